"""The merge half of the snapshot reader: one partition's buckets, file by file.

Per bucket it loads the visible delete events (`DeleteRegistry`, Hive's
`ColumnizedDeleteEventRegistry`), then streams inserts stripe by stripe, dropping events whose
write id is not valid (`findRecordsWithInvalidTransactionIds`) and rows a delete names; original
files get Hive 3's synthetic ROW__IDs. Mirrors `VectorizedOrcAcidRowBatchReader`. Knows files
and write-id lists, not how partitions or directories are chosen (`snapshot`, `state`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import Future, wait
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Literal

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as po
from fsspec.implementations.local import LocalFileSystem

from ingest.acid.format import (
    ACID_FIELD_NAMES,
    ACID_STATS,
    BUCKET,
    DELETE,
    KEY_COLUMNS,
    OPERATION,
    ROW,
    ROW_ID,
    ROW_POSITION,
    ParsedDirectory,
    ValidWriteIdList,
    checksums,
    encode_bucket_property,
    parse_acid_stats,
)
from ingest.acid.format import CURRENT_TRANSACTION as CURRENT
from ingest.acid.format import ORIGINAL_TRANSACTION as OTID
from ingest.acid.predicate import Condition, Domain
from ingest.acid.read._delete_registry import DeleteRegistry, Entries
from ingest.acid.read._stripe_decoder import StripeDecoder, ahead, finished
from ingest.acid.read.bucket_file import damage_hint
from ingest.acid.read.stripe_stats import row_columns, sequential_keys, stripe_domains
from ingest.acid.read.tails import SideFileWarning, committed_read_length
from ingest.errors import ConfigError, CorruptFileError, UnsupportedFormatError
from ingest.orc import (
    FileTail,
    SubMicroseconds,
    TimestampPrecisionWarning,
    WideColumn,
    open_orc,
    read_tail,
    tail_from_bytes,
    wide_timestamp_columns,
    with_wide_timestamps,
)

# Hive 3 `RecordIdentifier.StructInfo`: ROW__ID is struct<writeid:bigint,bucketid:int,rowid:bigint>.
ROW_ID_COLUMN = "row__id"
ROW_ID_TYPE = pa.struct([("writeid", pa.int64()), ("bucketid", pa.int32()), ("rowid", pa.int64())])

READ_AHEAD_ENV = "INGEST_READ_AHEAD"

FileKind = Literal["original", "base", "delta", "delete_delta"]
_POSITIONAL = re.compile(r"_col\d+")

def valid_mask(current: pa.Array, snapshot: ValidWriteIdList) -> pa.BooleanArray:
    """Which events' currentTransaction is valid in `snapshot` (docs/invariants.md, 2)."""
    mask = pc.less_equal(current, pa.scalar(snapshot.high_watermark, pa.int64()))
    exceptions = snapshot.open_write_ids + snapshot.aborted_write_ids
    if exceptions:
        mask = pc.and_(mask, pc.invert(pc.is_in(current, value_set=pa.array(exceptions,
                                                                               pa.int64()))))
    return pc.fill_null(mask, False) if mask.null_count else mask


def _valid_write_ids(current: pa.Array, snapshot: ValidWriteIdList) -> np.ndarray:
    """`valid_mask` as a numpy array, for events the caller handles in numpy (delete keys)."""
    if isinstance(current, pa.ChunkedArray):
        current = current.combine_chunks()
    filled = current.fill_null(0) if current.null_count else current
    values = np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.int64)
    valid = values <= snapshot.high_watermark
    exceptions = snapshot.open_write_ids + snapshot.aborted_write_ids
    if exceptions:
        valid &= ~np.isin(values, np.asarray(exceptions, dtype=np.int64))
    if current.null_count:
        valid &= np.asarray(current.is_valid().to_numpy(zero_copy_only=False), dtype=np.bool_)
    return valid


def synthetic_keys(
    batch_rows: int, *, write_id: int, bucket_property: int, first_row_id: int,
) -> dict[str, pa.Array]:
    """ACID key columns for rows of an original (pre-ACID) or raw file.

    Hive 3 gives such rows ROW__ID (write id of their directory, or 0 for original files;
    the file's bucket with statement id; their position among the bucket's files in path order).
    """
    return {
        OTID: pa.array(np.full(batch_rows, write_id, dtype=np.int64)),
        BUCKET: pa.array(np.full(batch_rows, bucket_property, dtype=np.int32)),
        ROW_ID: pa.array(np.arange(first_row_id, first_row_id + batch_rows, dtype=np.int64)),
        CURRENT: pa.array(np.full(batch_rows, write_id, dtype=np.int64)),
    }


def row_id_array(otid: pa.Array, bucket: pa.Array, row_id: pa.Array) -> pa.StructArray:
    """Hive's ROW__ID struct from the key columns."""
    return pa.StructArray.from_arrays(
        [otid.cast(pa.int64()), bucket.cast(pa.int32()), row_id.cast(pa.int64())],
        fields=list(ROW_ID_TYPE))


def conform(columns: dict[str, pa.Array], schema: pa.Schema, n: int, *,
            sub_microseconds: SubMicroseconds = "warn") -> list[pa.Array]:
    """Arrays in `schema`'s order and types; a column a file lacks comes back as nulls.

    Args:
        sub_microseconds: when a nanosecond column is floored to the `schema`'s
            microseconds, "warn" about a dropped digit or "error" (refuse).

    Raises:
        pyarrow.ArrowInvalid: a column's values cannot be cast to the table's type.
        UnsupportedFormatError: a digit would be dropped and `sub_microseconds` is "error".
    """
    out = []
    for field in schema:
        arr = columns.get(field.name)
        if arr is None:
            out.append(pa.nulls(n, field.type))
        elif arr.type != field.type:
            out.append(_to_microseconds(arr, field, sub_microseconds)
                       if _ns_to_us(arr.type, field.type)
                       else arr.cast(field.type))
        else:
            out.append(arr)
    return out


def _ns_to_us(found: pa.DataType, wanted: pa.DataType) -> bool:
    return (pa.types.is_timestamp(found) and pa.types.is_timestamp(wanted)
            and found.unit == "ns" and wanted.unit == "us")


def _to_microseconds(arr: pa.Array, field: pa.Field,
                     sub_microseconds: SubMicroseconds) -> pa.Array:
    """A nanosecond column of a read that widened it (`Merger._fit_timestamps`): floored to
    the microsecond, saying so when a digit below it is dropped (docs/format.md §19)."""
    nanos = arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    floored = pa.array(nanos // 1000, pa.timestamp("us"),
                       mask=arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count
                       else None)
    if (nanos % 1000).any():
        message = (f"column {field.name}: this read holds timestamps outside 1677-09-21 .. "
                   "2262-04-11, so it returns the column as microseconds, and other values "
                   "of it have digits below the microsecond")
        if sub_microseconds == "error":
            raise UnsupportedFormatError(
                f"Cannot rewrite {message}, which would be lost",
                hint="leave these files uncompacted: readers return every row "
                     "(docs/format.md §19)")
        warnings.warn(TimestampPrecisionWarning(message + ", which were dropped"),
                      stacklevel=4)
    return floored.cast(field.type) if floored.type != field.type else floored


@dataclass(frozen=True)
class DataFile:
    """A bucket file (or an original file) a snapshot reads."""

    path: str
    bucket_id: int
    kind: FileKind
    directory: ParsedDirectory | None = None
    # For original files: the synthetic rowId of the file's first row.
    first_row_id: int = 0
    # As the plan's listing of the directory found them (None: not listed): the file's size,
    # and whether a side file was listed beside it.
    size: int | None = dataclasses.field(default=None, compare=False)
    side_file: bool | None = dataclasses.field(default=None, compare=False)

    @property
    def listed_without_side_file(self) -> int | None:
        """The listed size of a file listed without a side file, else None."""
        return self.size if self.side_file is False else None


def read_length(fs: fsspec.AbstractFileSystem, path: str, snapshot: ValidWriteIdList, *,
                listed_size: int | None = None) -> int:
    """The bytes of a bucket file a snapshot reads: its side file's length, or its own
    footers' when the side file stops below committed rows (with a `SideFileWarning` naming
    the file); `listed_size`: the size of a file its directory's listing showed without a
    side file, which is then read whole."""
    length, warning = committed_read_length(
        fs, path, snapshot.is_valid, lambda w: snapshot.is_valid(w) or snapshot.is_aborted(w),
        listed_size=listed_size)
    if warning is not None:
        warnings.warn(SideFileWarning(warning), stacklevel=3)
    return length


@contextmanager
def open_bounded(fs: fsspec.AbstractFileSystem, path: str, length: int, *,
                 check_checksums: bool = True, tail: FileTail | None = None,
                 sub_microseconds: SubMicroseconds = "warn",
                 wide: list[WideColumn] | None = None) -> Iterator[po.ORCFile]:
    """pyarrow's ORC reader on the first `length` bytes; native memory map for local files.

    Args:
        check_checksums: hash every stripe against its recorded checksum first (unless
            INGEST_CHECK_CHECKSUMS=0); False when only the schema is wanted.
        tail: the tail that ends at `length`, when the caller has parsed it already.
        sub_microseconds: for TIMESTAMP values outside timestamp[ns], which read as
            timestamp[us]: "warn" drops digits below the microsecond with a warning,
            "error" refuses (`ingest.orc.timestamps`).
        wide: the file's `wide_timestamp_columns` at `length`, when known already.

    Raises:
        CorruptFileError: no complete tail ends at `length`, a stripe differs from its
            recorded checksum, or pyarrow cannot decode what the tail describes (a damaged
            file must never pass for data).
    """
    check = check_checksums and checksums.checks_enabled()
    try:
        local = isinstance(fs, LocalFileSystem)
        if (check or local) and tail is None:
            tail = read_tail(fs, path, length)
        if local:
            assert tail is not None
            with pa.memory_map(path) as mm:
                buffer = mm.read_buffer(length)
                if check:
                    checksums.check_stripes(fs, path, tail, data=buffer)
                yield with_wide_timestamps(  # type: ignore[misc]
                    po.ORCFile(pa.BufferReader(buffer)), tail,
                    lambda start, end: buffer[start:end].to_pybytes(), where=path,
                    sub_microseconds=sub_microseconds, columns=wide)
            return
        if check:
            assert tail is not None
            checksums.check_stripes(fs, path, tail)
        with open_orc(fs, path, length, sub_microseconds=sub_microseconds) as orc:
            yield orc
    except (OSError, pa.ArrowException, ValueError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise CorruptFileError(f"Cannot read bucket file {path} at length {length:,}: {e}",
                               path=path, offset=length,
                               hint=damage_hint(fs, path, length)) from e


@dataclass(frozen=True)
class _Keyed:
    """A bucket's delete registry (being read) and what its files' reads must include for it."""

    registry: Future[DeleteRegistry]
    may_delete: bool
    legacy: bool


@dataclass(frozen=True)
class _Decoded:
    """One stripe submitted for decoding, and what filtering it needs; `registry` None: the
    rows are final already (original files)."""

    batch: Future[pa.RecordBatch]
    path: str
    length: int
    values: Mapping[str, str | None]
    registry: Future[DeleteRegistry] | None
    need_op: bool = False
    need_valid: bool = False
    to_table: Mapping[str, str] | None = None
    rows: int = 0  # the stripe's rows, as its tail counts them
    # (originalTransaction, bucket, first rowId) when its statistics prove the ROW__IDs run
    # from there without gaps: its key columns were left out of the decode.
    keys: tuple[int, int, int] | None = None

    def result(self, fs: fsspec.AbstractFileSystem) -> pa.RecordBatch:
        """The decoded stripe; decoding errors read as `open_bounded`'s do.

        Raises:
            CorruptFileError: pyarrow could not decode the stripe.
        """
        try:
            return self.batch.result()
        except FileNotFoundError:
            raise
        except (OSError, pa.ArrowException, ValueError) as e:
            raise CorruptFileError(
                f"Cannot read bucket file {self.path} at length {self.length:,}: {e}",
                path=self.path, offset=self.length,
                hint=damage_hint(fs, self.path, self.length)) from e


def _acid_stats(tail: FileTail) -> tuple[int, int, int] | None:
    return parse_acid_stats(tail.user_metadata.get(ACID_STATS))


@dataclass
class ScanCounts:
    """What a read skipped by a condition's bounds and what it read (insert files only:
    delete events are always read whole)."""

    files: int = 0
    stripes: int = 0
    stripes_skipped: int = 0


class Merger:
    """One read, complete from its construction: the snapshot, the row schema and columns, the
    files with their read lengths, the output schema; merges partitions.

    `condition` (optional) lets it skip stripes of insert events whose statistics prove that
    no row can match; it never filters rows (the caller does, exactly) and never skips
    delete events, so a delete still hides its row wherever that row's stripe went.
    """

    def __init__(self, fs: fsspec.AbstractFileSystem, snapshot: ValidWriteIdList, *,
                 row_schema: pa.Schema, files: Sequence[DataFile],
                 lengths: Mapping[str, int] | None = None,
                 tails: Mapping[str, bytes] | None = None,
                 columns: Sequence[str] | None = None, with_row_id: bool = False,
                 partition_columns: Sequence[str] = (),
                 condition: Condition | None = None, condition_columns: Sequence[str] = (),
                 sub_microseconds: SubMicroseconds = "warn") -> None:
        """Read `columns` (None: all) of `row_schema` from `files`, each to its length in
        `lengths` (the planner's, checked against the manifest; else `read_length`'s), and
        widen a TIMESTAMP column to microseconds where one of `files` needs it.

        Args:
            tails: the tail bytes the planner checked, by path (each ends at the file's
                length in `lengths`): parsed when the file is read, instead of read again.
            sub_microseconds: "error" for rows rewritten (compaction): keep every digit or
                refuse; "warn" for reads.
            condition, condition_columns: skip stripes by `condition` over these row and
                partition column names.

        Raises:
            ConfigError: a column the table does not have.
            CorruptFileError: a file's tail cannot be read.
            UnsupportedFormatError: wide TIMESTAMP values inside a list, map or union column.
        """
        self.fs = fs
        self.snapshot = snapshot
        self.requested = list(columns) if columns is not None else None
        self.with_row_id = with_row_id
        self.partition_columns = list(partition_columns)
        self.row_fields: list[str] | None = None  # None: every field
        self._lengths: dict[str, int] = dict(lengths or {})
        self._tails: dict[str, FileTail | None] = {}
        self._tail_bytes: dict[str, bytes] = {
            path: data for path, data in (tails or {}).items() if path in self._lengths}
        self._stats: dict[str, tuple[int, int, int] | None] = {}
        self._wide: dict[tuple[str, int], list[WideColumn]] = {}  # by path and length
        self.sub_microseconds: SubMicroseconds = sub_microseconds
        self.condition: Condition | None = condition
        self._condition_columns: tuple[str, ...] = tuple(condition_columns)
        self.counts = ScanCounts()
        self._partition_domains: dict[str, Domain] = {}
        # Stripes are decoded one ahead on a worker thread (pyarrow releases the GIL), so the
        # merge overlaps the next decode; INGEST_READ_AHEAD=0 reads on one thread.
        self.read_ahead = os.environ.get(READ_AHEAD_ENV, "1") != "0"
        self.row_schema: pa.Schema = row_schema
        self._check_columns()
        self._fit_timestamps(files)

    def _check_columns(self) -> None:
        row_schema = self.row_schema
        if self.requested is None:
            self.row_fields = None
            return
        known = set(row_schema.names) | set(self.partition_columns)
        unknown = [c for c in self.requested if c not in known]
        if unknown:
            raise ConfigError(
                f"Cannot read columns {unknown}: the table has row columns "
                f"{row_schema.names} and partition columns {self.partition_columns}")
        self.row_fields = [n for n in row_schema.names if n in self.requested]

    @property
    def out_row_schema(self) -> pa.Schema:
        if self.row_fields is None:
            return self.row_schema
        return pa.schema([self.row_schema.field(n) for n in self.row_fields])

    @property
    def _full_schema(self) -> pa.Schema:
        """ROW__ID if asked for, the output row fields, then the partition columns."""
        fields = [pa.field(ROW_ID_COLUMN, ROW_ID_TYPE)] if self.with_row_id else []
        fields += list(self.out_row_schema)
        fields += [pa.field(c, pa.string()) for c in self.partition_columns]
        return pa.schema(fields)

    @property
    def schema(self) -> pa.Schema:
        schema = self._full_schema
        if self.requested is not None:
            keep = ([ROW_ID_COLUMN] if self.with_row_id else []) + self.requested
            schema = pa.schema([schema.field(n) for n in keep])
        return schema

    # -- one partition ------------------------------------------------------------------------

    def partition_batches(self, values: Mapping[str, str | None], files: Sequence[DataFile]
                          ) -> Iterator[pa.RecordBatch]:
        """Output rows of one partition: bucket by bucket, base then deltas in Hive's order."""
        return self.read_partitions([(values, files)])

    def read_partitions(self, parts: Sequence[tuple[Mapping[str, str | None],
                                                    Sequence[DataFile]]],
                        ) -> Generator[pa.RecordBatch, None, None]:
        """Output rows of partitions in order. With `read_ahead`, a worker thread reads delete
        events and decodes stripes while this one prepares files and filters
        (`_stripe_decoder`)."""
        decoder = StripeDecoder(threaded=self.read_ahead)
        source = self._decode(parts, decoder)
        try:
            # Further ahead while the stripes ahead are small: a bucket's small delta stripes,
            # being filtered, then do not keep the next bucket's large stripe from decoding.
            for d in ahead(source, decoder.depth, rows=lambda d: d.rows):
                batch = d.result(self.fs)
                if d.registry is not None:
                    batch = self._keep(d, batch, d.registry.result())
                if batch is not None and batch.num_rows:
                    yield self._finish(batch, d.values)
        finally:
            decoder.close()  # no decode still runs when the files close
            source.close()

    def _decode(self, parts: Sequence[tuple[Mapping[str, str | None], Sequence[DataFile]]],
                decoder: StripeDecoder) -> Generator[_Decoded, None, None]:
        for values, files in parts:
            inserts: dict[int, list[DataFile]] = {}
            deletes: dict[int, list[DataFile]] = {}
            for f in files:
                (deletes if f.kind == "delete_delta" else inserts).setdefault(
                    f.bucket_id, []).append(f)
            self._partition_domains = {
                c: Domain.exactly(None if v is None else v.encode("utf-8"))
                for c, v in values.items()}
            buckets = sorted(inserts)
            # Each bucket's delete events are read on the second worker while the bucket
            # before it is drawn: one bucket ahead of the source, so only the registries of
            # the buckets between the stripes being filtered and those being drawn are held.
            keyed = self._keyed(deletes.get(buckets[0], []), inserts[buckets[0]],
                                decoder) if buckets else None
            for i, bucket in enumerate(buckets):
                assert keyed is not None
                current = keyed
                if i + 1 < len(buckets):
                    following = buckets[i + 1]
                    keyed = self._keyed(deletes.get(following, []), inserts[following],
                                        decoder)
                for f in inserts[bucket]:
                    yield from self._file_stripes(f, current, values, decoder)

    def _keyed(self, bucket_deletes: list[DataFile], bucket_inserts: list[DataFile],
               decoder: StripeDecoder) -> _Keyed:
        """Start reading one bucket's delete registry on the decoder's second worker."""
        # Lengths and tails here (side-file warnings come from this thread); the delete
        # events are read on the worker.
        legacy = False
        for f in [*bucket_deletes, *bucket_inserts]:
            tail = self._tail(f)[1]
            if f.kind == "delta" and tail is not None:
                stats = self._acid_stats(f, tail)
                legacy = legacy or stats is None or stats[1] > 0 or stats[2] > 0
        registry = decoder.call_aside(self._registry, bucket_deletes, bucket_inserts)
        return _Keyed(registry, bool(bucket_deletes) or legacy, legacy)

    def _file_stripes(self, f: DataFile, keyed: _Keyed,
                      values: Mapping[str, str | None], decoder: StripeDecoder,
                      ) -> Iterator[_Decoded]:
        """The stripes of one insert file, submitted for decoding, with what filtering them
        needs."""
        length, tail = self._tail(f)
        if tail is None or tail.number_of_rows == 0:
            return
        registry = keyed.registry
        if f.kind == "original":
            for batch in self._original_batches(f, length, registry.result()):
                yield _Decoded(finished(batch), f.path, length, values, None,
                               rows=batch.num_rows)
            return
        stats = self._acid_stats(f, tail)
        need_op = stats is None or stats[1] > 0 or stats[2] > 0
        d = f.directory
        need_valid = (d is not None and f.kind != "base"
                      and self.snapshot.range_validity(d.min_write_id, d.max_write_id) != "ALL")
        # What the registry may need, known before it is read: keys when there are delete
        # events or legacy update events, currentTransaction for the latter (Hive 2).
        need_keys = self.with_row_id or keyed.may_delete
        need_current = need_valid or keyed.legacy
        pending: list[Future[pa.RecordBatch]] = []
        with self._open(f, length, tail) as orc:
            schema = orc.schema
            check_acid(schema, f)
            row_type = schema.field(ROW_POSITION).type
            to_file, to_table = self._field_names(
                [row_type.field(i).name for i in range(row_type.num_fields)])
            may_match = self._stripe_test(f, tail, to_file, acid=True)
            columns = [OPERATION] if need_op else []
            columns += list(KEY_COLUMNS) if need_keys else []
            columns += [CURRENT] if need_current else []
            if self.row_fields is None:
                columns.append(ROW)
            else:
                columns += [f"{ROW}.{to_file[n]}" for n in self.row_fields if n in to_file]
            without_keys = [c for c in columns if c not in KEY_COLUMNS]
            for i in range(orc.nstripes):
                if not may_match(i):
                    continue
                # Keys that the stripe's statistics give need no decoding; legacy update
                # events are matched by each row's currentTransaction, so they decode them.
                keys = sequential_keys(tail, i) if need_keys and not keyed.legacy else None
                read = without_keys if keys is not None else columns
                # Only partition columns asked for: read the smallest column to count rows.
                future = decoder.submit(orc, i, read or [OPERATION])
                pending.append(future)
                yield _Decoded(future, f.path, length, values, registry, need_op, need_valid,
                               to_table, tail.stripes[i].number_of_rows, keys)
            if not isinstance(self.fs, LocalFileSystem):
                # A remote file is read through its open handle: finish before closing it.
                # (A memory map's buffers outlive the map, so local files need not wait.)
                wait(pending)

    def _keep(self, d: _Decoded, batch: pa.RecordBatch, registry: DeleteRegistry
              ) -> pa.RecordBatch | None:
        """The rows of a decoded stripe that are inserts, valid, and not deleted, with only
        the columns the output needs."""
        mask: pa.Array | None = None
        if d.need_op:
            mask = pc.not_equal(batch[OPERATION], DELETE)
        if d.need_valid:
            v = valid_mask(batch[CURRENT], self.snapshot)
            mask = v if mask is None else pc.and_(mask, v)
        keep = None
        if d.keys is not None:
            if batch.num_rows != d.rows:
                raise CorruptFileError(
                    f"Cannot read bucket file {d.path}: a stripe decoded {batch.num_rows:,} "
                    f"rows where its footer counts {d.rows:,}", path=d.path, offset=d.length)
            if len(registry):
                keep = registry.keep_run(*d.keys, batch.num_rows)
            if self.with_row_id:
                batch = _with_keys(batch, d.keys)
        elif len(registry):
            keep = registry.keep_mask(batch)
        if keep is not None:
            mask = pa.array(keep) if mask is None else pc.and_(mask, pa.array(keep))
        # Filtering copies every column it keeps: leave out the event columns first.
        names = batch.schema.names
        wanted = [n for n in names if n == ROW or (self.with_row_id and n in KEY_COLUMNS)]
        if wanted != names:
            batch = batch.select(wanted or names[:1])
        if mask is not None:
            batch = _filter(batch, mask)
        return _rename_row(batch, dict(d.to_table or {})) if batch.num_rows else None

    def _registry(self, delete_files: list[DataFile], insert_files: list[DataFile]
                  ) -> DeleteRegistry:
        """Visible delete events of one bucket, plus legacy update/delete events of its deltas."""
        parts: list[Entries] = []
        columns = [*KEY_COLUMNS, CURRENT]
        for f in delete_files:
            for b in self._events(f, columns):
                parts.append(DeleteRegistry.delete_events(
                    b, _valid_write_ids(b[CURRENT], self.snapshot)))
        for f in insert_files:
            if f.kind != "delta":
                continue
            length, tail = self._tail(f)
            stats = self._acid_stats(f, tail) if tail is not None else (0, 0, 0)
            if stats is not None and stats[1] == stats[2] == 0:
                continue
            for b in self._events(f, [OPERATION, *columns]):
                keep = pc.and_(pc.not_equal(b[OPERATION], 0), valid_mask(b[CURRENT], self.snapshot))
                parts.append(DeleteRegistry.superseding_events(b.filter(keep)))
        return DeleteRegistry(parts)

    def _length(self, f: DataFile) -> int:
        """The planner's length for the file, else `read_length`'s, once per file and read."""
        if f.path not in self._lengths:
            self._lengths[f.path] = read_length(self.fs, f.path, self.snapshot,
                                                listed_size=f.listed_without_side_file)
        return self._lengths[f.path]

    def _tail(self, f: DataFile) -> tuple[int, FileTail | None]:
        """The read length and the tail ending there, parsed once per file and read (the
        delete registry and the insert pass both need it)."""
        length = self._length(f)
        if f.path not in self._tails:
            checked = self._tail_bytes.pop(f.path, None)
            self._tails[f.path] = (None if not length else
                                   read_tail(self.fs, f.path, length) if checked is None else
                                   tail_from_bytes(checked, length, path=f.path))
        return length, self._tails[f.path]

    def _open(self, f: DataFile, length: int, tail: FileTail | None
              ) -> AbstractContextManager[po.ORCFile]:
        return open_bounded(self.fs, f.path, length, tail=tail,
                            sub_microseconds=self.sub_microseconds,
                            wide=self._wide.get((f.path, length)))

    def _fit_timestamps(self, files: Sequence[DataFile]) -> None:
        """Read a TIMESTAMP column as timestamp[us] in every batch of this read when one of
        `files` holds a value outside timestamp[ns] there (by its column statistics).

        Raises:
            CorruptFileError: a file's tail cannot be read.
            UnsupportedFormatError: such values sit inside a list, map or union column.
        """
        stamps = {f.name for f in self.row_schema
                  if pa.types.is_timestamp(f.type) and f.type.unit == "ns"}
        wide: set[str] = set()
        for f in files if stamps else ():
            if f.kind == "delete_delta":
                continue
            tail = self._tail(f)[1]
            columns = wide_timestamp_columns(tail) if tail is not None else []
            if tail is not None:
                self._wide[(f.path, tail.length)] = columns
            if not columns:
                continue
            depth = 1 if f.kind == "original" else 2  # original files hold the row at the root
            names = [c.path[-1] for c in columns if len(c.path) == depth and c.unit == "us"]
            if any(_POSITIONAL.fullmatch(n) for n in names):
                row = self.row_schema.names
                names = [row[int(n[4:])] if int(n[4:]) < len(row) else n for n in names]
            wide |= stamps & set(names)
        if wide:
            self.row_schema = pa.schema([
                f.with_type(pa.timestamp("us")) if f.name in wide else f
                for f in self.row_schema], metadata=self.row_schema.metadata)

    def _acid_stats(self, f: DataFile, tail: FileTail) -> tuple[int, int, int] | None:
        """`hive.acid.stats` of a file, decoded once per read (the registry asks too)."""
        if f.path not in self._stats:
            self._stats[f.path] = _acid_stats(tail)
        return self._stats[f.path]

    def _events(self, f: DataFile, columns: list[str]) -> Iterator[pa.RecordBatch]:
        length, tail = self._tail(f)
        if not length:
            return
        with self._open(f, length, tail) as orc:
            check_acid(orc.schema, f)
            for i in range(orc.nstripes):
                yield orc.read_stripe(i, columns=columns)

    def _stripe_test(self, f: DataFile, tail: FileTail, to_file: dict[str, str], *,
                     acid: bool) -> Callable[[int], bool]:
        """Whether stripe i of an insert file may hold a row the condition matches; counts
        every stripe and every skip."""
        self.counts.files += 1
        self.counts.stripes += len(tail.stripes)
        condition = self.condition
        if condition is None:
            return lambda i: True
        ids = row_columns(tail, acid=acid)
        columns = {name: (ids[to_file[name]], self.row_schema.field(name).type)
                   for name in self.row_schema.names
                   if name in self.condition_columns and to_file.get(name) in ids}
        known = self._partition_domains

        def may_match(i: int) -> bool:
            domains = stripe_domains(tail, i, columns)
            if domains is None:
                return True
            if condition.may_match({**known, **domains}):
                return True
            self.counts.stripes_skipped += 1
            return False

        return may_match

    @property
    def condition_columns(self) -> frozenset[str]:
        return frozenset(self._condition_columns)

    def _field_names(self, file_fields: list[str]) -> tuple[dict[str, str], dict[str, str]]:
        """(table name -> file name, file name -> table name) for a file's row fields.

        Hive's own writers often name row fields `_col0, _col1, ...`; Hive then matches them to
        the table's columns by position (`orc.force.positional.evolution` for ACID files).
        """
        table = self.row_schema.names
        if (all(_POSITIONAL.fullmatch(n) for n in file_fields)
                and not all(_POSITIONAL.fullmatch(n) for n in table)):
            pairs = list(zip(table, file_fields, strict=False))
        else:
            pairs = [(n, n) for n in file_fields]
        return dict(pairs), {f: t for t, f in pairs}

    def _original_batches(self, f: DataFile, length: int, registry: DeleteRegistry
                          ) -> Iterator[pa.RecordBatch]:
        """Rows of a pre-ACID file with Hive 3's synthetic ROW__ID (write id 0)."""
        bucket_property = encode_bucket_property(f.bucket_id, 0)
        next_row_id = f.first_row_id
        tail = self._tail(f)[1]
        assert tail is not None
        with self._open(f, length, tail) as orc:
            names = orc.schema.names
            if [n.lower() for n in names] == [n.lower() for n in ACID_FIELD_NAMES]:
                raise UnsupportedFormatError(
                    f"Cannot read {f.path} as an original file: it holds ACID events but is not "
                    "inside a base_ or delta_ directory")
            to_file, to_table = self._field_names(names)
            may_match = self._stripe_test(f, tail, to_file, acid=False)
            wanted = ([to_file[n] for n in self.row_schema.names if n in to_file]
                      if self.row_fields is None
                      else [to_file[n] for n in self.row_fields if n in to_file])
            for i in range(orc.nstripes):
                if not may_match(i):
                    # Synthetic rowIds of later stripes still count this stripe's rows.
                    next_row_id += tail.stripes[i].number_of_rows
                    continue
                # Nothing wanted (only partition columns): read every column to count rows.
                data = orc.read_stripe(i, columns=wanted or None)
                n = data.num_rows
                keys = synthetic_keys(n, write_id=0, bucket_property=bucket_property,
                                      first_row_id=next_row_id)
                next_row_id += n
                row = pa.StructArray.from_arrays(
                    [data.column(c) for c in wanted] or [pa.nulls(n)],
                    names=[to_table[c] for c in wanted] or ["_"])
                batch = pa.RecordBatch.from_arrays(
                    [keys[OTID], keys[BUCKET], keys[ROW_ID], keys[CURRENT], row],
                    names=[OTID, BUCKET, ROW_ID, CURRENT, ROW])
                keep = registry.keep_mask(batch) if len(registry) else None
                if keep is not None:
                    batch = batch.filter(pa.array(keep))
                if batch.num_rows:
                    yield batch

    def _finish(self, batch: pa.RecordBatch, values: Mapping[str, str | None]) -> pa.RecordBatch:
        """Event batch -> output rows: ROW__ID, flattened row fields, partition values."""
        n = batch.num_rows
        arrays: dict[str, pa.Array] = {}
        if ROW in batch.schema.names:
            row = batch[ROW]
            for i, child in enumerate(row.flatten()):
                arrays[row.type.field(i).name] = child
        out: list[pa.Array] = []
        if self.with_row_id:
            out.append(row_id_array(batch[OTID], batch[BUCKET], batch[ROW_ID]))
        out += conform(arrays, self.out_row_schema, n, sub_microseconds=self.sub_microseconds)
        for c in self.partition_columns:
            value = values.get(c)
            out.append(pa.nulls(n, pa.string()) if value is None
                       else pa.repeat(pa.scalar(value, pa.string()), n))
        result = pa.RecordBatch.from_arrays(out, schema=self._full_schema)
        if self.requested is not None:
            result = result.select(self.schema.names)
        return result


def _with_keys(batch: pa.RecordBatch, keys: tuple[int, int, int]) -> pa.RecordBatch:
    """`batch` with the key columns its statistics proved: (otid, bucket, first + i)."""
    otid, bucket, first = keys
    n = batch.num_rows
    made = {OTID: pa.array(np.full(n, otid, dtype=np.int64)),
            BUCKET: pa.array(np.full(n, bucket, dtype=np.int32)),
            ROW_ID: pa.array(np.arange(first, first + n, dtype=np.int64))}
    for name, array in made.items():
        batch = batch.append_column(name, array)
    return batch


def _filter(batch: pa.RecordBatch, mask: pa.Array) -> pa.RecordBatch:
    """`batch.filter(mask)`, filtering the row struct's fields as columns of their own: a
    struct without nulls filters its fields just the same, at a good third less time than
    pyarrow's filter of the struct (measured on 625k-row stripes)."""
    names = batch.schema.names
    if ROW not in names or batch[ROW].null_count or not batch[ROW].type.num_fields:
        return batch.filter(mask)
    row = batch[ROW]
    fields = list(row.type)
    others = [n for n in names if n != ROW]
    columns = [batch[n] for n in others] + row.flatten()
    kept = pa.RecordBatch.from_arrays(columns, names=others + [f"{ROW}.{i}"
                                                             for i in range(len(fields))])
    kept = kept.filter(mask)
    out = dict(zip(others, kept.columns[:len(others)], strict=True))
    out[ROW] = pa.StructArray.from_arrays(kept.columns[len(others):], fields=fields)
    return pa.RecordBatch.from_arrays([out[n] for n in names], schema=batch.schema)


def _rename_row(batch: pa.RecordBatch, to_table: dict[str, str]) -> pa.RecordBatch:
    """`batch` with its row struct's fields named as the table names them."""
    if ROW not in batch.schema.names:
        return batch
    row = batch[ROW]
    names = [row.type.field(i).name for i in range(row.type.num_fields)]
    renamed = [to_table.get(n, n) for n in names]
    if renamed == names:
        return batch
    fixed = pa.StructArray.from_arrays([row.field(i) for i in range(len(names))], names=renamed,
                                       mask=row.is_null() if row.null_count else None)
    index = batch.schema.get_field_index(ROW)
    return batch.set_column(index, ROW, fixed)


def check_acid(schema: pa.Schema, f: DataFile) -> None:
    if [n.lower() for n in schema.names] != [n.lower() for n in ACID_FIELD_NAMES]:
        raise UnsupportedFormatError(
            f"Cannot read {f.path}: its root columns are {schema.names}, not Hive's ACID event "
            f"struct {list(ACID_FIELD_NAMES)}; raw files in {f.kind} directories (LOAD DATA "
            "into a full-ACID table) are not supported",
            hint="rewrite the data through `ingest` or compact it with Hive")


__all__ = [
    "BUCKET",
    "CURRENT",
    "KEY_COLUMNS",
    "OPERATION",
    "OTID",
    "READ_AHEAD_ENV",
    "ROW",
    "ROW_ID",
    "ROW_ID_COLUMN",
    "ROW_ID_TYPE",
    "DataFile",
    "DeleteRegistry",
    "FileKind",
    "Merger",
    "check_acid",
    "conform",
    "open_bounded",
    "row_id_array",
    "synthetic_keys",
    "valid_mask",
]
