"""`HiveMetastore`'s compactions: Hive 4's compaction queue, or a table parameter on Hive 3
(`compactions.py`), and the readers the cleaner waits for (`live_readers`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ingest.errors import CommitConflictError
from ingest.txn.hms._session import Session
from ingest.txn.hms.compactions import (
    ParameterHistory,
    QueueHistory,
    Txns,
    check_kind,
    open_compactor_txn,
    table_locks,
)
from ingest.txn.hms.thrift import Heartbeater, HiveTable, commit_txn, txn_snapshot
from ingest.txn.model import (
    CompactionInfo,
    CompactorVisibility,
    ReaderInfo,
    TableIdentifier,
    Transaction,
)


def _dead_compactor(txns: Txns, record: dict[str, Any], now: float, stale_after_s: float,
                    is_alive: Callable[[str], bool] | None) -> str | None:
    """Why a 'working' Hive 3 record's compactor is known to be dead, or None."""
    state = txns.state(record["txn"])
    if state != "open":
        return f"compactor stopped: its transaction {record['txn']} is {state or 'missing'}"
    silent = now - txns.rows[record["txn"]].heartbeat_at
    if silent > stale_after_s:
        return f"compactor stopped: no heartbeat for {silent:.1f} s (timeout {stale_after_s:g} s)"
    if is_alive is not None and record.get("agent") and not is_alive(record["agent"]):
        return f"compactor stopped: its process ({record['agent']}) is gone"
    return None


class CompactionOps:
    """Compactions of a `HiveMetastore` (see `Metastore` for the contract), and the readers
    the cleaner waits for."""

    def __init__(self, session: Session) -> None:
        self._s = session
        self._queue: QueueHistory | None = None
        self._params: ParameterHistory | None = None
        self._compacting: dict[int, tuple[str, str]] = {}  # compaction -> (table, partition)

    def _history(self) -> tuple[QueueHistory | None, ParameterHistory]:
        if self._queue is None and self._s.conn.info.major >= 4:
            self._queue = QueueHistory(self._s.conn)
        if self._params is None:
            self._params = ParameterHistory(self._s.conn, self._s.location)
        return self._queue, self._params

    def begin_compaction(self, table: TableIdentifier, partition: str, kind: str, *, agent: str,
                         stale_after_s: float,
                         is_alive: Callable[[str], bool] | None = None) -> tuple[int, Transaction]:
        """See `Metastore.begin_compaction`: on Hive 4 a compaction in Hive's queue (SHOW
        COMPACTIONS) with a COMPACTION transaction; on Hive 3 a record in the table parameter
        `ingest_compactions` (`ingest.txn.hms.compactions`)."""
        check_kind(kind)
        with self._s.lock:
            self._s.writable("compact")
            found = self._s.hive_table(table)
            queue, params = self._history()
            txns = Txns.read(self._s.conn)
            now = self._s.clock()
            if queue is not None:
                queue.take_over_dead(found, partition, txns, stale_after_s=stale_after_s,
                                     now=now, is_alive=is_alive, abort=self._s.abort_quietly)
            else:
                for r in params.working(found.name, partition):
                    why = _dead_compactor(txns, r, now, stale_after_s, is_alive)
                    if why is None:
                        raise CommitConflictError(
                            f"Cannot compact {found.name} partition {partition or '(table)'}: "
                            f"compaction {r['id']} (transaction {r['txn']}, agent "
                            f"{r.get('agent') or '?'}) is still working on it",
                            hint="wait for it to finish; a compactor silent for "
                                 f"{stale_after_s:g} s is taken over")
                    self._s.abort_quietly(r["txn"])
                    params.set_state(found.name, partition, r["id"], state="failed",
                                     finished=now, error=why)
            txn_id = open_compactor_txn(self._s.conn, agent)
            self._s.beats[txn_id] = Heartbeater(self._s.location, txn_id,
                                                info=self._s.conn.info).start()
            try:
                if queue is not None:
                    cid = queue.begin(found, partition, kind, txn_id, agent)
                else:
                    cid = txn_id
                    params.add(found.name, partition, {
                        "id": cid, "txn": txn_id, "kind": kind, "state": "working",
                        "agent": agent, "started": now})
            except BaseException:
                self._s.abort_quietly(txn_id)
                raise
            self._compacting[cid] = (found.name, partition)
            return cid, Transaction(txn_id, found.name, 0, now, agent)

    def _compaction(self, compaction_id: int, txn: Transaction) -> tuple[HiveTable, str]:
        where = self._compacting.get(compaction_id)
        if where is None:
            raise CommitConflictError(
                f"Cannot record compaction {compaction_id} (transaction {txn.txn_id}): this "
                f"connection to {self._s.location} did not begin it",
                hint="a compaction is recorded by the process that began it")
        return self._s.hive_table(where[0]), where[1]

    def finish_compaction(self, compaction_id: int, txn: Transaction, *, highest_write_id: int,
                          rows: int, inputs: Sequence[str], outputs: Sequence[str]) -> None:
        """See `Metastore.finish_compaction`: Hive 4 marks the queued compaction compacted,
        then commits its transaction (Hive's Worker order; the commit records
        CQ_NEXT_TXN_ID); Hive 3 commits, then records the history."""
        with self._s.lock:
            found, partition = self._compaction(compaction_id, txn)
            queue, params = self._history()
            gone = CommitConflictError(
                f"Cannot record compaction {compaction_id} (transaction {txn.txn_id}) of "
                f"{found.name}: it is no longer working; its output is in place but the "
                "history does not say so",
                hint="another compactor took the partition over after this one stopped "
                     "heartbeating; readers are not affected")
            if queue is not None:
                entry = queue.entry(found, compaction_id)
                if entry is None or entry.state != "working":
                    raise gone
                queue.record_done(found, entry, txn.txn_id, highest_write_id)
            elif not any(r["id"] == compaction_id
                         for r in params.working(found.name, partition)):
                raise gone
            beats = self._s.beats.pop(txn.txn_id, None)
            if beats is not None:
                try:
                    beats.check()
                finally:
                    beats.stop()
            commit_txn(self._s.conn, txn.txn_id)
            self._compacting.pop(compaction_id, None)
            if queue is None:
                params.set_state(found.name, partition, compaction_id,
                                 state="ready for cleaning", finished=self._s.clock(),
                                 hwm=highest_write_id, rows=rows, inputs=list(inputs),
                                 outputs=list(outputs),
                                 next_txn=txn_snapshot(self._s.conn).high_watermark)

    def fail_compaction(self, compaction_id: int, txn: Transaction, error: str) -> None:
        self._end_compaction(compaction_id, txn, "failed", error)

    def forget_compaction(self, compaction_id: int, txn: Transaction) -> None:
        self._end_compaction(compaction_id, txn, "refused", None)

    def _end_compaction(self, compaction_id: int, txn: Transaction, how: str,
                        error: str | None) -> None:
        with self._s.lock:
            try:
                found, partition = self._compaction(compaction_id, txn)
                queue, params = self._history()
                if queue is not None:
                    entry = queue.entry(found, compaction_id)
                    if entry is not None and entry.state in ("initiated", "working"):
                        queue.end(found, entry, how, error)
                elif how == "refused":
                    params.remove(found.name, partition, compaction_id)
                else:
                    params.set_state(found.name, partition, compaction_id, state="failed",
                                     finished=self._s.clock(), error=error)
            finally:
                self._compacting.pop(compaction_id, None)
                self._s.abort_quietly(txn.txn_id)

    def compactor_visibility(self, table: TableIdentifier) -> CompactorVisibility:
        """From the metastore's transactions: a `_vT` directory (Hive 4's compactor output)
        is visible once T committed, i.e. T is allocated and neither open nor aborted."""
        with self._s.lock:
            self._s.hive_table(table)
            txns = txn_snapshot(self._s.conn)
        return CompactorVisibility(txns.high_watermark,
                                   frozenset(txns.open_txns) | frozenset(txns.aborted_txns),
                                   frozenset(txns.aborted_txns))

    def compactions(self, table: TableIdentifier) -> list[CompactionInfo]:
        """See `Metastore.compactions`: Hive 4's SHOW COMPACTIONS for the table (Hive's own
        compactions too; ingest's "nothing to compact" left out), or the Hive 3 record."""
        with self._s.lock:
            found = self._s.hive_table(table)
            queue, params = self._history()
            txns = Txns.read(self._s.conn)
            if queue is not None:
                return queue.history(found, txns)
            return params.history(found.name, txns)

    def compactions_to_clean(self, table: TableIdentifier) -> list[CompactionInfo]:
        return [c for c in self.compactions(table)
                if c.state == "ready for cleaning" and c.txn_state == "committed"]

    def mark_compactions_cleaned(self, compaction_ids: Iterable[int]) -> None:
        """See `Metastore.mark_compactions_cleaned`: ids this object read with
        `compactions_to_clean` (Hive's `mark_cleaned` needs the table and partition)."""
        ids = list(compaction_ids)
        if not ids:
            return
        with self._s.lock:
            self._s.writable("record cleaned compactions")
            queue, params = self._history()
            if queue is not None:
                queue.mark_cleaned(ids)
            else:
                params.mark_cleaned(ids, self._s.clock())

    def live_readers(self, table: TableIdentifier, *, timeout_s: float) -> list[ReaderInfo]:
        """See `Metastore.live_readers`. The metastore registers no leases here; what stands
        for them is Hive's own rule: every open transaction (any table: a Hive or Trino query
        reads inside one), as a reader whose `min_open_txn` is its txn id, and every lock on
        the table held outside a transaction (`min_open_txn` 0: older than any compaction).
        The server times transactions out itself, so `timeout_s` is not used."""
        with self._s.lock:
            found = self._s.hive_table(table)
            txns = Txns.read(self._s.conn)
            locks = table_locks(self._s.conn, found)
        out = [ReaderInfo(r.txn_id, found.name, r.agent or "?", r.txn_id, r.opened_at,
                          r.heartbeat_at) for r in txns.rows.values() if r.state == "open"]
        out += [ReaderInfo(-lk.lockid, found.name, f"lock {lk.lockid} of {lk.user}@"
                           f"{lk.hostname} ({lk.agentInfo or '?'})", 0,
                           (lk.acquiredat or 0) / 1000, (lk.lastheartbeat or 0) / 1000)
                for lk in locks if not lk.txnid]
        return sorted(out, key=lambda r: r.reader_id)

    def forget_dead_readers(self, *, timeout_s: float) -> int:
        return 0


__all__ = ["CompactionOps"]
