"""Compactions of our tables in a Hive Metastore: the compactor's transaction, one compaction per
partition at a time, and the history the cleaner reads.

Hive 4 (4.0 and later): Hive's own compaction queue, as a remote compactor uses it. `compact2`
queues the request under a pool of its own (`ingest-<txn>`), `find_next_compact2` on that pool
moves it to 'working', `update_compactor_state` ties the compactor's transaction (opened with
type COMPACTION) to it, `mark_compacted` and the commit end it ('ready for cleaning'; the commit
records CQ_NEXT_TXN_ID), `mark_cleaned` once the cleaner removed what it hid; `mark_failed`
and `mark_refused` otherwise. So SHOW COMPACTIONS lists them, the server keeps them, and Hive
refuses a second request for a partition that has one queued or working.

Hive 3.1 has none of these calls over Thrift (its compactor talks to the database), so the
history is a table parameter, `ingest_compactions` (JSON, the last records per partition),
written by the compactor and the cleaner; the compactor's transaction is a plain one.
"""

from __future__ import annotations

import getpass
import json
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ingest.errors import CommitConflictError, ConfigError, MetastoreError
from ingest.txn.hms._catalog import find_hive_table, set_parameters
from ingest.txn.hms._states import TxnRow, txn_rows
from ingest.txn.hms.thrift import HiveTable, HmsConnection, snapshot, ttypes
from ingest.txn.hms.thrift import compact_api as api
from ingest.txn.model import CompactionInfo, CompactionState, TxnState

POOL_PREFIX = "ingest-"
"""Pool names of ingest's compactions in Hive 4's queue: `ingest-<compactor txn id>`."""
HISTORY_PARAMETER = "ingest_compactions"
"""The table parameter holding the history on a Hive 3 metastore."""
KEEP_PER_PARTITION = 20
"""Records kept per partition in that parameter (the newest)."""

_HIVE_STATES: dict[str, CompactionState] = {
    "initiated": "working", "working": "working", "ready for cleaning": "ready for cleaning",
    "cleaning": "ready for cleaning", "succeeded": "succeeded",
}


@dataclass(frozen=True)
class Txns:
    """The metastore's transactions at one moment: highest id, open and aborted ones."""

    highest: int
    rows: dict[int, TxnRow]

    @classmethod
    def read(cls, conn: HmsConnection) -> Txns:
        highest, rows = txn_rows(conn)
        return cls(highest, {r.txn_id: r for r in rows})

    def state(self, txn_id: int | None) -> TxnState | None:
        if txn_id is None or txn_id > self.highest:
            return None
        row = self.rows.get(txn_id)
        return "committed" if row is None else row.state


def open_compactor_txn(conn: HmsConnection, agent: str) -> int:
    """Open the compactor's transaction (type COMPACTION on Hive 4, a plain one on Hive 3).

    Raises:
        MetastoreError: the metastore failed.
    """
    t = ttypes()
    request = t.OpenTxnRequest(num_txns=1, user=getpass.getuser(),
                               hostname=socket.gethostname(), agentInfo=agent or "ingest")
    if conn.info.major >= 4:
        request.txn_type = t.TxnType.COMPACTION
    return int(conn.call("open_txns", request).txn_ids[0])


def _busy(table: str, partition: str, what: str, hint: str) -> CommitConflictError:
    return CommitConflictError(f"Cannot compact {table} partition {partition or '(table)'}: "
                               f"{what}", hint=hint)


class QueueHistory:
    """Compactions in Hive 4's queue (see the module docstring)."""

    def __init__(self, conn: HmsConnection) -> None:
        self._conn = conn
        self._seen: dict[int, tuple[HiveTable, api.QueueEntry]] = {}

    def take_over_dead(self, table: HiveTable, partition: str, txns: Txns, *,
                       stale_after_s: float, now: float,
                       is_alive: Callable[[str], bool] | None,
                       abort: Callable[[int], None]) -> None:
        """Fail the partition's queued or working compactions whose compactor is gone; refuse
        when a live one works on it.

        Raises:
            CommitConflictError: a live compactor (ours or Hive's) holds the partition.
            MetastoreError: the metastore failed.
        """
        for e in api.show(self._conn, table.database, table.table_name):
            if e.partition != partition or e.state not in ("initiated", "working",
                                                           "ready for cleaning"):
                continue
            if not e.pool.startswith(POOL_PREFIX):
                if e.state == "ready for cleaning":
                    continue  # Hive's own, finished: its cleaner's business
                raise _busy(table.name, partition,
                            f"Hive's compaction queue has compaction {e.compaction_id} "
                            f"({e.state}, worker {e.worker or '-'}) for it",
                            "let Hive's compactor finish it, or ABORT COMPACTIONS "
                            f"{e.compaction_id} in Hive")
            txn = int(e.pool[len(POOL_PREFIX):])
            state = txns.state(txn)
            if e.state == "ready for cleaning" and state == "committed":
                continue  # finished; waits for the cleaner
            if state == "open":
                row = txns.rows[txn]
                silent = now - row.heartbeat_at
                if silent <= stale_after_s and (is_alive is None or is_alive(e.worker)):
                    raise _busy(table.name, partition,
                                f"compaction {e.compaction_id} (transaction {txn}, agent "
                                f"{e.worker or '?'}) is still working on it",
                                "wait for it to finish; a compactor silent for "
                                f"{stale_after_s:g} s is taken over")
                abort(txn)
                reason = f"compactor stopped: no heartbeat for {silent:.1f} s or process gone"
            else:
                reason = f"compactor stopped: its transaction {txn} is {state or 'missing'}"
            if e.state == "initiated":
                api.take(self._conn, pool=e.pool, worker=e.worker or "ingest")
            api.mark(self._conn, "failed", api.info_struct(
                e.compaction_id, table.database, table.table_name, partition, e.kind,
                error=reason))

    def begin(self, table: HiveTable, partition: str, kind: str, txn: int, agent: str) -> int:
        """Queue and take the compaction for transaction `txn`; its id.

        Raises:
            CommitConflictError: Hive refused the request (one is queued, working, or ready
                for cleaning at the same high-water mark).
            MetastoreError: the metastore failed.
        """
        pool = f"{POOL_PREFIX}{txn}"
        cid, accepted, message = api.compact2(
            self._conn, table.database, table.table_name, partition, kind, pool=pool,
            user=getpass.getuser(), initiator=agent)
        if not accepted:
            raise _busy(table.name, partition, f"the Hive Metastore refused to queue it: "
                        f"{message or 'no reason given'}",
                        "a compaction that is ready for cleaning at the same write-id high-"
                        "water mark blocks another: run `ingest clean` first, or write more")
        if api.take(self._conn, pool=pool, worker=agent) is None:
            raise MetastoreError(f"Cannot compact {table.name}: compaction {cid} was queued "
                                 f"in pool {pool} but find_next_compact2 did not return it",
                                 location=self._conn.uri)
        hwm = snapshot(self._conn, table.name).high_watermark
        api.set_txn(self._conn, api.info_struct(cid, table.database, table.table_name,
                                                partition, kind, highest_write_id=hwm,
                                                user=getpass.getuser()), txn)
        return cid

    def entry(self, table: HiveTable, compaction_id: int) -> api.QueueEntry | None:
        return next((e for e in api.show(self._conn, table.database, table.table_name)
                     if e.compaction_id == compaction_id), None)

    def record_done(self, table: HiveTable, e: api.QueueEntry, txn: int,
                    highest_write_id: int) -> None:
        """Tie the final high-water mark to the compaction and mark it compacted (the caller
        commits the transaction next)."""
        info = api.info_struct(e.compaction_id, table.database, table.table_name, e.partition,
                               e.kind, highest_write_id=highest_write_id,
                               user=getpass.getuser())
        api.set_txn(self._conn, info, txn)
        api.mark(self._conn, "compacted", info)

    def end(self, table: HiveTable, e: api.QueueEntry, how: str, error: str | None) -> None:
        api.mark(self._conn, how, api.info_struct(e.compaction_id, table.database,
                                                  table.table_name, e.partition, e.kind,
                                                  error=error))

    def history(self, table: HiveTable, txns: Txns) -> list[CompactionInfo]:
        out = []
        for e in api.show(self._conn, table.database, table.table_name):
            ours = e.pool.startswith(POOL_PREFIX)
            if ours and e.state == "refused":
                continue  # ingest's "nothing to compact": forgotten, as the SQL backends do
            txn = int(e.pool[len(POOL_PREFIX):]) if ours else e.txn_id
            self._seen[e.compaction_id] = (table, e)
            state = _HIVE_STATES.get(e.state, "failed")
            txn_state = txns.state(txn)
            next_txn = e.next_txn_id
            if state == "ready for cleaning" and next_txn is None:
                next_txn = txns.highest  # not reported: every transaction so far may be older
            row = txns.rows.get(txn or 0)
            out.append(CompactionInfo(
                e.compaction_id, table.name, e.partition, e.kind, state, txn, txn_state,
                e.worker, row.heartbeat_at if row else None, e.highest_write_id,
                e.started_at or e.enqueued_at or 0.0, e.committed_at or e.ended_at,
                e.ended_at if e.state == "succeeded" else None, None, (), (),
                e.error, next_txn))
        return out

    def mark_cleaned(self, ids: Iterable[int]) -> None:
        for cid in ids:
            seen = self._seen.get(cid)
            if seen is None:
                continue  # not read by this object: the next cleaning marks it
            table, e = seen
            api.mark(self._conn, "cleaned", api.info_struct(
                cid, table.database, table.table_name, e.partition, e.kind,
                highest_write_id=e.highest_write_id))


class ParameterHistory:
    """Compactions recorded in a table parameter (Hive 3.1; see the module docstring)."""

    def __init__(self, conn: HmsConnection, location: str) -> None:
        self._conn = conn
        self._location = location
        self._tables: dict[int, str] = {}  # compaction id -> table name, for mark_cleaned

    def _read(self, name: str) -> tuple[HiveTable, dict[str, list[dict[str, Any]]]]:
        table = find_hive_table(self._conn, name)
        if table is None:
            raise MetastoreError(f"Cannot read the compactions of {name}: the table is gone "
                                 f"from the Hive Metastore at {self._location}",
                                 location=self._location)
        text = (table.thrift.parameters or {}).get(HISTORY_PARAMETER) or "{}"
        try:
            data = json.loads(text)
        except ValueError as e:
            raise MetastoreError(f"Cannot read the compactions of {name}: its table parameter "
                                 f"{HISTORY_PARAMETER} is not JSON ({e})",
                                 location=self._location,
                                 hint=f"remove the parameter {HISTORY_PARAMETER}; only the "
                                      "cleaner's wait for older transactions depends on it") from e
        return table, data

    def _update(self, name: str, partition: str,
                change: Callable[[list[dict[str, Any]]], None]) -> None:
        table, data = self._read(name)
        records = data.setdefault(partition, [])
        change(records)
        data[partition] = records[-KEEP_PER_PARTITION:]
        set_parameters(self._conn, table, {HISTORY_PARAMETER: json.dumps(data, sort_keys=True)})

    def working(self, name: str, partition: str) -> list[dict[str, Any]]:
        _, data = self._read(name)
        return [r for r in data.get(partition, []) if r["state"] == "working"]

    def set_state(self, name: str, partition: str, compaction_id: int,
                  **fields: Any) -> dict[str, Any] | None:
        """Update one record that is still 'working'; the record before, or None."""
        before: list[dict[str, Any]] = []

        def change(records: list[dict[str, Any]]) -> None:
            for r in records:
                if r["id"] == compaction_id and r["state"] == "working":
                    before.append(dict(r))
                    r.update(fields)
        self._update(name, partition, change)
        return before[0] if before else None

    def add(self, name: str, partition: str, record: dict[str, Any]) -> None:
        self._update(name, partition, lambda records: records.append(record))

    def remove(self, name: str, partition: str, compaction_id: int) -> None:
        def change(records: list[dict[str, Any]]) -> None:
            records[:] = [r for r in records if r["id"] != compaction_id]
        self._update(name, partition, change)

    def history(self, name: str, txns: Txns) -> list[CompactionInfo]:
        _, data = self._read(name)
        out = []
        for partition, records in data.items():
            for r in records:
                self._tables[int(r["id"])] = name
                state: CompactionState = r["state"]
                txn_state = txns.state(r["txn"])
                next_txn = r.get("next_txn")
                if state == "working" and txn_state == "committed":
                    # Committed, then the compactor died before recording it.
                    state, next_txn = "ready for cleaning", txns.highest
                row = txns.rows.get(r["txn"])
                out.append(CompactionInfo(
                    int(r["id"]), name, partition, r["kind"], state, r["txn"], txn_state,
                    r.get("agent", ""), row.heartbeat_at if row else None, r.get("hwm"),
                    r["started"], r.get("finished"), r.get("cleaned"), r.get("rows"),
                    tuple(r.get("inputs", ())), tuple(r.get("outputs", ())), r.get("error"),
                    next_txn))
        return sorted(out, key=lambda c: c.compaction_id)

    def mark_cleaned(self, ids: Iterable[int], now: float) -> None:
        wanted = {i for i in ids if i in self._tables}
        for name in sorted({self._tables[i] for i in wanted}):
            table, data = self._read(name)
            for records in data.values():
                for r in records:
                    if int(r["id"]) in wanted and r["state"] == "ready for cleaning":
                        r.update(state="succeeded", cleaned=now)
            set_parameters(self._conn, table,
                           {HISTORY_PARAMETER: json.dumps(data, sort_keys=True)})


def table_locks(conn: HmsConnection, table: HiveTable) -> list[Any]:
    """The locks on a table and its partitions (SHOW LOCKS).

    Raises:
        MetastoreError: the metastore failed.
    """
    t = ttypes()
    return list(conn.call("show_locks", t.ShowLocksRequest(
        dbname=table.database, tablename=table.table_name)).locks or [])


def check_kind(kind: str) -> None:
    """Raises:
        ConfigError: kind is neither "major" nor "minor"."""
    if kind not in ("major", "minor"):
        raise ConfigError(f"Cannot record a {kind!r} compaction: kind must be 'major' or "
                          "'minor'")


__all__ = ["HISTORY_PARAMETER", "POOL_PREFIX", "ParameterHistory", "QueueHistory", "Txns",
           "check_kind", "open_compactor_txn", "table_locks"]
