"""Whole-table operations: create a table, load a batch of rows, delete rows by predicate.

Each write is one metastore transaction over the acid layer, as Hive's INSERT INTO and
DELETE ... WHERE are with split-update: rows go to `delta_W_W_0000/bucket_N`, delete events to
`delete_delta_W_W_0000/bucket_N`. Files of a transaction that does not commit are removed
before it is aborted, so a failed call leaves nothing behind. The CLI's create/load/delete.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.bucketing import bucket_ids
from ingest.acid.names import (
    MAX_BUCKET_COUNT,
    DEFAULT_PARTITION_NAME,
    bucket_file_name,
    decode_bucket_property,
    format_delta,
    format_partition,
    write_acid_version_file,
)
from ingest.acid.predicate import Predicate, parse_predicate
from ingest.acid.schema import parse_schema, to_ddl
from ingest.acid.snapshot import ROW_ID_COLUMN, list_partitions, read_table
from ingest.acid.writeids import ValidWriteIdList
from ingest.acid.events import BUCKET, ORIGINAL_TRANSACTION, ROW_ID
from ingest.acid.file_options import parse_codec
from ingest.acid.writer import BucketFileOptions, BucketWriter, Compression
from ingest.errors import (
    CommitConflictError,
    ConfigError,
    IngestError,
    SchemaMismatchError,
)
from ingest.txn._input import InputFormat, read_input
from ingest.txn.locations import normalize_location
from ingest.txn.model import TableDefinition, Transaction
from ingest.txn.placement import default_metastore_url, find_metastore_for
from ingest.txn.store import Metastore

MetastoreRef = str | Metastore | None
"""A metastore URL, an open Metastore (left open), or None for the table's default one."""


@dataclass(frozen=True)
class LoadResult:
    """What `load` committed. write_id is None when there were no rows (nothing committed)."""

    table: str
    location: str
    write_id: int | None
    rows: int
    files: tuple[str, ...]
    partitions: tuple[str, ...]
    bytes_written: int


@dataclass(frozen=True)
class DeleteResult:
    """What `delete` committed, or would have (dry_run). write_id is None if nothing was."""

    table: str
    location: str
    where: str
    write_id: int | None
    rows_deleted: int
    files: tuple[str, ...]
    partitions: tuple[str, ...]
    dry_run: bool


# ---------------------------------------------------------------------------- create

def create_table(
    location: str,
    schema_ddl: str,
    *,
    name: str | None = None,
    partitioned_by: Sequence[str] = (),
    buckets: int = 0,
    bucketed_by: Sequence[str] = (),
    properties: dict[str, str] | None = None,
    metastore: MetastoreRef = None,
) -> TableDefinition:
    """Create a transactional table: its directory, and its entry in the metastore.

    Args:
        location: the table root, a path or fsspec URL.
        schema_ddl: Hive columns, e.g. ``"id BIGINT, value STRING, dt STRING"``; partition
            columns may be listed here (they must then be STRING) or left out.
        name: `[db.]table`; default: the directory name in database `default`.
        partitioned_by: partition columns, outermost first (values are strings).
        buckets: number of buckets (0: unbucketed); needs `bucketed_by`.
        bucketed_by: columns hashed into buckets (Hive bucketing version 2).
        properties: extra table properties (`orc.compress` picks the load compression).
        metastore: where to register it; default `default_metastore_url(location)`.

    Returns:
        The stored definition.

    Raises:
        ConfigError: bad schema, partition or bucket options, or metastore URL.
        TableExistsError: the metastore has a table of that name or location.
        MetastoreError: the metastore cannot be opened or written.
    """
    schema = parse_schema(schema_ddl)
    partition_columns = _split_names(partitioned_by)
    for column in partition_columns:
        if column in schema.names and not pa.types.is_string(schema.field(column).type):
            raise ConfigError(
                f"Cannot create table at {location}: partition column {column!r} is "
                f"{_ddl_type(schema.field(column))}, but partition values are strings",
                hint=f"declare it as `{column} STRING`, or leave it out of --schema")
    row_schema = pa.schema([f for f in schema if f.name not in partition_columns],
                           metadata=schema.metadata)
    defn = TableDefinition(
        name=name or _default_table_name(location), location=location, row_schema=row_schema,
        partition_columns=partition_columns, bucket_count=buckets,
        bucket_columns=_split_names(bucketed_by),
        # ZLIB by default: Hive 3 reads ORC with orc-core 1.5, which has no ZSTD.
        properties={"orc.compress": "ZLIB", **(properties or {})})
    if buckets > MAX_BUCKET_COUNT:
        raise ConfigError(f"Cannot create table {defn.name}: {buckets} buckets, at most "
                          f"{MAX_BUCKET_COUNT} are possible (Hive's bucket id has 12 bits)")
    fs, root = fsspec.core.url_to_fs(defn.location)
    created = not fs.exists(root)
    fs.makedirs(root, exist_ok=True)
    try:
        with _store(metastore, defn.location, create=True) as store:
            return store.create_table(defn)
    except BaseException:
        if created:
            _remove_empty_dirs(fs, [root])
        raise


def _default_table_name(location: str) -> str:
    base = normalize_location(location).rstrip("/").rsplit("/", 1)[-1].lower()
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in base)
    return cleaned if cleaned[:1].isalpha() else f"t_{cleaned}"


def _split_names(names: Sequence[str] | str) -> tuple[str, ...]:
    items = [names] if isinstance(names, str) else list(names)
    return tuple(n.strip() for item in items for n in item.split(",") if n.strip())


# ---------------------------------------------------------------------------- metastore

@contextmanager
def _store(metastore: MetastoreRef, location: str, *, create: bool) -> Iterator[Metastore]:
    if isinstance(metastore, Metastore):
        yield metastore
        return
    store = Metastore.open(metastore or default_metastore_url(location), create=create)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _open_table(
    location: str, metastore: MetastoreRef,
) -> Iterator[tuple[Metastore, TableDefinition]]:
    """The metastore holding the table at `location` (its root) and the table's definition."""
    if metastore is None:
        store, defn = find_metastore_for(location)
        try:
            _check_root(defn, location)
            yield store, defn
        finally:
            store.close()
        return
    with _store(metastore, location, create=False) as store:
        defn = store.get_table(normalize_location(location))
        yield store, defn


def _check_root(defn: TableDefinition, location: str) -> None:
    if defn.location != normalize_location(location):
        raise ConfigError(
            f"{location} is inside table {defn.name}, not its root {defn.location}",
            hint=f"give the table root: {defn.location}")


def _table_fs(defn: TableDefinition) -> tuple[fsspec.AbstractFileSystem, str]:
    fs, root = fsspec.core.url_to_fs(defn.location)
    return fs, str(root).rstrip("/")


def _agent(what: str) -> str:
    return f"{socket.gethostname()}:{os.getpid()}:ingest-{what}"


def table_schema(defn: TableDefinition) -> pa.Schema:
    """Row columns followed by partition columns (strings): what a load's input holds."""
    return pa.schema(list(defn.row_schema) + [pa.field(c, pa.string())
                                              for c in defn.partition_columns])


# ---------------------------------------------------------------------------- load

def load(
    location: str,
    data: pa.Table,
    *,
    metastore: MetastoreRef = None,
    agent: str = "",
    compression: Compression | None = None,
) -> LoadResult:
    """Insert rows into a table in one transaction (Hive's INSERT INTO).

    The data is checked and cast to the table's columns first (nothing is written if any
    column does not fit), split by partition values (null or '' go to
    `__HIVE_DEFAULT_PARTITION__`) and by bucket (bucketing v2; unbucketed tables use
    bucket 0), and written as `<partition>/delta_W_W_0000/bucket_N` plus
    `_orc_acid_version`; all files are closed before the commit.

    Args:
        location: the table root.
        data: row and partition columns, in any order; names match case-insensitively.
        metastore: as for `create_table`; default: found from the location.
        agent: recorded with the transaction; default host:pid:ingest-load.
        compression: ORC codec; default the table's `orc.compress` property, else zlib.

    Returns:
        Counts, files and the write id (None for an empty input: nothing is committed).

    Raises:
        TableNotFoundError: no table at `location`.
        SchemaMismatchError: columns are missing or extra, or values do not fit their types.
        CommitConflictError: the transaction was aborted meanwhile (e.g. timed out).
        MetastoreError: the metastore failed.
    """
    with _open_table(location, metastore) as (store, defn):
        rows, partitions = _conform(data, defn)
        codec = compression or _table_compression(defn)
        if rows.num_rows == 0:
            return LoadResult(defn.name, defn.location, None, 0, (), (), 0)
        fs, root = _table_fs(defn)
        parts: list[str] = []
        with _writing(store, defn, fs, agent=agent or _agent("load")) as (txn, written):
            w = txn.write_id
            for part, bucket, chunk in _split(rows, partitions, defn):
                directory = _join(root, part, format_delta(w, w, 0))
                if directory not in written.directories:
                    written.make_directory(_join(root, part), directory)
                    parts.append(part)
                written.write_bucket(directory, bucket, chunk, row_schema=defn.row_schema,
                                     write_id=w, compression=codec)
                store.heartbeat(txn)
        _commit(store, txn, written)
        return LoadResult(defn.name, defn.location, w, rows.num_rows,
                          tuple(fs.unstrip_protocol(p) for p in written.files), tuple(parts),
                          written.bytes)


def load_file(
    location: str,
    input_path: str,
    *,
    format: InputFormat | None = None,
    metastore: MetastoreRef = None,
    agent: str = "",
) -> LoadResult:
    """`read_input` with the table's column types, then `load`.

    Raises:
        As `read_input` and `load`.
    """
    with _open_table(location, metastore) as (store, defn):
        data = read_input(input_path, format=format, schema=table_schema(defn))
        return load(defn.location, data, metastore=store, agent=agent)


def _table_compression(defn: TableDefinition) -> Compression:
    return parse_codec(defn.properties.get("orc.compress", "zlib"),
                       where=f"Cannot load into {defn.name}: table property orc.compress=")


def _conform(data: pa.Table, defn: TableDefinition) -> tuple[pa.Table, pa.Table]:
    """(rows cast to the row schema, partition columns as strings), or SchemaMismatchError."""
    target = table_schema(defn)
    found: dict[str, str] = {}
    problems: list[str] = []
    for column in data.column_names:
        exact = column if column in target.names else None
        folded = [n for n in target.names if n.lower() == column.lower()]
        match = exact or (folded[0] if len(folded) == 1 else None)
        if match is None:
            problems.append(f"column {column!r} is not in the table")
        elif match in found:
            problems.append(f"columns {found[match]!r} and {column!r} both name {match!r}")
        else:
            found[match] = column
    problems += [f"column {f.name!r} ({_ddl_type(f)}) is missing" for f in target
                 if f.name not in found]
    arrays: dict[str, pa.ChunkedArray] = {}
    for field in target:
        if field.name not in found:
            continue
        column = data.column(found[field.name])
        try:
            arrays[field.name] = column.cast(field.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            problems.append(f"column {field.name!r} is {column.type} and cannot be converted "
                            f"to {_ddl_type(field)}: {e}")
    if problems:
        raise SchemaMismatchError(
            f"Cannot load {data.num_rows:,} rows into {defn.name}: " + "; ".join(problems),
            hint=f"the table's columns are: {to_ddl(defn.row_schema)}"
            + (f"; partitioned by {', '.join(defn.partition_columns)} (STRING)"
               if defn.partition_columns else ""))
    rows = pa.Table.from_arrays([arrays[f.name] for f in defn.row_schema],
                                schema=defn.row_schema)
    parts = pa.table({c: arrays[c] for c in defn.partition_columns})
    return rows, parts


def _ddl_type(field: pa.Field) -> str:
    return to_ddl(pa.schema([field])).split(" ", 1)[1]


def _split(rows: pa.Table, partitions: pa.Table,
           defn: TableDefinition) -> Iterator[tuple[str, int, pa.Table]]:
    """(partition path, bucket id, rows) groups, each keeping the input order."""
    n = rows.num_rows
    part_of_row = np.zeros(n, dtype=np.int64)
    names: list[str] = [""]
    if defn.partition_columns:
        codes, values = [], []
        for column in partitions.columns:
            column = pc.if_else(pc.equal(column, ""), pa.scalar(None, pa.string()), column)
            encoded = pc.dictionary_encode(column.combine_chunks(), null_encoding="encode")
            codes.append(encoded.indices.to_numpy(zero_copy_only=False))
            values.append(encoded.dictionary.to_pylist())
        unique, part_of_row = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
        part_of_row = part_of_row.reshape(-1)
        names = [partition_path(defn.partition_columns,
                                [values[i][code] for i, code in enumerate(combo)])
                 for combo in unique]
    if defn.bucket_count:
        buckets = bucket_ids(rows, defn.bucket_columns, defn.bucket_count).to_numpy(
            zero_copy_only=False).astype(np.int64)
    else:
        buckets = np.zeros(n, dtype=np.int64)
    key = part_of_row * MAX_BUCKET_COUNT + buckets
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    for start, end in zip(starts, np.r_[starts[1:], n], strict=True):
        k = int(ordered[start])
        part, bucket = divmod(k, MAX_BUCKET_COUNT)
        yield names[part], bucket, rows.take(pa.array(order[start:end]))


def partition_path(columns: Sequence[str], values: Sequence[str | None]) -> str:
    """Hive's partition directory, e.g. ``dt=2026-01-01/country=__HIVE_DEFAULT_PARTITION__``.

    Names and values are escaped as Hive's FileUtils.escapePathName does (``/`` → ``%2F``);
    a null or empty value is the default partition (`ingest.acid.names.format_partition`).
    """
    return "/".join(format_partition(c, v) for c, v in zip(columns, values, strict=True))


def _join(root: str, *parts: str) -> str:
    return "/".join([root, *(p for p in parts if p)])


# ---------------------------------------------------------------------------- transactions

class _Written:
    """Directories and files a transaction created, to remove if it does not commit."""

    def __init__(self, fs: fsspec.AbstractFileSystem) -> None:
        self.fs = fs
        self.directories: list[str] = []  # our delta / delete_delta dirs (named by write id)
        self.parents: list[str] = []  # partition dirs this call created
        self.files: list[str] = []
        self.bytes = 0

    def make_directory(self, parent: str, directory: str) -> None:
        missing, p = [], parent
        while p and not self.fs.exists(p):
            missing.append(p)
            p = p.rsplit("/", 1)[0]
        self.directories.append(directory)
        self.parents.extend(missing)  # deepest first
        self.fs.makedirs(directory, exist_ok=True)
        write_acid_version_file(self.fs, directory)

    def write_bucket(self, directory: str, bucket_id: int, data: pa.Table, *,
                     row_schema: pa.Schema, write_id: int, compression: Compression,
                     deletes: bool = False) -> None:
        """Write `directory/bucket_N`: `data` as insert events, or (deletes=True) as the keys
        of delete events (originalTransaction, bucket, rowId); count its files and bytes."""
        path = f"{directory}/{bucket_file_name(bucket_id)}"
        writer = BucketWriter.create(path, BucketFileOptions(
            write_id=write_id, row_schema=row_schema, bucket_id=bucket_id,
            kind="delete" if deletes else "insert", compression=compression), fs=self.fs)
        self.files.append(path)
        with writer:
            if deletes:
                writer.write_deletes(data)
            else:
                writer.write(data)
        self.bytes += writer.bytes_written

    def remove(self) -> None:
        for directory in self.directories:
            if self.fs.exists(directory):
                self.fs.rm(directory, recursive=True)
        _remove_empty_dirs(self.fs, self.parents)


def _remove_empty_dirs(fs: fsspec.AbstractFileSystem, directories: Sequence[str]) -> None:
    for directory in directories:
        try:
            if not fs.ls(directory):
                fs.rmdir(directory)
        except (OSError, NotImplementedError):
            pass  # another writer is using it, or the store has no directories


@contextmanager
def _writing(store: Metastore, defn: TableDefinition, fs: fsspec.AbstractFileSystem, *,
             agent: str) -> Iterator[tuple[Transaction, _Written]]:
    """Open a transaction and track what it writes; an error inside the block removes the
    files and aborts it (`_fail`). Committing (`_commit`) or aborting an empty write is the
    caller's, after the block."""
    txn = store.open_transaction(defn, agent=agent)
    written = _Written(fs)
    try:
        yield txn, written
    except BaseException as e:
        _fail(store, txn, written, e)
        raise


def _fail(store: Metastore, txn: Transaction, written: _Written, error: BaseException) -> None:
    """Remove what the transaction wrote, then abort it (files first: nothing stays behind)."""
    try:
        written.remove()
    except OSError as e:
        error.add_note(f"Also failed to remove files of write id {txn.write_id}: {e}")
    try:
        store.abort(txn, reason=f"aborted on error: {type(error).__name__}: {error}")
    except IngestError as e:
        error.add_note(f"Also failed to abort transaction {txn.txn_id}: {e}")


def _commit(store: Metastore, txn: Transaction, written: _Written) -> None:
    try:
        store.commit(txn)
    except BaseException as e:
        # Remove files only once the transaction is known not to be committed.
        try:
            store.abort(txn, reason=f"commit failed: {type(e).__name__}: {e}")
        except CommitConflictError:
            raise e from None  # abort refused: it is committed after all, keep the files
        except IngestError as abort_error:
            e.add_note(f"Also failed to abort transaction {txn.txn_id}: {abort_error}")
            raise
        try:
            written.remove()
        except OSError as rm_error:
            e.add_note(f"Also failed to remove files of write id {txn.write_id}: {rm_error}")
        raise


# ---------------------------------------------------------------------------- delete

def delete(
    location: str,
    where: str,
    *,
    metastore: MetastoreRef = None,
    agent: str = "",
    dry_run: bool = False,
    compression: Compression | None = None,
) -> DeleteResult:
    """Delete the rows matching `where` in one transaction (Hive's DELETE ... WHERE).

    Reads the table's current snapshot with row ids, keeps the rows matching the predicate
    (partition columns included, as strings; the default partition reads as null) and writes
    their keys as delete events to `<partition>/delete_delta_W_W_0000/bucket_N`, N being the
    bucket id decoded from each row's bucket property. If nothing matches, the transaction
    is aborted and nothing is written.

    Args:
        location: the table root.
        where: the predicate, see `ingest.acid.predicate.parse_predicate`.
        metastore: as for `load`.
        agent: recorded with the transaction; default host:pid:ingest-delete.
        dry_run: only count the matching rows; no transaction, nothing written.
        compression: as for `load`.

    Returns:
        How many rows were deleted (or would be), the write id and the files.

    Raises:
        ConfigError: `where` cannot be parsed or does not fit the table's columns.
        TableNotFoundError: no table at `location`.
        CorruptFileError: a data file of the snapshot cannot be read.
        CommitConflictError: the transaction was aborted meanwhile.
        MetastoreError: the metastore failed.
    """
    with _open_table(location, metastore) as (store, defn):
        predicate = parse_predicate(where, table_schema(defn))
        codec = compression or _table_compression(defn)
        fs, root = _table_fs(defn)
        if dry_run:
            snapshot = store.snapshot(defn)
            count = sum(k.num_rows for _, k in _matching_keys(fs, root, defn, predicate, snapshot))
            return DeleteResult(defn.name, defn.location, where, None, count, (), (), True)
        parts: list[str] = []
        count = 0
        with _writing(store, defn, fs, agent=agent or _agent("delete")) as (txn, written):
            w = txn.write_id
            # Taken after opening: every transaction committed before ours is visible.
            snapshot = store.snapshot(defn)
            for part, keys in _matching_keys(fs, root, defn, predicate, snapshot):
                directory = _join(root, part, format_delta(w, w, 0, delete=True))
                written.make_directory(_join(root, part), directory)
                parts.append(part)
                count += keys.num_rows
                for bucket, bucket_keys in _by_bucket(keys):
                    written.write_bucket(directory, bucket, bucket_keys,
                                         row_schema=defn.row_schema, write_id=w,
                                         compression=codec, deletes=True)
                store.heartbeat(txn)
        if count == 0:
            store.abort(txn, reason=f"delete matched no rows: {where}")
            return DeleteResult(defn.name, defn.location, where, None, 0, (), (), False)
        _commit(store, txn, written)
        return DeleteResult(defn.name, defn.location, where, w, count,
                            tuple(fs.unstrip_protocol(p) for p in written.files), tuple(parts),
                            False)


def _matching_keys(fs: fsspec.AbstractFileSystem, root: str, defn: TableDefinition,
                   predicate: Predicate, snapshot: ValidWriteIdList,
                   ) -> Iterator[tuple[str, pa.Table]]:
    """(partition path relative to root, keys of matching rows) per partition with matches."""
    for partition in list_partitions(root, fs=fs):
        # All columns: with no data file yet the reader cannot type a column subset.
        table = read_table(partition.path, snapshot, with_row_id=True, fs=fs)
        if table.num_rows == 0:
            continue
        matched = table.filter(predicate.expression)
        if matched.num_rows == 0:
            continue
        row_id = matched.column(ROW_ID_COLUMN).combine_chunks()
        part = partition.path[len(root):].strip("/")
        yield part, pa.table({ORIGINAL_TRANSACTION: row_id.field("writeid"),
                              BUCKET: row_id.field("bucketid"),
                              ROW_ID: row_id.field("rowid")})


def _by_bucket(keys: pa.Table) -> Iterator[tuple[int, pa.Table]]:
    properties = keys.column(BUCKET).to_numpy()
    ids = np.array([decode_bucket_property(int(v))[1] for v in properties], dtype=np.int64)
    for bucket in np.unique(ids):
        yield int(bucket), keys.filter(pa.array(ids == bucket))


__all__ = [
    "DEFAULT_PARTITION_NAME",
    "DeleteResult",
    "InputFormat",
    "LoadResult",
    "MetastoreRef",
    "create_table",
    "delete",
    "load",
    "load_file",
    "partition_path",
    "read_input",
    "table_schema",
]
