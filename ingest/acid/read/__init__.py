"""Reading ACID tables: one bucket file up to its flush length, which tail of a file is complete,
which directories a read uses (Hive's `getAcidState`), the read view, the one read planner,
the merge of inserts with delete events, filtered scans and the on-disk layout `ingest status`
shows.
"""

from ingest.acid.read.bucket_file import (
    BucketFileInfo,
    as_read_back,
    inspect_bucket_file,
    read_bucket_file,
    read_events,
    readable_length,
)
from ingest.acid.read.directories import AcidState, NotEnoughHistoryError, VisibleTxn, acid_state
from ingest.acid.read.layout import (
    DirectoryStatus,
    FileStatus,
    PartitionStatus,
    TableLayout,
    describe_table,
)
from ingest.acid.read.merge import (
    ROW_ID_COLUMN,
    DataFile,
    Merger,
    ScanCounts,
    read_length,
    valid_mask,
)
from ingest.acid.read.plan import (
    FilePlan,
    Partition,
    ScanTask,
    bucket_files,
    covers,
    list_partitions,
    plan_files,
    plan_partition,
)
from ingest.acid.read.reader import (
    UnverifiedSnapshotWarning,
    open_plan,
    read_batches,
    read_table,
    resolve_snapshot,
    start_merge,
)
from ingest.acid.read.scan import ALL_ON_DISK, ScanStats, SnapshotArg, SnapshotScan, all_on_disk
from ingest.acid.read.tails import (
    SideFileWarning,
    committed_footer_past,
    committed_read_length,
    data_problem,
    last_complete_footer,
    max_write_id,
    parsed_at,
    tail_at_end,
    tail_at_flush,
)
from ingest.acid.read.view import ReadView

__all__ = [
    "ALL_ON_DISK",
    "ROW_ID_COLUMN",
    "AcidState",
    "BucketFileInfo",
    "DataFile",
    "DirectoryStatus",
    "FilePlan",
    "FileStatus",
    "Merger",
    "NotEnoughHistoryError",
    "Partition",
    "PartitionStatus",
    "ReadView",
    "ScanCounts",
    "ScanStats",
    "ScanTask",
    "SideFileWarning",
    "SnapshotArg",
    "SnapshotScan",
    "TableLayout",
    "UnverifiedSnapshotWarning",
    "VisibleTxn",
    "acid_state",
    "all_on_disk",
    "as_read_back",
    "bucket_files",
    "committed_footer_past",
    "committed_read_length",
    "covers",
    "data_problem",
    "describe_table",
    "inspect_bucket_file",
    "last_complete_footer",
    "list_partitions",
    "max_write_id",
    "open_plan",
    "parsed_at",
    "plan_files",
    "plan_partition",
    "read_batches",
    "read_bucket_file",
    "read_events",
    "read_length",
    "read_table",
    "readable_length",
    "resolve_snapshot",
    "start_merge",
    "tail_at_end",
    "tail_at_flush",
    "valid_mask",
]
