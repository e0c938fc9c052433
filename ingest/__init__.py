"""ingest: stream Kafka into Hive ACID transactional tables stored as ORC."""

__version__ = "0.1.0"
