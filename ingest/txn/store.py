"""The metastore: tables, snapshots (valid write-id lists) and sink progress.

Mirrors Hive's metastore `createTable`/`getTable`/`dropTable` and `TxnHandler.getValidWriteIds`
over one database several processes share (a SQLite file or PostgreSQL); it inherits the
transaction lifecycle (`_lifecycle`), registered readers (`readers`), the compaction history
(`compactions`) and the committed-file manifest (`manifest`); the SQL plumbing is in `_db` and
`_connect`. Knows nothing of ORC bytes or Spark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from ingest.acid.read_view import ReadView
from ingest.acid.writeids import ValidWriteIdList
from ingest.errors import CommitConflictError, ConfigError, TableExistsError
from ingest.txn._db import MEMORY_URL, TABLE_COLUMNS, TableRef, table_from_row, table_key
from ingest.txn._schema import (
    committed_files,
    sink_progress,
    tables,
    txn_offsets,
    txn_to_write_id,
    txns,
)
from ingest.txn.compactions import CompactionStore
from ingest.txn.manifest import MANIFEST_VERSION, ManifestStore
from ingest.txn.model import (
    TXN_STATES,
    OffsetRange,
    TableDefinition,
    TransactionInfo,
    TxnState,
)
from ingest.txn.readers import READER_HEARTBEAT_S, ReaderRegistry, valid_write_ids


class Metastore(ReaderRegistry, CompactionStore, ManifestStore):
    """Transactional-table metadata in one SQLite or PostgreSQL database; see the module
    docstring.

    Open one with `Metastore.open(url)`. One object may be shared by a process's threads; any
    number of processes (on any number of hosts, for PostgreSQL) may open the same one.
    """

    # -- tables ----------------------------------------------------------------------------

    def create_table(self, defn: TableDefinition, *, next_write_id: int = 1) -> TableDefinition:
        """Record a new transactional table.

        Args:
            defn: the table.
            next_write_id: the first write id to hand out; above 1 when the table adopts
                data already on disk, so no new write reuses an id found there.

        Returns:
            The definition as stored.

        Raises:
            ConfigError: next_write_id < 1.
            TableExistsError: a table with that name or location exists.
            MetastoreError: the database failed.
        """
        if next_write_id < 1:
            raise ConfigError(f"Cannot create table {defn.name}: next write id {next_write_id} "
                              "must be at least 1")
        with self._translate(f"create table {defn.name}"), self._write() as c:
            for column, value in (("name", defn.name), ("location", defn.location)):
                found = self._select_table(c, column, value)
                if found is not None:
                    raise TableExistsError(
                        f"Cannot create table {defn.name} at {defn.location}: table "
                        f"{found.name} already exists at {found.location}",
                        table=found.name,
                        hint="choose another name or location, or drop the existing table",
                    )
            c.execute(sa.insert(tables).values(
                name=defn.name,
                location=defn.location,
                row_schema=defn.row_schema.serialize().to_pybytes(),
                partition_columns=json.dumps(list(defn.partition_columns)),
                bucket_count=defn.bucket_count,
                bucket_columns=json.dumps(list(defn.bucket_columns)),
                properties=json.dumps(defn.properties, sort_keys=True),
                next_write_id=next_write_id,
                created_at=self._clock(),
            ))
        return defn

    def set_properties(self, table: TableRef, properties: dict[str, str]) -> TableDefinition:
        """Set table properties (Hive's ALTER TABLE ... SET TBLPROPERTIES); others are kept.

        Returns:
            The definition as stored afterwards.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        with self._translate("alter table"), self._write() as c:
            name = self._resolve(c, table)
            found = self._select_table(c, "name", name)
            if found is None:
                raise self._not_found(table)
            merged = {**found.properties, **properties}
            c.execute(sa.update(tables).where(tables.c.name == name)
                      .values(properties=json.dumps(merged, sort_keys=True)))
            updated = self._select_table(c, "name", name)
        if updated is None:
            raise self._not_found(table)
        return updated

    def find_table(self, table: TableRef) -> TableDefinition | None:
        """The table with this name or location, or None.

        Raises:
            MetastoreError: the database failed.
        """
        column, value = table_key(table)
        with self._translate("read tables"), self._read() as c:
            return self._select_table(c, column, value)

    def get_table(self, table: TableRef) -> TableDefinition:
        """The table with this name or location.

        Raises:
            TableNotFoundError: no such table in this metastore.
            MetastoreError: the database failed.
        """
        found = self.find_table(table)
        if found is None:
            raise self._not_found(table)
        return found

    def list_tables(self) -> list[TableDefinition]:
        """Every table, ordered by name.

        Raises:
            MetastoreError: the database failed.
        """
        with self._translate("list tables"), self._read() as c:
            rows = c.execute(sa.select(*TABLE_COLUMNS)).all()
        # Sorted here: the database's collation (PostgreSQL's locale) may order otherwise.
        return [table_from_row(row) for row in sorted(rows, key=lambda r: r[0])]

    def drop_table(self, table: TableRef) -> None:
        """Forget a table, its write ids, sink progress and committed-file entries. Files are
        not touched.

        Raises:
            TableNotFoundError: no such table.
            CommitConflictError: a transaction writing the table is still open.
            MetastoreError: the database failed.
        """
        with self._translate("drop table"), self._write() as c:
            name = self._resolve(c, table)
            open_txns = list(c.execute(
                sa.select(txn_to_write_id.c.txn_id)
                .join(txns, txns.c.txn_id == txn_to_write_id.c.txn_id)
                .where(txn_to_write_id.c.table_name == name, txns.c.state == "open")
                .order_by(txn_to_write_id.c.txn_id)).scalars())
            if open_txns:
                raise CommitConflictError(
                    f"Cannot drop table {name}: transactions {open_txns} writing it are open",
                    hint="stop the writers or abort the transactions first",
                )
            c.execute(sa.delete(sink_progress).where(sink_progress.c.table_name == name))
            if self.schema_version >= MANIFEST_VERSION:
                c.execute(sa.delete(committed_files).where(committed_files.c.table_name == name))
            c.execute(sa.delete(txn_to_write_id).where(txn_to_write_id.c.table_name == name))
            c.execute(sa.delete(tables).where(tables.c.name == name))

    # -- snapshots and progress ------------------------------------------------------------

    def snapshot(self, table: TableRef) -> ValidWriteIdList:
        """The table's valid write-id list now (Hive's getValidWriteIds).

        The high watermark is the highest write id allocated; open and aborted ids are listed.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        with self._translate("read a snapshot"), self._read() as c:
            return valid_write_ids(c, self._resolve(c, table))

    @contextmanager
    def read_view(
        self, table: TableRef, *, agent: str, snapshot: ValidWriteIdList | None = None,
        heartbeat_s: float = READER_HEARTBEAT_S, keep_lease: bool = False,
    ) -> Iterator[ReadView]:
        """The table as of its committed snapshot, leased until the block ends.

        The one call every reader makes: the snapshot and its lease are one write transaction
        (`leased_snapshot`), the manifest is read before it and the compactor's visibility
        after it (a compaction committed in between only adds an output the snapshot's own
        write-id checks accept, and the lease keeps its inputs either way). With `snapshot`
        given (a caller's own, e.g. an older one), that snapshot is used unleased. With
        `keep_lease`, a block that ends without an exception leaves the lease registered for
        the processes that go on reading (`leased_snapshot`).

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        name = self.get_table(table).name
        committed = self.committed_files(name)
        if snapshot is not None:
            yield ReadView(name, snapshot, committed, self.compactor_visibility(name))
            return
        with self.leased_snapshot(name, agent=agent, heartbeat_s=heartbeat_s,
                                  keep_lease=keep_lease) as (lease, taken):
            yield ReadView(name, taken, committed, self.compactor_visibility(name), lease)

    def write_id_states(self, table: TableRef) -> dict[int, TxnState]:
        """Every allocated write id of the table mapped to its transaction's state.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        return {info.write_id: info.state for info in self.transactions(table)}

    def transactions(
        self, table: TableRef | None = None, *, states: Iterable[TxnState] = TXN_STATES
    ) -> list[TransactionInfo]:
        """One row per (transaction, table), by txn id; only `table`'s rows if given.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        w = txn_to_write_id
        query = (sa.select(txns.c.txn_id, w.c.table_name, w.c.write_id, txns.c.state,
                           txns.c.agent, txns.c.opened_at, txns.c.heartbeat_at,
                           txns.c.finished_at, txns.c.reason, w.c.is_primary)
                 .join(w, w.c.txn_id == txns.c.txn_id)
                 .where(txns.c.state.in_(list(states))))
        with self._translate("list transactions"), self._read() as c:
            if table is not None:
                query = query.where(w.c.table_name == self._resolve(c, table))
            rows = list(c.execute(query).all())
        rows.sort(key=lambda r: (r[0], -r[9], r[1]))
        return [TransactionInfo(*row[:9]) for row in rows]

    def committed_write_id(self, sink_id: str, batch_id: int) -> int | None:
        """The write id that committed this micro-batch of this sink, or None.

        Raises:
            MetastoreError: the database failed.
        """
        with self._translate("read sink progress"), self._read() as c:
            found = c.execute(
                sa.select(sink_progress.c.write_id)
                .where(sink_progress.c.sink_id == sink_id, sink_progress.c.batch_id == batch_id)
            ).scalar()
        return None if found is None else int(found)

    def last_committed_batch(self, sink_id: str) -> int | None:
        """The highest batch id this sink committed, or None.

        Raises:
            MetastoreError: the database failed.
        """
        with self._translate("read sink progress"), self._read() as c:
            found = c.execute(
                sa.select(sa.func.max(sink_progress.c.batch_id))
                .where(sink_progress.c.sink_id == sink_id)).scalar()
        return None if found is None else int(found)

    def offset_ranges(self, table: TableRef) -> list[tuple[int, OffsetRange]]:
        """Kafka ranges of committed transactions that wrote `table`, with the write id.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        with self._translate("read offsets"), self._read() as c:
            name = self._resolve(c, table)
            o, w = txn_offsets, txn_to_write_id
            rows = list(c.execute(
                sa.select(w.c.write_id, o.c.topic, o.c.partition, o.c.from_offset,
                          o.c.until_offset)
                .join(w, w.c.txn_id == o.c.txn_id).where(w.c.table_name == name)).all())
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
        return [(int(row[0]), OffsetRange(*row[1:])) for row in rows]


__all__ = ["MEMORY_URL", "Metastore", "TableRef"]
