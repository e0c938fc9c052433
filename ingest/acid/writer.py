"""The ACID bucket-file writer: Hive's OrcRecordUpdater (insert events) on pyarrow stripes.

pyarrow encodes stripes; this module moves them into the bucket file and writes every tail
itself, so each flush() leaves an intermediate footer that describes all stripes so far, with
`hive.acid.key.index`, `hive.acid.stats` and `hive.acid.version`, then records the file length
in the side file (DESIGN invariant 1). Stripes are relocatable: only the footer holds offsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.orc as po

from ingest.acid import _files, _nested_nulls
from ingest.acid.events import ACID_FIELD_NAMES, INSERT, acid_event_schema, row_schema_of
from ingest.acid.names import encode_bucket_property
from ingest.acid.side_file import encode_length, read_flush_lengths, side_file_path
from ingest.errors import CorruptFileError, SchemaMismatchError, UnsupportedFormatError
from ingest.faults import crash_point
from ingest.orc import Message, StripeInfo, merge_statistics, open_orc, read_tail, serialize_tail
from ingest.orc.tail import (
    FT_CONTENT_LENGTH,
    FT_HEADER_LENGTH,
    FT_METADATA,
    FT_NUMBER_OF_ROWS,
    FT_STATISTICS,
    FT_STRIPES,
    FT_TYPES,
    MAGIC,
    MD_STRIPE_STATS,
    STRIPE_STATS_COLUMNS,
    FileTail,
    parse_tail,
)

Compression = Literal["none", "zlib", "snappy", "lz4", "zstd"]
_PYARROW_CODEC = {"none": "uncompressed", "zlib": "zlib", "snappy": "snappy", "lz4": "lz4",
                  "zstd": "zstd"}

KEY_INDEX = "hive.acid.key.index"
ACID_STATS = "hive.acid.stats"
ACID_VERSION = "hive.acid.version"


@dataclass(frozen=True)
class WriterOptions:
    """How stripes are cut and encoded.

    Attributes:
        stripe_size_bytes: target stripe size handed to the ORC encoder; rows are also buffered
            up to about this many (uncompressed Arrow) bytes before being encoded.
        compression_block_size: ORC compression chunk size (bytes).
        row_index_stride: rows per row-index entry (0 disables the row index).
    """

    stripe_size_bytes: int = 64 * 1024 * 1024
    compression_block_size: int = 256 * 1024
    row_index_stride: int = 10_000


class BucketWriter:
    """Writes insert events of one write id into one ACID bucket file.

    Usage::

        w = BucketWriter("…/delta_0000005_0000005_0000/bucket_00000", schema, write_id=5)
        w.write(batch); w.flush(); w.write(batch2); w.close()

    Rows get `rowId` 0, 1, 2, … per write id and the Hive 3 (BucketCodec V1) bucket property.
    """

    def __init__(
        self,
        path: str,
        row_schema: pa.Schema,
        *,
        write_id: int,
        bucket_id: int = 0,
        statement_id: int = 0,
        compression: Compression = "zstd",
        fs: fsspec.AbstractFileSystem | None = None,
        options: WriterOptions | None = None,
    ) -> None:
        """Create the bucket file (it must not exist) and its side file holding one 0 entry.

        Raises:
            FileExistsError: the bucket file exists; use `open_append` to continue it.
            UnsupportedFormatError: unknown compression.
        """
        if compression not in _PYARROW_CODEC:
            raise UnsupportedFormatError(
                f"Cannot write ORC with compression {compression!r}: supported are "
                f"{', '.join(_PYARROW_CODEC)}")
        self._fs, self.path = _files.resolve(path, fs)
        if self._fs.exists(self.path):
            raise FileExistsError(
                f"Cannot create bucket file, it already exists: {self.path} "
                "(use BucketWriter.open_append to add a transaction to it)")
        self._init_state(row_schema, write_id, encode_bucket_property(bucket_id, statement_id),
                         compression, options or WriterOptions())
        parent = self.path.rsplit("/", 1)[0]
        self._fs.makedirs(parent, exist_ok=True)
        self._file = self._fs.open(self.path, "wb")
        self._file.write(MAGIC)
        self._position = len(MAGIC)
        # Hive 3 starts the side file with a 0 entry: nothing is readable before the first flush.
        self._side = self._fs.open(side_file_path(self.path), "wb")
        self._side.write(encode_length(0))
        _files.durable_flush(self._side)
        self._template = self._encode_template()
        self._statistics = self._template.statistics

    # ------------------------------------------------------------------ construction helpers
    def _init_state(self, row_schema: pa.Schema, write_id: int, bucket_property: int,
                    compression: Compression, options: WriterOptions) -> None:
        if write_id < 0:
            raise ValueError(f"write_id must be >= 0, got {write_id}")
        self.row_schema = pa.schema([f.with_nullable(True) for f in row_schema])
        self.event_schema = acid_event_schema(self.row_schema)
        self._fix_nested_nulls = _nested_nulls.needs_fix(self.event_schema.field("row").type)
        self.write_id = write_id
        self.bucket_property = bucket_property
        self.compression: Compression = compression
        self.options = options
        self._next_row_id = 0
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._stripes: list[StripeInfo] = []
        self._stripe_stats: list[Message] = []
        self._key_index: list[str] = []
        self._inserts = self._updates = self._deletes = 0
        self._other_metadata: list[Message] = []
        self._flushed_stripe_count = -1  # no tail written yet
        self._last_flush_length = 0
        self._closed = False

    def _encode(self, table: pa.Table) -> tuple[bytes, FileTail]:
        sink = pa.BufferOutputStream()
        po.write_table(
            table, sink, compression=_PYARROW_CODEC[self.compression],
            stripe_size=self.options.stripe_size_bytes,
            compression_block_size=self.options.compression_block_size,
            row_index_stride=self.options.row_index_stride,
        )
        data = sink.getvalue().to_pybytes()
        return data, parse_tail(data, len(data))

    def _encode_template(self) -> FileTail:
        """An empty file's tail: the types, writer and postscript fields every tail reuses."""
        _, tail = self._encode(self.event_schema.empty_table())
        return tail

    # ------------------------------------------------------------------ appending
    @classmethod
    def open_append(
        cls,
        path: str,
        *,
        write_id: int,
        fs: fsspec.AbstractFileSystem | None = None,
        options: WriterOptions | None = None,
    ) -> BucketWriter:
        """Continue an existing bucket file with rows of another (or the same) write id.

        Bytes past the last recorded flush length (a torn stripe or footer) are discarded
        first; without a side file the whole file must be a complete ORC file.

        Raises:
            FileNotFoundError: no such bucket file.
            CorruptFileError: the side file points past the end of the file, or no complete
                footer ends at the recorded length (run `ingest recover`).
            SchemaMismatchError: the file is not an ACID file, or write_id is older than the
                file's last write id (rows must stay sorted by write id).
        """
        fs, stripped = _files.resolve(path, fs)
        size = fs.size(stripped)
        lengths = read_flush_lengths(fs, stripped)
        length = (lengths[-1] if lengths else 0) if lengths is not None else size
        if length > size:
            raise CorruptFileError(
                f"Cannot append to {stripped}: its side file records a flush length of "
                f"{length:,} bytes but the file has only {size:,}", path=stripped, offset=size,
                hint=f"run `ingest recover` on the table holding {stripped}")
        if length == 0:
            raise CorruptFileError(
                f"Cannot append to {stripped}: no transaction was ever flushed to it",
                path=stripped, offset=0, hint="run `ingest recover`; it removes such files")
        tail = read_tail(fs, stripped, length)
        with open_orc(fs, stripped, length) as orc:
            schema = orc.schema
        try:
            row_schema = row_schema_of(schema)
        except UnsupportedFormatError as e:
            raise SchemaMismatchError(f"Cannot append to {stripped}: {e}") from e
        self = cls.__new__(cls)
        self._fs, self.path = fs, stripped
        self._restore(tail, row_schema, write_id, options or WriterOptions())
        if length < size:
            _files.truncate(fs, stripped, length)
        self._file = fs.open(stripped, "ab")
        self._position = length
        self._side = fs.open(side_file_path(stripped), "ab")
        if lengths is None:
            # A new side file must never hide what is already committed: start at the length.
            self._side.write(encode_length(length))
            _files.durable_flush(self._side)
        return self

    def _restore(self, tail: FileTail, row_schema: pa.Schema, write_id: int,
                 options: WriterOptions) -> None:
        compression = tail.compression
        if compression == "lzo":
            raise UnsupportedFormatError(f"Cannot append to {self.path}: LZO is not supported")
        keys = _parse_key_index(tail.user_metadata.get(KEY_INDEX, b""), self.path)
        if len(keys) != len(tail.stripes):
            raise CorruptFileError(
                f"Cannot append to {self.path}: {KEY_INDEX} has {len(keys)} entries for "
                f"{len(tail.stripes)} stripes", path=self.path)
        last_write_id, bucket_property, last_row_id = keys[-1] if keys else (-1, None, -1)
        if write_id < last_write_id:
            raise SchemaMismatchError(
                f"Cannot append write id {write_id} to {self.path}: it already holds write id "
                f"{last_write_id} and events must stay sorted by write id")
        self._init_state(row_schema, write_id, bucket_property or encode_bucket_property(0, 0),
                         compression, options)
        self.options = WriterOptions(options.stripe_size_bytes, tail.block_size,
                                     options.row_index_stride)
        self._next_row_id = last_row_id + 1 if write_id == last_write_id else 0
        self._template = tail
        self._statistics = tail.statistics
        self._stripes = tail.stripes
        self._stripe_stats = tail.metadata.messages(MD_STRIPE_STATS)
        self._key_index = [f"{w},{b},{r}" for w, b, r in keys]
        stats = tail.user_metadata.get(ACID_STATS, b"0,0,0").decode().split(",")
        self._inserts, self._updates, self._deletes = (int(x) for x in stats[:3])
        self._other_metadata = [m for m in tail.footer.messages(FT_METADATA)
                                if m.string(1) not in (KEY_INDEX, ACID_STATS, ACID_VERSION)]
        self._flushed_stripe_count = len(self._stripes)
        self._last_flush_length = tail.length

    # ------------------------------------------------------------------ writing
    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        """Buffer rows as insert events; full stripes are encoded and written as they fill.

        Raises:
            SchemaMismatchError: the data's columns or types differ from the row schema.
        """
        self._check_open()
        self._check_schema(data.schema)
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        for batch in batches:
            if batch.num_rows == 0:
                continue
            self._pending.append(self._to_events(batch))
            self._pending_bytes += batch.nbytes
        if self._pending_bytes >= self.options.stripe_size_bytes:
            self._write_pending()

    def _check_schema(self, schema: pa.Schema) -> None:
        expected = self.row_schema
        if schema.names == expected.names and all(
                a.type == b.type for a, b in zip(schema, expected, strict=True)):
            return
        problems = []
        for f in expected:
            if f.name not in schema.names:
                problems.append(f"column {f.name!r} ({f.type}) is missing")
            elif schema.field(f.name).type != f.type:
                problems.append(
                    f"column {f.name!r} is {schema.field(f.name).type}, expected {f.type}")
        problems += [f"column {n!r} is not in the table" for n in schema.names
                     if n not in expected.names]
        if not problems:
            problems.append(f"columns are in order {schema.names}, expected {expected.names}")
        raise SchemaMismatchError(
            f"Cannot write to {self.path}: the batch does not match the row schema: "
            + "; ".join(problems))

    def _to_events(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        n = batch.num_rows
        row_ids = np.arange(self._next_row_id, self._next_row_id + n, dtype=np.int64)
        self._next_row_id += n
        row = pa.StructArray.from_arrays(batch.columns, fields=list(self.row_schema))
        if self._fix_nested_nulls:
            row = _nested_nulls.prepare(row)
        return pa.RecordBatch.from_arrays([
            pa.array(np.full(n, INSERT, dtype=np.int32)),
            pa.array(np.full(n, self.write_id, dtype=np.int64)),
            pa.array(np.full(n, self.bucket_property, dtype=np.int32)),
            pa.array(row_ids),
            pa.array(np.full(n, self.write_id, dtype=np.int64)),
            row,
        ], schema=self.event_schema)

    def _write_pending(self) -> None:
        """Encode buffered rows into stripes and append them to the file."""
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending, schema=self.event_schema)
        self._pending, self._pending_bytes = [], 0
        data, tail = self._encode(table)
        stripes = tail.stripes
        first, last = stripes[0].offset, stripes[-1].end
        self._file.write(memoryview(data)[first:last])
        crash_point("writer.after_stripes")
        shift = self._position - first
        last_row = table.column("rowId")[0].as_py() - 1
        for stripe in stripes:
            self._stripes.append(stripe.moved_to(stripe.offset + shift))
            last_row += stripe.number_of_rows
            self._key_index.append(f"{self.write_id},{self.bucket_property},{last_row}")
        self._position += last - first
        self._stripe_stats.extend(tail.metadata.messages(MD_STRIPE_STATS))
        self._statistics = [merge_statistics(a, b)
                            for a, b in zip(self._statistics, tail.statistics, strict=True)]
        self._inserts += table.num_rows

    def flush(self) -> int:
        """Make every row written so far readable; returns the new flush length.

        Order (invariant 1): stripes, intermediate footer, durable flush of the data file,
        then the length appended to the side file and that flushed too.
        """
        self._check_open()
        self._write_pending()
        if self._flushed_stripe_count != len(self._stripes):
            self._write_tail()
            _files.durable_flush(self._file)
            crash_point("writer.after_footer")
            self._side.write(encode_length(self._position))
            _files.durable_flush(self._side)
            crash_point("writer.after_side_file")
            self._last_flush_length = self._position
        return self._last_flush_length

    def _write_tail(self) -> None:
        footer = Message(list(self._template.footer.fields))
        footer.set_uint(FT_HEADER_LENGTH, len(MAGIC))
        footer.set_uint(FT_CONTENT_LENGTH, self._position - len(MAGIC))
        footer.set_messages(FT_STRIPES, [s.to_message() for s in self._stripes])
        footer.set_messages(FT_METADATA, self._other_metadata + [
            _metadata_item(KEY_INDEX, "".join(k + ";" for k in self._key_index)),
            _metadata_item(ACID_STATS, f"{self._inserts},{self._updates},{self._deletes}"),
            _metadata_item(ACID_VERSION, "2"),
        ])
        footer.set_uint(FT_NUMBER_OF_ROWS, sum(s.number_of_rows for s in self._stripes))
        footer.set_messages(FT_STATISTICS, self._statistics)
        assert footer.messages(FT_TYPES), "template footer must carry the types"
        metadata = Message()
        metadata.set_messages(MD_STRIPE_STATS, self._stripe_stats)
        tail = serialize_tail(postscript=self._template.postscript, footer=footer,
                              metadata=metadata, compression=self.compression,
                              block_size=self.options.compression_block_size)
        self._file.write(tail)
        self._position += len(tail)
        self._flushed_stripe_count = len(self._stripes)

    def close(self) -> None:
        """Write the final footer, close the file and remove the side file."""
        if self._closed:
            return
        self._write_pending()
        if self._flushed_stripe_count != len(self._stripes):
            self._write_tail()
        _files.durable_flush(self._file)
        self._file.close()
        self._side.close()
        self._fs.rm_file(side_file_path(self.path))
        self._closed = True

    def abandon(self) -> None:
        """Close handles without writing anything more (the transaction is being aborted)."""
        if not self._closed:
            self._file.close()
            self._side.close()
            self._closed = True

    @property
    def rows_written(self) -> int:
        return self._inserts

    @property
    def bytes_written(self) -> int:
        return self._position

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"BucketWriter for {self.path} is closed")

    def __enter__(self) -> BucketWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abandon()


def _metadata_item(name: str, value: str) -> Message:
    return Message([(1, 2, name.encode()), (2, 2, value.encode())])


def _parse_key_index(raw: bytes, path: str) -> list[tuple[int, int, int]]:
    keys = []
    for entry in raw.decode("utf-8", "replace").split(";"):
        if not entry:
            continue
        try:
            w, b, r = (int(x) for x in entry.split(","))
        except ValueError as e:
            raise CorruptFileError(f"Cannot parse {KEY_INDEX} entry {entry!r} in {path}",
                                   path=path) from e
        keys.append((w, b, r))
    return keys


__all__ = ["ACID_FIELD_NAMES", "BucketWriter", "Compression", "WriterOptions"]
