"""The compaction history in SQL and the compactor's own transactions (Hive's
COMPACTION_QUEUE and COMPLETED_COMPACTIONS, one row per compaction of one partition).

A compaction begins as 'working' with a transaction that allocates no write id; one database
transaction later records its outcome and commits or aborts that transaction together, so
the row and the transaction never disagree. Knows SQL only; never reads the files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sqlalchemy as sa

from ingest.errors import CommitConflictError, ConfigError
from ingest.faults import crash_point
from ingest.txn.model import (
    CompactionInfo,
    CompactionState,
    CompactorVisibility,
    TableIdentifier,
    Transaction,
)
from ingest.txn.sql._database import Part, inserted_id
from ingest.txn.sql._schema import compactions, txns
from ingest.txn.sql._transactions import insert_txn

HISTORY_VERSION = 2  # the schema version that added `compactions`

_c = compactions.c
_COLUMNS = (
    _c.compaction_id, _c.table_name, _c.partition, _c.kind, _c.state, _c.txn_id, txns.c.state,
    txns.c.agent, txns.c.heartbeat_at, _c.highest_write_id, _c.started_at, _c.finished_at,
    _c.cleaned_at, _c.rows, _c.inputs, _c.outputs, _c.error,
)


class Compactions(Part):
    """The `compactions` table of one database, and the compactor transactions in `txns`."""

    since_version = HISTORY_VERSION
    what = "compaction history"

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
        """See `Metastore.begin_compaction`: the check and the insert share one write
        transaction."""
        if kind not in ("major", "minor"):
            raise ConfigError(f"Cannot record a {kind!r} compaction: kind must be 'major' or "
                              "'minor'")
        with self._db.translate("begin a compaction"), self._db.write() as c:
            self.require("record a compaction")
            name = self._db.resolve(c, table)
            now = self._db.clock()
            for row in self._rows(c, _c.table_name == name, _c.partition == partition,
                                  _c.state == "working"):
                info = _info(row)
                gone = _gone(info, now, stale_after_s, is_alive)
                if gone is None:
                    raise CommitConflictError(
                        f"Cannot compact {name} partition {partition or '(table)'}: compaction "
                        f"{info.compaction_id} (transaction {info.txn_id}, agent "
                        f"{info.agent or '?'}) is still working on it",
                        hint="wait for it to finish; a compactor silent for "
                        f"{stale_after_s:g} s is taken over",
                    )
                self._end(c, info.compaction_id, info.txn_id, "failed", gone, now)
            txn_id = insert_txn(c, agent, now)
            result = c.execute(sa.insert(compactions).values(
                table_name=name, partition=partition, kind=kind, state="working",
                txn_id=txn_id, started_at=now))
            compaction_id = inserted_id(result)
        return compaction_id, Transaction(txn_id, name, 0, now, agent)

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
        """See `Metastore.finish_compaction`; one write transaction."""
        with self._db.translate(f"record compaction {compaction_id}"), self._db.write() as c:
            self._require_working(c, compaction_id, txn)
            now = self._db.clock()
            c.execute(sa.update(compactions).where(_c.compaction_id == compaction_id).values(
                state="ready for cleaning", finished_at=now, highest_write_id=highest_write_id,
                rows=rows, inputs=json.dumps(list(inputs)), outputs=json.dumps(list(outputs))))
            crash_point("compact.during_record")  # a kill here must roll the record back
            c.execute(sa.update(txns).where(txns.c.txn_id == txn.txn_id)
                      .values(state="committed", finished_at=now))

    def fail_compaction(self, compaction_id: int, txn: Transaction, error: str) -> None:
        """See `Metastore.fail_compaction`."""
        with self._db.translate(f"record compaction {compaction_id}"), self._db.write() as c:
            self._end(c, compaction_id, txn.txn_id, "failed", error, self._db.clock())

    def forget_compaction(self, compaction_id: int, txn: Transaction) -> None:
        """See `Metastore.forget_compaction`."""
        with self._db.translate(f"remove compaction {compaction_id}"), self._db.write() as c:
            c.execute(sa.delete(compactions).where(_c.compaction_id == compaction_id,
                                                   _c.state == "working"))
            _abort_txn(c, txn.txn_id, "nothing to compact", self._db.clock())

    def compactor_visibility(self, table: TableIdentifier) -> CompactorVisibility:
        """See `Metastore.compactor_visibility`: one read of the history joined to its
        transactions."""
        with self._db.translate("read compactor transactions"), self._db.read() as c:
            name = self._db.resolve(c, table)
            highest = c.execute(
                sa.select(sa.func.coalesce(sa.func.max(txns.c.txn_id), 0))).scalar_one()
            rows: list[Any] = []
            if self.available:
                rows = list(c.execute(
                    sa.select(_c.txn_id, txns.c.state)
                    .join(txns, txns.c.txn_id == _c.txn_id)
                    .where(_c.table_name == name, txns.c.state != "committed")).all())
        return CompactorVisibility(int(highest), frozenset(int(t) for t, _ in rows),
                                   frozenset(int(t) for t, st in rows if st == "aborted"))

    def compactions(self, table: TableIdentifier) -> list[CompactionInfo]:
        """See `Metastore.compactions`."""
        with self._db.translate("read compactions"), self._db.read() as c:
            name = self._db.resolve(c, table)
            if not self.available:
                return []
            return [_info(row) for row in self._rows(c, _c.table_name == name)]

    def compactions_to_clean(self, table: TableIdentifier) -> list[CompactionInfo]:
        """See `Metastore.compactions_to_clean`."""
        with self._db.translate("read the compaction history"), self._db.read() as c:
            name = self._db.resolve(c, table)
            if not self.available:
                return []
            rows = self._rows(
                c, _c.table_name == name, _c.state == "ready for cleaning",
                _c.finished_at.is_not(None),
                sa.or_(_c.txn_id.is_(None), txns.c.state == "committed"))
        return [_info(row) for row in rows]

    def mark_compactions_cleaned(self, compaction_ids: Iterable[int]) -> None:
        """See `Metastore.mark_compactions_cleaned`."""
        ids = list(compaction_ids)
        if not ids or not self.available:
            return
        with self._db.translate("record cleaned compactions"), self._db.write() as c:
            c.execute(sa.update(compactions)
                      .where(_c.compaction_id.in_(ids), _c.state == "ready for cleaning")
                      .values(state="succeeded", cleaned_at=self._db.clock()))

    # -- helpers ----------------------------------------------------------------------------

    @staticmethod
    def _rows(c: sa.Connection, *where: sa.ColumnElement[bool]) -> list[Any]:
        return list(c.execute(
            sa.select(*_COLUMNS).outerjoin(txns, txns.c.txn_id == _c.txn_id).where(*where)
            .order_by(_c.compaction_id)).all())

    def _require_working(self, c: sa.Connection, compaction_id: int,
                         txn: Transaction) -> None:
        rows = self._rows(c, _c.compaction_id == compaction_id)
        info = _info(rows[0]) if rows else None
        if info is None or info.state != "working" or info.txn_state != "open":
            found = "missing" if info is None else (
                f"{info.state}, transaction {info.txn_id} {info.txn_state}"
                + (f" ({info.error})" if info.error else ""))
            raise CommitConflictError(
                f"Cannot record compaction {compaction_id} (transaction {txn.txn_id}): it is "
                f"{found}; its output is in place but the history does not say so",
                hint="another compactor took the partition over after this one stopped "
                "heartbeating; readers are not affected")

    @staticmethod
    def _end(c: sa.Connection, compaction_id: int, txn_id: int | None,
             state: CompactionState, error: str, now: float) -> None:
        c.execute(sa.update(compactions)
                  .where(_c.compaction_id == compaction_id, _c.state == "working")
                  .values(state=state, finished_at=now, error=error))
        _abort_txn(c, txn_id, error, now)


def _abort_txn(c: sa.Connection, txn_id: int | None, reason: str, now: float) -> None:
    """Abort a compactor's transaction if it is still open."""
    c.execute(sa.update(txns).where(txns.c.txn_id == txn_id, txns.c.state == "open")
              .values(state="aborted", finished_at=now, reason=reason))


def _info(row: Sequence[Any]) -> CompactionInfo:
    (cid, table, partition, kind, state, txn_id, txn_state, agent, heartbeat_at, hwm, started,
     finished, cleaned, rows, inputs, outputs, error) = row
    return CompactionInfo(int(cid), table, partition, kind, state, txn_id, txn_state,
                          agent or "", heartbeat_at, hwm, started, finished, cleaned, rows,
                          tuple(json.loads(inputs)), tuple(json.loads(outputs)), error)


def _gone(info: CompactionInfo, now: float, stale_after_s: float,
          is_alive: Callable[[str], bool] | None) -> str | None:
    """Why a 'working' compaction's compactor is known to be dead, or None if it may live."""
    if info.txn_state != "open":
        return (f"compactor stopped: its transaction {info.txn_id} is "
                f"{info.txn_state or 'missing'}")
    if info.heartbeat_at is not None and now - info.heartbeat_at > stale_after_s:
        return (f"compactor stopped: no heartbeat for {now - info.heartbeat_at:.1f} s "
                f"(timeout {stale_after_s:g} s)")
    if is_alive is not None and info.agent and not is_alive(info.agent):
        return f"compactor stopped: its process ({info.agent}) is gone"
    return None


__all__ = ["HISTORY_VERSION", "Compactions"]
