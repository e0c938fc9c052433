"""Tables as their users see them, on top of the metastore and the ACID files.

`open_table(location)` -> `Table`: read it (`to_arrow`, `to_batches`, `scan(...).plan()`),
write it (`load`, `delete`, `upsert`, `apply_changes`, `alter`) and look after it
(`compact`, `clean`, `verify`, `recover`, `status`, `history`); `Table.ref`, the resolved
table as a picklable `TableRef` that opens again without a metastore search (what Spark's
tasks, threads and jobs are handed); the commands' openers
(`open_table_root`, `open_table_or_files`); the results those return. In rooms (docs/
architecture.md §1.1): the base every operation shares (`ingest.table.core`), the operations
that write (`ingest.table.write`) and maintenance (`ingest.table.maintain`), whose faces offer
the functions behind the `Table` methods to the other packages.
Uses `ingest.txn` (metastore), `ingest.records` and `ingest.acid` (files); knows nothing of
Spark or the CLI.
"""

from ingest.table.api import ScanPlan, Table, TableRef, TableScan, open_table
from ingest.table.core import StreamProgress
from ingest.table.history import Commit
from ingest.table.locate import open_table_or_files, open_table_root
from ingest.table.maintain import CleanReport, CompactReport, TableRecovery, VerifyReport
from ingest.table.status import PartitionBacklog, StatusTotals, TableStatus
from ingest.table.write import AlterResult, DeleteResult, LoadResult, UpsertResult

__all__ = [
    "AlterResult",
    "CleanReport",
    "Commit",
    "CompactReport",
    "DeleteResult",
    "LoadResult",
    "PartitionBacklog",
    "ScanPlan",
    "StatusTotals",
    "StreamProgress",
    "Table",
    "TableRecovery",
    "TableRef",
    "TableScan",
    "TableStatus",
    "UpsertResult",
    "VerifyReport",
    "open_table",
    "open_table_or_files",
    "open_table_root",
]
