"""Read a Hive ACID table (or one partition) as of a snapshot: Hive's split-update read path.

Per partition `acid_state` picks the base and deltas; per bucket the visible delete events are
loaded, then base and insert deltas stream stripe by stripe, dropping events whose write id is
not valid and rows a delete event names (`VectorizedOrcAcidRowBatchReader`, facts §1.7, §5).
Takes the snapshot as a plain `ValidWriteIdList`; knows nothing of the metastore.
"""

from __future__ import annotations

import os.path
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import unquote

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as po
from fsspec.implementations.local import LocalFileSystem

from ingest.acid import _files
from ingest.acid._merge import (
    BUCKET,
    CURRENT,
    KEY_COLUMNS,
    OPERATION,
    OTID,
    ROW,
    ROW_ID,
    ROW_ID_COLUMN,
    ROW_ID_TYPE,
    DeleteRegistry,
    conform,
    row_id_array,
    synthetic_keys,
    valid_mask,
)
from ingest.acid.bucket_file import readable_length
from ingest.acid.events import ACID_FIELD_NAMES, DELETE
from ingest.acid.names import (
    ParsedDirectory,
    encode_bucket_property,
    is_hidden,
    is_side_file,
    parse_bucket_file,
    parse_directory,
)
from ingest.acid.state import AcidState, acid_state
from ingest.acid.writeids import ValidWriteIdList
from ingest.errors import ConfigError, SchemaMismatchError, UnsupportedFormatError
from ingest.orc import FileTail, open_orc, read_tail

# Hive's name for a null partition value (`ConfVars.DEFAULTPARTITIONNAME`).
DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"
_ACID_STATS = "hive.acid.stats"

FileKind = Literal["original", "base", "delta", "delete_delta"]


class UnverifiedSnapshotWarning(UserWarning):
    """A table was read without a snapshot: open or aborted transactions' rows may show."""


@dataclass(frozen=True)
class Partition:
    """One partition directory (or an unpartitioned table's root).

    Attributes:
        path: the directory, as the filesystem names it.
        values: (column, value) pairs from the `col=value` path components, outermost first;
            Hive's `__HIVE_DEFAULT_PARTITION__` becomes None.
    """

    path: str
    values: tuple[tuple[str, str | None], ...] = ()
    children: tuple[str, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class DataFile:
    """A bucket file (or an original file) a snapshot reads."""

    path: str
    bucket_id: int
    kind: FileKind
    directory: ParsedDirectory | None = None
    # For original files: the synthetic rowId of the file's first row.
    first_row_id: int = 0


def list_partitions(
    path: str, *, fs: fsspec.AbstractFileSystem | None = None
) -> list[Partition]:
    """Partition directories at or below `path`, sorted by path.

    A directory holding anything but `col=value` sub-directories (base/delta dirs, original
    files) is a partition; `col=value` components of `path` itself count as partition values.

    Raises:
        FileNotFoundError: `path` does not exist.
    """
    fs, root = _files.resolve(path, fs)
    root = root.rstrip("/") or "/"
    if not fs.isdir(root):
        raise FileNotFoundError(f"Cannot read table, directory does not exist: {root}")
    values: list[tuple[str, str | None]] = []
    for part in reversed(root.split("/")):
        kv = _partition_value(part)
        if kv is None:
            break
        values.insert(0, kv)
    found: list[Partition] = []
    _walk(fs, root, tuple(values), found)
    return sorted(found, key=lambda p: p.path)


def _partition_value(name: str) -> tuple[str, str | None] | None:
    if "=" not in name or is_hidden(name):
        return None
    key, _, value = name.partition("=")
    if not key:
        return None
    value = unquote(value)
    return unquote(key), (None if value == DEFAULT_PARTITION_NAME else value)


def _walk(fs: fsspec.AbstractFileSystem, directory: str,
          values: tuple[tuple[str, str | None], ...], found: list[Partition]) -> None:
    infos = fs.ls(directory, detail=True)
    names = [str(i["name"]).rstrip("/").rsplit("/", 1)[-1] for i in infos]
    subdirs = [(n, str(i["name"]).rstrip("/")) for n, i in zip(names, infos, strict=True)
               if i.get("type") == "directory" and _partition_value(n) is not None]
    visible = [n for n in names if not is_hidden(n)]
    if subdirs and len(subdirs) == len(visible):
        for name, full in sorted(subdirs):
            kv = _partition_value(name)
            assert kv is not None
            _walk(fs, full, (*values, kv), found)
        return
    found.append(Partition(directory, values, tuple(names)))


def resolve_snapshot(
    snapshot: ValidWriteIdList | str | None,
    partitions: Sequence[Partition],
    *,
    table: str = "",
    stacklevel: int = 2,
) -> ValidWriteIdList:
    """The snapshot to read with; None means "every write id named on disk is committed".

    Raises:
        ConfigError: a string that is not Hive's write-id list form.
    """
    if isinstance(snapshot, ValidWriteIdList):
        return snapshot
    if isinstance(snapshot, str):
        return ValidWriteIdList.from_hive_string(snapshot)
    hwm = 0
    for p in partitions:
        for name in p.children:
            parsed = parse_directory(name)
            if parsed is not None:
                hwm = max(hwm, parsed.max_write_id)
    warnings.warn(UnverifiedSnapshotWarning(
        f"Reading {table or 'the table'} without a snapshot: every write id named by its "
        f"directories (1..{hwm}) is taken as committed, so rows of open or aborted "
        "transactions may be returned. Pass the metastore's snapshot (a ValidWriteIdList or "
        "Hive's 'db.table:hwm:minOpen:open:aborted' string) to read only committed data."),
        stacklevel=stacklevel + 1)
    return ValidWriteIdList.all_committed(table or "unknown", hwm)


def plan_partition(
    fs: fsspec.AbstractFileSystem, partition: Partition, snapshot: ValidWriteIdList
) -> tuple[AcidState, list[DataFile]]:
    """The chosen directories of a partition and the files to read, in read order.

    Raises:
        FileNotFoundError: the partition vanished.
        NotEnoughHistoryError, UnsupportedFormatError, CorruptFileError: see `acid_state`.
    """
    state = acid_state(fs, partition.path, snapshot)
    files: list[DataFile] = []
    offsets: dict[int, int] = {}
    for rel in state.original_files:
        bucket = _original_bucket_id(rel)
        full = state.path(rel)
        files.append(DataFile(full, bucket, "original", None, offsets.get(bucket, 0)))
        tail_rows = _rows_at_readable_length(fs, full)
        offsets[bucket] = offsets.get(bucket, 0) + tail_rows
    dirs = ([state.base] if state.base is not None else []) + list(state.deltas)
    for d in dirs:
        kind: FileKind = d.kind
        for name in sorted(fs.ls(state.path(d.name), detail=False)):
            base = str(name).rstrip("/").rsplit("/", 1)[-1]
            if is_hidden(base) or is_side_file(base):
                continue
            bucket = parse_bucket_file(base)
            if bucket is None:
                continue
            files.append(DataFile(f"{state.path(d.name)}/{base}", bucket, kind, d))
    return state, files


def _original_bucket_id(rel: str) -> int:
    """`AcidUtils.parseBucketId` for original files: `000001_0` -> 1, `bucket_00001` -> 1."""
    name = rel.rsplit("/", 1)[-1]
    bucket = parse_bucket_file(name)
    if bucket is not None:
        return bucket
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() and "_" in name else 0


def _rows_at_readable_length(fs: fsspec.AbstractFileSystem, path: str) -> int:
    length = readable_length(fs, path)[0]
    return read_tail(fs, path, length).number_of_rows if length else 0


@contextmanager
def _open(fs: fsspec.AbstractFileSystem, path: str, length: int) -> Iterator[po.ORCFile]:
    """pyarrow's ORC reader on the first `length` bytes; native memory map for local files."""
    if isinstance(fs, LocalFileSystem):
        with pa.memory_map(path) as mm:
            yield po.ORCFile(pa.BufferReader(mm.read_buffer(length)))
        return
    with open_orc(fs, path, length) as orc:
        yield orc


def _acid_stats(tail: FileTail) -> tuple[int, int, int] | None:
    raw = tail.user_metadata.get(_ACID_STATS)
    if raw is None:
        return None
    try:
        a, b, c = (int(x) for x in raw.decode("ascii").split(",")[:3])
    except ValueError:
        return None
    return a, b, c


class _Reader:
    """One read: the options, the snapshot and the output schema."""

    def __init__(self, fs: fsspec.AbstractFileSystem, snapshot: ValidWriteIdList,
                 columns: Sequence[str] | None, with_row_id: bool,
                 partition_columns: Sequence[str]) -> None:
        self.fs = fs
        self.snapshot = snapshot
        self.requested = list(columns) if columns is not None else None
        self.with_row_id = with_row_id
        self.partition_columns = list(partition_columns)
        self.row_schema: pa.Schema = pa.schema([])
        self.row_fields: list[str] | None = None  # None: every field

    def set_row_schema(self, row_schema: pa.Schema) -> None:
        self.row_schema = row_schema
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
    def schema(self) -> pa.Schema:
        fields = [pa.field(ROW_ID_COLUMN, ROW_ID_TYPE)] if self.with_row_id else []
        fields += list(self.out_row_schema)
        fields += [pa.field(c, pa.string()) for c in self.partition_columns]
        schema = pa.schema(fields)
        if self.requested is not None:
            keep = ([ROW_ID_COLUMN] if self.with_row_id else []) + self.requested
            schema = pa.schema([schema.field(n) for n in keep])
        return schema

    # -- one partition ------------------------------------------------------------------------

    def partition_batches(self, partition: Partition, files: list[DataFile]
                          ) -> Iterator[pa.RecordBatch]:
        values = dict(partition.values)
        inserts: dict[int, list[DataFile]] = {}
        deletes: dict[int, list[DataFile]] = {}
        for f in files:
            (deletes if f.kind == "delete_delta" else inserts).setdefault(f.bucket_id, []).append(f)
        for bucket in sorted(inserts):
            registry = self._registry(deletes.get(bucket, []), inserts[bucket])
            for f in inserts[bucket]:
                for batch in self._file_batches(f, registry):
                    yield self._finish(batch, values)

    def _registry(self, delete_files: list[DataFile], insert_files: list[DataFile]
                  ) -> DeleteRegistry:
        """Visible delete events of one bucket, plus legacy update/delete events of its deltas."""
        parts: list[pa.Table] = []
        columns = [*KEY_COLUMNS, CURRENT]
        for f in delete_files:
            for b in self._events(f, columns):
                b = b.filter(valid_mask(b[CURRENT], self.snapshot))
                parts.append(DeleteRegistry.delete_events(b))
        for f in insert_files:
            if f.kind != "delta":
                continue
            length, tail = self._tail(f)
            stats = _acid_stats(tail) if tail is not None else (0, 0, 0)
            if stats is not None and stats[1] == stats[2] == 0:
                continue
            for b in self._events(f, [OPERATION, *columns], length=length):
                keep = pc.and_(pc.not_equal(b[OPERATION], 0), valid_mask(b[CURRENT], self.snapshot))
                parts.append(DeleteRegistry.superseding_events(b.filter(keep)))
        return DeleteRegistry(parts)

    def _tail(self, f: DataFile) -> tuple[int, FileTail | None]:
        length = readable_length(self.fs, f.path)[0]
        return length, (read_tail(self.fs, f.path, length) if length else None)

    def _events(self, f: DataFile, columns: list[str], *, length: int | None = None
                ) -> Iterator[pa.RecordBatch]:
        if length is None:
            length = readable_length(self.fs, f.path)[0]
        if not length:
            return
        with _open(self.fs, f.path, length) as orc:
            _check_acid(orc.schema, f)
            for i in range(orc.nstripes):
                yield orc.read_stripe(i, columns=columns)

    def _file_batches(self, f: DataFile, registry: DeleteRegistry) -> Iterator[pa.RecordBatch]:
        length, tail = self._tail(f)
        if tail is None or tail.number_of_rows == 0:
            return
        if f.kind == "original":
            yield from self._original_batches(f, length, registry)
            return
        stats = _acid_stats(tail)
        need_op = stats is None or stats[1] > 0 or stats[2] > 0
        d = f.directory
        need_valid = (d is not None and f.kind != "base"
                      and self.snapshot.range_validity(d.min_write_id, d.max_write_id) != "ALL")
        need_keys = self.with_row_id or len(registry) > 0
        need_current = need_valid or (len(registry) > 0 and not registry.only_deletes)
        with _open(self.fs, f.path, length) as orc:
            schema = orc.schema
            _check_acid(schema, f)
            row_type = schema.field(5).type
            file_fields = [row_type.field(i).name for i in range(row_type.num_fields)]
            columns = [OPERATION] if need_op else []
            columns += list(KEY_COLUMNS) if need_keys else []
            columns += [CURRENT] if need_current else []
            if self.row_fields is None:
                columns.append(ROW)
            else:
                columns += [f"{ROW}.{n}" for n in self.row_fields if n in file_fields]
            if not columns:
                # Only partition columns asked for: read the smallest column to count rows.
                columns = [OPERATION]
            for i in range(orc.nstripes):
                batch = orc.read_stripe(i, columns=columns)
                mask: pa.Array | np.ndarray | None = None
                if need_op:
                    mask = pc.not_equal(batch[OPERATION], DELETE)
                if need_valid:
                    v = valid_mask(batch[CURRENT], self.snapshot)
                    mask = v if mask is None else pc.and_(mask, v)
                keep = registry.keep_mask(batch) if len(registry) else None
                if keep is not None:
                    mask = keep if mask is None else np.logical_and(
                        np.asarray(mask.to_numpy(zero_copy_only=False)), keep)
                if mask is not None:
                    batch = batch.filter(pa.array(mask) if isinstance(mask, np.ndarray) else mask)
                if batch.num_rows:
                    yield batch

    def _original_batches(self, f: DataFile, length: int, registry: DeleteRegistry
                          ) -> Iterator[pa.RecordBatch]:
        """Rows of a pre-ACID file with Hive 3's synthetic ROW__ID (write id 0)."""
        bucket_property = encode_bucket_property(f.bucket_id, 0)
        next_row_id = f.first_row_id
        with _open(self.fs, f.path, length) as orc:
            names = orc.schema.names
            if [n.lower() for n in names] == [n.lower() for n in ACID_FIELD_NAMES]:
                raise UnsupportedFormatError(
                    f"Cannot read {f.path} as an original file: it holds ACID events but is not "
                    "inside a base_ or delta_ directory")
            wanted = names if self.row_fields is None else [n for n in names
                                                            if n in self.row_fields]
            for i in range(orc.nstripes):
                data = orc.read_stripe(i, columns=wanted or None)
                n = data.num_rows
                keys = synthetic_keys(n, write_id=0, bucket_property=bucket_property,
                                      first_row_id=next_row_id)
                next_row_id += n
                row = pa.StructArray.from_arrays(
                    [data.column(c) for c in wanted], names=wanted) if wanted else \
                    pa.StructArray.from_arrays([pa.nulls(n)], names=["_"])
                batch = pa.RecordBatch.from_arrays(
                    [keys[OTID], keys[BUCKET], keys[ROW_ID], keys[CURRENT], row],
                    names=[OTID, BUCKET, ROW_ID, CURRENT, ROW])
                keep = registry.keep_mask(batch) if len(registry) else None
                if keep is not None:
                    batch = batch.filter(pa.array(keep))
                if batch.num_rows:
                    yield batch

    def _finish(self, batch: pa.RecordBatch, values: dict[str, str | None]) -> pa.RecordBatch:
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
        out += conform(arrays, self.out_row_schema, n)
        for c in self.partition_columns:
            value = values.get(c)
            out.append(pa.nulls(n, pa.string()) if value is None
                       else pa.repeat(pa.scalar(value, pa.string()), n))
        full = [pa.field(ROW_ID_COLUMN, ROW_ID_TYPE)] if self.with_row_id else []
        full += list(self.out_row_schema) + [pa.field(c, pa.string())
                                            for c in self.partition_columns]
        result = pa.RecordBatch.from_arrays(out, schema=pa.schema(full))
        if self.requested is not None:
            result = result.select(self.schema.names)
        return result


def _check_acid(schema: pa.Schema, f: DataFile) -> None:
    if [n.lower() for n in schema.names] != [n.lower() for n in ACID_FIELD_NAMES]:
        raise UnsupportedFormatError(
            f"Cannot read {f.path}: its root columns are {schema.names}, not Hive's ACID event "
            f"struct {list(ACID_FIELD_NAMES)}; raw files in {f.kind} directories (LOAD DATA "
            "into a full-ACID table) are not supported",
            hint="rewrite the data through `ingest` or compact it with Hive")


def _row_schema(fs: fsspec.AbstractFileSystem, files: Sequence[DataFile]) -> pa.Schema | None:
    """The row schema of the newest readable data file (later files win over older ones)."""
    ordered = sorted((f for f in files if f.kind != "delete_delta"),
                     key=lambda f: (f.directory.max_write_id if f.directory else -1, f.path),
                     reverse=True)
    for f in ordered:
        length = readable_length(fs, f.path)[0]
        if not length:
            continue
        with _open(fs, f.path, length) as orc:
            schema = orc.schema
        if f.kind == "original":
            return schema
        _check_acid(schema, f)
        return pa.schema(list(schema.field(5).type))
    return None


def read_batches(
    path: str,
    snapshot: ValidWriteIdList | str | None = None,
    columns: Sequence[str] | None = None,
    with_row_id: bool = False,
    *,
    fs: fsspec.AbstractFileSystem | None = None,
    limit: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """Stream the rows a snapshot sees, one record batch per stripe read (empty ones skipped).

    Args:
        path: a table root (with `col=value/` partition directories below it), one partition
            directory, or an unpartitioned table root holding base/delta directories.
        snapshot: the valid write-id list to read with, or Hive's string form of one; None
            takes every write id named on disk as committed and warns
            (`UnverifiedSnapshotWarning`).
        columns: row and partition columns to return, in this order (default: all row
            columns, then partition columns as strings).
        with_row_id: also return Hive's ROW__ID as a first column `row__id`,
            struct<writeid:bigint, bucketid:int, rowid:bigint>.
        fs: the filesystem (default: from the path's URL).
        limit: stop after this many rows.

    Raises:
        FileNotFoundError: `path` does not exist.
        ConfigError: a bad snapshot string, or `columns` names an unknown column.
        NotEnoughHistoryError: a partition's only bases are too new for the snapshot.
        CorruptFileError: a bucket file or side file is damaged (run `ingest recover`).
        UnsupportedFormatError: something Hive writes that this reader does not handle.
        SchemaMismatchError: partitions disagree on their partition columns.
    """
    reader, plans = _prepare(path, snapshot, columns, with_row_id, fs=fs)
    return _stream(reader, plans, limit)


def _prepare(
    path: str, snapshot: ValidWriteIdList | str | None, columns: Sequence[str] | None,
    with_row_id: bool, *, fs: fsspec.AbstractFileSystem | None,
) -> tuple[_Reader, list[tuple[Partition, list[DataFile]]]]:
    fs, root = _files.resolve(path, fs)
    partitions = list_partitions(root, fs=fs)
    table = os.path.basename(root.rstrip("/"))
    snap = resolve_snapshot(snapshot, partitions, table=table, stacklevel=3)
    keys = [tuple(k for k, _ in p.values) for p in partitions]
    if len(set(keys)) > 1:
        raise SchemaMismatchError(
            f"Cannot read table {root}: its partition directories use different partition "
            f"columns: {sorted(set(keys))}")
    reader = _Reader(fs, snap, columns, with_row_id, keys[0] if keys else ())
    plans = [(p, plan_partition(fs, p, snap)[1]) for p in partitions]
    row_schema = _row_schema(fs, [f for _, files in plans for f in files])
    reader.set_row_schema(row_schema if row_schema is not None else pa.schema([]))
    return reader, plans


def _stream(reader: _Reader, plans: list[tuple[Partition, list[DataFile]]],
            limit: int | None) -> Iterator[pa.RecordBatch]:
    remaining = limit
    if remaining is not None and remaining <= 0:
        return
    for partition, files in plans:
        for batch in reader.partition_batches(partition, files):
            if remaining is not None:
                if batch.num_rows >= remaining:
                    yield batch.slice(0, remaining)
                    return
                remaining -= batch.num_rows
            yield batch


def read_table(
    path: str,
    snapshot: ValidWriteIdList | str | None = None,
    columns: Sequence[str] | None = None,
    with_row_id: bool = False,
    *,
    fs: fsspec.AbstractFileSystem | None = None,
    limit: int | None = None,
) -> pa.Table:
    """Every row a snapshot sees, as one table (`read_batches` concatenated).

    Raises:
        See `read_batches`.
    """
    reader, plans = _prepare(path, snapshot, columns, with_row_id, fs=fs)
    return pa.Table.from_batches(list(_stream(reader, plans, limit)), schema=reader.schema)


__all__ = [
    "DEFAULT_PARTITION_NAME",
    "ROW_ID_COLUMN",
    "ROW_ID_TYPE",
    "DataFile",
    "Partition",
    "UnverifiedSnapshotWarning",
    "list_partitions",
    "plan_partition",
    "read_batches",
    "read_table",
    "resolve_snapshot",
]
