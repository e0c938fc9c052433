"""The metastore (Hive's in miniature): tables, transactions, write ids, snapshots.

Hands out write ids and snapshots as `ingest.acid.ValidWriteIdList`; never reads ORC bytes
and performs no table operation (those are `ingest.table`'s). `Metastore` is the interface;
`Metastore.open(url)` picks its implementation by the URL's scheme (`register_metastore`).
The default is one SQLite file per warehouse directory (see `placement`); a PostgreSQL
database serves several hosts. Other layers import only the names below.
"""

from ingest.acid.format import CommittedFile
from ingest.errors import MetastoreError  # kept here too: many callers import it from here
from ingest.txn.locations import ancestors, normalize_location
from ingest.txn.metastore import READER_HEARTBEAT_S, Metastore
from ingest.txn.model import (
    TXN_STATES,
    CompactionInfo,
    CompactionState,
    CompactorVisibility,
    MetastoreCapabilities,
    OffsetRange,
    PinnedView,
    ReaderInfo,
    SinkProgress,
    TableDefinition,
    TableIdentifier,
    TopicPartitionKey,
    Transaction,
    TransactionInfo,
    TxnState,
)
from ingest.txn.placement import (
    METASTORE_FILENAME,
    default_metastore_url,
    find_metastore_for,
    placed_metastore_url,
)
from ingest.txn.registry import (
    MEMORY_URL,
    backend_for,
    redact_url,
    register_metastore,
    supported_schemes,
)

__all__ = [
    "MEMORY_URL",
    "METASTORE_FILENAME",
    "READER_HEARTBEAT_S",
    "TXN_STATES",
    "CommittedFile",
    "CompactionInfo",
    "CompactionState",
    "CompactorVisibility",
    "Metastore",
    "MetastoreCapabilities",
    "MetastoreError",
    "OffsetRange",
    "PinnedView",
    "ReaderInfo",
    "SinkProgress",
    "TableDefinition",
    "TableIdentifier",
    "TopicPartitionKey",
    "Transaction",
    "TransactionInfo",
    "TxnState",
    "ancestors",
    "backend_for",
    "default_metastore_url",
    "find_metastore_for",
    "normalize_location",
    "placed_metastore_url",
    "redact_url",
    "register_metastore",
    "supported_schemes",
]
