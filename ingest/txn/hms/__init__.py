"""A thin, typed layer over a Hive Metastore's Thrift API: tables, transactions, write ids,
locks, heartbeats and snapshots, for the metastore backend that speaks `thrift://host:port`.

Knows the metastore only (no ORC bytes, no table operations); snapshots come out as
`ingest.acid.ValidWriteIdList`. Needs the `hms` extra (Hive 4's Thrift stubs from pyiceberg's
wheel); refuses Hive 2 servers, which have no write ids.
"""

from ingest.txn.hms.connection import (
    CALL_TIMEOUT_S,
    CONNECT_TIMEOUT_S,
    HmsConnection,
    ServerInfo,
    connect,
    parse_thrift_uri,
)
from ingest.txn.hms.heartbeat import Heartbeater
from ingest.txn.hms.tables import (
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
    hive_columns,
    list_partition_names,
)
from ingest.txn.hms.txns import (
    LOCK_TIMEOUT_S,
    HeartbeatResult,
    LockTarget,
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
    txn_snapshot,
)
from ingest.txn.hms.write import WriteTxn, write_transaction

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
    "ServerInfo",
    "TxnSnapshot",
    "WriteTxn",
    "abort_txn",
    "add_partitions",
    "allocate_write_ids",
    "commit_txn",
    "connect",
    "create_database",
    "create_table",
    "drop_table",
    "get_table",
    "get_tables",
    "heartbeat",
    "hive_columns",
    "list_partition_names",
    "lock",
    "lock_all",
    "open_txns",
    "parse_thrift_uri",
    "register_partitions",
    "snapshot",
    "txn_snapshot",
    "write_transaction",
]
