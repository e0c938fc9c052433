"""Find the current ROW__ID (and chosen columns) of given keys: the lookup a keyed upsert needs.

Plans only the partitions and buckets the keys hash to (a key's bucket is a function of the key
when the table is bucketed by it: docs/format.md §12, §24) and reads them with the one reader,
projecting the key columns and the few others asked for, plus ROW__ID; delete events apply as
in every read. A second, narrower read fetches whole rows by ROW__ID, opening only the files
whose write ids hold them. With the table's key index (`key_index.py`), a bucket whose every
insert file has a trusted index is looked up there instead: candidates by key hash, their key
values compared, their ROW__IDs checked against the bucket's delete events; the other buckets
are scanned. Knows no metastore: the view arrives as a value.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, replace

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.format import (
    CommittedFile,
    decode_bucket_property,
)
from ingest.acid.keys._delete_events import deleted, identity, valid_write_ids
from ingest.acid.keys._runs import HASH, runs_of
from ingest.acid.keys.key_index import (
    DIGEST,
    IndexFile,
    index_data_file,
    load_index,
    probe_sorted,
    row_hashes,
)
from ingest.acid.read import (
    ROW_ID_COLUMN,
    DataFile,
    FilePlan,
    Merger,
    Partition,
    ReadView,
    ScanTask,
    plan_files,
    start_merge,
)
from ingest.errors import CorruptFileError

WRITE_ID, BUCKET_PROPERTY, ROW_ID = "_writeid", "_bucketid", "_rowid"
"""The flattened ROW__ID columns of `CurrentRows.rows`."""
_KNOWN = "_known"


@dataclass(frozen=True)
class CurrentRows:
    """The live rows of the looked-up keys, and what finding them cost.

    Attributes:
        rows: the key columns, the other columns asked for, then `_writeid`, `_bucketid`
            (the bucket property) and `_rowid`: one row per live row whose key was asked for
            (more than one if the table holds a key twice).
        plan: the planned read (its partitions and tasks: what was read).
        rows_scanned: live rows read from the scanned buckets before matching the keys, plus
            the events read to index files that had no index (`catch_up`).
        digests: for each row, the key index's digest of the whole stored row (0 where
            `known` is False: the row was found by the scan).
        known: which rows have a digest.
        buckets_indexed: (partition, bucket) pairs looked up in the key index, not scanned.
    """

    rows: pa.Table
    plan: FilePlan
    rows_scanned: int
    digests: np.ndarray | None = None
    known: np.ndarray | None = None
    buckets_indexed: int = 0

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
    key_index: Sequence[str] | None = None,
    catch_up: bool = False,
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
        key_index: the key's row columns when the table's key index is of them: buckets
            whose insert files all have a trusted index are looked up there; the values of
            `columns` (the index holds none) are then read for the rows found only, from
            the insert files holding their write ids.
        catch_up: index the committed insert files of the keys' buckets that have no index
            yet (a `load`, another engine's write), reading each once, instead of scanning
            their buckets on every lookup.

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
    indexed: list[tuple[ScanTask, list[tuple[CommittedFile, IndexFile]]]] = []
    caught_up = [0]  # events read to index files that had none
    if key_index is not None:
        for task in plan.tasks:
            trusted = _trusted_indexes(fs, root, plan.view, task, key_index,
                                       row_schema=row_schema, catch_up=catch_up,
                                       counted=caught_up)
            if trusted is not None:
                indexed.append((task, trusted))
    found: list[pa.Table] = []
    digests: list[tuple[np.ndarray, np.ndarray]] = []
    if indexed:
        by_index = _look_up_indexed(fs, root, plan, indexed, keys, wanted, bucket_ids,
                                    row_schema=row_schema, key_index=key_index or ())
        if by_index.num_rows and len(projected) > len(key_names):
            by_index = _with_columns(fs, root, plan, by_index, projected[len(key_names):],
                                     row_schema=row_schema)
        if by_index.num_rows:
            digests.append((by_index.column(DIGEST).to_numpy(),
                            np.asarray(by_index.column(_KNOWN).to_numpy(zero_copy_only=False),
                                       dtype=bool)))
            found.append(by_index.select(schema.names).cast(schema))
    done = {(t.partition.path, t.bucket_id) for t, _ in indexed}
    scanned_plan = replace(plan, tasks=tuple(
        t for t in plan.tasks if (t.partition.path, t.bucket_id) not in done))
    scanned = caught_up[0]
    if scanned_plan.tasks:
        merger = start_merge(fs, scanned_plan, row_schema=row_schema, columns=projected,
                             with_row_id=True)
        probe_keys = keys.select(key_names)
        for partition, files in scanned_plan.by_partition():
            for batch in merger.partition_batches(dict(partition.values), files):
                scanned += batch.num_rows
                matched = flatten_row_id(pa.Table.from_batches([batch])).join(
                    probe_keys, keys=key_names, join_type="left semi", use_threads=False)
                if matched.num_rows:
                    found.append(matched.select(schema.names).cast(schema))
    rows = pa.concat_tables(found) if found else schema.empty_table()
    known = np.zeros(rows.num_rows, dtype=bool)
    digest = np.zeros(rows.num_rows, dtype=np.uint64)
    if digests:
        n = len(digests[0][0])
        digest[:n], known[:n] = digests[0]
    return CurrentRows(rows, plan, scanned, digest, known, len(indexed))


def _trusted_indexes(fs: fsspec.AbstractFileSystem, root: str, view: ReadView, task: ScanTask,
                     key_index: Sequence[str], *, row_schema: pa.Schema, catch_up: bool,
                     counted: list[int]) -> list[tuple[CommittedFile, IndexFile]] | None:
    """The index of every insert file of `task`, or None when one has none to trust (an
    original file, a file the manifest does not list, a write without the index that
    `catch_up` does not index)."""
    out = []
    key_types = pa.schema([row_schema.field(c) for c in key_index])
    for f in task.files:
        if f.kind == "delete_delta":
            continue
        if f.kind not in ("base", "delta"):
            return None
        entry = view.committed.get(_relative(root, f.path))
        if entry is None:
            return None
        index = load_index(fs, root, entry, key_types=key_types, row_types=row_schema)
        if index is None and catch_up:
            try:
                made = index_data_file(fs, root, entry, row_schema=row_schema,
                                       key_columns=key_index)
            except OSError:  # the index cannot be written here: scan
                made = None
            if made is not None:
                counted[0] += entry.rows
                index = load_index(fs, root, entry, key_types=key_types, row_types=row_schema)
        if index is None:
            return None
        out.append((entry, index))
    return out


def _look_up_indexed(fs: fsspec.AbstractFileSystem, root: str, plan: FilePlan,
                     indexed: list[tuple[ScanTask, list[tuple[CommittedFile, IndexFile]]]],
                     keys: pa.Table, wanted: list[tuple[str | None, ...]],
                     bucket_ids: np.ndarray | None, *, row_schema: pa.Schema,
                     key_index: Sequence[str]) -> pa.Table:
    """The live rows of `keys` in the indexed buckets: the key columns, flattened ROW__ID and
    `_digest`. Per bucket the keys' hashes are sorted once and probe the bucket's index
    files, the small ones merged into a few runs (`_runs.py`); the candidates' key values are
    compared (the hash may collide), their write ids checked against the snapshot where the
    file's range is not wholly valid, and only their ROW__IDs looked for among the bucket's
    delete events."""
    snapshot = plan.view.snapshot
    key_types = pa.schema([row_schema.field(c) for c in key_index])
    hashes = row_hashes(keys, key_types)
    asked = {c: keys.column(c).cast(key_types.field(c).type) for c in key_index}
    groups: dict[tuple[tuple[str | None, ...], int | None], list[int]] = {}
    buckets = [None] * keys.num_rows if bucket_ids is None else bucket_ids.tolist()
    for i, (p, b) in enumerate(zip(wanted, buckets, strict=True)):
        groups.setdefault((p, b), []).append(i)
    lengths = plan.read_lengths()
    types = (str(key_types), str(row_schema))
    found: list[tuple[np.ndarray, ...]] = []
    for task, indexes in indexed:
        mine = groups.get((_values(task.partition), task.bucket_id))
        if mine is None and bucket_ids is None:
            mine = groups.get((_values(task.partition), None))
        if not mine:
            continue
        positions = np.asarray(mine, dtype=np.int64)
        order = np.argsort(hashes[positions])
        needles = hashes[positions][order]  # sorted needles walk each run in order
        members: dict[Hashable, tuple[IndexFile, bool]] = {}
        for f, (entry, index) in zip((f for f in task.files if f.kind != "delete_delta"),
                                     indexes, strict=True):
            check = f.kind != "base" and f.directory is not None and snapshot.range_validity(
                f.directory.min_write_id, f.directory.max_write_id) != "ALL"
            members[identity(entry)] = (index, check)
        runs = runs_of(("key_index", fs.unstrip_protocol(task.partition.path), task.bucket_id,
                        types), [(m, len(index.hashes), _index_columns(index))
                                 for m, (index, _) in members.items()])
        candidates: list[tuple[np.ndarray, ...]] = []
        for run in runs:
            which, at = probe_sorted(run.columns[HASH], needles)
            if not len(which):
                continue
            k, member, position = positions[order[which]], run.member_of(at), \
                run.position_of(at)
            by_member = np.argsort(member, kind="stable")
            starts = np.flatnonzero(np.diff(member[by_member], prepend=-1))
            for sel in np.split(by_member, starts[1:]):
                index, check = members[run.members[int(member[sel[0]])]]
                hits, of_keys = position[sel], k[sel]
                same = np.ones(len(sel), dtype=bool)
                at_index, asked_at = pa.array(hits), pa.array(of_keys)
                for c in key_index:  # the hash may collide: compare the key values
                    same &= _equal(index.entries.column(c).take(at_index),
                                   asked[c].take(asked_at))
                if check:
                    same &= valid_write_ids(index.write_ids[hits], snapshot)
                hits = hits[same]
                candidates.append((of_keys[same], index.write_ids[hits],
                                   index.bucket_properties[hits], index.row_ids[hits],
                                   index.digests[hits], np.full(len(hits), index.digests_valid)))
        if not candidates:
            continue
        k, w, b, r, d, known = (np.concatenate(c) for c in zip(*candidates, strict=True))
        live = ~deleted(fs, root, plan.view, task, lengths, w, b, r)
        found.append((k[live], w[live], b[live], r[live], d[live], known[live]))
    if not found:
        return pa.table({DIGEST: pa.array([], pa.uint64()), _KNOWN: pa.array([], pa.bool_())})
    k, w, b, r, d, known = (np.concatenate(c) for c in zip(*found, strict=True))
    rows = keys.take(pa.array(k))
    for name, values, kind in ((WRITE_ID, w, pa.int64()), (BUCKET_PROPERTY, b, pa.int32()),
                               (ROW_ID, r, pa.int64()), (DIGEST, d, pa.uint64()),
                               (_KNOWN, known, pa.bool_())):
        rows = rows.append_column(name, pa.array(values, kind))
    return rows


def _index_columns(index: IndexFile) -> Callable[[], dict[str, np.ndarray]]:
    """A run keeps only the hashes (and where each came from): the rest is gathered from
    the index file of the entries found."""
    return lambda: {HASH: index.hashes}


def _equal(a: pa.ChunkedArray, b: pa.ChunkedArray) -> np.ndarray:
    eq = pc.fill_null(pc.equal(a, b), False)
    return np.asarray(eq.to_numpy(zero_copy_only=False), dtype=bool)


def _relative(root: str, path: str) -> str:
    """`path` relative to the table root, as the manifest names it."""
    return path[len(root.rstrip("/")) + 1:] if path.startswith(root.rstrip("/") + "/") \
        else path


def read_rows_by_id(fs: fsspec.AbstractFileSystem, current: CurrentRows, row_ids: pa.Table, *,
                    row_schema: pa.Schema, columns: Sequence[str] | None = None) -> pa.Table:
    """Whole rows (row columns, partition columns, flattened ROW__ID) of `row_ids`, rows
    `find_current_rows` found live: only the insert files of their buckets whose write-id
    range holds one of their write ids are read, and no delete events (they are live).

    Args:
        row_ids: columns `_writeid`, `_bucketid`, `_rowid` of some of `current.rows`.
        columns: only these row columns (and the flattened ROW__ID); default all.

    Raises:
        CorruptFileError: a file is damaged.
    """
    return _read_by_id(fs, current.plan, row_ids, row_schema=row_schema, columns=columns)


def _read_by_id(fs: fsspec.AbstractFileSystem, plan: FilePlan, row_ids: pa.Table, *,
                row_schema: pa.Schema, columns: Sequence[str] | None) -> pa.Table:
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
                    columns=columns, with_row_id=True,
                    partition_columns=plan.partition_columns)
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


def _with_columns(fs: fsspec.AbstractFileSystem, root: str, plan: FilePlan, found: pa.Table,
                  columns: Sequence[str], *, row_schema: pa.Schema) -> pa.Table:
    """`found` (rows the key index found live) with the values of `columns`, read for those
    rows only (the columns projected, from the insert files holding their write ids).

    Raises:
        CorruptFileError: a found row is not in its data file (the index and the file it is
            bound to disagree: a damaged file), or a file is damaged.
    """
    # A ROW__ID is unique within its partition only: match on the partition values too.
    ids = [*plan.partition_columns, WRITE_ID, BUCKET_PROPERTY, ROW_ID]
    values = _read_by_id(fs, plan, found.select(ids[len(plan.partition_columns):]),
                         row_schema=row_schema, columns=[*columns, *plan.partition_columns])
    values = pa.table({**{c: values.column(c).cast(found.schema.field(c).type) for c in ids},
                       **{c: values.column(c) for c in columns}})
    joined = found.join(values, keys=ids, join_type="inner", use_threads=False)
    if joined.num_rows != found.num_rows:
        raise CorruptFileError(
            f"Cannot look up keys in {plan.view.table}: the key index names "
            f"{found.num_rows - joined.num_rows:,} live rows their data files do not hold",
            path=root, hint="run `ingest verify` on the table")
    return joined


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
