"""Hive ACID on ORC: directory and bucket names, the event struct, the bucket-file writer and
reader, side files, snapshots. Knows nothing of Spark or Kafka (DESIGN.md layers)."""

from ingest.acid.bucket_file import (
    BucketFileInfo,
    inspect_bucket_file,
    read_bucket_file,
    read_events,
)
from ingest.acid.events import ACID_FIELD_NAMES, DELETE, INSERT, UPDATE, acid_event_schema
from ingest.acid.side_file import last_flush_length, read_flush_lengths, side_file_path
from ingest.acid.writeids import ValidWriteIdList
from ingest.acid.writer import BucketWriter, WriterOptions

__all__ = [
    "ACID_FIELD_NAMES",
    "DELETE",
    "INSERT",
    "UPDATE",
    "BucketFileInfo",
    "BucketWriter",
    "ValidWriteIdList",
    "WriterOptions",
    "acid_event_schema",
    "inspect_bucket_file",
    "last_flush_length",
    "read_bucket_file",
    "read_events",
    "read_flush_lengths",
    "side_file_path",
]
