"""Hive ACID on ORC: directory and bucket names, the event struct, the bucket-file writer and
reader, side files, snapshots, recovery. Knows nothing of Spark, Kafka or the metastore
(docs/architecture.md): snapshots arrive as ValidWriteIdList values."""

from ingest.acid.compaction.compact import (
    CompactionPlan,
    CompactionResult,
    compact_partition,
    compactor_snapshot,
    finish_interrupted,
    plan_compaction,
)
from ingest.acid.format.events import ACID_FIELD_NAMES, DELETE, INSERT, UPDATE, acid_event_schema
from ingest.acid.format.names import (
    ParsedDirectory,
    bucket_file_name,
    decode_bucket_property,
    encode_bucket_property,
    format_base,
    format_delta,
    format_partition,
    is_side_file,
    parse_bucket_file,
    parse_directory,
    write_acid_version_file,
)
from ingest.acid.format.schema import COMMENT_KEY, parse_schema, to_ddl, to_orc_type_string
from ingest.acid.format.side_file import last_flush_length, read_flush_lengths, side_file_path
from ingest.acid.format.writeids import ValidWriteIdList
from ingest.acid.predicate.where import Predicate, parse_predicate, parse_where
from ingest.acid.read.bucket_file import (
    BucketFileInfo,
    inspect_bucket_file,
    read_bucket_file,
    read_events,
)
from ingest.acid.read.directories import AcidState, NotEnoughHistoryError, acid_state
from ingest.acid.read.layout import (
    DirectoryStatus,
    FileStatus,
    PartitionStatus,
    TableLayout,
    describe_table,
)
from ingest.acid.read.reader import (
    Partition,
    UnverifiedSnapshotWarning,
    list_partitions,
    read_batches,
    read_table,
)
from ingest.acid.read.view import ReadView
from ingest.acid.recovery.recover import FileRecovery, RecoveryReport, recover_table, rollback_file
from ingest.acid.write.options import CODECS, parse_codec
from ingest.acid.write.writer import KEY_COLUMNS, BucketFileOptions, BucketWriter, WriterOptions
from ingest.io.files import can_append, has_directories

__all__ = [
    "ACID_FIELD_NAMES",
    "CODECS",
    "COMMENT_KEY",
    "DELETE",
    "INSERT",
    "KEY_COLUMNS",
    "UPDATE",
    "AcidState",
    "BucketFileInfo",
    "BucketFileOptions",
    "BucketWriter",
    "CompactionPlan",
    "CompactionResult",
    "DirectoryStatus",
    "FileRecovery",
    "FileStatus",
    "NotEnoughHistoryError",
    "ParsedDirectory",
    "Partition",
    "PartitionStatus",
    "Predicate",
    "ReadView",
    "RecoveryReport",
    "TableLayout",
    "UnverifiedSnapshotWarning",
    "ValidWriteIdList",
    "WriterOptions",
    "acid_event_schema",
    "acid_state",
    "bucket_file_name",
    "can_append",
    "has_directories",
    "compact_partition",
    "compactor_snapshot",
    "decode_bucket_property",
    "describe_table",
    "encode_bucket_property",
    "finish_interrupted",
    "format_base",
    "format_delta",
    "format_partition",
    "inspect_bucket_file",
    "is_side_file",
    "last_flush_length",
    "list_partitions",
    "parse_bucket_file",
    "parse_codec",
    "parse_directory",
    "parse_predicate",
    "plan_compaction",
    "parse_schema",
    "parse_where",
    "read_batches",
    "read_bucket_file",
    "read_events",
    "read_flush_lengths",
    "read_table",
    "recover_table",
    "rollback_file",
    "side_file_path",
    "to_ddl",
    "to_orc_type_string",
    "write_acid_version_file",
]
