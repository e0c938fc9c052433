"""Hidden side tables in a Hive Metastore: full-ACID ORC tables of ours kept beside a target
table and written in the target's own HMS transactions (docs/invariants.md, 8.11).

A side table of target `db.t` is `db.t__ingest_<kind>` at `<t's location>/_ingest_<kind>`:
hidden from Hive's, Trino's and our own readers of `t` (a `_` directory), inside `t`'s managed
location as Hive 4 wants. A transaction allocates a write id P on it, writes one delta
`delta_P_P_0000/bucket_00000` and commits; the rows are committed exactly when the rest of the
transaction is. Reading is reading its committed snapshot with our reader, each committed
delta once per process (`SideRows`). Used by `progress.py` and `manifest.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import pyarrow as pa

from ingest.acid import (
    BucketFileOptions,
    BucketWriter,
    ValidWriteIdList,
    format_delta,
    read_bucket_file,
    read_table,
    write_acid_version_file,
)
from ingest.errors import TableExistsError, TableNotFoundError
from ingest.io import storage
from ingest.txn.hms.thrift import (
    HiveTable,
    HiveTableSpec,
    HmsConnection,
    create_table,
    get_table,
    hive_columns,
)
from ingest.txn.locations import normalize_location

MARK = "__ingest_"
"""Every side table's name is its target's name, this mark and its kind."""

R = TypeVar("R")


@dataclass(frozen=True)
class SideTable:
    """One kind of side table.

    Attributes:
        kind: `progress`, `files`: the name's suffix after `__ingest_` and the directory's
            after `_ingest_`.
        schema: its columns.
        of_property: the table parameter naming the target.
        holds: what it holds, for its comment ("the streaming progress").
    """

    kind: str
    schema: pa.Schema
    of_property: str
    holds: str

    @property
    def suffix(self) -> str:
        return MARK + self.kind

    @property
    def directory(self) -> str:
        return "_ingest_" + self.kind

    def name(self, target: str) -> str:
        """`db.t__ingest_<kind>` for target `db.t`."""
        return target + self.suffix

    def location(self, target_location: str) -> str:
        """`<target location>/_ingest_<kind>`, hidden inside the target's directory."""
        return target_location.rstrip("/") + "/" + self.directory

    def find(self, conn: HmsConnection, target: HiveTable) -> HiveTable | None:
        """The target's side table of this kind, or None when nothing wrote one yet.

        Raises:
            MetastoreError: the metastore failed.
        """
        try:
            return get_table(conn, self.name(target.name))
        except TableNotFoundError:
            return None

    def ensure(self, conn: HmsConnection, target: HiveTable) -> HiveTable:
        """The target's side table, registered first when missing (another writer may race
        us to it: its table is as good as ours).

        Raises:
            ConfigError: the server refused the definition.
            MetastoreError: the metastore failed.
        """
        found = self.find(conn, target)
        if found is not None:
            return found
        spec = HiveTableSpec(self.name(target.name), hive_columns(self.schema),
                             location=self.location(target.location),
                             properties={self.of_property: target.name,
                                         "comment": f"ingest: {self.holds} of {target.name}, "
                                                    "committed with its data"})
        try:
            return create_table(conn, spec)
        except TableExistsError:
            return get_table(conn, spec.name)


def is_side_table(name: str) -> bool:
    """Whether `name` names a side table (by its mark), which no command treats as a target."""
    return MARK in name.rsplit(".", 1)[-1]


def write_delta(table: HiveTable, write_id: int, rows: pa.Table) -> str:
    """Write `rows` as the one delta of write id `write_id` of side table `table`; returns the
    bucket file's path. Durable when this returns (the writer's close flushes it).

    Raises:
        FileExistsError: the delta's bucket file exists (never for a freshly allocated id).
        OSError: the storage failed.
    """
    fs, root = storage.url_to_fs(normalize_location(table.location))
    directory = f"{str(root).rstrip('/')}/{format_delta(write_id, write_id, 0)}"
    path = f"{directory}/bucket_00000"
    writer = BucketWriter.create(path, BucketFileOptions(write_id=write_id,
                                                         row_schema=rows.schema,
                                                         compression="zlib"), fs=fs)
    try:
        writer.write(rows)
    finally:
        writer.close()
    write_acid_version_file(fs, directory)
    return path


class SideRows(Generic[R]):
    """Committed rows of side tables, decoded, read once per committed write id.

    A committed delta never changes, so each is read once: a lookup reads the deltas of write
    ids committed since the last one, each straight from `delta_P_P_0000` (one small file per
    commit, not the whole table again). When one is missing (Hive's compactor merged it), the
    whole committed snapshot is read with our reader instead.
    """

    def __init__(self, schema: pa.Schema, decode: Callable[[pa.Table], list[R]]) -> None:
        """`decode` turns a table of `schema`'s columns into one value per row, in order."""
        self._schema = schema
        self._decode = decode
        self._lock = threading.Lock()
        self._rows: dict[str, dict[int, list[R]]] = {}

    def by_write_id(self, table: HiveTable,
                    snapshot: ValidWriteIdList) -> list[tuple[int, list[R]]]:
        """Every committed write id of side table `table` as of `snapshot` (its own), with its
        rows, ascending.

        Raises:
            CorruptFileError: a committed delta does not read.
            OSError: the storage failed.
        """
        location = normalize_location(table.location)
        key = f"{table.name}@{location}"
        committed = [w for w in range(1, snapshot.high_watermark + 1) if snapshot.is_valid(w)]
        with self._lock:
            known = self._rows.setdefault(key, {})
            missing = [w for w in committed if w not in known]
        if missing:
            fresh = self._read(location, snapshot, missing, committed)
            with self._lock:
                known.update(fresh)
        with self._lock:
            return [(w, list(known.get(w, ()))) for w in committed]

    def rows(self, table: HiveTable, snapshot: ValidWriteIdList) -> list[R]:
        """Every committed row of side table `table` as of `snapshot`, by write id.

        Raises:
            CorruptFileError: a committed delta does not read.
            OSError: the storage failed.
        """
        return [r for _, rows in self.by_write_id(table, snapshot) for r in rows]

    def _decoded(self, table: pa.Table) -> list[R]:
        return self._decode(table.select(self._schema.names)) if table.num_rows else []

    def _read(self, location: str, snapshot: ValidWriteIdList, missing: list[int],
              committed: list[int]) -> dict[int, list[R]]:
        fs, root = storage.url_to_fs(location)
        fresh: dict[int, list[R]] = {}
        for w in missing:
            path = f"{str(root).rstrip('/')}/{format_delta(w, w, 0)}/bucket_00000"
            if not fs.exists(path):
                break
            struct = read_bucket_file(path, fs=fs).column("row").combine_chunks()
            fresh[w] = self._decoded(pa.Table.from_struct_array(struct)) if len(struct) else []
        else:
            return fresh
        # Compacted (or otherwise laid out differently): the whole snapshot, by write id.
        table = read_table(location, snapshot, with_row_id=True)
        ids = [r["writeid"] for r in table.column("row__id").to_pylist()]
        by_id: dict[int, list[R]] = {w: [] for w in committed}
        for w, row in zip(ids, self._decoded(table), strict=True):
            by_id.setdefault(int(w), []).append(row)
        return by_id


__all__ = ["MARK", "SideRows", "SideTable", "is_side_table", "write_delta"]
