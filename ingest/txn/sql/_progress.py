"""Snapshots and progress in SQL: valid write-id lists, the transaction list, sink progress
and Kafka offset ranges.

Mirrors Hive's `TxnHandler.getValidWriteIds` (the high watermark from NEXT_WRITE_ID, open and
aborted ids from TXN_TO_WRITE_ID) and `showTxns`; sink progress and offsets are what Hive
keeps as `commitTxnWithKeyValue` table properties. Reads only.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from ingest.acid.format import ValidWriteIdList
from ingest.txn.model import TXN_STATES, OffsetRange, TableIdentifier, TransactionInfo, TxnState
from ingest.txn.sql._database import Database
from ingest.txn.sql._schema import sink_progress, tables, txn_to_write_id, txns
from ingest.txn.sql._table_offsets import TableOffsets


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


class Progress:
    """What the `txns`, `txn_to_write_id`, `sink_progress`, `txn_offsets` and
    `table_offsets` tables of one database say about tables and sinks."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._table_offsets = TableOffsets(db)

    def snapshot(self, table: TableIdentifier) -> ValidWriteIdList:
        """See `Metastore.snapshot`; one read transaction."""
        db = self._db
        with db.translate("read a snapshot"), db.read() as c:
            return valid_write_ids(c, db.resolve(c, table))

    def transactions(
        self, table: TableIdentifier | None = None, *, states: Iterable[TxnState] = TXN_STATES
    ) -> list[TransactionInfo]:
        """See `Metastore.transactions`."""
        w = txn_to_write_id
        query = (sa.select(txns.c.txn_id, w.c.table_name, w.c.write_id, txns.c.state,
                           txns.c.agent, txns.c.opened_at, txns.c.heartbeat_at,
                           txns.c.finished_at, txns.c.reason, w.c.is_primary)
                 .join(w, w.c.txn_id == txns.c.txn_id)
                 .where(txns.c.state.in_(list(states))))
        db = self._db
        with db.translate("list transactions"), db.read() as c:
            if table is not None:
                query = query.where(w.c.table_name == db.resolve(c, table))
            rows = list(c.execute(query).all())
        rows.sort(key=lambda r: (r[0], -r[9], r[1]))
        return [TransactionInfo(*row[:9]) for row in rows]

    def committed_write_id(self, sink_id: str, batch_id: int) -> int | None:
        """See `Metastore.committed_write_id`."""
        db = self._db
        with db.translate("read sink progress"), db.read() as c:
            found = c.execute(
                sa.select(sink_progress.c.write_id)
                .where(sink_progress.c.sink_id == sink_id, sink_progress.c.batch_id == batch_id)
            ).scalar()
        return None if found is None else int(found)

    def last_committed_batch(self, sink_id: str) -> int | None:
        """See `Metastore.last_committed_batch`."""
        db = self._db
        with db.translate("read sink progress"), db.read() as c:
            found = c.execute(
                sa.select(sa.func.max(sink_progress.c.batch_id))
                .where(sink_progress.c.sink_id == sink_id)).scalar()
        return None if found is None else int(found)

    def offset_ranges(self, table: TableIdentifier) -> list[tuple[int, OffsetRange]]:
        """See `Metastore.offset_ranges`."""
        db = self._db
        with db.translate("read offsets"), db.read() as c:
            rows = self._table_offsets.ranges_of(c, db.resolve(c, table))
        return sorted(rows, key=lambda r: (r[0], r[1].topic, r[1].partition))


__all__ = ["Progress", "valid_write_ids"]
