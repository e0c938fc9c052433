"""Writing ACID bucket files: `BucketWriter` (Hive's OrcRecordUpdater: inserts or delete events,
flushes with side-file entries, appends), its options, and the writer of whole events with
their own keys that compaction uses (`write_bucket`); rows encoded away from the writer as
stripe pieces (`encode_piece`, `BucketWriter.write_piece`).
"""

from ingest.acid.write.event_writer import write_bucket
from ingest.acid.write.options import (
    CODECS,
    BucketFileOptions,
    Compression,
    WriterOptions,
    parse_codec,
)
from ingest.acid.write.pieces import encode_piece, piece_encoder
from ingest.acid.write.writer import BucketWriter

__all__ = [
    "CODECS",
    "BucketFileOptions",
    "BucketWriter",
    "Compression",
    "WriterOptions",
    "encode_piece",
    "parse_codec",
    "piece_encoder",
    "write_bucket",
]
