"""The transaction store (Hive's metastore in miniature): tables, transactions, write ids.

Hands out write ids and snapshots as `ingest.acid.ValidWriteIdList`; never reads ORC bytes.
The default store is one SQLite file per warehouse directory (see `placement`).
"""

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
from ingest.txn.operations import (
    DeleteResult,
    InputFormat,
    LoadResult,
    MetastoreRef,
    create_table,
    delete,
    load,
    load_file,
    partition_path,
    read_input,
    table_schema,
)
from ingest.txn.placement import (
    METASTORE_FILENAME,
    default_metastore_url,
    find_metastore_for,
)
from ingest.txn.store import MEMORY_URL, Metastore, TableRef
from ingest.txn.verify import (
    Problem,
    TableRecovery,
    VerifyReport,
    recover_table_with_metastore,
    verify_table,
)

__all__ = [
    "MEMORY_URL",
    "METASTORE_FILENAME",
    "TXN_STATES",
    "Metastore",
    "MetastoreError",
    "OffsetRange",
    "SinkProgress",
    "TableDefinition",
    "TableRef",
    "Transaction",
    "TransactionInfo",
    "TxnState",
    "DeleteResult",
    "InputFormat",
    "LoadResult",
    "MetastoreRef",
    "create_table",
    "default_metastore_url",
    "delete",
    "load",
    "load_file",
    "partition_path",
    "Problem",
    "TableRecovery",
    "VerifyReport",
    "recover_table_with_metastore",
    "verify_table",
    "read_input",
    "table_schema",
    "find_metastore_for",
    "normalize_location",
]
