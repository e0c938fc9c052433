"""A filtered snapshot read: partitions pruned by their values, stripes skipped by their ORC
statistics, then the condition applied exactly to each batch.

Builds on the reader (`reader.start_merge`, `merge.Merger`); a row filter in
the `ingest delete --where` language is pruned with `conditions` and `stripe_stats`. Takes
the snapshot as a value (docs/architecture.md §2); knows no metastore.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.format import ValidWriteIdList
from ingest.acid.predicate import Domain, Predicate, parse_predicate
from ingest.acid.read.merge import ROW_ID_COLUMN, DataFile
from ingest.acid.read.plan import Partition, list_partitions
from ingest.acid.read.reader import (
    ALL_ON_DISK,
    on_disk_snapshot,
    open_plan,
    plan_row_schema,
    start_merge,
)
from ingest.acid.read.view import ReadView
from ingest.io import files as _files

SnapshotArg = ValidWriteIdList | str | None
"""A snapshot: a valid write-id list, Hive's string form of one, `"all-on-disk"` (every write
id named on disk is committed, chosen explicitly), or None (the same, with a warning)."""


@dataclass
class ScanStats:
    """What a scan pruned, skipped and returned; stripe figures fill in while it streams.

    Attributes:
        partitions: partition directories found under the path.
        partitions_pruned: of those, left out by their values alone.
        files: insert-event (and original) files opened in the kept partitions.
        stripes: their stripes.
        stripes_skipped: stripes never decoded because their statistics exclude every row.
        rows: rows returned (after deletes, the condition and the limit).
    """

    partitions: int = 0
    partitions_pruned: int = 0
    files: int = 0
    stripes: int = 0
    stripes_skipped: int = 0
    rows: int = 0


class SnapshotScan:
    """One planned read of a table or partition as of a snapshot; `batches()` streams it.

    Planning (listing partitions, choosing directories, parsing the condition) happens in the
    constructor; `batches()` opens the files one stripe at a time, so memory stays bounded by
    a stripe and one bucket's delete events.
    """

    def __init__(
        self,
        path: str,
        snapshot: SnapshotArg | ReadView,
        *,
        columns: Sequence[str] | None = None,
        where: str | Predicate | None = None,
        with_row_id: bool = False,
        fs: fsspec.AbstractFileSystem | None = None,
        row_schema: pa.Schema | None = None,
        limit: int | None = None,
        table: str = "",
        root: str | None = None,
    ) -> None:
        """Plan the read; see `scan` for the arguments. `snapshot` may also be a whole
        `ReadView` (the metastore's: manifest and `_vT` visibility checked by the planner),
        whose manifest paths are relative to `root` (default: `path`); `table` names the
        table in a warning.

        Raises:
            See `scan`.
        """
        self.fs, plan = open_plan(path, snapshot, fs, root=root, table=table, stacklevel=3)
        self.plan = plan
        self.snapshot = plan.view.snapshot
        self.limit = limit
        self.stats = ScanStats(partitions=len(plan.partitions))
        row_schema = plan_row_schema(self.fs, plan, row_schema)
        plans = plan.by_partition()
        partition_columns = plan.partition_columns
        full = pa.schema(list(row_schema)
                         + [pa.field(c, pa.string()) for c in partition_columns])
        self.predicate = (parse_predicate(where, full, option="where") if isinstance(where, str)
                          else where)
        requested = list(columns) if columns is not None else None
        read_columns = requested
        if requested is not None and self.predicate is not None:
            read_columns = requested + [c for c in self.predicate.columns if c not in requested]
        condition = self.predicate.condition if self.predicate is not None else None
        self._merger = start_merge(
            self.fs, plan, row_schema=row_schema, columns=read_columns, with_row_id=with_row_id,
            condition=condition,
            condition_columns=self.predicate.columns if self.predicate is not None else ())
        self._out_names: list[str] | None = None
        if read_columns != requested:
            assert requested is not None
            self._out_names = ([ROW_ID_COLUMN] if with_row_id else []) + requested
        self._plans: list[tuple[Partition, list[DataFile]]] = []
        for p, files in plans:
            if condition is not None and not condition.may_match(_partition_domains(p)):
                self.stats.partitions_pruned += 1
                continue
            self._plans.append((p, files))

    @property
    def schema(self) -> pa.Schema:
        """The schema of the batches: ROW__ID if asked, the columns, partition columns."""
        schema = self._merger.schema
        if self._out_names is not None:
            schema = pa.schema([schema.field(n) for n in self._out_names])
        return schema

    @property
    def partitions(self) -> list[Partition]:
        """The partitions the scan reads (those not pruned)."""
        return [p for p, _ in self._plans]

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Stream the matching rows, one batch per stripe read (empty ones left out).

        Raises:
            CorruptFileError: a bucket file or side file is damaged (run `ingest recover`).
            UnsupportedFormatError: something Hive writes that this reader does not handle.
        """
        remaining = self.limit
        if remaining is not None and remaining <= 0:
            return
        expression: pc.Expression | None = (self.predicate.expression
                                            if self.predicate is not None else None)
        counts = self._merger.counts
        stream = self._merger.read_partitions([(dict(p.values), files)
                                               for p, files in self._plans])
        try:
            for batch in stream:
                if expression is not None:
                    batch = batch.filter(expression)
                if self._out_names is not None:
                    batch = batch.select(self._out_names)
                if not batch.num_rows:
                    continue
                if remaining is not None:
                    if batch.num_rows >= remaining:
                        batch = batch.slice(0, remaining)
                        self.stats.rows += batch.num_rows
                        yield batch
                        return
                    remaining -= batch.num_rows
                self.stats.rows += batch.num_rows
                yield batch
        finally:
            stream.close()  # stops the decoding thread and closes the files
            self.stats.files = counts.files
            self.stats.stripes = counts.stripes
            self.stats.stripes_skipped = counts.stripes_skipped

    def to_table(self) -> pa.Table:
        """Every matching row as one table."""
        return pa.Table.from_batches(list(self.batches()), schema=self.schema)


class ScanOptions(TypedDict, total=False):
    """The keyword-only options of `scan` (and of `SnapshotScan`); see `scan`."""

    columns: Sequence[str] | None
    where: str | Predicate | None
    with_row_id: bool
    fs: fsspec.AbstractFileSystem | None
    row_schema: pa.Schema | None
    limit: int | None


def scan(path: str, snapshot: SnapshotArg, **options: Unpack[ScanOptions]) -> SnapshotScan:
    """Plan a read of `path` as of `snapshot`, optionally filtered.

    Args:
        path: a table root, one partition directory, or an unpartitioned table root.
        snapshot: see `SnapshotArg`.
        columns: row and partition columns to return, in this order (default: all).
        where: a condition in the `ingest delete --where` language over row and partition
            columns (partition values compare as strings), or one already parsed. Rows are
            kept only where it is true (a null never matches).
        with_row_id: also return ROW__ID as a first column `row__id`.
        fs: the filesystem (default: from the path's URL).
        row_schema: the table's row columns (default: the newest data file's).
        limit: stop after this many matching rows.

    Raises:
        FileNotFoundError: `path` does not exist.
        ConfigError: a bad snapshot string, an unknown column, or a `where` that does not
            parse or fit the columns.
        NotEnoughHistoryError, UnsupportedFormatError, CorruptFileError: see `read_batches`.
        SchemaMismatchError: partitions disagree on their partition columns.
    """
    unknown = sorted(set(options) - set(ScanOptions.__annotations__))
    if unknown:  # `table` and `root` are SnapshotScan's own, not scan's
        raise TypeError(f"scan() got an unexpected keyword argument {unknown[0]!r}")
    return SnapshotScan(path, snapshot, **options)


def _partition_domains(p: Partition) -> dict[str, Domain]:
    return {c: Domain.exactly(None if v is None else v.encode("utf-8")) for c, v in p.values}


def all_on_disk(path: str, *, fs: fsspec.AbstractFileSystem | None = None,
                table: str = "") -> ValidWriteIdList:
    """The snapshot that takes every write id a directory under `path` names as committed.

    Raises:
        FileNotFoundError: `path` does not exist.
    """
    fs, root = _files.resolve(path, fs)
    return on_disk_snapshot(list_partitions(root, fs=fs),
                            table or root.rstrip("/").rsplit("/", 1)[-1])


__all__ = [
    "ALL_ON_DISK", "all_on_disk", "ScanOptions", "ScanStats", "SnapshotArg", "SnapshotScan", "scan",
]
