"""`SqlMetastore`: the `Metastore` kept in one SQL database (a SQLite file, SQLite in memory,
or PostgreSQL shared by several hosts).

Built by composition: one `Database` (the connection, its transactions, table-name lookup)
shared by small parts that each own some of the tables: `Tables`, `Transactions`,
`Progress`, `Readers`, `Compactions` and `Manifest`. This class only opens the database and
hands each call to its part; the contract of every method is `Metastore`'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Literal, Self

import pyarrow as pa

from ingest.acid.format import CommittedFile, ValidWriteIdList
from ingest.txn.metastore import READER_HEARTBEAT_S, Metastore
from ingest.txn.model import (
    TXN_STATES,
    CompactionInfo,
    CompactorVisibility,
    MetastoreCapabilities,
    OffsetRange,
    ReaderInfo,
    SinkProgress,
    TableDefinition,
    TableIdentifier,
    Transaction,
    TransactionInfo,
    TxnState,
)
from ingest.txn.sql._compactions import Compactions
from ingest.txn.sql._connect import redact_url as redact_sql_url
from ingest.txn.sql._database import Database
from ingest.txn.sql._manifest import Manifest
from ingest.txn.sql._progress import Progress
from ingest.txn.sql._readers import Readers
from ingest.txn.sql._schema import SCHEMA_VERSION
from ingest.txn.sql._tables import Tables
from ingest.txn.sql._transactions import Transactions


class SqlMetastore(Metastore):
    """A metastore in one SQLite or PostgreSQL database (SQLAlchemy Core); see `Metastore`.

    Attributes:
        dialect: "sqlite" or "postgresql".
        schema_version: the database's schema version; below the current one only when an
            older metastore was opened read-only (its newer tables are then absent).
    """

    def __init__(self, db: Database) -> None:
        """Wrap an open database; use `Metastore.open` instead."""
        super().__init__(url=db.url, location=db.location)
        self._db = db
        self._manifest = Manifest(db)
        self._tables = Tables(db, self._manifest)
        self._transactions = Transactions(db, self._manifest)
        self._progress = Progress(db)
        self._readers = Readers(db)
        self._compactions = Compactions(db)

    @property
    def dialect(self) -> str:
        return self._db.dialect

    @property
    def schema_version(self) -> int:
        return self._db.schema_version

    # -- opening ----------------------------------------------------------------------------

    @classmethod
    def _connect(cls, url: str, *, create: bool, read_only: bool, busy_timeout_s: float,
                 clock: Callable[[], float] = time.time) -> Self:
        """Open the database (`Database.open`: URL forms, creation, upgrade, read-only)."""
        return cls(Database.open(url, create=create, read_only=read_only,
                                 busy_timeout_s=busy_timeout_s, clock=clock))

    @classmethod
    def _connect_for_reading(cls, url: str) -> Self:
        """Writable only when it is a current-version metastore this process may write (for
        SQLite, the file and its directory, for the write-ahead log); otherwise read-only. A
        PostgreSQL user without write rights reads unregistered too (`Readers`)."""
        store = cls._connect(url, create=False, read_only=True, busy_timeout_s=30.0)
        writable = True
        path = store._db.path
        if path is not None:
            writable = path != ":memory:" and os.access(path, os.W_OK) and os.access(
                os.path.dirname(path), os.W_OK | os.X_OK)
        if store.schema_version < SCHEMA_VERSION or not writable:
            return store
        store.close()
        # The version was checked above, so this open upgrades nothing.
        return cls._connect(url, create=False, read_only=False, busy_timeout_s=30.0)

    @classmethod
    def redact_url(cls, url: str) -> str:
        """A PostgreSQL URL without its password and query; any other without user
        information.

        Raises:
            ConfigError: a postgresql:// URL that cannot be parsed.
        """
        return redact_sql_url(url)

    def close(self) -> None:
        self._db.close()

    @property
    def capabilities(self) -> MetastoreCapabilities:
        return MetastoreCapabilities(committed_files=self._manifest.available,
                                     reader_leases=self._readers.available,
                                     compaction_history=self._compactions.available)

    # -- tables -----------------------------------------------------------------------------

    def create_table(self, defn: TableDefinition, *, next_write_id: int = 1) -> TableDefinition:
        return self._tables.create_table(defn, next_write_id=next_write_id)

    def set_properties(self, table: TableIdentifier, properties: dict[str, str]) -> TableDefinition:
        return self._tables.set_properties(table, properties)

    def alter_columns(self, table: TableIdentifier, row_schema: pa.Schema, *,
                      expected: pa.Schema) -> TableDefinition:
        return self._tables.alter_columns(table, row_schema, expected=expected)

    def find_table(self, table: TableIdentifier) -> TableDefinition | None:
        return self._tables.find_table(table)

    def find_tables(self, tables: Sequence[TableIdentifier]) -> list[TableDefinition | None]:
        return self._tables.find_tables(tables)

    def list_tables(self) -> list[TableDefinition]:
        return self._tables.list_tables()

    def drop_table(self, table: TableIdentifier) -> None:
        self._tables.drop_table(table)

    # -- transactions -----------------------------------------------------------------------

    def open_transaction(
        self, table: TableIdentifier, *, agent: str = "", also: Sequence[TableIdentifier] = (),
        operation: Literal["insert", "delete"] = "insert",
    ) -> Transaction:
        # Serial writes (docs/invariants.md, 9): a delete needs no lock of its own here.
        return self._transactions.open_transaction(table, agent=agent, also=also)

    def allocate_write_ids(
        self, table: TableIdentifier, count: int, *, agent: str = ""
    ) -> list[Transaction]:
        return self._transactions.allocate_write_ids(table, count, agent=agent)

    def allocate_write_id(self, txn: Transaction, table: TableIdentifier) -> Transaction:
        return self._transactions.allocate_write_id(txn, table)

    def commit(
        self,
        txn: Transaction,
        *,
        sink: SinkProgress | None = None,
        offsets: Iterable[OffsetRange] = (),
        files: Mapping[str, Iterable[CommittedFile]] | None = None,
        updated: Mapping[str, Iterable[int]] | None = None,
        table_offsets: Mapping[str, Iterable[OffsetRange]] | None = None,
        table_updated: Mapping[str, Mapping[str, Iterable[int]]] | None = None,
    ) -> None:
        self._transactions.commit(txn, sink=sink, offsets=offsets, files=files,
                                  updated=updated, table_offsets=table_offsets,
                                  table_updated=table_updated)

    def abort(self, txn: Transaction, *, reason: str = "aborted by its writer") -> None:
        self._transactions.abort(txn, reason=reason)

    def heartbeat(self, txn: Transaction) -> None:
        self._transactions.heartbeat(txn)

    def abort_timed_out(self, timeout_s: float) -> list[Transaction]:
        return self._transactions.abort_timed_out(timeout_s)

    # -- snapshots and progress ---------------------------------------------------------------

    def snapshot(self, table: TableIdentifier) -> ValidWriteIdList:
        return self._progress.snapshot(table)

    def snapshot_schema(self, table: TableIdentifier,
                        snapshot: ValidWriteIdList) -> tuple[int, pa.Schema]:
        return self._tables.snapshot_schema(table, snapshot)

    def leased_snapshot(
        self, table: TableIdentifier, *, agent: str, heartbeat_s: float = READER_HEARTBEAT_S,
        keep_lease: bool = False,
    ) -> AbstractContextManager[tuple[int | None, ValidWriteIdList]]:
        return self._readers.leased_snapshot(table, agent=agent, heartbeat_s=heartbeat_s,
                                             keep_lease=keep_lease)

    def heartbeat_reader(self, reader_id: int) -> bool:
        return self._readers.heartbeat_reader(reader_id)

    def end_reader(self, reader_id: int) -> None:
        self._readers.end_reader(reader_id)

    def transactions(
        self, table: TableIdentifier | None = None, *, states: Iterable[TxnState] = TXN_STATES
    ) -> list[TransactionInfo]:
        return self._progress.transactions(table, states=states)

    def committed_write_id(self, sink_id: str, batch_id: int, *,
                           table: TableIdentifier | None = None) -> int | None:
        """See `Metastore.committed_write_id`; sink ids are unique in the metastore, so
        `table` is not needed."""
        return self._progress.committed_write_id(sink_id, batch_id)

    def last_committed_batch(self, sink_id: str, *,
                             table: TableIdentifier | None = None) -> int | None:
        """See `Metastore.last_committed_batch`; `table` is not needed."""
        return self._progress.last_committed_batch(sink_id)

    def offset_ranges(self, table: TableIdentifier) -> list[tuple[int, OffsetRange]]:
        return self._progress.offset_ranges(table)

    # -- the committed-file manifest ----------------------------------------------------------

    def committed_files(self, table: TableIdentifier) -> dict[str, CommittedFile]:
        return self._manifest.committed_files(table)

    def record_committed_files(self, table: TableIdentifier,
                               files: Iterable[CommittedFile]) -> None:
        self._manifest.record_committed_files(table, files)

    def forget_committed_files(self, table: TableIdentifier, paths: Iterable[str]) -> int:
        return self._manifest.forget_committed_files(table, paths)

    # -- compactions ------------------------------------------------------------------------

    def begin_compaction(
        self,
        table: TableIdentifier,
        partition: str,
        kind: str,
        *,
        agent: str,
        stale_after_s: float,
        is_alive: Callable[[str], bool] | None = None,
    ) -> tuple[int, Transaction]:
        return self._compactions.begin_compaction(
            table, partition, kind, agent=agent, stale_after_s=stale_after_s, is_alive=is_alive)

    def finish_compaction(
        self,
        compaction_id: int,
        txn: Transaction,
        *,
        highest_write_id: int,
        rows: int,
        inputs: Sequence[str],
        outputs: Sequence[str],
    ) -> None:
        self._compactions.finish_compaction(compaction_id, txn,
                                            highest_write_id=highest_write_id, rows=rows,
                                            inputs=inputs, outputs=outputs)

    def fail_compaction(self, compaction_id: int, txn: Transaction, error: str) -> None:
        self._compactions.fail_compaction(compaction_id, txn, error)

    def forget_compaction(self, compaction_id: int, txn: Transaction) -> None:
        self._compactions.forget_compaction(compaction_id, txn)

    def compactor_visibility(self, table: TableIdentifier) -> CompactorVisibility:
        return self._compactions.compactor_visibility(table)

    def compactions(self, table: TableIdentifier) -> list[CompactionInfo]:
        return self._compactions.compactions(table)

    def compactions_to_clean(self, table: TableIdentifier) -> list[CompactionInfo]:
        return self._compactions.compactions_to_clean(table)

    def mark_compactions_cleaned(self, compaction_ids: Iterable[int]) -> None:
        self._compactions.mark_compactions_cleaned(compaction_ids)

    # -- reader leases ------------------------------------------------------------------------

    def live_readers(self, table: TableIdentifier, *, timeout_s: float) -> list[ReaderInfo]:
        return self._readers.live_readers(table, timeout_s=timeout_s)

    def forget_dead_readers(self, *, timeout_s: float) -> int:
        return self._readers.forget_dead_readers(timeout_s=timeout_s)


__all__ = ["SqlMetastore"]
