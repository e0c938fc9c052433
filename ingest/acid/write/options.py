"""What bucket file to write, in one value: Hive's AcidOutputFormat.Options.

`BucketFileOptions` names the file (write id, bucket, statement, insert or delete events,
row schema, codec) and carries the encoder's tuning (`WriterOptions`); `BucketWriter.create`
and `BucketWriter.open_append` take it. Knows nothing of files or encoding.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from ingest.acid.format import MAX_BUCKET_ID, MAX_STATEMENT_ID
from ingest.orc import CODECS, INT64_MAX, parse_codec
from ingest.orc import Codec as Compression

EventKind = Literal["insert", "delete"]


@dataclass(frozen=True)
class WriterOptions:
    """How stripes are cut and encoded.

    Attributes:
        stripe_size_bytes: rows are buffered up to about this many (uncompressed Arrow) bytes,
            then encoded as one stripe; a flush also ends a stripe.
        compression_block_size: ORC compression chunk size (bytes).
        row_index_stride: rows per row-index entry.
        encoder_threads: each stripe's user columns are encoded as this many groups of
            columns at once (pyarrow releases the GIL while encoding); 1 encodes in the calling
            thread.
    """

    stripe_size_bytes: int = 64 * 1024 * 1024
    # pyarrow's default: each stream holds a block, so smaller blocks mean less memory per file.
    compression_block_size: int = 64 * 1024
    row_index_stride: int = 10_000
    encoder_threads: int = 2


@dataclass(frozen=True)
class BucketFileOptions:
    """The bucket file a `BucketWriter` writes, as Hive's AcidOutputFormat.Options describes it.

    Fields left None are, when creating a file, the defaults below, and when appending to one
    (`BucketWriter.open_append`), what the file already has; a value given when appending must
    agree with the file (a file has one row type, bucket, codec and kind of event).

    Attributes:
        write_id: the writing transaction's write id (`currentTransaction`).
        row_schema: the table's row columns; required to create a file.
        bucket_id: N of `bucket_N` (default 0).
        statement_id: the statement id in the bucket property (default 0).
        kind: "insert" events, or "delete" events for a `delete_delta` (default "insert").
        compression: the ORC codec, one of CODECS in any case (default "zstd").
        tuning: how stripes are cut and encoded.
    """

    write_id: int
    row_schema: pa.Schema | None = None
    bucket_id: int | None = None
    statement_id: int | None = None
    kind: EventKind | None = None
    compression: Compression | None = None
    tuning: WriterOptions = WriterOptions()

    def __post_init__(self) -> None:
        """Raises:
            ValueError: an id out of range, or an unknown kind.
            ConfigError: an unknown codec.
        """
        if self.compression is not None:
            object.__setattr__(self, "compression", parse_codec(
                self.compression, where="Cannot write ORC with compression "))
        if not 0 <= self.write_id <= INT64_MAX:
            raise ValueError(f"write_id must be in 0..{INT64_MAX}, got {self.write_id}")
        if self.bucket_id is not None and not 0 <= self.bucket_id <= MAX_BUCKET_ID:
            raise ValueError(f"Bucket id {self.bucket_id} is out of range: must be "
                             f"0..{MAX_BUCKET_ID}")
        if self.statement_id is not None and self.statement_id > MAX_STATEMENT_ID:
            raise ValueError(f"Statement id {self.statement_id} is out of range: must be at "
                             f"most {MAX_STATEMENT_ID}")
        if self.kind not in (None, "insert", "delete"):
            raise ValueError(f"kind must be 'insert' or 'delete', got {self.kind!r}")

    def with_defaults(self) -> BucketFileOptions:
        """These options with every unset field at its default for a new file."""
        return dataclasses.replace(
            self,
            bucket_id=0 if self.bucket_id is None else self.bucket_id,
            statement_id=0 if self.statement_id is None else self.statement_id,
            kind=self.kind or "insert",
            compression=self.compression or "zstd")


__all__ = ["CODECS", "BucketFileOptions", "Compression", "EventKind", "WriterOptions",
           "parse_codec"]
