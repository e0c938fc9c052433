"""ORC bytes: the file tail (postscript, footer, metadata), compression, statistics.

Knows nothing of ACID or Spark. Stripes are encoded by pyarrow; this layer reads and writes
everything around them so a writer controls every footer it puts into a file.
"""

from ingest.orc._protobuf import Message
from ingest.orc.compression import CompressionKind, compress_stream, decompress_stream
from ingest.orc.reader import BoundedFile, open_orc, read_tail
from ingest.orc.statistics import merge_statistics
from ingest.orc.tail import (
    FileTail,
    StripeInfo,
    TailError,
    check_extends,
    parse_tail,
    serialize_tail,
)
from ingest.orc.timestamps import (
    TimestampPrecisionWarning,
    WideTimestampFile,
    wide_timestamp_columns,
    with_wide_timestamps,
)

__all__ = [
    "BoundedFile",
    "CompressionKind",
    "FileTail",
    "Message",
    "StripeInfo",
    "TailError",
    "TimestampPrecisionWarning",
    "WideTimestampFile",
    "check_extends",
    "compress_stream",
    "decompress_stream",
    "merge_statistics",
    "open_orc",
    "parse_tail",
    "read_tail",
    "serialize_tail",
    "wide_timestamp_columns",
    "with_wide_timestamps",
]
