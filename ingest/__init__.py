"""ingest: stream Kafka into Hive ACID transactional tables stored as ORC.

Layers, each importing only those before it: `orc` (ORC bytes), `acid` (Hive ACID files),
`txn` (the metastore), `table` (table operations), `spark` (the streaming sink), `cli`.
"""

__version__ = "0.1.0"
