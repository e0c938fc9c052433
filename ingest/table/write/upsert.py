"""Keyed upserts and change data capture in Hive's split-update form, one write id per call.

An update is a delete event naming the key's current ROW__ID (`delete_delta_W_W_0000`) plus an
insert event of the new image (`delta_W_W_0000`), both of write id W and committed together;
a delete writes only the delete event; an update that changes nothing, or an event older than
the stored row's order-by value, writes nothing (docs/format.md §24). `write_changes` is the
per-batch step inside an open transaction (the streaming sink's too); `upsert`,
`apply_changes` and `upsert_file` open the table and the transaction around it. Talks to the
metastore through `ingest.txn`, reads and writes ORC through `ingest.acid`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.format import (
    BUCKET,
    ORIGINAL_TRANSACTION,
    bucket_ids,
    decode_bucket_property,
    encode_bucket_property,
    format_delta,
)
from ingest.acid.format import ROW_ID as EVENT_ROW_ID
from ingest.acid.keys import (
    BUCKET_PROPERTY,
    ROW_ID,
    WRITE_ID,
    CurrentRows,
    build_entries,
    declare_key_columns,
    find_current_rows,
    read_rows_by_id,
    row_hashes,
    write_index,
)
from ingest.acid.read import ReadView
from ingest.acid.write import Compression
from ingest.io import storage
from ingest.records import (
    CdcFormat,
    ChangeBatch,
    InputFormat,
    check_cdc_format,
    from_debezium,
    from_debezium_arrow,
    from_rows,
    read_debezium_file,
    read_input,
    split_rows,
)
from ingest.table.core import (
    ResolvedTable,
    Written,
    agent_name,
    commit,
    join_path,
    table_compression,
    table_manifest,
    table_schema,
    writing,
)
from ingest.table.write.keyed import (
    DELETE,
    ORDER,
    SOURCE,
    KeySpec,
    Resolved,
    check_keyed_table,
    resolve,
)
from ingest.table.write.load import MissingColumns, check_missing_columns
from ingest.txn import TableDefinition


@dataclass(frozen=True)
class ChangeCounts:
    """What one batch of changes did, key by key.

    Attributes:
        events: events in the batch; keys: distinct keys (one final event each).
        inserted: keys without a live row that got one.
        updated: keys whose live row was replaced (delete event + insert event).
        deleted: keys whose live row was deleted.
        unchanged: updates whose new row equals the live row (nothing written).
        stale: final events older than the live row's order-by value (skipped).
        absent: deletes of keys without a live row (nothing written).
        rows_scanned: live rows read in the buckets the keys hash to, to find theirs.
        buckets_read: (partition, bucket) pairs read for that.
        lookup_s: seconds spent finding the live rows.
        buckets_indexed: those of them looked up in the key index instead of scanned.
    """

    events: int = 0
    keys: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    stale: int = 0
    absent: int = 0
    rows_scanned: int = 0
    buckets_read: int = 0
    lookup_s: float = 0.0
    buckets_indexed: int = 0


@dataclass(frozen=True)
class UpsertResult:
    """What an upsert committed. write_id is None when nothing needed writing (nothing was
    committed); `files` are the delete- and insert-event files."""

    table: str
    location: str
    write_id: int | None
    counts: ChangeCounts
    files: tuple[str, ...]
    partitions: tuple[str, ...]


def write_changes(
    fs: fsspec.AbstractFileSystem,
    root: str,
    defn: TableDefinition,
    view: ReadView,
    written: Written,
    resolved: Resolved,
    *,
    spec: KeySpec,
    write_id: int,
    compression: Compression,
    heartbeat: Callable[[], None] = lambda: None,
) -> ChangeCounts:
    """Write one resolved batch of changes as write id `write_id`, inside its open transaction.

    Finds each key's live row as of `view` (a snapshot taken after the transaction opened),
    then writes `<partition>/delete_delta_W_W_0000/bucket_N` with the ROW__IDs it replaces or
    deletes and `<partition>/delta_W_W_0000/bucket_N` with the new rows, and beside each
    insert file its key index file (`key_index.py`; unless the table's index is of another
    key). Commit (or abort, when `written` holds no file) is the caller's.

    Args:
        fs: the table's filesystem.
        root: the table root as `fs` names it (the manifest's root).
        defn: the table; view: what to read the live rows as of.
        written: where the files written are tracked (removed if the write fails).
        resolved: the batch (`keyed.resolve`).
        spec: the checked key.
        write_id: the transaction's write id.
        compression: the ORC codec.
        heartbeat: called after each file, to keep the transaction alive.

    Raises:
        CorruptFileError: a file read differs from what its commit recorded, or is damaged.
        IngestError: a directory W's files go to exists already (another metastore's).
    """
    winners = resolved.winners
    if winners.num_rows == 0:
        return ChangeCounts(events=resolved.events)
    started = time.monotonic()
    keys = winners.select(list(spec.columns))
    index_key = [c for c in spec.columns if c not in defn.partition_columns]
    indexed = bool(index_key) and declare_key_columns(written.fs, root, index_key)
    current = find_current_rows(
        fs, root, view, keys, bucket_ids=_key_buckets(keys, defn),
        row_schema=defn.row_schema, partition_columns=defn.partition_columns,
        columns=[spec.order_by] if spec.order_by else [],
        key_index=index_key if indexed else None, catch_up=indexed)
    plan = _decide(fs, defn, resolved, spec, current)
    lookup_s = time.monotonic() - started
    deletes = current.rows.take(pa.array(plan.delete_rows))
    _write_deletes(root, defn, written, deletes, write_id, compression, heartbeat)
    _write_inserts(root, defn, written, resolved, plan.insert_sources, write_id, compression,
                   heartbeat, index_key=index_key if indexed else None)
    return ChangeCounts(resolved.events, winners.num_rows, plan.inserted, plan.updated,
                        plan.deleted, plan.unchanged, plan.stale, plan.absent,
                        current.rows_scanned, current.buckets_read, round(lookup_s, 6),
                        current.buckets_indexed)


@dataclass(frozen=True)
class _Plan:
    delete_rows: np.ndarray  # rows of CurrentRows.rows to delete
    insert_sources: np.ndarray  # rows of Resolved.rows to insert
    inserted: int
    updated: int
    deleted: int
    unchanged: int
    stale: int
    absent: int


def _decide(fs: fsspec.AbstractFileSystem, defn: TableDefinition, resolved: Resolved,
            spec: KeySpec, current: CurrentRows) -> _Plan:
    """Match each final event with its key's live rows and decide what to write."""
    winners = resolved.winners
    n = winners.num_rows
    names = list(spec.columns)
    probe = winners.select(names).append_column("_w", pa.array(np.arange(n)))
    stored = current.rows.select(names).cast(probe.select(names).schema)
    stored = stored.append_column("_s", pa.array(np.arange(current.rows.num_rows)))
    pairs = probe.join(stored, keys=names, join_type="inner", use_threads=False)
    pw = pairs.column("_w").to_numpy()
    ps = pairs.column("_s").to_numpy()
    stale = np.zeros(n, dtype=bool)
    if spec.order_by and len(pw):
        ours = winners.column(ORDER).take(pa.array(pw))
        theirs = current.rows.column(spec.order_by).take(pa.array(ps)).cast(ours.type)
        older = np.asarray(pc.fill_null(pc.less(ours, theirs), False).to_numpy(
            zero_copy_only=False), dtype=bool)
        stale[pw[older]] = True
    matches = np.bincount(pw, minlength=n)
    is_delete = np.asarray(winners.column(DELETE).to_numpy(zero_copy_only=False), dtype=bool)
    live = ~stale
    upsert = live & ~is_delete
    unchanged = np.zeros(n, dtype=bool)
    single = np.flatnonzero(upsert & (matches == 1))
    if len(single):
        pair_of = np.full(n, -1, dtype=np.int64)
        pair_of[pw] = np.arange(len(pw))
        same = _same_rows(fs, defn, resolved, current, single, ps[pair_of[single]])
        unchanged[single[same]] = True
    replaced = live & (matches > 0) & ~unchanged  # deletes, and updates that change the row
    sources = winners.column(SOURCE).to_numpy()
    return _Plan(
        delete_rows=ps[replaced[pw]],
        insert_sources=sources[upsert & ~unchanged],
        inserted=int((upsert & (matches == 0)).sum()),
        updated=int((upsert & (matches > 0) & ~unchanged).sum()),
        deleted=int((live & is_delete & (matches > 0)).sum()),
        unchanged=int(unchanged.sum()),
        stale=int(stale.sum()),
        absent=int((live & is_delete & (matches == 0)).sum()))


def _same_rows(fs: fsspec.AbstractFileSystem, defn: TableDefinition, resolved: Resolved,
               current: CurrentRows, winner_rows: np.ndarray, stored_rows: np.ndarray,
               ) -> np.ndarray:
    """Whether each winner's new image equals its one live row, column by column (the
    partition columns are part of the key, so equal by construction). A row the key index
    found carries a digest of the stored row: a new image of another digest differs, and only
    the rows of equal digests are read and compared."""
    same = np.zeros(len(stored_rows), dtype=bool)
    if current.known is not None and current.digests is not None and len(stored_rows):
        sources = resolved.winners.column(SOURCE).to_numpy()[winner_rows]
        new_digests = row_hashes(resolved.rows.take(pa.array(sources)), defn.row_schema)
        differ = current.known[stored_rows] & (current.digests[stored_rows] != new_digests)
        check = np.flatnonzero(~differ)
        if len(check) < len(stored_rows):
            if len(check):
                same[check] = _same_rows(fs, defn, resolved, _unindexed(current),
                                         winner_rows[check], stored_rows[check])
            return same
    # A ROW__ID is unique within its partition only: match on the partition values too
    # (else a row of another partition of the batch with the same ROW__ID is compared).
    keys = [*defn.partition_columns, WRITE_ID, BUCKET_PROPERTY, ROW_ID]
    ids = current.rows.select(keys).take(pa.array(stored_rows))
    full = read_rows_by_id(fs, current, ids.select([WRITE_ID, BUCKET_PROPERTY, ROW_ID]),
                           row_schema=defn.row_schema)
    for c in defn.partition_columns:
        full = full.set_column(full.schema.get_field_index(c), c,
                               full.column(c).cast(ids.schema.field(c).type))
    probe = ids.append_column("_c", pa.array(np.arange(len(stored_rows))))
    found = full.join(probe, keys=keys, join_type="inner", use_threads=False)
    if found.num_rows == 0:
        return same
    which = found.column("_c").to_numpy()
    sources = resolved.winners.column(SOURCE).to_numpy()[winner_rows[which]]
    new = resolved.rows.take(pa.array(sources))
    equal = np.ones(len(which), dtype=bool)
    for field in defn.row_schema:
        equal &= _equal_values(new.column(field.name), found.column(field.name))
    same[which] = equal
    return same


def _unindexed(current: CurrentRows) -> CurrentRows:
    """`current` without digests (its rows compared by reading them)."""
    return CurrentRows(current.rows, current.plan, current.rows_scanned)


def _equal_values(new: pa.ChunkedArray, old: pa.ChunkedArray) -> np.ndarray:
    """Element-wise equality with null == null; nested values compared as Python values."""
    a, b = new.combine_chunks(), old.combine_chunks()
    if a.type != b.type:
        try:
            b = b.cast(a.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            a = a.cast(b.type)
    if pa.types.is_nested(a.type):
        return np.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)],
                        dtype=bool)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    eq = pc.or_(pc.fill_null(pc.equal(a, b), False), both_null)
    return np.asarray(eq.to_numpy(zero_copy_only=False), dtype=bool)


def _key_buckets(keys: pa.Table, defn: TableDefinition) -> np.ndarray:
    """Each key's bucket: the bucket columns are part of the key (`check_keyed_table`)."""
    fields = [defn.row_schema.field(c) for c in defn.bucket_columns]
    columns = pa.Table.from_arrays([keys.column(f.name).cast(f.type) for f in fields],
                                   schema=pa.schema(fields))
    return np.asarray(bucket_ids(columns, defn.bucket_columns, defn.bucket_count))


def _write_deletes(root: str, defn: TableDefinition, written: Written, deletes: pa.Table,
                   write_id: int, compression: Compression, heartbeat: Callable[[], None],
                   ) -> None:
    if deletes.num_rows == 0:
        return
    events = pa.table({ORIGINAL_TRANSACTION: deletes.column(WRITE_ID),
                       BUCKET: deletes.column(BUCKET_PROPERTY),
                       EVENT_ROW_ID: deletes.column(ROW_ID)})
    properties, of_row = np.unique(deletes.column(BUCKET_PROPERTY).to_numpy(),
                                   return_inverse=True)
    ids = np.array([decode_bucket_property(int(v))[1] for v in properties], dtype=np.int64)
    parts = deletes.select(list(defn.partition_columns))
    for part, bucket, chunk in split_rows(events, parts, bucket_ids=ids[of_row.reshape(-1)]):
        directory = join_path(root, part, format_delta(write_id, write_id, 0, delete=True))
        if directory not in written.directories:
            written.make_directory(join_path(root, part), directory)
        written.write_bucket(directory, bucket, chunk, row_schema=defn.row_schema,
                             write_id=write_id, compression=compression, deletes=True)
        heartbeat()


def _write_inserts(root: str, defn: TableDefinition, written: Written, resolved: Resolved,
                   sources: np.ndarray, write_id: int, compression: Compression,
                   heartbeat: Callable[[], None], *, index_key: Sequence[str] | None) -> None:
    """The insert files, each followed by its key index file (with `index_key`): bound to
    the file's manifest entry, so trusted only once this write commits."""
    if len(sources) == 0:
        return
    take = pa.array(sources)
    rows, parts = resolved.rows.take(take), resolved.partitions.take(take)
    buckets = bucket_ids(rows, defn.bucket_columns, defn.bucket_count)
    for part, bucket, chunk in split_rows(rows, parts, bucket_ids=buckets):
        directory = join_path(root, part, format_delta(write_id, write_id, 0))
        if directory not in written.directories:
            written.make_directory(join_path(root, part), directory)
        written.write_bucket(directory, bucket, chunk, row_schema=rows.schema,
                             write_id=write_id, compression=compression)
        if index_key:
            n = chunk.num_rows
            key_types = pa.schema([defn.row_schema.field(c) for c in index_key])
            entries = build_entries(
                chunk, key_types=key_types, row_types=defn.row_schema,
                write_ids=np.full(n, write_id, np.int64),
                bucket_properties=np.full(n, encode_bucket_property(bucket, 0), np.int32),
                row_ids=np.arange(n, dtype=np.int64))
            written.side_files.append(write_index(written.fs, root, entries,
                                                  data=written.committed[-1],
                                                  key_types=key_types,
                                                  row_types=defn.row_schema))
        heartbeat()


def _throttled(beat: Callable[[], None], *, interval_s: float = 30.0) -> Callable[[], None]:
    """`beat`, called at most every `interval_s`: a metastore write per file would cost more
    than the file (the transaction times out after minutes, not seconds)."""
    last = time.monotonic()

    def call() -> None:
        nonlocal last
        if time.monotonic() - last >= interval_s:
            beat()
            last = time.monotonic()

    return call


def _apply(table: ResolvedTable, make_batch: Callable[[TableDefinition], ChangeBatch], *,
           key: object, order_by: object, agent: str, compression: Compression | None,
           missing_columns: MissingColumns, action: str = "upsert rows") -> UpsertResult:
    check_missing_columns(missing_columns)
    with table.to_write(action) as (store, defn):
        spec = check_keyed_table(defn, key, order_by)
        resolved = resolve(make_batch(defn), defn, spec, missing_columns=missing_columns)
        codec = compression or table_compression(defn)
        fs = table.fs
        if resolved.winners.num_rows == 0:
            return UpsertResult(defn.name, defn.location, None,
                                ChangeCounts(events=resolved.events), (), ())
        with writing(store, defn, fs, agent=agent or agent_name("upsert")) as (txn, written):
            # Taken after opening: every transaction committed before ours is visible.
            snapshot = store.snapshot(defn)
            manifest = table_manifest(store, defn)
            view = ReadView(defn.name, snapshot, manifest.entries)
            counts = write_changes(fs, manifest.root, defn, view, written, resolved,
                                   spec=spec, write_id=txn.write_id, compression=codec,
                                   heartbeat=_throttled(lambda: store.heartbeat(txn)))
        if not written.files:
            store.abort(txn, reason="upsert changed nothing")
            return UpsertResult(defn.name, defn.location, None, counts, (), ())
        commit(store, txn, written, updates=True)
        parts = sorted({d.rsplit("/", 1)[0][len(manifest.root):].strip("/")
                        for d in written.directories})
        return UpsertResult(defn.name, defn.location, txn.write_id, counts,
                            tuple(fs.unstrip_protocol(p) for p in written.files), tuple(parts))


def upsert(
    table: ResolvedTable,
    data: pa.Table,
    *,
    key: Sequence[str],
    order_by: str | None = None,
    agent: str = "",
    compression: Compression | None = None,
    missing_columns: MissingColumns = "error",
) -> UpsertResult:
    """Make each row the current row of its key, in one transaction (Hive's MERGE with
    split-update).

    Within `data` the last row per key wins (row order, or the highest `order_by` value);
    a row older than the live row's `order_by` value is skipped; a row equal to the live row
    writes nothing. Rows are conformed as `load` conforms them.

    Args:
        table: the table, opened at its root (`ingest.open_table`); it must be bucketed by
            (part of) the key, and its partition columns must be in the key.
        data: row and partition columns.
        key: the key columns.
        order_by: a row column that orders a key's rows (a version or timestamp).
        agent, compression, missing_columns: as for `load`.

    Returns:
        The write id (None when nothing needed writing) and what each key did.

    Raises:
        ConfigError: the key or order-by column does not fit the table (see
            `check_keyed_table`), or a bad `missing_columns`.
        SchemaMismatchError: rows do not fit the table's columns.
        BadRecordError: a row has a null key column or no order-by value (named).
        TableNotFoundError, CorruptFileError, CommitConflictError, MetastoreError: as for
            `delete`.
    """
    return _apply(table, lambda _: from_rows(data), key=key, order_by=order_by,
                  agent=agent, compression=compression, missing_columns=missing_columns)


def apply_changes(
    table: ResolvedTable,
    envelopes: Iterable[object] | pa.Table | pa.RecordBatch,
    *,
    key: Sequence[str],
    cdc_format: CdcFormat = "debezium",
    order_by: str | None = None,
    agent: str = "",
    compression: Compression | None = None,
) -> UpsertResult:
    """Apply change events (Debezium envelopes, see `changes.from_debezium`) in one
    transaction: c/r/u upsert `after`, d and tombstones delete; ordered as in `upsert`, with
    Debezium's tie-break c < r < u < d between events of equal `order_by` value.

    `envelopes` are dicts, or an Arrow table (or record batch) of envelopes, one row each:
    columns `op`, `after` and `before` (structs), as `changes.from_debezium_arrow` reads them
    (no tombstones: a delete is op d with `before`).

    Raises:
        BadRecordError: an event without `op`, with an unknown one, without the image it
            needs or with a null key (named by its position, "event 3").
        As `upsert` otherwise.
    """
    check_cdc_format(cdc_format)
    arrow = isinstance(envelopes, (pa.Table, pa.RecordBatch))
    items = envelopes if arrow else list(envelopes)  # type: ignore[arg-type]

    def make(_: TableDefinition) -> ChangeBatch:
        return from_debezium_arrow(items) if arrow else from_debezium(items)  # type: ignore

    return _apply(table, make, key=key, order_by=order_by, agent=agent,
                  compression=compression, missing_columns="null", action="apply changes")


def upsert_file(
    table: ResolvedTable,
    input_path: str,
    *,
    key: Sequence[str],
    cdc_format: CdcFormat | None = None,
    order_by: str | None = None,
    format: InputFormat | None = None,
    agent: str = "",
    missing_columns: MissingColumns = "error",
) -> UpsertResult:
    """`upsert` the rows of a file (as `load_file` reads it) or, with `cdc_format`, apply the
    change events of a JSON Lines file, one per line (errors name the line).

    Raises:
        As `read_input` and `upsert`, or `read_debezium_file` and `apply_changes`.
    """
    if cdc_format is not None:
        check_cdc_format(cdc_format)

    def make_batch(defn: TableDefinition) -> ChangeBatch:
        options = (table.storage_options if storage.same_root(input_path, defn.location)
                   else None)
        if cdc_format is not None:
            return read_debezium_file(input_path, storage_options=options)
        data = read_input(input_path, format=format, schema=table_schema(defn),
                          storage_options=options)
        return from_rows(data, unit="row")

    return _apply(table, make_batch, key=key, order_by=order_by, agent=agent,
                  compression=None, missing_columns="null" if cdc_format else missing_columns)


__all__ = ["ChangeCounts", "UpsertResult", "apply_changes", "upsert", "upsert_file",
           "write_changes"]
