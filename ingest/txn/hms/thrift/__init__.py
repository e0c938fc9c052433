"""The Hive Metastore's Thrift client: one connection (`connection.py`, over the stubs of
`_stubs.py`, with several hosts and failover; the URI and its options in `address.py`; Kerberos
in `sasl.py` and `kerberos.py`) and one module per family of Hive's calls: tables (`tables.py`),
transactions, write ids, locks and snapshots (`txns.py`), heartbeats (`heartbeat.py`), one
write as one transaction (`write.py`), a cut-off write call's outcome (`outcome.py`), read
transactions as reader leases (`leases.py`) and Hive 4's compaction queue (`compact_api.py`,
offered as a module).

Speaks Hive's API only: nothing here knows the `Metastore` interface or its values; snapshots
come out as `ingest.acid.ValidWriteIdList`.
"""

from ingest.txn.hms.thrift import compact_api
from ingest.txn.hms.thrift._stubs import ttypes
from ingest.txn.hms.thrift.address import (
    ThriftOptions,
    parse_thrift_hosts,
    parse_thrift_options,
    parse_thrift_uri,
)
from ingest.txn.hms.thrift.connection import (
    CALL_TIMEOUT_S,
    CONNECT_TIMEOUT_S,
    HmsConnection,
    ServerInfo,
    connect,
)
from ingest.txn.hms.thrift.heartbeat import Heartbeater
from ingest.txn.hms.thrift.leases import begin_read, end_read, holding, renew_read
from ingest.txn.hms.thrift.outcome import (
    allocate_write_id_settled,
    commit_txn_settled,
    open_txn_settled,
)
from ingest.txn.hms.thrift.tables import (
    ACID_PROPERTIES,
    ORC_INPUT_FORMAT,
    ORC_OUTPUT_FORMAT,
    ORC_SERDE,
    PROCESSOR_CAPABILITIES,
    HiveColumn,
    HiveTable,
    HiveTableSpec,
    add_partitions,
    create_database,
    create_table,
    drop_table,
    get_table,
    get_tables,
    hadoop_location,
    hive_columns,
    list_partition_names,
)
from ingest.txn.hms.thrift.txns import (
    LOCK_TIMEOUT_S,
    HeartbeatResult,
    LockTarget,
    Operation,
    TxnSnapshot,
    abort_txn,
    allocate_write_ids,
    commit_txn,
    heartbeat,
    lock,
    lock_all,
    open_txns,
    register_partitions,
    snapshot,
    snapshots,
    txn_snapshot,
)
from ingest.txn.hms.thrift.write import WriteTxn, write_transaction

__all__ = [
    "ACID_PROPERTIES",
    "CALL_TIMEOUT_S",
    "CONNECT_TIMEOUT_S",
    "LOCK_TIMEOUT_S",
    "ORC_INPUT_FORMAT",
    "ORC_OUTPUT_FORMAT",
    "ORC_SERDE",
    "PROCESSOR_CAPABILITIES",
    "HeartbeatResult",
    "Heartbeater",
    "HiveColumn",
    "HiveTable",
    "HiveTableSpec",
    "HmsConnection",
    "LockTarget",
    "Operation",
    "ServerInfo",
    "TxnSnapshot",
    "WriteTxn",
    "abort_txn",
    "add_partitions",
    "allocate_write_id_settled",
    "allocate_write_ids",
    "begin_read",
    "commit_txn",
    "commit_txn_settled",
    "compact_api",
    "connect",
    "create_database",
    "create_table",
    "drop_table",
    "end_read",
    "get_table",
    "get_tables",
    "hadoop_location",
    "heartbeat",
    "hive_columns",
    "holding",
    "list_partition_names",
    "lock",
    "lock_all",
    "open_txn_settled",
    "open_txns",
    "parse_thrift_hosts",
    "parse_thrift_uri",
    "parse_thrift_options",
    "ThriftOptions",
    "register_partitions",
    "renew_read",
    "snapshot",
    "snapshots",
    "ttypes",
    "txn_snapshot",
    "write_transaction",
]
