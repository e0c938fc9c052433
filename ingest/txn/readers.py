"""Registered readers (Hive's MIN_HISTORY_LEVEL): snapshots held while their files are read.

A reader takes its snapshot and registers it in one metastore transaction, heartbeats while it
reads and unregisters at the end; the cleaner keeps every directory a live registration may
still use. Also what the cleaner asks of the compaction history. Knows SQL, not files.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Self

import sqlalchemy as sa

from ingest.acid.writeids import ValidWriteIdList
from ingest.errors import IngestError
from ingest.txn._connect import is_read_only_error
from ingest.txn._db import TableRef, inserted_id, sqlite_path
from ingest.txn._lifecycle import TransactionStore
from ingest.txn._schema import SCHEMA_VERSION, readers, tables, txn_to_write_id, txns

log = logging.getLogger(__name__)

# How often a held registration is refreshed; it counts as dead after the transaction
# time-out (300 s by default), so a few beats may fail before the cleaner ignores it.
READER_HEARTBEAT_S = 60.0


@dataclass(frozen=True)
class ReaderInfo:
    """One registered reader.

    Attributes:
        reader_id: its row id.
        table: the table it reads (`db.table`).
        agent: who reads, e.g. "host:pid:ingest-cat".
        min_open_txn: the lowest transaction open when its snapshot was taken, or the next
            transaction id if none was: every transaction below it had finished.
        opened_at: registration time (seconds since the epoch).
        heartbeat_at: its last heartbeat.
    """

    reader_id: int
    table: str
    agent: str
    min_open_txn: int
    opened_at: float
    heartbeat_at: float


def valid_write_ids(c: sa.Connection, name: str) -> ValidWriteIdList:
    """Table `name`'s valid write-id list, inside the caller's transaction.

    The high watermark is the highest write id allocated; open and aborted ids are listed.
    """
    next_id = c.execute(sa.select(tables.c.next_write_id)
                        .where(tables.c.name == name)).scalar_one()
    w = txn_to_write_id
    rows = c.execute(
        sa.select(w.c.write_id, txns.c.state).join(txns, txns.c.txn_id == w.c.txn_id)
        .where(w.c.table_name == name, txns.c.state != "committed")
        .order_by(w.c.write_id)).all()
    return ValidWriteIdList(
        name,
        int(next_id) - 1,
        tuple(int(w) for w, s in rows if s == "open"),
        tuple(int(w) for w, s in rows if s == "aborted"),
    )


def min_open_txn(c: sa.Connection) -> int:
    """The lowest open txn id, or the next txn id when none is open: every transaction
    below it has finished. Txn rows are never deleted, so the next id is above the highest
    row (a PostgreSQL sequence may skip ids after a rollback; those never exist)."""
    lowest_open = sa.select(sa.func.min(txns.c.txn_id)).where(txns.c.state == "open")
    after_last = sa.select(sa.func.coalesce(sa.func.max(txns.c.txn_id), 0) + 1)
    return int(c.execute(sa.select(sa.func.coalesce(lowest_open.scalar_subquery(),
                                                   after_last.scalar_subquery()))).scalar_one())


class ReaderRegistry(TransactionStore):
    """The registered-reader half of `Metastore`; see the module docstring."""

    @classmethod
    def open_for_reading(cls, url: str) -> Self:
        """Open an existing metastore for a reading command that registers its snapshot.

        Opened writable only when it is a version-2 metastore this process may write (for
        SQLite, the file and its directory, for the write-ahead log); otherwise read-only,
        and `reading` then goes on unregistered. A PostgreSQL user without write rights
        reads unregistered too (`reading`). Never creates, rebuilds or upgrades a metastore.

        Raises:
            MetastoreError: the file is missing, empty, unreadable or not a metastore.
            UnsupportedFormatError: it was written by a newer ingest.
            ConfigError: the URL is not a supported metastore URL.
        """
        store = cls.open(url, read_only=True)
        writable = True
        if store.dialect == "sqlite":
            path = sqlite_path(url)
            writable = path != ":memory:" and os.access(path, os.W_OK) and os.access(
                os.path.dirname(path), os.W_OK | os.X_OK)
        if store.schema_version < SCHEMA_VERSION or not writable:
            return store
        store.close()
        # The version was checked above, so this open upgrades nothing.
        return cls.open(url, create=False)

    @contextmanager
    def reading(
        self, table: TableRef, *, agent: str, heartbeat_s: float = READER_HEARTBEAT_S
    ) -> Iterator[ValidWriteIdList]:
        """Take the table's snapshot and keep it registered until the block ends.

        The snapshot and the registration are one write transaction, so no compaction can
        commit between them. A daemon thread heartbeats the registration every
        `heartbeat_s`. On a metastore opened read-only, not writable, or of schema
        version 1, the snapshot is taken unregistered (readers outside the metastore are
        protected by the cleaner's retention time instead).

        Example:
            with store.reading("default.events", agent="host:1:cat") as snapshot:
                rows = read_table(location, snapshot)

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        with self.leased_snapshot(table, agent=agent, heartbeat_s=heartbeat_s) as (_, snapshot):
            yield snapshot

    @contextmanager
    def leased_snapshot(
        self, table: TableRef, *, agent: str, heartbeat_s: float = READER_HEARTBEAT_S,
        keep_lease: bool = False,
    ) -> Iterator[tuple[int | None, ValidWriteIdList]]:
        """`reading`, also yielding the lease's reader id (None when unregistered).

        Args:
            keep_lease: when the block ends without an exception, leave the registration in
                place for others to heartbeat (`heartbeat_reader`) and end (`end_reader`);
                unrenewed, it lapses after the transaction time-out. For a read that goes
                on in other processes after this one stops, such as Spark's tasks.

        Raises:
            See `reading`.
        """
        reader_id, snapshot = self._register(table, agent)
        if reader_id is None:
            yield None, snapshot
            return
        stop = threading.Event()
        beat = threading.Thread(target=self._beat_until, args=(reader_id, stop, heartbeat_s),
                                name="ingest-reader-heartbeat", daemon=True)
        beat.start()
        failed = False
        try:
            yield reader_id, snapshot
        except BaseException:
            failed = True
            raise
        finally:
            stop.set()
            beat.join()
            if failed or not keep_lease:
                self.end_reader(reader_id)

    def heartbeat_reader(self, reader_id: int) -> bool:
        """Renew a registration another process took; False when it is gone (it lapsed and
        a cleaner forgot it, or its reader ended it).

        Raises:
            MetastoreError: the database failed (a read-only metastore included).
        """
        if self.schema_version < 2:
            return False
        with self._translate("heartbeat a reader"), self._write() as c:
            done = c.execute(sa.update(readers).where(readers.c.reader_id == reader_id)
                             .values(heartbeat_at=self._clock()))
        return int(done.rowcount) == 1

    def end_reader(self, reader_id: int) -> None:
        """Remove a registration; a failure is logged, never raised: the registration lapses
        by itself after the time-out, and the rows already read are not affected."""
        try:
            with self._translate("unregister a reader"), self._write() as c:
                c.execute(sa.delete(readers).where(readers.c.reader_id == reader_id))
        except IngestError:
            log.warning("could not unregister reader %d in %s; it expires after the "
                        "transaction time-out", reader_id, self.location, exc_info=True)

    def _register(self, table: TableRef, agent: str) -> tuple[int | None, ValidWriteIdList]:
        if self.schema_version >= 2:
            try:
                with self._translate("register a reader"), self._write() as c:
                    name = self._resolve(c, table)
                    snapshot = valid_write_ids(c, name)
                    low = min_open_txn(c)
                    now = self._clock()
                    result = c.execute(sa.insert(readers).values(
                        table_name=name, agent=agent, min_open_txn=low, opened_at=now,
                        heartbeat_at=now))
                    return inserted_id(result), snapshot
            except IngestError as e:
                if e.__cause__ is None or not is_read_only_error(e.__cause__):
                    raise
        with self._translate("read a snapshot"), self._read() as c:
            return None, valid_write_ids(c, self._resolve(c, table))

    def _beat_until(self, reader_id: int, stop: threading.Event, interval_s: float) -> None:
        while not stop.wait(interval_s):
            try:
                with self._translate("heartbeat a reader"), self._write() as c:
                    c.execute(sa.update(readers).where(readers.c.reader_id == reader_id)
                              .values(heartbeat_at=self._clock()))
            except IngestError:
                log.warning("heartbeat of reader %d failed; retrying in %.0f s", reader_id,
                            interval_s, exc_info=True)

    def live_readers(self, table: TableRef, *, timeout_s: float) -> list[ReaderInfo]:
        """The table's registered readers whose last heartbeat is within `timeout_s`.

        Older registrations belong to readers that died without unregistering; they are
        ignored (and left for `forget_dead_readers`). Empty on a version-1 metastore.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        if self.schema_version < 2:
            return []
        with self._translate("list readers"), self._read() as c:
            name = self._resolve(c, table)
            rows = c.execute(
                sa.select(readers.c.reader_id, readers.c.table_name, readers.c.agent,
                          readers.c.min_open_txn, readers.c.opened_at, readers.c.heartbeat_at)
                .where(readers.c.table_name == name,
                       readers.c.heartbeat_at >= self._clock() - timeout_s)
                .order_by(readers.c.reader_id)).all()
        return [ReaderInfo(*row) for row in rows]

    def forget_dead_readers(self, *, timeout_s: float) -> int:
        """Delete registrations silent for longer than `timeout_s`; returns how many.

        Raises:
            MetastoreError: the database failed.
        """
        if self.schema_version < 2:
            return 0
        with self._translate("forget dead readers"), self._write() as c:
            cur = c.execute(sa.delete(readers)
                            .where(readers.c.heartbeat_at < self._clock() - timeout_s))
        return int(cur.rowcount)


__all__ = ["READER_HEARTBEAT_S", "ReaderInfo", "ReaderRegistry", "min_open_txn",
           "valid_write_ids"]
