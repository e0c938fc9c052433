"""Hidden side tables of ours in a Hive Metastore, written in a target table's own HMS
transactions (docs/invariants.md, 8.11): what they share (`table.py`), a stream's progress
(`progress.py`) and the committed-file manifest (`manifest.py`). Over the Thrift client
(`ingest.txn.hms.thrift`) and our ACID reader and writer.
"""

from ingest.txn.hms.side.manifest import MANIFEST, HmsManifest, checked, own_transaction
from ingest.txn.hms.side.progress import (
    PROGRESS,
    ProgressCache,
    ProgressRow,
    ensure_progress_table,
    find_progress_table,
    write_progress,
)
from ingest.txn.hms.side.table import is_side_table

__all__ = [
    "MANIFEST",
    "PROGRESS",
    "HmsManifest",
    "ProgressCache",
    "ProgressRow",
    "checked",
    "ensure_progress_table",
    "find_progress_table",
    "is_side_table",
    "own_transaction",
    "write_progress",
]
