"""Maintenance: compact (`compact`, the compactor's commit protocol in `_compactor`), clean,
verify a table against its metastore, recover with the metastore. Imports the base
(`ingest.table.core`).
"""

from ingest.table.maintain._compactor import CompactorRun
from ingest.table.maintain.clean import CleanReport, PartitionClean, Removed, clean
from ingest.table.maintain.compact import (
    CompactionHistory,
    CompactMode,
    CompactReport,
    PartitionCompaction,
    compact,
    compaction_history,
    shown_state,
)
from ingest.table.maintain.recover import (
    DEFAULT_TXN_TIMEOUT_S,
    TableRecovery,
    live_files_of,
    recover_table_with_metastore,
)
from ingest.table.maintain.verify import Problem, VerifyReport, verify_table

__all__ = [
    "clean",
    "CleanReport",
    "compact",
    "compaction_history",
    "CompactionHistory",
    "CompactMode",
    "CompactorRun",
    "CompactReport",
    "DEFAULT_TXN_TIMEOUT_S",
    "live_files_of",
    "PartitionClean",
    "PartitionCompaction",
    "Problem",
    "recover_table_with_metastore",
    "Removed",
    "shown_state",
    "TableRecovery",
    "verify_table",
    "VerifyReport",
]
