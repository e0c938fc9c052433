"""The ACID bucket-file writer: Hive's OrcRecordUpdater (insert or delete events) on pyarrow.

`_stripe_encoder` encodes stripes (pyarrow for the user's columns, the event columns
directly); this module appends them to the bucket file and writes every tail itself, so
each flush() ends a stripe and leaves an intermediate footer that describes all so far, with
`hive.acid.key.index`, `hive.acid.stats`, `hive.acid.version` and our stripe checksums
(docs/format.md §16), then records the file length in the side file (docs/invariants.md, 1).
Stripes are relocatable: only the footer holds offsets.
A writer for `kind="delete"` (`BucketFileOptions`) writes a `delete_delta` bucket file instead:
operation 2, the deleted rows' keys, a null `row` (OrcRecordUpdater.delete, split-update).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Self

import fsspec
import pyarrow as pa
import pyarrow.orc as po

from ingest.acid.format import (
    ACID_FIELD_NAMES,
    BUCKET,
    KEY_COLUMNS,
    ROW,
    AcidTail,
    CommittedFile,
    StripeHasher,
    acid_event_schema,
    encode_bucket_property,
    encode_length,
    file_checksums,
    pack_checksum,
    row_schema_of,
    side_file_path,
    tail_bytes_at,
)
from ingest.acid.format import tail_hash as hash_tail
from ingest.acid.read import readable_length
from ingest.acid.write import _acid_stripes, _event_batches, _nested_nulls
from ingest.acid.write._acid_stripes import AcidStripe
from ingest.acid.write._file_state import FileState, restore, writable_row_schema
from ingest.acid.write._stripe_encoder import StripeEncoder
from ingest.acid.write.options import BucketFileOptions, Compression, WriterOptions
from ingest.errors import (
    CommitConflictError,
    CorruptFileError,
    SchemaMismatchError,
    UnsupportedFormatError,
)
from ingest.faults import crash_point
from ingest.io import files as _files
from ingest.orc import (
    INT64_MAX,
    MAGIC,
    Footer,
    Message,
    StripeStatistics,
    merge_statistics,
    open_orc,
    parse_tail,
    read_tail,
)


class BucketWriter:
    """Writes the events of one write id into one ACID bucket file.

    Usage::

        options = BucketFileOptions(write_id=5, row_schema=schema)
        w = BucketWriter.create("…/delta_0000005_0000005_0000/bucket_00000", options)
        w.write(batch); w.flush(); w.write(batch2); w.close()

    Insert rows get `rowId` 0, 1, 2, … per write id and the Hive 3 (BucketCodec V1) bucket
    property. With `kind="delete"` the file is a `delete_delta` bucket file and takes
    `write_deletes` instead of `write`.
    """

    def __init__(self, path: str, options: BucketFileOptions, *,
                 fs: fsspec.AbstractFileSystem, state: FileState, file: Any, side: Any) -> None:
        """Use `create` or `open_append`: they check the options against the file and open it.

        Args:
            path: the bucket file, within fs.
            options: every field set (`BucketFileOptions.with_defaults`, or the file's own).
            fs: its filesystem.
            state: the file's state (empty for a new file).
            file: the bucket file, open for appending at `state.position`.
            side: its side file, open for appending; None on an object store (no append).
        """
        assert options.row_schema is not None and options.compression is not None
        assert options.bucket_id is not None and options.statement_id is not None
        self._fs, self.path = fs, path
        self.options = options
        self.row_schema = options.row_schema
        self.event_schema = acid_event_schema(self.row_schema)
        self._fix_nested_nulls = _nested_nulls.needs_fix(self.event_schema.field(ROW).type)
        self.write_id = options.write_id
        self.bucket_property = (encode_bucket_property(options.bucket_id, options.statement_id)
                                if state.bucket_property is None else state.bucket_property)
        self.compression: Compression = options.compression
        self._is_delete = options.kind == "delete"
        self._encoder = _encoder(options)
        self._statistics = state.template.statistics
        self._position = state.position
        self._stripe_count = len(state.stripes)
        self._number_of_rows = sum(s.number_of_rows for s in state.stripes)
        self._tail = AcidTail(state.template, other_metadata=state.other_metadata,
                              compression=self.compression,
                              block_size=options.tuning.compression_block_size)
        assert state.checksums is not None, "open_append fills in missing checksums"
        for stripe, statistics, key, checksum in zip(
                state.stripe_messages, state.stripe_stats, state.keys, state.checksums,
                strict=True):
            self._tail.add_stripe(stripe, statistics, key, pack_checksum(checksum))
        self._inserts, self._updates, self._deletes = state.counts
        self._flushed_stripe_count = state.flushed_stripe_count
        self._last_flush_length = state.last_flush_length
        self._next_row_id = state.next_row_id
        self._last_key = state.last_key
        self._appending = state.appending
        # The last tail in the file, for the committed-file manifest (docs/format.md §20): its
        # end, hash (None until this writer writes one: read from the file when asked) and
        # the events it counts.
        self._tail_end = state.last_flush_length
        self._tail_hash: str | None = None
        self._tail_rows = self._number_of_rows
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._row_type_messages: list[bytes] | None = None
        self._file, self._side = file, side
        self._closed = False

    @classmethod
    def create(cls, path: str, options: BucketFileOptions, *,
               fs: fsspec.AbstractFileSystem | None = None) -> Self:
        """Create the bucket file (it must not exist) and its side file holding one 0 entry.

        Args:
            path: the bucket file, e.g. `…/delta_0000005_0000005_0000/bucket_00000` (or in a
                `delete_delta` directory for `kind="delete"`).
            options: the file to write; `row_schema` is required.
            fs: its filesystem (from the URL when None).

        Raises:
            FileExistsError: the bucket file exists; use `open_append` to continue it. On
                S3 raised by `close()` instead (the upload is refused, nothing replaced).
            SchemaMismatchError: the row schema has no columns.
            ConfigError: the ORC encoder refuses the writer tuning.
            ValueError: no row schema.
        """
        if options.row_schema is None:
            raise ValueError("Cannot create a bucket file without BucketFileOptions.row_schema")
        options = options.with_defaults()
        options = dataclasses.replace(options, row_schema=writable_row_schema(options.row_schema))
        fs, path = _files.resolve(path, fs)
        # Checked first where a request can ask cheaply; on S3 the store refuses the upload
        # when the file closes instead (no HEAD and LIST per file: `files.create_new`).
        if _files.can_append(fs) and fs.exists(path):
            raise FileExistsError(
                f"Cannot create bucket file, it already exists: {path} "
                "(use BucketWriter.open_append to add a transaction to it)")
        # An empty file's tail: types, writer and postscript fields every tail reuses.
        # Encoded before any file is created: it also checks the options.
        assert options.row_schema is not None
        template = _encoder(options).empty_tail(acid_event_schema(options.row_schema))
        if _files.has_directories(fs):  # an object store's makedirs may create a bucket
            fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        file = _files.create_new(fs, path)
        side = None
        try:
            file.write(MAGIC)
            # Hive 3 starts the side file with a 0 entry: nothing is readable before the
            # first flush. An object store stores the file whole at close or not at all, so
            # there is no partly written file for a side file to describe (format.md §23).
            if _files.can_append(fs):
                side = fs.open(side_file_path(path), "wb")
                side.write(encode_length(0))
                _files.durable_flush(side)
        except BaseException:
            _files.discard(file)
            if side is not None:
                _files.discard(side)
            raise
        return cls(path, options, fs=fs, state=FileState(template, len(MAGIC)),
                   file=file, side=side)

    # ------------------------------------------------------------------ appending
    @classmethod
    def open_append(cls, path: str, options: BucketFileOptions, *,
                    fs: fsspec.AbstractFileSystem | None = None) -> Self:
        """Continue an existing bucket file with events of another (or the same) write id.

        Bytes past the last recorded flush length (a torn stripe or footer) are discarded
        first; without a side file the whole file must be a complete ORC file. Options left
        None are taken from the file (row schema, bucket, codec, kind of events); the
        compression block size and row-index stride are always the file's.

        Args:
            path: the bucket file.
            options: the write id, the writer tuning, and optionally what the file must be.
            fs: its filesystem (from the URL when None).

        Raises:
            FileNotFoundError: no such bucket file.
            CorruptFileError: the side file points past the end of the file, or no complete
                footer ends at the recorded length (run `ingest recover`).
            SchemaMismatchError: the file is not an ACID file, its rows are not of the
                options' row schema, or write_id is older than the file's last write id (rows
                must stay sorted by write id).
            UnsupportedFormatError: the file's codec or block size cannot be written.
            ValueError: the options' bucket, statement, kind or codec differ from the file's.
        """
        fs, stripped = _files.resolve(path, fs)
        length, size, lengths = readable_length(fs, stripped)
        if length == 0:
            raise CorruptFileError(
                f"Cannot append to {stripped}: no transaction was ever flushed to it",
                path=stripped, offset=0, hint="run `ingest recover`; it removes such files")
        tail = read_tail(fs, stripped, length)
        with open_orc(fs, stripped, length) as orc:
            schema = orc.schema
        try:
            file_row_schema = row_schema_of(schema)
        except UnsupportedFormatError as e:
            raise SchemaMismatchError(f"Cannot append to {stripped}: {e}") from e
        options, state = restore(stripped, tail, file_row_schema, options)
        if state.checksums is None:
            # Written without checksums (Hive, an older ingest): hash the stripes as they are.
            state.checksums = file_checksums(fs, stripped, state.stripes)
        if length < size:
            _files.truncate(fs, stripped, length)
        side_path = side_file_path(stripped)
        if lengths is not None and fs.size(side_path) != 8 * len(lengths):
            # A torn last entry: cut it, or new entries would be misaligned by its bytes.
            _files.truncate(fs, side_path, 8 * len(lengths))
        file = fs.open(stripped, "ab")
        side = fs.open(side_path, "ab")
        if lengths is None:
            # A new side file must never hide what is already committed: start at the length.
            side.write(encode_length(length))
            _files.durable_flush(side)
        return cls(stripped, options, fs=fs, state=state, file=file, side=side)

    # ------------------------------------------------------------------ writing
    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        """Buffer rows as insert events; full stripes are encoded and written as they fill.

        Raises:
            SchemaMismatchError: the data's columns or types differ from the row schema.
            ValueError: the writer was made for delete events (`kind="delete"`).
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
        if self._pending_bytes >= self.options.tuning.stripe_size_bytes:
            self._write_pending()

    def write_piece(self, piece: bytes | memoryview | pa.Buffer) -> int:
        """Append rows encoded elsewhere (`pieces.encode_piece`) as insert events: one stripe,
        after every row written before it (row ids continue from them).

        A piece encoded with another codec or tuning than this file's (the table's codec
        changed between the files of an appended delta) is decoded and written as rows.

        Args:
            piece: the piece's bytes.

        Returns:
            The rows the piece held.

        Raises:
            TailError: the bytes are not one whole ORC file.
            SchemaMismatchError: the piece's columns are not this file's row schema.
            ValueError: the writer was made for delete events, or row ids would pass
                INT64_MAX.
        """
        self._check_open()
        if self._is_delete:
            raise ValueError(f"BucketWriter for {self.path} writes delete events: stripe "
                             "pieces hold inserts")
        view = memoryview(piece).cast("B")
        tail = parse_tail(view, len(view))
        tuning = self.options.tuning
        if (tail.compression != self.compression or tail.block_size
                != tuning.compression_block_size or len(tail.stripes) != 1
                or (tail.footer.uint(Footer.ROW_INDEX_STRIDE, 0) or 0)
                != tuning.row_index_stride):
            rows = po.ORCFile(pa.BufferReader(pa.py_buffer(view))).read()
            self.write(rows)
            return rows.num_rows
        if [m.encode() for m in tail.footer.messages(Footer.TYPES)] != self._row_types():
            raise SchemaMismatchError(
                f"Cannot write a stripe piece to {self.path}: its columns are not the file's "
                f"row schema ({self.row_schema})")
        rows = tail.stripes[0].number_of_rows
        if rows == 0:
            return 0
        if self._next_row_id + rows - 1 > INT64_MAX:
            raise ValueError(f"Cannot write to {self.path}: row ids of write id "
                             f"{self.write_id} would pass {INT64_MAX}")
        self._write_pending()  # rows written before the piece keep the lower row ids
        stripe = _acid_stripes.insert_stripe(
            [(view, tail)], write_id=self.write_id, bucket_property=self.bucket_property,
            first_row_id=self._next_row_id)
        self._next_row_id += rows
        self._append_stripe(stripe)
        return rows

    def _row_types(self) -> list[bytes]:
        """The ORC types of a plain file of this file's rows, as the encoder writes them."""
        if self._row_type_messages is None:
            _, tail = self._encoder.encode_file(self.row_schema.empty_table())
            self._row_type_messages = [m.encode() for m in tail.footer.messages(Footer.TYPES)]
        return self._row_type_messages

    def write_deletes(self, keys: pa.Table | pa.RecordBatch) -> None:
        """Buffer delete events for the rows with these keys (OrcRecordUpdater.delete).

        Each event gets operation 2, currentTransaction = write_id, the deleted row's key
        (originalTransaction, bucket property, rowId) and a null row. Keys are sorted here;
        keys of a later call must not sort before those of an earlier one (a file is one
        sorted run: docs/format.md, OrcRecordUpdater).

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
                             "delete_delta file with BucketFileOptions(kind='delete')")
        table = _event_batches.sorted_delete_keys(keys, path=self.path)
        if table.num_rows == 0:
            return
        _event_batches.check_delete_buckets(table.column(BUCKET).to_numpy(),
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
        if self._pending_bytes >= self.options.tuning.stripe_size_bytes:
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
        hasher = StripeHasher()
        for piece in stripe.pieces:
            self._file.write(piece)
            hasher.update(piece)
        crash_point("writer.after_stripes")
        moved = stripe.info.moved_to(self._position)
        self._position += moved.length
        self._stripe_count += 1
        self._number_of_rows += moved.number_of_rows
        stats = Message()
        stats.set_messages(StripeStatistics.COL_STATS, stripe.statistics)
        self._tail.add_stripe(moved.to_message().encode(), stats.encode(), stripe.last_key,
                              pack_checksum(hasher.value()))
        self._statistics = [merge_statistics(a, b)
                            for a, b in zip(self._statistics, stripe.statistics, strict=True)]
        if self._is_delete:
            self._deletes += moved.number_of_rows
        else:
            self._inserts += moved.number_of_rows

    def flush(self) -> int:
        """Make every row written so far readable; returns the new flush length.

        Order (docs/invariants.md, 1): stripes, intermediate footer, durable flush of the data file,
        then the length appended to the side file and that flushed too.
        """
        self._check_open()
        self._write_pending()
        if self._flushed_stripe_count != self._stripe_count:
            self._write_tail()
            _files.durable_flush(self._file)
            crash_point("writer.after_footer")
            if self._side is not None:
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
        tail = self._tail.encode(
            content_end=self._position, number_of_rows=self._number_of_rows,
            statistics=self._statistics, counts=(self._inserts, self._updates, self._deletes))
        self._file.write(tail)
        self._position += len(tail)
        self._flushed_stripe_count = self._stripe_count
        self._tail_end, self._tail_hash = self._position, hash_tail(tail)
        self._tail_rows = self._number_of_rows

    def close(self) -> None:
        """Write the final footer, close the file and remove the side file."""
        if self._closed:
            return
        try:
            self._write_pending()
            if self._flushed_stripe_count != self._stripe_count:
                self._write_tail()
            _files.durable_flush(self._file)
            self._file.close()
            if self._side is not None:
                self._side.close()
        except BaseException:
            # A close that fails (an object store's upload) leaves nothing half stored, now
            # or when the handles are garbage-collected.
            self.abandon()
            raise
        if self._side is not None:
            self._fs.rm_file(side_file_path(self.path))
        self._closed = True

    def abandon(self) -> None:
        """Close handles without writing anything more (the transaction is being aborted).

        On an object store nothing is uploaded: a closed handle would store what was written
        so far as a whole object (`_files.discard`)."""
        if not self._closed:
            self._closed = True
            _files.discard(self._file)
            if self._side is not None:
                _files.discard(self._side)

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
        """Whether this writer writes delete events (`kind="delete"`)."""
        return self._is_delete

    @property
    def bytes_written(self) -> int:
        return self._position

    @property
    def tail_end(self) -> int:
        """Where the file's last complete tail ends: the length of the last flush or close
        (0 before the first)."""
        return self._tail_end

    @property
    def tail_hash(self) -> str:
        """The manifest's hash of the last complete tail (`ingest.acid.format.committed.tail_hash`);
        kept from writing it, read back only for a reopened file this writer added nothing to.

        Raises:
            ValueError: nothing was flushed yet.
            OSError: the file cannot be read back.
        """
        if self._tail_hash is None:
            if not self._tail_end:
                raise ValueError(f"BucketWriter for {self.path} has flushed nothing yet")
            self._tail_hash = hash_tail(tail_bytes_at(self._fs, self.path, self._tail_end))
        return self._tail_hash

    @property
    def tail_rows(self) -> int:
        """Events (inserts and deletes) the last complete tail counts."""
        return self._tail_rows

    def committed_file(self, path: str) -> CommittedFile:
        """The manifest entry a commit records for this file after its last flush or close.

        Args:
            path: the file's path relative to the table root.

        Raises:
            ValueError: nothing was flushed yet.
            ConfigError: `path` is not a relative path.
        """
        return CommittedFile(path, self.write_id, self.tail_end, self.tail_hash, self.tail_rows)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"BucketWriter for {self.path} is closed")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abandon()


def _encoder(options: BucketFileOptions) -> StripeEncoder:
    """The stripe encoder for a file's codec and tuning.

    Raises:
        ConfigError: the ORC encoder refuses the writer options.
    """
    assert options.compression is not None
    tuning = options.tuning
    return StripeEncoder(
        options.compression, block_size=tuning.compression_block_size,
        row_index_stride=tuning.row_index_stride, stripe_size_bytes=tuning.stripe_size_bytes,
        threads=tuning.encoder_threads)


__all__ = ["ACID_FIELD_NAMES", "KEY_COLUMNS", "BucketFileOptions", "BucketWriter",
           "Compression", "WriterOptions"]
