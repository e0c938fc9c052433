"""Read a Hive ACID table (or one partition) as of a snapshot: Hive's split-update read path.

Finds partitions (`col=value/` directories), runs `acid_state` on each and hands the chosen
files to `_merge.Merger`, which drops rows of invalid write ids and rows delete events name
(`AcidUtils.getAcidState` + `VectorizedOrcAcidRowBatchReader`, docs/format.md §10, §11).
Takes the snapshot as a plain
`ValidWriteIdList`, and the metastore's committed-file manifest as plain `CommittedFiles`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import fsspec
import pyarrow as pa
from fsspec.implementations.local import LocalFileSystem

from ingest.acid import _files
from ingest.acid._merge import (
    ROW_ID_COLUMN,
    ROW_ID_TYPE,
    DataFile,
    FileKind,
    Merger,
    check_acid,
    open_bounded,
)
from ingest.acid.bucket_file import readable_length
from ingest.acid.committed import CommittedFiles, damage_error, size_damage, tail_damage
from ingest.acid.events import ROW_POSITION
from ingest.acid.names import (
    DEFAULT_PARTITION_NAME,
    is_hidden,
    is_side_file,
    parse_bucket_file,
    parse_directory,
    parse_partition,
)
from ingest.acid.state import AcidState, VisibleTxn, acid_state
from ingest.acid.writeids import ValidWriteIdList
from ingest.errors import SchemaMismatchError
from ingest.orc import read_tail


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


def list_partitions(
    path: str, *, fs: fsspec.AbstractFileSystem | None = None
) -> list[Partition]:
    """Partition directories at or below `path`, sorted by path.

    A directory holding anything but `col=value` sub-directories (base/delta dirs, original
    files) is a partition; `col=value` components of `path` itself count as partition values.

    Raises:
        FileNotFoundError: `path` does not exist (on an object store, where directories do
            not exist apart from their files, a missing `path` has no partitions instead).
    """
    fs, root = _files.resolve(path, fs)
    root = root.rstrip("/") or "/"
    if not fs.isdir(root):
        if not _files.has_directories(fs):
            # An object store keeps no empty directory: a table or partition without files
            # has no prefix at all and reads as empty (docs/format.md §23).
            return []
        raise FileNotFoundError(f"Cannot read table, directory does not exist: {root}")
    values: list[tuple[str, str | None]] = []
    for part in reversed(root.split("/")):
        kv = parse_partition(part)
        if kv is None:
            break
        values.insert(0, kv)
    found: list[Partition] = []
    _walk(fs, root, tuple(values), found)
    return sorted(found, key=lambda p: p.path)


def _walk(fs: fsspec.AbstractFileSystem, directory: str,
          values: tuple[tuple[str, str | None], ...], found: list[Partition]) -> None:
    infos = fs.ls(directory, detail=True)
    names = [str(i["name"]).rstrip("/").rsplit("/", 1)[-1] for i in infos]
    subdirs = [(n, str(i["name"]).rstrip("/")) for n, i in zip(names, infos, strict=True)
               if i.get("type") == "directory" and parse_partition(n) is not None]
    visible = [n for n in names if not is_hidden(n)]
    if subdirs and len(subdirs) == len(visible):
        for name, full in sorted(subdirs):
            kv = parse_partition(name)
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


def _open_read(
    path: str, snapshot: ValidWriteIdList | str | None, fs: fsspec.AbstractFileSystem | None,
    *, stacklevel: int,
) -> tuple[fsspec.AbstractFileSystem, str, list[Partition], ValidWriteIdList]:
    """(fs, root, partitions, snapshot) of a read of `path`; the table is named by its root.

    `stacklevel` is as for `resolve_snapshot`, counted from this function's caller.
    """
    fs, root = _files.resolve(path, fs)
    partitions = list_partitions(root, fs=fs)
    table = root.rstrip("/").rsplit("/", 1)[-1]
    snap = resolve_snapshot(snapshot, partitions, table=table, stacklevel=stacklevel + 1)
    return fs, root, partitions, snap


def plan_partition(
    fs: fsspec.AbstractFileSystem, partition: Partition, snapshot: ValidWriteIdList, *,
    visible_txn: VisibleTxn | None = None,
) -> tuple[AcidState, list[DataFile]]:
    """The chosen directories of a partition and the files to read, in read order.

    `visible_txn` says which compactor transactions (the T of a `_vT` directory) are
    committed; None takes all as committed (see `acid_state`).

    Raises:
        FileNotFoundError: the partition vanished.
        NotEnoughHistoryError, UnsupportedFormatError, CorruptFileError: see `acid_state`.
    """
    state = acid_state(fs, partition.path, snapshot, visible_txn=visible_txn)
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
        for path, bucket in _bucket_files(fs, state.path(d.name)):
            files.append(DataFile(path, bucket, kind, d))
    return state, files


def _bucket_files(fs: fsspec.AbstractFileSystem, directory: str) -> list[tuple[str, int]]:
    """(path, bucket id) of the bucket files in a base/delta directory, sorted by name."""
    found = []
    for name in sorted(str(n).rstrip("/").rsplit("/", 1)[-1]
                       for n in fs.ls(directory, detail=False)):
        if is_hidden(name) or is_side_file(name):
            continue
        bucket = parse_bucket_file(name)
        if bucket is not None:
            found.append((f"{directory}/{name}", bucket))
    return found


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


def _row_schema(fs: fsspec.AbstractFileSystem, files: Sequence[DataFile]) -> pa.Schema | None:
    """The row schema of the newest readable data file (later files win over older ones)."""
    ordered = sorted((f for f in files if f.kind != "delete_delta"),
                     key=lambda f: (f.directory.max_write_id if f.directory else -1, f.path),
                     reverse=True)
    for f in ordered:
        length = readable_length(fs, f.path)[0]
        if not length:
            continue
        with open_bounded(fs, f.path, length, check_checksums=False) as orc:  # schema only
            schema = orc.schema
        if f.kind == "original":
            return schema
        check_acid(schema, f)
        return pa.schema(list(schema.field(ROW_POSITION).type))
    return None


def read_batches(
    path: str,
    snapshot: ValidWriteIdList | str | None = None,
    columns: Sequence[str] | None = None,
    with_row_id: bool = False,
    *,
    fs: fsspec.AbstractFileSystem | None = None,
    limit: int | None = None,
    row_schema: pa.Schema | None = None,
    committed: CommittedFiles | None = None,
    visible_txn: VisibleTxn | None = None,
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
        row_schema: the table's row columns (e.g. the metastore's definition); rows come back
            in this schema, and files whose fields are Hive's positional `_col0, _col1, ...`
            are matched by position. Default: the schema of the newest data file.
        committed: the table's committed-file manifest (from its metastore). Before any row
            is read, each file the snapshot reads that has an entry must be there, no shorter
            than its committed length, and when it is read at exactly that length, end in
            the tail the commit recorded (docs/invariants.md, 7). Files without an entry
            read as before.
        visible_txn: whether the compactor transaction T of a `_vT` directory is committed
            (from the metastore); None takes every `_vT` directory as committed.

    Raises:
        FileNotFoundError: `path` does not exist.
        ConfigError: a bad snapshot string, or `columns` names an unknown column.
        NotEnoughHistoryError: a partition's only bases are too new for the snapshot.
        CorruptFileError: a bucket file or side file is damaged (run `ingest recover`), or a
            file differs from what its commit recorded (`committed`).
        UnsupportedFormatError: something Hive writes that this reader does not handle.
        SchemaMismatchError: partitions disagree on their partition columns.
    """
    reader, plans = _prepare(path, snapshot, columns, with_row_id, fs=fs, row_schema=row_schema,
                             committed=committed, visible_txn=visible_txn)
    return _stream(reader, plans, limit)


def _prepare(
    path: str, snapshot: ValidWriteIdList | str | None, columns: Sequence[str] | None,
    with_row_id: bool, *, fs: fsspec.AbstractFileSystem | None, row_schema: pa.Schema | None,
    committed: CommittedFiles | None = None, visible_txn: VisibleTxn | None = None,
) -> tuple[Merger, list[tuple[Partition, list[DataFile]]]]:
    fs, root, partitions, snap = _open_read(path, snapshot, fs, stacklevel=3)
    reader, plans, row_schema = plan_read(fs, root, partitions, snap, with_row_id=with_row_id,
                                          row_schema=row_schema, committed=committed,
                                          visible_txn=visible_txn)
    reader.select(columns, row_schema, [f for _, files in plans for f in files])
    return reader, plans


def plan_read(
    fs: fsspec.AbstractFileSystem, root: str, partitions: Sequence[Partition],
    snapshot: ValidWriteIdList, *, with_row_id: bool, row_schema: pa.Schema | None,
    committed: CommittedFiles | None, visible_txn: VisibleTxn | None,
) -> tuple[Merger, list[tuple[Partition, list[DataFile]]], pa.Schema]:
    """What every read of a snapshot does before choosing columns: the merger, the files of
    each partition in read order (checked against `committed` before any is opened for its
    data), and the row schema (`row_schema`, else the newest data file's). The caller then
    picks the columns with `Merger.select`.

    Raises:
        SchemaMismatchError: partitions disagree on their partition columns.
        NotEnoughHistoryError, CorruptFileError, UnsupportedFormatError: see `read_batches`.
    """
    keys = {tuple(k for k, _ in p.values) for p in partitions}
    if len(keys) > 1:
        raise SchemaMismatchError(
            f"Cannot read table {root}: its partition directories use different partition "
            f"columns: {sorted(keys)}")
    reader = Merger(fs, snapshot, None, with_row_id, next(iter(keys)) if keys else ())
    planned = [(p, *plan_partition(fs, p, snapshot, visible_txn=visible_txn))
               for p in partitions]
    if committed is not None and len(committed):
        for _, state, files in planned:
            check_committed(fs, reader, state, files, committed)
    plans = [(p, files) for p, _, files in planned]
    if row_schema is None:
        row_schema = _row_schema(fs, [f for _, files in plans for f in files])
    return reader, plans, row_schema if row_schema is not None else pa.schema([])


def check_committed(fs: fsspec.AbstractFileSystem, reader: Merger, state: AcidState,
                     files: Sequence[DataFile], committed: CommittedFiles) -> None:
    """Refuse a partition whose files differ from what their commits recorded, and read a
    listed file only up to its committed length when nothing past it is valid here.

    Refused: missing files of the chosen directories, files emptied or cut below their
    committed length, and (only when the read stops exactly at the committed length: an open
    transaction batch's file may have grown past it) a tail that hashes differently. In a
    transaction batch's file, bytes past the committed length belong to its later write ids
    (a commit of any of them records a new length); when the snapshot holds none of them
    valid, the read stops at the committed length, whose tail the hash vouches for, instead
    of at a later footer no commit checked. Uses the read lengths the merge computes anyway,
    so no file is read twice for the check.

    Raises:
        CorruptFileError: naming the first such file.
    """
    table = (committed.root if isinstance(fs, LocalFileSystem)
             else fs.unstrip_protocol(committed.root))
    present = {f.path for f in files}
    chosen = ([state.base] if state.base is not None else []) + list(state.deltas)
    for d in chosen:
        for path, entry in committed.in_directory(state.path(d.name)):
            if path not in present:
                damage = size_damage(path, entry, None)
                assert damage is not None
                raise damage_error(damage, table=table)
    for f in files:
        entry = committed.entry(f.path)
        if entry is None:
            continue
        damage = size_damage(f.path, entry, int(fs.size(f.path)))
        if damage is not None:
            raise damage_error(damage, table=table)
        d = f.directory
        if (d is not None and d.max_write_id > entry.write_id
                and not any(reader.snapshot.is_valid(w)
                            for w in range(entry.write_id + 1, d.max_write_id + 1))):
            reader._lengths[f.path] = entry.length  # the merge reads this length
        # Merger._length is cached per file: the read below reuses it.
        if reader._length(f) == entry.length:
            damage = tail_damage(fs, f.path, entry)
            if damage is not None:
                raise damage_error(damage, table=table)


def _stream(reader: Merger, plans: list[tuple[Partition, list[DataFile]]],
            limit: int | None) -> Iterator[pa.RecordBatch]:
    remaining = limit
    if remaining is not None and remaining <= 0:
        return
    for partition, files in plans:
        for batch in reader.partition_batches(dict(partition.values), files):
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
    row_schema: pa.Schema | None = None,
    committed: CommittedFiles | None = None,
    visible_txn: VisibleTxn | None = None,
) -> pa.Table:
    """Every row a snapshot sees, as one table (`read_batches` concatenated).

    Raises:
        See `read_batches`.
    """
    reader, plans = _prepare(path, snapshot, columns, with_row_id, fs=fs, row_schema=row_schema,
                             committed=committed, visible_txn=visible_txn)
    return pa.Table.from_batches(list(_stream(reader, plans, limit)), schema=reader.schema)


__all__ = [
    "DEFAULT_PARTITION_NAME",
    "ROW_ID_COLUMN",
    "ROW_ID_TYPE",
    "DataFile",
    "FileKind",
    "Partition",
    "UnverifiedSnapshotWarning",
    "list_partitions",
    "plan_partition",
    "read_batches",
    "read_table",
    "resolve_snapshot",
]
