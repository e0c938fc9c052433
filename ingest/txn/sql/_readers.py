"""Registered readers in SQL (Hive's MIN_HISTORY_LEVEL): snapshots held while their files are
read.

A reader takes its snapshot and registers it in one write transaction, heartbeats while it
reads and unregisters at the end; the cleaner keeps every directory a live registration may
still use. A metastore opened read-only, not writable, or of schema version 1 reads
unregistered. Knows SQL, not files.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from ingest.acid.format import ValidWriteIdList
from ingest.errors import IngestError
from ingest.txn.metastore import READER_HEARTBEAT_S
from ingest.txn.model import ReaderInfo, TableIdentifier
from ingest.txn.sql._connect import is_read_only_error
from ingest.txn.sql._database import Part, inserted_id
from ingest.txn.sql._progress import valid_write_ids
from ingest.txn.sql._schema import readers, txns

log = logging.getLogger(__name__)

READERS_VERSION = 2  # the schema version that added `readers`


def min_open_txn(c: sa.Connection) -> int:
    """The lowest open txn id, or the next txn id when none is open: every transaction
    below it has finished. Txn rows are never deleted, so the next id is above the highest
    row (a PostgreSQL sequence may skip ids after a rollback; those never exist)."""
    lowest_open = sa.select(sa.func.min(txns.c.txn_id)).where(txns.c.state == "open")
    after_last = sa.select(sa.func.coalesce(sa.func.max(txns.c.txn_id), 0) + 1)
    return int(c.execute(sa.select(sa.func.coalesce(lowest_open.scalar_subquery(),
                                                   after_last.scalar_subquery()))).scalar_one())


class Readers(Part):
    """The `readers` table of one database."""

    since_version = READERS_VERSION
    what = "reader leases"

    @contextmanager
    def leased_snapshot(
        self, table: TableIdentifier, *, agent: str, heartbeat_s: float = READER_HEARTBEAT_S,
        keep_lease: bool = False,
    ) -> Iterator[tuple[int | None, ValidWriteIdList]]:
        """See `Metastore.leased_snapshot`: the snapshot and the registration are one write
        transaction; a daemon thread heartbeats it."""
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
        """See `Metastore.heartbeat_reader`."""
        if not self.available:
            return False
        db = self._db
        with db.translate("heartbeat a reader"), db.write() as c:
            done = c.execute(sa.update(readers).where(readers.c.reader_id == reader_id)
                             .values(heartbeat_at=db.clock()))
        return int(done.rowcount) == 1

    def end_reader(self, reader_id: int) -> None:
        """See `Metastore.end_reader`."""
        db = self._db
        try:
            with db.translate("unregister a reader"), db.write() as c:
                c.execute(sa.delete(readers).where(readers.c.reader_id == reader_id))
        except IngestError:
            # The registration expires by itself after the time-out; the rows read are
            # not affected, so a failed removal must not fail the read.
            log.warning("could not unregister reader %d in %s; it expires after the "
                        "transaction time-out", reader_id, db.location, exc_info=True)

    def _register(self, table: TableIdentifier, agent: str) -> tuple[int | None, ValidWriteIdList]:
        db = self._db
        if self.available:
            try:
                with db.translate("register a reader"), db.write() as c:
                    name = db.resolve(c, table)
                    snapshot = valid_write_ids(c, name)
                    low = min_open_txn(c)
                    now = db.clock()
                    result = c.execute(sa.insert(readers).values(
                        table_name=name, agent=agent, min_open_txn=low, opened_at=now,
                        heartbeat_at=now))
                    return inserted_id(result), snapshot
            except IngestError as e:
                if e.__cause__ is None or not is_read_only_error(e.__cause__):
                    raise
        with db.translate("read a snapshot"), db.read() as c:
            return None, valid_write_ids(c, db.resolve(c, table))

    def _beat_until(self, reader_id: int, stop: threading.Event, interval_s: float) -> None:
        db = self._db
        while not stop.wait(interval_s):
            try:
                with db.translate("heartbeat a reader"), db.write() as c:
                    c.execute(sa.update(readers).where(readers.c.reader_id == reader_id)
                              .values(heartbeat_at=db.clock()))
            except IngestError:
                log.warning("heartbeat of reader %d failed; retrying in %.0f s", reader_id,
                            interval_s, exc_info=True)

    def live_readers(self, table: TableIdentifier, *, timeout_s: float) -> list[ReaderInfo]:
        """See `Metastore.live_readers`; empty on a version-1 metastore."""
        if not self.available:
            return []
        db = self._db
        with db.translate("list readers"), db.read() as c:
            name = db.resolve(c, table)
            rows = c.execute(
                sa.select(readers.c.reader_id, readers.c.table_name, readers.c.agent,
                          readers.c.min_open_txn, readers.c.opened_at, readers.c.heartbeat_at)
                .where(readers.c.table_name == name,
                       readers.c.heartbeat_at >= db.clock() - timeout_s)
                .order_by(readers.c.reader_id)).all()
        return [ReaderInfo(*row) for row in rows]

    def forget_dead_readers(self, *, timeout_s: float) -> int:
        """See `Metastore.forget_dead_readers`; 0 on a version-1 metastore."""
        if not self.available:
            return 0
        db = self._db
        with db.translate("forget dead readers"), db.write() as c:
            cur = c.execute(sa.delete(readers)
                            .where(readers.c.heartbeat_at < db.clock() - timeout_s))
        return int(cur.rowcount)


__all__ = ["READERS_VERSION", "Readers", "min_open_txn"]
