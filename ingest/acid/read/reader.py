"""Read a Hive ACID table (or one partition) as of a snapshot: Hive's split-update read path.

Plans with the one planner (`plan.plan_files`: partitions, `acid_state` on each, checked
against the committed-file manifest) and hands the chosen files to `merge.Merger`, which
drops rows of invalid write ids and rows delete events name (`AcidUtils.getAcidState` +
`VectorizedOrcAcidRowBatchReader`, docs/format.md §10, §11). Takes the snapshot as a plain
`ValidWriteIdList`, and the metastore's committed-file manifest as plain `CommittedFiles`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import TypedDict, Unpack

import fsspec
import pyarrow as pa

from ingest.acid.format import (
    DEFAULT_PARTITION_NAME,
    ROW_POSITION,
    CommittedFiles,
    ValidWriteIdList,
    parse_directory,
)
from ingest.acid.predicate import Condition
from ingest.acid.read.bucket_file import readable_length
from ingest.acid.read.directories import VisibleTxn
from ingest.acid.read.merge import (
    ROW_ID_COLUMN,
    ROW_ID_TYPE,
    DataFile,
    FileKind,
    Merger,
    check_acid,
    open_bounded,
)
from ingest.acid.read.plan import FilePlan, Partition, list_partitions, plan_files, plan_partition
from ingest.acid.read.view import ReadView
from ingest.io import files as _files

ALL_ON_DISK = "all-on-disk"
"""The snapshot argument that takes every write id named on disk as committed, chosen
explicitly (no warning)."""


class UnverifiedSnapshotWarning(UserWarning):
    """A table was read without a snapshot: open or aborted transactions' rows may show."""


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
    snap = on_disk_snapshot(partitions, table or "unknown")
    warnings.warn(UnverifiedSnapshotWarning(
        f"Reading {table or 'the table'} without a snapshot: every write id named by its "
        f"directories (1..{snap.high_watermark}) is taken as committed, so rows of open or "
        "aborted transactions may be returned. Pass the metastore's snapshot (a "
        "ValidWriteIdList or Hive's 'db.table:hwm:minOpen:open:aborted' string) to read only "
        "committed data."),
        stacklevel=stacklevel + 1)
    return snap


def on_disk_snapshot(partitions: Sequence[Partition], table: str) -> ValidWriteIdList:
    """The snapshot that takes every write id a directory of `partitions` names as committed
    (its high-water mark is the highest such id; 0 when none is named); no warning."""
    hwm = 0
    for p in partitions:
        for name in p.children:
            parsed = parse_directory(name)
            if parsed is not None:
                hwm = max(hwm, parsed.max_write_id)
    return ValidWriteIdList.all_committed(table, hwm)


def open_plan(
    path: str, snapshot: ValidWriteIdList | str | ReadView | None,
    fs: fsspec.AbstractFileSystem | None, *, committed: CommittedFiles | None = None,
    visible_txn: VisibleTxn | None = None, root: str | None = None, table: str = "",
    stacklevel: int,
) -> tuple[fsspec.AbstractFileSystem, FilePlan]:
    """The filesystem and the checked plan of a read of `path` as of `snapshot`: the one
    place a read's snapshot argument becomes a view.

    Args:
        path: a table root or a partition inside it.
        snapshot: a whole `ReadView` (used as it is); a valid write-id list or Hive's string form;
            `ALL_ON_DISK` (every write id named on disk is committed) or None (the same, with
            a warning). Those two list the partitions once, for the snapshot and the plan.
        fs: the filesystem (default: from the path's URL).
        committed: the manifest the plan checks against (for a `ReadView`, which carries
            its own entries, only its root counts).
        visible_txn: `_vT` visibility (ignored for a `ReadView`).
        root: the table root a manifest's paths are relative to when `committed` is None
            (default: `path`).
        table: the table's name in the snapshot and a warning (default: the directory's).
        stacklevel: as for `resolve_snapshot`, counted from this function's caller.

    Raises:
        See `read_batches`.
    """
    fs, where = _files.resolve(path, fs)
    where = where.rstrip("/") or "/"
    listed = None
    if isinstance(snapshot, ReadView):
        view = snapshot
    else:
        if snapshot is None or snapshot == ALL_ON_DISK:
            listed = list_partitions(where, fs=fs)
            name = table or where.rsplit("/", 1)[-1]
            snapshot = (on_disk_snapshot(listed, name) if snapshot == ALL_ON_DISK else
                        resolve_snapshot(None, listed, table=name, stacklevel=stacklevel + 1))
        snap = resolve_snapshot(snapshot, ())
        view = ReadView(snap.table, snap, committed.entries if committed is not None else {},
                        visible_txn)
    return fs, plan_files(fs, where, view, partitions=listed,
                          root=committed.root if committed is not None else root)


def plan_row_schema(fs: fsspec.AbstractFileSystem, plan: FilePlan,
                    row_schema: pa.Schema | None = None) -> pa.Schema:
    """The row schema a planned read uses: `row_schema`, else the newest data file's (empty
    when there is none)."""
    if row_schema is None:
        row_schema = _row_schema(fs, [f for t in plan.tasks for f in t.files])
    return row_schema if row_schema is not None else pa.schema([])


def start_merge(fs: fsspec.AbstractFileSystem, plan: FilePlan, *, row_schema: pa.Schema,
                columns: Sequence[str] | None = None, with_row_id: bool = False,
                condition: Condition | None = None,
                condition_columns: Sequence[str] = ()) -> Merger:
    """The merger of a planned read (every reader's): its files read to the planner's checked
    lengths (with the tails it checked), `columns` (None: all) of `row_schema` (see
    `plan_row_schema`).

    Raises:
        ConfigError, CorruptFileError, UnsupportedFormatError: see `Merger`.
    """
    return Merger(fs, plan.view.snapshot, row_schema=row_schema,
                  files=[f for t in plan.tasks for f in t.files], lengths=plan.read_lengths(),
                  tails=plan.read_tails(),
                  columns=columns, with_row_id=with_row_id,
                  partition_columns=plan.partition_columns, condition=condition,
                  condition_columns=condition_columns)


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


class ReadOptions(TypedDict, total=False):
    """The keyword-only options of `read_batches` and `read_table`; see `read_batches`."""

    fs: fsspec.AbstractFileSystem | None
    limit: int | None
    row_schema: pa.Schema | None
    committed: CommittedFiles | None
    visible_txn: VisibleTxn | None


def read_batches(
    path: str,
    snapshot: ValidWriteIdList | str | None = None,
    columns: Sequence[str] | None = None,
    with_row_id: bool = False,
    **options: Unpack[ReadOptions],
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
    reader, plans = _prepare(path, snapshot, columns, with_row_id, options)
    return _stream(reader, plans, options.get("limit"))


def _prepare(
    path: str, snapshot: ValidWriteIdList | str | None, columns: Sequence[str] | None,
    with_row_id: bool, options: ReadOptions,
) -> tuple[Merger, list[tuple[Partition, list[DataFile]]]]:
    unknown = sorted(set(options) - set(ReadOptions.__annotations__))
    if unknown:  # as a signature that named the options would
        raise TypeError(f"got an unexpected keyword argument {unknown[0]!r}")
    fs, plan = open_plan(path, snapshot, options.get("fs"), committed=options.get("committed"),
                         visible_txn=options.get("visible_txn"), stacklevel=3)
    reader = start_merge(fs, plan, row_schema=plan_row_schema(fs, plan, options.get("row_schema")),
                         columns=columns, with_row_id=with_row_id)
    return reader, plan.by_partition()


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
    **options: Unpack[ReadOptions],
) -> pa.Table:
    """Every row a snapshot sees, as one table (`read_batches` concatenated).

    Raises:
        See `read_batches`.
    """
    reader, plans = _prepare(path, snapshot, columns, with_row_id, options)
    return pa.Table.from_batches(list(_stream(reader, plans, options.get("limit"))),
                                 schema=reader.schema)


__all__ = [
    "DEFAULT_PARTITION_NAME",
    "ROW_ID_COLUMN",
    "ROW_ID_TYPE",
    "DataFile",
    "FileKind",
    "Partition",
    "ReadOptions",
    "UnverifiedSnapshotWarning",
    "list_partitions",
    "on_disk_snapshot",
    "open_plan",
    "plan_partition",
    "read_batches",
    "read_table",
    "resolve_snapshot",
    "plan_row_schema",
    "start_merge",
]
