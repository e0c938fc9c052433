"""Delete rows by predicate in one transaction (Hive's DELETE ... WHERE with split-update).

Reads the table's snapshot with row ids, and writes the keys of the matching rows as delete
events to `<partition>/delete_delta_W_W_0000/bucket_N`; the files of a delete that does not
commit are removed (`_written`). Talks to the metastore through `ingest.txn`, reads and
writes ORC through `ingest.acid`; the CLI's `ingest delete`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import fsspec
import numpy as np
import pyarrow as pa

from ingest.acid.format import (
    BUCKET,
    ORIGINAL_TRANSACTION,
    ROW_ID,
    CommittedFiles,
    ValidWriteIdList,
    decode_bucket_property,
    format_delta,
)
from ingest.acid.predicate import Predicate, parse_predicate
from ingest.acid.read import ROW_ID_COLUMN, open_plan, start_merge
from ingest.acid.write import Compression
from ingest.records import split_rows
from ingest.table.core import (
    ResolvedTable,
    agent_name,
    commit,
    join_path,
    table_compression,
    table_manifest,
    table_schema,
    writing,
)


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


def delete(
    table: ResolvedTable,
    where: str,
    *,
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
        table: the table, opened at its root (`ingest.open_table`).
        where: the predicate, see `ingest.acid.predicate.where.parse_predicate`.
        agent: recorded with the transaction; default host:pid:ingest-delete.
        dry_run: only count the matching rows; no transaction, nothing written.
        compression: as for `load`.

    Returns:
        How many rows were deleted (or would be), the write id and the files.

    Raises:
        ConfigError: `where` cannot be parsed or does not fit the table's columns; the table
            was opened without a metastore or at a partition.
        TableNotFoundError: the metastore no longer lists the table.
        CorruptFileError: a data file of the snapshot cannot be read, or differs from what
            its commit recorded.
        CommitConflictError: the transaction was aborted meanwhile.
        MetastoreError: the metastore failed.
    """
    with table.to_write("delete rows") as (store, defn):
        predicate = parse_predicate(where, table_schema(defn))
        codec = compression or table_compression(defn)
        fs, root = table.fs, table.path
        if dry_run:
            snapshot = store.snapshot(defn)
            count = sum(k.num_rows for _, k in _matching_keys(
                fs, root, predicate, snapshot, table_manifest(store, defn), defn.row_schema))
            return DeleteResult(defn.name, defn.location, where, None, count, (), (), True)
        parts: list[str] = []
        count = 0
        with writing(store, defn, fs, agent=agent or agent_name("delete"),
                     operation="delete") as (txn, written):
            w = txn.write_id
            # Taken after opening (and its DELETE lock): every transaction committed before
            # ours is visible, a concurrent delete's too.
            snapshot = store.snapshot(defn)
            manifest = table_manifest(store, defn)
            for part, keys in _matching_keys(fs, root, predicate, snapshot, manifest,
                                             defn.row_schema):
                directory = join_path(root, part, format_delta(w, w, 0, delete=True))
                written.make_directory(join_path(root, part), directory)
                parts.append(part)
                count += keys.num_rows
                for _, bucket, bucket_keys in split_rows(keys, bucket_ids=_bucket_ids(keys)):
                    written.write_bucket(directory, bucket, bucket_keys,
                                         row_schema=defn.row_schema, write_id=w,
                                         compression=codec, deletes=True)
                store.heartbeat(txn)
        if count == 0:
            store.abort(txn, reason=f"delete matched no rows: {where}")
            return DeleteResult(defn.name, defn.location, where, None, 0, (), (), False)
        commit(store, txn, written, updates=True)
        return DeleteResult(defn.name, defn.location, where, w, count,
                            tuple(fs.unstrip_protocol(p) for p in written.files), tuple(parts),
                            False)


def _matching_keys(fs: fsspec.AbstractFileSystem, root: str, predicate: Predicate,
                   snapshot: ValidWriteIdList, manifest: CommittedFiles,
                   row_schema: pa.Schema) -> Iterator[tuple[str, pa.Table]]:
    """(partition path relative to root, keys of matching rows) per partition with matches.

    The whole table is planned and checked against the manifest before any key is found, so
    a damaged or missing committed file fails the delete before it writes anything."""
    fs, plan = open_plan(root, snapshot, fs, committed=manifest, stacklevel=2)
    # The table's columns (files written before a schema change read under them).
    merger = start_merge(fs, plan, row_schema=row_schema, with_row_id=True)
    parts = plan.by_partition()
    for partition, files in parts:
        table = pa.Table.from_batches(
            list(merger.partition_batches(dict(partition.values), files)), schema=merger.schema)
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


def _bucket_ids(keys: pa.Table) -> np.ndarray:
    """The bucket id each key's bucket property encodes (decoded once per distinct value)."""
    properties, of_row = np.unique(keys.column(BUCKET).to_numpy(), return_inverse=True)
    ids = np.array([decode_bucket_property(int(v))[1] for v in properties], dtype=np.int64)
    return ids[of_row.reshape(-1)]


__all__ = ["DeleteResult", "delete"]
