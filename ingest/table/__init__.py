"""Table operations: a table as its users see it, on top of the metastore and the ACID files.

Create, alter, load, delete, upsert, verify and recover a table; describe its status; read
input files; split rows by partition and bucket (once, for the CLI and the streaming sink
alike); clean up after a failed write.
Uses `ingest.txn` (metastore) and `ingest.acid` (files); knows nothing of Spark or the CLI.
"""

from ingest.table._arguments import check_snapshot_table
from ingest.table._compactor import CompactorRun
from ingest.table._definition import (
    cleaner_retention_s,
    compaction_thresholds,
    table_schema,
    uses_visibility_suffix,
)
from ingest.table._open import MetastoreRef, StorageOptions, agent_name, locate_table
from ingest.table._owner import check_owner
from ingest.table._written import (
    AbortedWriteRemoval,
    Written,
    remove_aborted_writes,
    write_set,
)
from ingest.table.alter import AlterResult, alter_table
from ingest.table.api import ScanPlan, Table, TableScan, open_table
from ingest.table.avro_schema import (
    AvroField,
    avro_fields,
    avro_to_arrow,
    avro_to_ddl,
    hive_type_to_arrow,
    load_avro_schema,
    read_avro_schema_file,
)
from ingest.table.changes import OP_RANK, ChangeBatch, unwrap_debezium
from ingest.table.clean import CleanReport, PartitionClean, Removed, clean
from ingest.table.compact import (
    CompactionHistory,
    CompactReport,
    PartitionCompaction,
    compact,
    compaction_history,
    shown_state,
)
from ingest.table.create import create_table, default_table_name
from ingest.table.delete import DeleteResult, delete
from ingest.table.evolve import SchemaChange, evolve_schema
from ingest.table.history import Commit, table_history
from ingest.table.input import InputFormat, read_input
from ingest.table.keyed import KeySpec, check_keyed_table, resolve
from ingest.table.load import LoadResult, MissingColumns, load, load_file
from ingest.table.locate import open_table_or_files, open_table_root
from ingest.table.progress import StreamProgress, stream_progress
from ingest.table.recover import (
    DEFAULT_TXN_TIMEOUT_S,
    TableRecovery,
    live_files_of,
    recover_table_with_metastore,
)
from ingest.table.schema_versions import (
    check_written_columns,
    pinned_definition,
    written_schema_problem,
)
from ingest.table.split import partition_path, split_rows
from ingest.table.status import PartitionBacklog, StatusTotals, TableStatus, table_status
from ingest.table.upsert import (
    ChangeCounts,
    UpsertResult,
    apply_changes,
    upsert,
    upsert_file,
    write_changes,
)
from ingest.table.values import (
    WIDE_DECIMAL,
    describe_decimal_error,
    outside_nanoseconds,
    to_decimal,
    to_nanosecond_timestamp,
)
from ingest.table.verify import Problem, VerifyReport, verify_table

__all__ = [
    "DEFAULT_TXN_TIMEOUT_S",
    "OP_RANK",
    "WIDE_DECIMAL",
    "AbortedWriteRemoval",
    "AlterResult",
    "ChangeBatch",
    "ChangeCounts",
    "CleanReport",
    "Commit",
    "CompactReport",
    "CompactionHistory",
    "CompactorRun",
    "DeleteResult",
    "InputFormat",
    "KeySpec",
    "LoadResult",
    "MetastoreRef",
    "MissingColumns",
    "PartitionBacklog",
    "PartitionClean",
    "PartitionCompaction",
    "Problem",
    "Removed",
    "StorageOptions",
    "ScanPlan",
    "SchemaChange",
    "StatusTotals",
    "StreamProgress",
    "Table",
    "TableRecovery",
    "TableScan",
    "TableStatus",
    "UpsertResult",
    "VerifyReport",
    "Written",
    "agent_name",
    "alter_table",
    "evolve_schema",
    "check_written_columns",
    "pinned_definition",
    "written_schema_problem",
    "apply_changes",
    "check_keyed_table",
    "cleaner_retention_s",
    "check_owner",
    "check_snapshot_table",
    "clean",
    "compact",
    "compaction_history",
    "compaction_thresholds",
    "create_table",
    "default_table_name",
    "delete",
    "describe_decimal_error",
    "live_files_of",
    "load",
    "load_file",
    "locate_table",
    "open_table",
    "open_table_or_files",
    "open_table_root",
    "outside_nanoseconds",
    "partition_path",
    "read_input",
    "recover_table_with_metastore",
    "remove_aborted_writes",
    "write_set",
    "resolve",
    "shown_state",
    "split_rows",
    "table_history",
    "table_schema",
    "stream_progress",
    "table_status",
    "to_decimal",
    "to_nanosecond_timestamp",
    "upsert",
    "unwrap_debezium",
    "upsert_file",
    "uses_visibility_suffix",
    "verify_table",
    "write_changes",
    "AvroField",
    "avro_fields",
    "avro_to_arrow",
    "avro_to_ddl",
    "hive_type_to_arrow",
    "load_avro_schema",
    "read_avro_schema_file",
]
