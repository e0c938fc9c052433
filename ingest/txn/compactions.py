"""The compaction history and the compactor's own transactions (Hive's COMPACTION_QUEUE and
COMPLETED_COMPACTIONS, one row per compaction of one partition).

A compaction begins as 'working' with a transaction that allocates no write id; one metastore
transaction later records its outcome and commits or aborts that transaction together, so
the row and the transaction never disagree. Knows SQL only; never reads the files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

from ingest.errors import CommitConflictError, ConfigError
from ingest.faults import crash_point
from ingest.txn._db import SqlStore, TableRef, inserted_id
from ingest.txn._lifecycle import insert_txn
from ingest.txn._schema import compactions, txns
from ingest.txn.errors import MetastoreError
from ingest.txn.model import Transaction, TxnState

CompactionState = Literal["working", "ready for cleaning", "succeeded", "failed"]

_c = compactions.c
_COLUMNS = (
    _c.compaction_id, _c.table_name, _c.partition, _c.kind, _c.state, _c.txn_id, txns.c.state,
    txns.c.agent, txns.c.heartbeat_at, _c.highest_write_id, _c.started_at, _c.finished_at,
    _c.cleaned_at, _c.rows, _c.inputs, _c.outputs, _c.error,
)


@dataclass(frozen=True)
class CompactionInfo:
    """One row of the compaction history, with its transaction's state.

    Attributes:
        compaction_id: the row's id.
        table: `db.table`.
        partition: relative to the table root, "" when unpartitioned.
        kind: "major" or "minor".
        state: as recorded: 'working', 'ready for cleaning', 'succeeded' or 'failed'.
        txn_id: the compactor's transaction.
        txn_state: that transaction's state now (None if it is missing).
        agent: who ran the compaction (host:pid:ingest-compact).
        heartbeat_at: the transaction's last heartbeat.
        highest_write_id: the compactor snapshot's high watermark, once recorded.
        started_at, finished_at, cleaned_at: seconds since the epoch.
        rows: events written.
        inputs, outputs: directory names, relative to the partition.
        error: why it failed.
    """

    compaction_id: int
    table: str
    partition: str
    kind: str
    state: CompactionState
    txn_id: int | None
    txn_state: TxnState | None
    agent: str
    heartbeat_at: float | None
    highest_write_id: int | None
    started_at: float
    finished_at: float | None
    cleaned_at: float | None
    rows: int | None
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    error: str | None

    @property
    def abandoned(self) -> bool:
        """Still 'working' although its transaction has ended: the compactor died (Hive's
        'attempted'). Its output, if renamed before it died, is in place all the same."""
        return self.state == "working" and self.txn_state != "open"


@dataclass(frozen=True)
class CompactorVisibility:
    """Which compactor transactions were committed when it was read: the predicate readers
    pass as `visible_txn` for `_vT` directories (Hive's `AcidUtils.isDirUsable`).

    Attributes:
        highest_txn: the highest txn id allocated then; later ones count as not committed.
        uncommitted: the table's compactor transactions then open or aborted.
        aborted: those of them aborted (their `_vT` outputs never become visible).
    """

    highest_txn: int
    uncommitted: frozenset[int]
    aborted: frozenset[int]

    def __call__(self, txn_id: int) -> bool:
        return txn_id <= self.highest_txn and txn_id not in self.uncommitted


class CompactionStore(SqlStore):
    """The compaction half of `Metastore`; see the module docstring."""

    def begin_compaction(
        self,
        table: TableRef,
        partition: str,
        kind: str,
        *,
        agent: str,
        stale_after_s: float,
        is_alive: Callable[[str], bool] | None = None,
    ) -> tuple[int, Transaction]:
        """Open a compactor transaction and record a 'working' compaction of one partition.

        One compaction per partition at a time: the check and the insert share one write
        transaction. A 'working' row whose transaction ended, went silent for
        `stale_after_s`, or whose agent `is_alive` says is gone, is marked failed (and its
        transaction aborted) first, so a crashed compactor never blocks the next one.

        Args:
            table: the table.
            partition: the partition relative to the table root ("" when unpartitioned).
            kind: "major" or "minor".
            agent: who compacts, e.g. "host:pid:ingest-compact".
            stale_after_s: heartbeat age after which a working compactor counts as dead.
            is_alive: whether the process an agent string names still runs (None: assume so).

        Returns:
            (compaction id, the open compactor transaction; its write_id is 0).

        Raises:
            ConfigError: kind is neither "major" nor "minor".
            CommitConflictError: a live compaction of this partition is working.
            TableNotFoundError: no such table.
            MetastoreError: the database failed, or it predates the compaction history.
        """
        if kind not in ("major", "minor"):
            raise ConfigError(f"Cannot record a {kind!r} compaction: kind must be 'major' or "
                              "'minor'")
        with self._translate("begin a compaction"), self._write() as c:
            self._require_history(c)
            name = self._resolve(c, table)
            now = self._clock()
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
        """Record a compaction whose output is in place ('ready for cleaning') and commit its
        transaction, atomically.

        Raises:
            CommitConflictError: the row is no longer 'working' or the transaction no longer
                open (another compactor took the partition over, or the transaction timed
                out); the output stays where it is and nothing is recorded.
            MetastoreError: the database failed.
        """
        with self._translate(f"record compaction {compaction_id}"), self._write() as c:
            self._require_working(c, compaction_id, txn)
            now = self._clock()
            c.execute(sa.update(compactions).where(_c.compaction_id == compaction_id).values(
                state="ready for cleaning", finished_at=now, highest_write_id=highest_write_id,
                rows=rows, inputs=json.dumps(list(inputs)), outputs=json.dumps(list(outputs))))
            crash_point("compact.during_record")  # a kill here must roll the record back
            c.execute(sa.update(txns).where(txns.c.txn_id == txn.txn_id)
                      .values(state="committed", finished_at=now))

    def fail_compaction(self, compaction_id: int, txn: Transaction, error: str) -> None:
        """Record that a compaction failed and abort its transaction; a row that is no longer
        'working' is left as it is.

        Raises:
            MetastoreError: the database failed.
        """
        with self._translate(f"record compaction {compaction_id}"), self._write() as c:
            self._end(c, compaction_id, txn.txn_id, "failed", error, self._clock())

    def forget_compaction(self, compaction_id: int, txn: Transaction) -> None:
        """Remove the row of a compaction that found nothing to do, and abort its transaction.

        Raises:
            MetastoreError: the database failed.
        """
        with self._translate(f"remove compaction {compaction_id}"), self._write() as c:
            c.execute(sa.delete(compactions).where(_c.compaction_id == compaction_id,
                                                   _c.state == "working"))
            _abort_txn(c, txn.txn_id, "nothing to compact", self._clock())

    def compactor_visibility(self, table: TableRef) -> CompactorVisibility:
        """Which of the table's compactor transactions are committed now, for readers of
        `_vT` directories; one read of the compaction history joined to its transactions.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        with self._translate("read compactor transactions"), self._read() as c:
            name = self._resolve(c, table)
            highest = c.execute(
                sa.select(sa.func.coalesce(sa.func.max(txns.c.txn_id), 0))).scalar_one()
            rows: list[Any] = []
            if self.schema_version >= 2:
                rows = list(c.execute(
                    sa.select(_c.txn_id, txns.c.state)
                    .join(txns, txns.c.txn_id == _c.txn_id)
                    .where(_c.table_name == name, txns.c.state != "committed")).all())
        return CompactorVisibility(int(highest), frozenset(int(t) for t, _ in rows),
                                   frozenset(int(t) for t, st in rows if st == "aborted"))

    def compactions(self, table: TableRef) -> list[CompactionInfo]:
        """The table's compaction history, oldest first (empty for a metastore read-only at
        a schema version without one).

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        with self._translate("read compactions"), self._read() as c:
            name = self._resolve(c, table)
            if self.schema_version < 2:
                return []
            return [_info(row) for row in self._rows(c, _c.table_name == name)]

    def compactions_to_clean(self, table: TableRef) -> list[CompactionInfo]:
        """Compactions of the table whose output is in place ('ready for cleaning'), with a
        committed compactor transaction or none: what the cleaner may finish.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        with self._translate("read the compaction history"), self._read() as c:
            name = self._resolve(c, table)
            if self.schema_version < 2:
                return []
            rows = self._rows(
                c, _c.table_name == name, _c.state == "ready for cleaning",
                _c.finished_at.is_not(None),
                sa.or_(_c.txn_id.is_(None), txns.c.state == "committed"))
        return [_info(row) for row in rows]

    def mark_compactions_cleaned(self, compaction_ids: Iterable[int]) -> None:
        """Record that the cleaner removed every input of these compactions (state
        'succeeded', `cleaned_at` now); rows in another state are left alone.

        Raises:
            MetastoreError: the database failed.
        """
        ids = list(compaction_ids)
        if not ids or self.schema_version < 2:
            return
        with self._translate("record cleaned compactions"), self._write() as c:
            c.execute(sa.update(compactions)
                      .where(_c.compaction_id.in_(ids), _c.state == "ready for cleaning")
                      .values(state="succeeded", cleaned_at=self._clock()))

    # -- helpers ----------------------------------------------------------------------------

    def _require_history(self, c: sa.Connection) -> None:
        if self.schema_version < 2:
            raise MetastoreError(
                f"Cannot record a compaction in metastore {self.location}: it has schema "
                f"version {self.schema_version}, without a compaction history",
                location=self.location, hint="open it writable so ingest upgrades it")

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


__all__ = ["CompactionInfo", "CompactionState", "CompactionStore", "CompactorVisibility"]
