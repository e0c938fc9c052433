"""Which transaction holds which write id, and in what state, as far as a Hive Metastore says.

The metastore answers no such question directly: `get_open_txns_info` lists the open and
aborted transactions (agent, heartbeat) without their tables, and `get_valid_write_ids` lists
a table's invalid write ids for a given valid-transaction list. Asked with a list in which
only transaction X is invalid, it names exactly X's write id on that table (Hive's
`getValidWriteIdsForTable` marks invalid the write ids whose transaction the list calls
invalid), so one call per open or aborted transaction maps them. Committed write ids are the
valid ones below the high watermark; the transaction that wrote them is not known (txn id 0).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ingest.acid import ValidWriteIdList
from ingest.txn.hms import _stubs
from ingest.txn.hms.connection import HmsConnection
from ingest.txn.hms.txns import TxnSnapshot, snapshot
from ingest.txn.model import TransactionInfo, TxnState


@dataclass(frozen=True)
class TxnRow:
    """One open or aborted transaction as `get_open_txns_info` lists it."""

    txn_id: int
    state: TxnState
    agent: str
    opened_at: float
    heartbeat_at: float


def txn_rows(conn: HmsConnection) -> tuple[int, list[TxnRow]]:
    """(the highest txn id, every open or aborted transaction the metastore keeps).

    Raises:
        MetastoreError: the metastore failed.
    """
    t = _stubs.ttypes()
    response = conn.call("get_open_txns_info")
    rows = []
    for info in response.open_txns or ():
        state: TxnState = "aborted" if info.state == t.TxnState.ABORTED else "open"
        started = (info.startedTime or 0) / 1000
        beat = (info.lastHeartbeatTime or 0) / 1000 or started
        rows.append(TxnRow(info.id, state, info.agentInfo or "", started, beat))
    return int(response.txn_high_water_mark), sorted(rows, key=lambda r: r.txn_id)


def write_id_of(conn: HmsConnection, table: str, txn_id: int, high_watermark: int) -> int | None:
    """The write id transaction `txn_id` holds on `table`, or None when it writes another.

    Raises:
        MetastoreError: the metastore failed.
    """
    alone = TxnSnapshot(high_watermark, (txn_id,), ())
    ids = snapshot(conn, table, txns=alone)
    return ids.open_write_ids[0] if ids.open_write_ids else None


def table_transactions(conn: HmsConnection, table: str,
                       states: Iterable[TxnState]) -> list[TransactionInfo]:
    """One row per transaction of `table` in `states`: open and aborted ones with their txn
    id, agent and heartbeat; committed write ids with txn id 0 (the metastore does not say).

    Raises:
        MetastoreError: the metastore failed.
    """
    wanted = set(states)
    high, rows = txn_rows(conn)
    out = []
    for row in rows:
        if row.state not in wanted:
            continue
        write_id = write_id_of(conn, table, row.txn_id, high)
        if write_id is not None:
            out.append(TransactionInfo(row.txn_id, table, write_id, row.state, row.agent,
                                       row.opened_at, row.heartbeat_at, None, None))
    if "committed" in wanted:
        states_now = write_id_states(snapshot(conn, table))
        out.extend(TransactionInfo(0, table, w, "committed", "", 0.0, 0.0, None, None)
                   for w, s in sorted(states_now.items()) if s == "committed")
    return sorted(out, key=lambda i: (i.txn_id, i.write_id))


def write_id_states(ids: ValidWriteIdList) -> dict[int, TxnState]:
    """Every write id up to the high watermark mapped to its state in a snapshot."""
    aborted = set(ids.aborted_write_ids)
    opened = set(ids.open_write_ids)
    return {w: ("aborted" if w in aborted else "open" if w in opened else "committed")
            for w in range(1, ids.high_watermark + 1)}

