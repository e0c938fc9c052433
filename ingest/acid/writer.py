"""The ACID bucket-file writer: Hive's OrcRecordUpdater (insert or delete events) on pyarrow.

`_stripe_encoder` encodes stripes (pyarrow for the user's columns, the event columns
directly); this module appends them to the bucket file and writes every tail itself, so
each flush() ends a stripe and leaves an intermediate footer that describes all so far, with
`hive.acid.key.index`, `hive.acid.stats` and `hive.acid.version`, then records the file length
in the side file (DESIGN invariant 1). Stripes are relocatable: only the footer holds offsets.
A writer made with `BucketWriter.for_deletes` writes a `delete_delta` bucket file instead:
operation 2, the deleted rows' keys, a null `row` (OrcRecordUpdater.delete, split-update).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import fsspec
import pyarrow as pa

from ingest.acid import _acid_footer, _event_batches, _files, _nested_nulls
from ingest.acid._acid_footer import ACID_STATS, ACID_VERSION, KEY_INDEX
from ingest.acid._acid_stripes import AcidStripe
from ingest.acid._event_batches import KEY_COLUMNS
from ingest.acid._stripe_encoder import PYARROW_BLOCK_UNIT, WRITABLE_CODECS, StripeEncoder
from ingest.acid.events import ACID_FIELD_NAMES, acid_event_schema, row_schema_of
from ingest.acid.names import encode_bucket_property
from ingest.acid.side_file import encode_length, read_flush_lengths, side_file_path
from ingest.errors import (
    CommitConflictError,
    CorruptFileError,
    SchemaMismatchError,
    UnsupportedFormatError,
)
from ingest.faults import crash_point
from ingest.orc import Message, StripeInfo, merge_statistics, open_orc, read_tail
from ingest.orc.statistics import INT64_MAX
from ingest.orc.tail import (
    FT_METADATA,
    FT_ROW_INDEX_STRIDE,
    MAGIC,
    MD_STRIPE_STATS,
    STRIPE_STATS_COLUMNS,
    FileTail,
)

Compression = Literal["none", "zlib", "snappy", "lz4", "zstd"]


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
        if compression not in WRITABLE_CODECS:
            raise UnsupportedFormatError(
                f"Cannot write ORC with compression {compression!r}: supported are "
                f"{', '.join(WRITABLE_CODECS)}")
        self._fs, self.path = _files.resolve(path, fs)
        if self._fs.exists(self.path):
            raise FileExistsError(
                f"Cannot create bucket file, it already exists: {self.path} "
                "(use BucketWriter.open_append to add a transaction to it)")
        self._init_state(row_schema, write_id, encode_bucket_property(bucket_id, statement_id),
                         compression, options or WriterOptions())
        self._encoder = self._make_encoder()
        # An empty file's tail: types, writer and postscript fields every tail reuses.
        # Encoded before any file is created: it also checks the options.
        _, self._template = self._encoder.encode_file(self.event_schema.empty_table())
        parent = self.path.rsplit("/", 1)[0]
        self._fs.makedirs(parent, exist_ok=True)
        self._file = self._fs.open(self.path, "wb")
        self._file.write(MAGIC)
        self._position = len(MAGIC)
        # Hive 3 starts the side file with a 0 entry: nothing is readable before the first flush.
        self._side = self._fs.open(side_file_path(self.path), "wb")
        self._side.write(encode_length(0))
        _files.durable_flush(self._side)
        self._statistics = self._template.statistics

    @classmethod
    def for_deletes(
        cls,
        path: str,
        row_schema: pa.Schema,
        *,
        write_id: int,
        bucket_id: int,
        statement_id: int = 0,
        compression: Compression = "zstd",
        fs: fsspec.AbstractFileSystem | None = None,
        options: WriterOptions | None = None,
    ) -> BucketWriter:
        """Create a `delete_delta_W_W_S/bucket_N` file for delete events (`write_deletes`).

        The file carries the table's full row type, as Hive's delete deltas do, with `row`
        null in every event. Footers, side file, key index and `hive.acid.stats` ("0,0,<n>")
        work as for insert files.

        Args:
            path: the bucket file, normally in a `delete_delta_W_W_0000` directory.
            row_schema: the table's row schema.
            write_id: the deleting transaction's write id (`currentTransaction`).
            bucket_id: N of `bucket_N`; every deleted row's bucket property must decode to it.
            statement_id: the deleting statement's id.
            compression: as for `BucketWriter`.
            fs: as for `BucketWriter`.
            options: as for `BucketWriter`.

        Raises:
            FileExistsError: the bucket file exists.
            UnsupportedFormatError: unknown compression.
        """
        self = cls(path, row_schema, write_id=write_id, bucket_id=bucket_id,
                   statement_id=statement_id, compression=compression, fs=fs, options=options)
        self._is_delete = True
        return self

    # ------------------------------------------------------------------ construction helpers
    def _init_state(self, row_schema: pa.Schema, write_id: int, bucket_property: int,
                    compression: Compression, options: WriterOptions) -> None:
        if not 0 <= write_id <= INT64_MAX:
            raise ValueError(f"write_id must be in 0..{INT64_MAX}, got {write_id}")
        if len(row_schema) == 0:
            raise SchemaMismatchError("Cannot write an ACID bucket file of rows without columns")
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
        # Encoded once: every footer repeats all stripes, so re-encoding would be quadratic.
        self._stripe_messages: list[bytes] = []
        self._stripe_stats: list[bytes] = []
        self._key_index: list[str] = []
        self._inserts = self._updates = self._deletes = 0
        self._other_metadata: list[Message] = []
        self._flushed_stripe_count = -1  # no tail written yet
        self._appending = False
        self._last_flush_length = 0
        self._closed = False
        self._is_delete = False
        self._last_key: tuple[int, ...] | None = None

    def _make_encoder(self) -> StripeEncoder:
        """The stripe encoder for this file's codec and options.

        Raises:
            ConfigError: the ORC encoder refuses the writer options.
        """
        return StripeEncoder(
            self.compression, block_size=self.options.compression_block_size,
            row_index_stride=self.options.row_index_stride,
            stripe_size_bytes=self.options.stripe_size_bytes,
            threads=self.options.encoder_threads)

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
        side = side_file_path(stripped)
        if lengths is not None and fs.size(side) != 8 * len(lengths):
            # A torn last entry: cut it, or new entries would be misaligned by its bytes.
            _files.truncate(fs, side, 8 * len(lengths))
        self._file = fs.open(stripped, "ab")
        self._position = length
        self._appending = True
        self._side = fs.open(side, "ab")
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
        if compression != "none" and tail.block_size % PYARROW_BLOCK_UNIT:
            raise UnsupportedFormatError(
                f"Cannot append to {self.path}: it was written with a compression block size "
                f"of {tail.block_size:,} bytes, and the ORC encoder writes only multiples of "
                f"{PYARROW_BLOCK_UNIT:,}", hint="write the new rows to a new delta instead")
        keys = _acid_footer.parse_key_index(tail.user_metadata.get(KEY_INDEX, b""), self.path)
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
        # New stripes must use the file's block size and row-index stride: the footer kept
        # states them for every stripe (a file without row index keeps the options' stride).
        self.options = dataclasses.replace(
            options, compression_block_size=tail.block_size,
            row_index_stride=tail.footer.uint(FT_ROW_INDEX_STRIDE, 0) or options.row_index_stride)
        self._encoder = self._make_encoder()
        self._next_row_id = last_row_id + 1 if write_id == last_write_id else 0
        self._template = tail
        self._statistics = tail.statistics
        self._stripes = tail.stripes
        self._stripe_messages = [s.to_message().encode() for s in self._stripes]
        self._stripe_stats = [bytes(b) for b in tail.metadata.raw(MD_STRIPE_STATS)]
        self._key_index = [f"{w},{b},{r}" for w, b, r in keys]
        stats = tail.user_metadata.get(ACID_STATS, b"0,0,0").decode().split(",")
        self._inserts, self._updates, self._deletes = (int(x) for x in stats[:3])
        # A delete-delta file (only delete events) continues as one, still sorted by key.
        self._is_delete = self._deletes > 0 and self._inserts == 0
        self._last_key = keys[-1] if keys else None
        self._other_metadata = [m for m in tail.footer.messages(FT_METADATA)
                                if m.string(1) not in (KEY_INDEX, ACID_STATS, ACID_VERSION)]
        self._flushed_stripe_count = len(self._stripes)
        self._last_flush_length = tail.length

    # ------------------------------------------------------------------ writing
    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        """Buffer rows as insert events; full stripes are encoded and written as they fill.

        Raises:
            SchemaMismatchError: the data's columns or types differ from the row schema.
            ValueError: the writer was made for delete events (`for_deletes`).
        """
        self._check_open()
        if self._is_delete:
            raise ValueError(f"BucketWriter for {self.path} writes delete events: use "
                             "write_deletes, or a BucketWriter of its own for inserts")
        data = _event_batches.conform_rows(data, self.row_schema, path=self.path)
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if self._next_row_id + batch.num_rows - 1 > INT64_MAX:
                raise ValueError(f"Cannot write to {self.path}: row ids of write id "
                                 f"{self.write_id} would pass {INT64_MAX}")
            if self._fix_nested_nulls:
                batch = _nested_nulls.prepare_batch(batch)
            self._pending.append(batch)
            self._next_row_id += batch.num_rows
            self._pending_bytes += batch.nbytes
        if self._pending_bytes >= self.options.stripe_size_bytes:
            self._write_pending()

    def write_deletes(self, keys: pa.Table | pa.RecordBatch) -> None:
        """Buffer delete events for the rows with these keys (OrcRecordUpdater.delete).

        Each event gets operation 2, currentTransaction = write_id, the deleted row's key
        (originalTransaction, bucket property, rowId) and a null row. Keys are sorted here;
        keys of a later call must not sort before those of an earlier one (a file is one
        sorted run: facts §4).

        Args:
            keys: columns `originalTransaction`, `bucket` (the encoded bucket property of the
                deleted row, e.g. from ROW__ID) and `rowId`, any integer types, no nulls;
                other columns are ignored.

        Raises:
            SchemaMismatchError: a key column is missing, not an integer, or has nulls.
            ValueError: the writer is for inserts, a key's bucket property does not decode to
                this file's bucket id, or the keys sort before keys already written.
        """
        self._check_open()
        if not self._is_delete:
            raise ValueError(f"BucketWriter for {self.path} writes insert events: open a "
                             "delete_delta file with BucketWriter.for_deletes")
        table = _event_batches.sorted_delete_keys(keys, path=self.path)
        if table.num_rows == 0:
            return
        _event_batches.check_delete_buckets(table.column("bucket").to_numpy(),
                                            self.bucket_property, path=self.path)
        first = tuple(table.column(n)[0].as_py() for n in KEY_COLUMNS)
        if self._last_key is not None and first < self._last_key:
            raise ValueError(
                f"Cannot write delete events to {self.path}: key {first} sorts before the last "
                f"key written, {self._last_key}; events must stay sorted by "
                "(originalTransaction, bucket, rowId)")
        self._last_key = tuple(table.column(n)[-1].as_py() for n in KEY_COLUMNS)
        for batch in table.to_batches():
            self._pending.append(_event_batches.delete_events(
                batch, event_schema=self.event_schema, write_id=self.write_id))
            self._pending_bytes += batch.nbytes
        if self._pending_bytes >= self.options.stripe_size_bytes:
            self._write_pending()

    def _write_pending(self) -> None:
        """Encode buffered rows into stripes and append them in order."""
        if not self._pending:
            return
        schema = self.event_schema if self._is_delete else self.row_schema
        table = pa.Table.from_batches(self._pending, schema=schema)
        self._pending, self._pending_bytes = [], 0
        first_row_id = self._next_row_id - table.num_rows  # of the pending inserts
        for start, rows in self._encoder.stripe_slices(table):
            piece = table.slice(start, rows)
            if self._is_delete:
                stripe = self._encoder.event_stripe(piece)
            else:
                stripe = self._encoder.insert_stripe(
                    piece, write_id=self.write_id, bucket_property=self.bucket_property,
                    first_row_id=first_row_id + start)
            self._append_stripe(stripe)

    def _append_stripe(self, stripe: AcidStripe) -> None:
        """Append one encoded stripe to the file; fold in its statistics and key."""
        self._fence()
        for piece in stripe.pieces:
            self._file.write(piece)
        crash_point("writer.after_stripes")
        moved = stripe.info.moved_to(self._position)
        self._stripes.append(moved)
        self._stripe_messages.append(moved.to_message().encode())
        self._position += moved.length
        self._key_index.append("{},{},{}".format(*stripe.last_key))
        stats = Message()
        stats.set_messages(STRIPE_STATS_COLUMNS, stripe.statistics)
        self._stripe_stats.append(stats.encode())
        self._statistics = [merge_statistics(a, b)
                            for a, b in zip(self._statistics, stripe.statistics, strict=True)]
        if self._is_delete:
            self._deletes += moved.number_of_rows
        else:
            self._inserts += moved.number_of_rows

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

    def _fence(self) -> None:
        """An appending writer checks that nobody else changed the file since it opened it:
        two writers appending (a zombie task attempt) would make footers point at the
        wrong bytes.

        Raises:
            CommitConflictError: the file's length is not where this writer left it.
        """
        if not self._appending:
            return
        self._file.flush()
        size = self._fs.size(self.path)
        if size != self._position:
            raise CommitConflictError(
                f"Cannot append to {self.path}: it has {size:,} bytes but this writer left it "
                f"at {self._position:,}; another writer changed it",
                hint="abort this transaction: only one writer may append to a bucket file")

    def _write_tail(self) -> None:
        self._fence()
        tail = _acid_footer.acid_tail(
            self._template, content_end=self._position, stripe_messages=self._stripe_messages,
            number_of_rows=sum(s.number_of_rows for s in self._stripes),
            statistics=self._statistics, stripe_statistics=self._stripe_stats,
            key_index=self._key_index, counts=(self._inserts, self._updates, self._deletes),
            other_metadata=self._other_metadata, compression=self.compression,
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
        """Insert events in the file (including those of earlier writers when appending)."""
        return self._inserts

    @property
    def deletes_written(self) -> int:
        """Delete events in the file (including those of earlier writers when appending)."""
        return self._deletes

    @property
    def is_delete_writer(self) -> bool:
        """Whether this writer writes delete events (`for_deletes`)."""
        return self._is_delete

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


__all__ = ["ACID_FIELD_NAMES", "KEY_COLUMNS", "BucketWriter", "Compression", "WriterOptions"]
