"""Find the current ROW__ID (and chosen columns) of given keys: the lookup a keyed upsert needs.

Plans only the partitions and buckets the keys hash to (a key's bucket is a function of the key
when the table is bucketed by it: docs/format.md §12, §24) and reads them with the one reader,
projecting the key columns and the few others asked for, plus ROW__ID; delete events apply as
in every read. A second, narrower read fetches whole rows by ROW__ID, opening only the files
whose write ids hold them. Knows no metastore: the view arrives as a value.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.format import decode_bucket_property
from ingest.acid.read import (
    ROW_ID_COLUMN,
    DataFile,
    FilePlan,
    Merger,
    Partition,
    ReadView,
    plan_files,
    start_merge,
)

WRITE_ID, BUCKET_PROPERTY, ROW_ID = "_writeid", "_bucketid", "_rowid"
"""The flattened ROW__ID columns of `CurrentRows.rows`."""


@dataclass(frozen=True)
class CurrentRows:
    """The live rows of the looked-up keys, and what finding them cost.

    Attributes:
        rows: the key columns, the other columns asked for, then `_writeid`, `_bucketid`
            (the bucket property) and `_rowid`: one row per live row whose key was asked for
            (more than one if the table holds a key twice).
        plan: the planned read (its partitions and tasks: what was read).
        rows_scanned: live rows read from the planned buckets before matching the keys.
    """

    rows: pa.Table
    plan: FilePlan
    rows_scanned: int

    @property
    def buckets_read(self) -> int:
        return len(self.plan.tasks)


def find_current_rows(
    fs: fsspec.AbstractFileSystem,
    root: str,
    view: ReadView,
    keys: pa.Table,
    *,
    bucket_ids: np.ndarray | None,
    row_schema: pa.Schema,
    partition_columns: Sequence[str],
    columns: Sequence[str] = (),
) -> CurrentRows:
    """The live rows of `keys` as of `view`, reading only the partitions and buckets they
    belong to.

    Args:
        fs: the table's filesystem.
        root: the table root as `fs` names it (the manifest's paths are relative to it).
        view: the snapshot and committed-file manifest to read (the manifest checks every
            file read, as in any read).
        keys: distinct keys: the key columns, partition columns among them as strings
            (never null or empty: a key lies in exactly one partition).
        bucket_ids: each key's bucket (None: the table is unbucketed; every bucket of the
            keys' partitions is read).
        row_schema: the table's row columns.
        partition_columns: the table's partition columns, outermost first.
        columns: row columns to return besides the key columns.

    Raises:
        CorruptFileError: a file read differs from what its commit recorded, or is damaged.
        NotEnoughHistoryError, UnsupportedFormatError: see `plan_files`.
    """
    key_names = keys.column_names
    wanted = _partition_values(keys, partition_columns)
    if bucket_ids is None:
        wanted_buckets = None
    else:
        wanted_buckets = {(p, int(b)) for p, b in zip(wanted, bucket_ids.tolist(),
                                                       strict=True)}
    parts = set(wanted)

    def keep(p: Partition) -> bool:
        return _values(p) in parts

    def keep_bucket(p: Partition, bucket: int) -> bool:
        return wanted_buckets is None or (_values(p), bucket) in wanted_buckets

    plan = plan_files(fs, root, view, root=root, keep=keep, keep_bucket=keep_bucket)
    projected = list(dict.fromkeys([*key_names, *columns]))
    schema = pa.schema([
        *(pa.field(c, pa.string()) if c in partition_columns else row_schema.field(c)
          for c in projected),
        pa.field(WRITE_ID, pa.int64()), pa.field(BUCKET_PROPERTY, pa.int32()),
        pa.field(ROW_ID, pa.int64())])
    if not plan.tasks:  # nothing stored in the keys' buckets (or no partition yet)
        return CurrentRows(schema.empty_table(), plan, 0)
    merger = start_merge(fs, plan, row_schema=row_schema, columns=projected, with_row_id=True)
    found: list[pa.Table] = []
    scanned = 0
    probe = keys.select(key_names)
    for partition, files in plan.by_partition():
        for batch in merger.partition_batches(dict(partition.values), files):
            scanned += batch.num_rows
            matched = flatten_row_id(pa.Table.from_batches([batch])).join(
                probe, keys=key_names, join_type="left semi", use_threads=False)
            if matched.num_rows:
                found.append(matched.select(schema.names))
    rows = pa.concat_tables(found) if found else schema.empty_table()
    return CurrentRows(rows, plan, scanned)


def read_rows_by_id(fs: fsspec.AbstractFileSystem, current: CurrentRows, row_ids: pa.Table, *,
                    row_schema: pa.Schema) -> pa.Table:
    """Whole rows (row columns, partition columns, flattened ROW__ID) of `row_ids`, rows
    `find_current_rows` found live: only the insert files of their buckets whose write-id
    range holds one of their write ids are read, and no delete events (they are live).

    Args:
        row_ids: columns `_writeid`, `_bucketid`, `_rowid` of some of `current.rows`.

    Raises:
        CorruptFileError: a file is damaged.
    """
    plan = current.plan
    write_ids = np.unique(row_ids.column(WRITE_ID).to_numpy())
    buckets = {decode_bucket_property(int(v))[1]
               for v in np.unique(row_ids.column(BUCKET_PROPERTY).to_numpy()).tolist()}
    parts: list[tuple[Partition, list[DataFile]]] = []
    for task in plan.tasks:
        if task.bucket_id not in buckets:
            continue
        files = [f for f in task.files if f.kind != "delete_delta" and _holds(f, write_ids)]
        if files:
            parts.append((task.partition, files))
    merger = Merger(fs, plan.view.snapshot, row_schema=row_schema,
                    files=[f for _, group in parts for f in group], lengths=plan.read_lengths(),
                    with_row_id=True, partition_columns=plan.partition_columns)
    probe = row_ids.select([WRITE_ID, BUCKET_PROPERTY, ROW_ID])
    found: list[pa.Table] = []
    for batch in merger.read_partitions([(dict(p.values), files) for p, files in parts]):
        matched = flatten_row_id(pa.Table.from_batches([batch])).join(
            probe, keys=[WRITE_ID, BUCKET_PROPERTY, ROW_ID], join_type="left semi",
            use_threads=False)
        if matched.num_rows:
            found.append(matched)
    if not found:
        return flatten_row_id(pa.Table.from_batches([], schema=merger.schema))
    return pa.concat_tables(found)


def flatten_row_id(table: pa.Table) -> pa.Table:
    """`table` with its `row__id` struct replaced by `_writeid`, `_bucketid`, `_rowid` at
    the end (joins take no struct columns)."""
    row_id = table.column(ROW_ID_COLUMN).combine_chunks()
    rest = table.drop_columns([ROW_ID_COLUMN])
    for name, field in ((WRITE_ID, "writeid"), (BUCKET_PROPERTY, "bucketid"),
                        (ROW_ID, "rowid")):
        rest = rest.append_column(name, pc.struct_field(row_id, field))
    return rest


def _holds(f: DataFile, write_ids: np.ndarray) -> bool:
    """Whether file `f` may hold an insert event of one of `write_ids` (original files hold
    write id 0; a base every id up to its own)."""
    d = f.directory
    if d is None:
        return bool((write_ids == 0).any())
    low = 0 if d.is_base else d.min_write_id
    return bool(((write_ids >= low) & (write_ids <= d.max_write_id)).any())


def _values(p: Partition) -> tuple[str | None, ...]:
    return tuple(v for _, v in p.values)


def _partition_values(keys: pa.Table, partition_columns: Collection[str]
                      ) -> list[tuple[str | None, ...]]:
    """The partition values of each key, as `Partition.values` holds them."""
    if not partition_columns:
        return [()] * keys.num_rows
    columns = [keys.column(c).to_pylist() for c in partition_columns]
    return list(zip(*columns, strict=True))


__all__ = ["BUCKET_PROPERTY", "ROW_ID", "WRITE_ID", "CurrentRows", "find_current_rows",
           "flatten_row_id", "read_rows_by_id"]
