"""The transaction store (Hive's metastore in miniature): tables, transactions, write ids.

Hands out write ids and snapshots as `ingest.acid.ValidWriteIdList`; never reads ORC bytes
and performs no table operation (those are `ingest.table`'s). The default store is one
SQLite file per warehouse directory (see `placement`); a PostgreSQL database serves several
hosts.
"""

from ingest.acid.committed import CommittedFile
from ingest.txn._connect import redact_url
from ingest.txn.compactions import CompactionInfo
from ingest.txn.errors import MetastoreError
from ingest.txn.locations import normalize_location
from ingest.txn.model import (
    TXN_STATES,
    OffsetRange,
    SinkProgress,
    TableDefinition,
    Transaction,
    TransactionInfo,
    TxnState,
)
from ingest.txn.placement import (
    METASTORE_FILENAME,
    chosen_metastore,
    default_metastore_url,
    find_metastore_for,
    placed_metastore_url,
    use_metastore,
)
from ingest.txn.readers import READER_HEARTBEAT_S, ReaderInfo
from ingest.txn.store import MEMORY_URL, Metastore, TableRef

__all__ = [
    "MEMORY_URL",
    "METASTORE_FILENAME",
    "CompactionInfo",
    "READER_HEARTBEAT_S",
    "TXN_STATES",
    "CommittedFile",
    "Metastore",
    "MetastoreError",
    "OffsetRange",
    "ReaderInfo",
    "SinkProgress",
    "TableDefinition",
    "TableRef",
    "Transaction",
    "TransactionInfo",
    "TxnState",
    "default_metastore_url",
    "chosen_metastore",
    "find_metastore_for",
    "placed_metastore_url",
    "use_metastore",
    "normalize_location",
    "redact_url",
]
