"""Which transaction holds which write id, and in what state, as far as a Hive Metastore says.

The metastore answers no such question directly: `get_open_txns_info` lists the open and
aborted transactions (agent, heartbeat) without their tables, and `get_valid_write_ids` lists
tables' invalid write ids for a given valid-transaction list. Asked with a list in which only
a set S of transactions is invalid, it names exactly the write ids S holds (Hive's
`getValidWriteIdsForTable` marks invalid the write ids whose transaction the list calls
invalid). Numbering the n transactions from 1 and making the ones with bit b set invalid in
call b spells out each write id's transaction in ceil(log2(n + 1)) calls, each for every
table at once, plus one for the highest write ids allocated (`write_id_owners`). Committed
write ids are the valid ones below the high watermark; the transaction that wrote them is not
known (txn id 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ingest.acid import ValidWriteIdList
from ingest.txn.hms.thrift import HmsConnection, TxnSnapshot, snapshot, snapshots, ttypes
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
    t = ttypes()
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


def write_id_owners(conn: HmsConnection, tables: Sequence[str], txn_ids: Iterable[int],
                    high_watermark: int) -> dict[str, dict[int, int]]:
    """The write ids transactions `txn_ids` hold on each of `tables`: {table: {write id: txn
    id}}, in 1 + ceil(log2(n + 1)) calls for n transactions (see the module's docstring).

    Raises:
        MetastoreError: the metastore failed.
    """
    ordered = sorted(set(txn_ids))
    codes: dict[str, dict[int, int]] = {table: {} for table in tables}
    if not ordered or not tables:
        return codes
    # Every transaction valid: the highest write id allocated on each table. A list in which
    # no write id left in TXN_TO_WRITE_ID is valid is answered shortened (Hive 4: the lowest
    # invalid write id as the high watermark), so the ids above it count as invalid too.
    allocated = {t: ids.high_watermark for t, ids in snapshots(
        conn, tables, txns=TxnSnapshot(high_watermark, (), ()), whole=False).items()}
    for bit in range(len(ordered).bit_length()):
        invalid = tuple(txn for i, txn in enumerate(ordered, start=1) if i >> bit & 1)
        found = snapshots(conn, tables, txns=TxnSnapshot(high_watermark, invalid, ()),
                          whole=False)
        for table, ids in found.items():
            above = range(ids.high_watermark + 1, allocated[table] + 1)
            for write_id in (*ids.open_write_ids, *ids.aborted_write_ids, *above):
                codes[table][write_id] = codes[table].get(write_id, 0) | 1 << bit
    # A code outside 1..n would be a write id no listed transaction holds: never expected.
    return {table: {w: ordered[code - 1] for w, code in sorted(by_id.items())
                    if 0 < code <= len(ordered)}
            for table, by_id in codes.items()}


def table_transactions(conn: HmsConnection, tables: Sequence[str],
                       states: Iterable[TxnState]) -> list[TransactionInfo]:
    """One row per (transaction, table) of `tables` in `states`: open and aborted ones with
    their txn id, agent and heartbeat; committed write ids with txn id 0 (the metastore does
    not say). A handful of calls whatever the number of tables and transactions.

    Raises:
        MetastoreError: the metastore failed.
    """
    wanted = set(states)
    high, rows = txn_rows(conn)
    picked = {row.txn_id: row for row in rows if row.state in wanted}
    out = []
    for table, owners in write_id_owners(conn, tables, picked, high).items():
        for write_id, txn_id in owners.items():
            row = picked[txn_id]
            out.append(TransactionInfo(txn_id, table, write_id, row.state, row.agent,
                                       row.opened_at, row.heartbeat_at, None, None))
    if "committed" in wanted and tables:
        for table, ids in snapshots(conn, tables).items():
            out.extend(TransactionInfo(0, table, w, "committed", "", 0.0, 0.0, None, None)
                       for w, s in sorted(write_id_states(ids).items()) if s == "committed")
    return sorted(out, key=lambda i: (i.txn_id, i.table, i.write_id))


def write_id_states(ids: ValidWriteIdList) -> dict[int, TxnState]:
    """Every write id up to the high watermark mapped to its state in a snapshot."""
    aborted = set(ids.aborted_write_ids)
    opened = set(ids.open_write_ids)
    return {w: ("aborted" if w in aborted else "open" if w in opened else "committed")
            for w in range(1, ids.high_watermark + 1)}

