"""Hive ACID on ORC, in rooms that import downward in this order:

- `predicate`: the WHERE language (conditions, the lexer shared with column lists);
- `format`: names, the event struct, schemas, side files, footer keys, checksums, manifest
  entries, valid write-id lists, bucketing;
- `read`: bucket files up to their flush length, complete tails, the directories a read uses,
  the read view, the one planner, the merge, scans, the on-disk layout;
- `write`: the bucket-file writer and its options;
- `recovery`: files back to their last complete footer;
- `compaction`: the initiator, compaction, cleaning.

Knows nothing of Spark, Kafka or the metastore (docs/architecture.md): a read's committed state
arrives as a `ReadView` or a `ValidWriteIdList` value. The names below are the layer's face;
each room's own face (`ingest.acid.read`, ...) offers more.
"""

from ingest.acid.compaction import (
    CompactionPlan,
    CompactionResult,
    compact_partition,
    compactor_snapshot,
    finish_interrupted,
    plan_compaction,
)
from ingest.acid.format import (
    ACID_FIELD_NAMES,
    COMMENT_KEY,
    DELETE,
    INSERT,
    KEY_COLUMNS,
    UPDATE,
    ParsedDirectory,
    ValidWriteIdList,
    acid_event_schema,
    bucket_file_name,
    decode_bucket_property,
    encode_bucket_property,
    format_base,
    format_delta,
    format_partition,
    is_side_file,
    last_flush_length,
    parse_bucket_file,
    parse_directory,
    parse_schema,
    read_flush_lengths,
    side_file_path,
    to_ddl,
    to_orc_type_string,
    write_acid_version_file,
)
from ingest.acid.predicate import Predicate, parse_predicate, parse_where
from ingest.acid.read import (
    AcidState,
    BucketFileInfo,
    DirectoryStatus,
    FileStatus,
    Partition,
    PartitionStatus,
    ReadView,
    TableLayout,
    UnverifiedSnapshotWarning,
    acid_state,
    describe_table,
    inspect_bucket_file,
    list_partitions,
    read_batches,
    read_bucket_file,
    read_events,
    read_table,
)
from ingest.acid.recovery import FileRecovery, RecoveryReport, recover_table, rollback_file
from ingest.acid.write import (
    CODECS,
    BucketFileOptions,
    BucketWriter,
    WriterOptions,
    encode_piece,
    parse_codec,
    piece_encoder,
)

# Kept here for callers of this face; their home is ingest.io.
from ingest.io import can_append, has_directories

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
    "encode_piece",
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
    "piece_encoder",
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
