"""Transactions, write ids, locks and snapshots in a Hive Metastore, in Hive Streaming v2's order:
`open_txns`, `allocate_table_write_ids`, a SHARED_READ lock for INSERT (`check_lock` polled
until granted), `add_dynamic_partitions`, then `commit_txn` or `abort_txn`.

Snapshots are Hive's: `get_open_txns` gives the valid-transaction list, `get_valid_write_ids`
turns it into one table's `ValidWriteIdList` (storage-api's ValidReaderWriteIdList).
"""

from __future__ import annotations

import getpass
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ingest.acid import ValidWriteIdList
from ingest.errors import CommitConflictError, MetastoreError
from ingest.txn.hms.thrift import _stubs
from ingest.txn.hms.thrift.connection import HmsConnection
from ingest.txn.hms.thrift.tables import HiveTable, qualified_name

AGENT_INFO = "ingest"
"""The agent a transaction or lock names when its caller gives none."""
LOCK_AGENT_CHARS = 128
"""The longest agent a lock can name (HIVE_LOCKS.HL_AGENT_INFO)."""
LOCK_TIMEOUT_S = 60.0
"""How long `lock` waits for a lock held by someone else before giving up."""
NO_OPEN_TXN = 9223372036854775807
"""Hive's Long.MAX_VALUE for "no open transaction" in a valid-transaction list."""

LockType = Literal["SHARED_READ", "SHARED_WRITE", "EXCL_WRITE", "EXCLUSIVE"]
Operation = Literal["SELECT", "INSERT", "UPDATE", "DELETE"]


@dataclass(frozen=True)
class TxnSnapshot:
    """The metastore's transactions as a reader sees them (Hive's ValidReadTxnList).

    Attributes:
        high_watermark: the highest transaction id handed out.
        open_txns: transactions still open, ascending.
        aborted_txns: aborted transactions whose records the metastore still keeps, ascending.
    """

    high_watermark: int
    open_txns: tuple[int, ...]
    aborted_txns: tuple[int, ...]

    def to_hive_string(self) -> str:
        """`hwm:minOpen:open,ids:aborted,ids`, with plain lists (Hive 4 also reads ranges,
        Hive 3 does not)."""
        low = self.open_txns[0] if self.open_txns else NO_OPEN_TXN
        return (f"{self.high_watermark}:{low}:{','.join(map(str, self.open_txns))}:"
                f"{','.join(map(str, self.aborted_txns))}")


@dataclass(frozen=True)
class HeartbeatResult:
    """What a heartbeat learnt: transactions the server aborted or no longer knows."""

    aborted: frozenset[int]
    missing: frozenset[int]

    @property
    def ok(self) -> bool:
        return not self.aborted and not self.missing


def open_txns(conn: HmsConnection, count: int = 1, *, user: str | None = None,
              agent: str = "") -> list[int]:
    """Open `count` transactions; their ids, ascending.

    Args:
        agent: who opens them, e.g. "host:pid:ingest-load" (SHOW TRANSACTIONS shows it).

    Raises:
        MetastoreError: the metastore failed.
    """
    t = _stubs.ttypes()
    response = conn.call("open_txns", t.OpenTxnRequest(
        num_txns=count, user=user or getpass.getuser(), hostname=socket.gethostname(),
        agentInfo=agent or AGENT_INFO))
    return sorted(response.txn_ids)


def allocate_write_ids(conn: HmsConnection, table: str, txn_ids: Sequence[int]) -> dict[int, int]:
    """One write id of `table` for each transaction: {txn id: write id}.

    Raises:
        CommitConflictError: the server says a transaction is no longer open.
        MetastoreError: the metastore failed. Hive 4.0.1 and 3.1.3 also answer this way for a
            transaction they aborted (an IllegalStateException they do not declare: an
            internal error, or a dropped connection), so allocate right after opening.
    """
    t = _stubs.ttypes()
    db, name = qualified_name(table)
    try:
        response = conn.call("allocate_table_write_ids", t.AllocateTableWriteIdsRequest(
            dbName=db, tableName=name, txnIds=list(txn_ids)),
            expect=(t.NoSuchTxnException, t.TxnAbortedException))
    except (t.NoSuchTxnException, t.TxnAbortedException) as e:
        raise _gone(conn, txn_ids, "allocate a write id of " + f"{db}.{name}", e) from e
    return {m.txnId: m.writeId for m in response.txnToWriteIds}


@dataclass(frozen=True)
class LockTarget:
    """One component of a lock request: a table (or one partition) and how it is locked.

    Attributes:
        table: the table.
        lock_type: Hive's lock type; SHARED_READ with INSERT is what Hive Streaming takes.
        operation: Hive's data operation.
        partition: a Hive partition name (`k=v/...`), or None for the table; on a
            partitioned table without one the write is "dynamic", and the partitions written
            are named before commit with `register_partitions`.
    """

    table: HiveTable
    lock_type: LockType = "SHARED_READ"
    operation: Operation = "INSERT"
    partition: str | None = None

    def describe(self) -> str:
        return f"{self.lock_type} lock for {self.operation} on {self.table.name}"


def lock(conn: HmsConnection, txn_id: int, table: HiveTable, *,
         lock_type: LockType = "SHARED_READ", operation: Operation = "INSERT",
         partition: str | None = None, timeout_s: float = LOCK_TIMEOUT_S,
         agent: str = "") -> int:
    """Take a lock for transaction `txn_id` on a table (or one partition) and wait for it
    (`lock_all` with one component).

    Returns:
        The lock id. It is released when the transaction commits or aborts.

    Raises:
        CommitConflictError: not granted within `timeout_s` (naming the lock that blocks it),
            refused, or the transaction is no longer open.
        MetastoreError: the metastore failed.
    """
    return lock_all(conn, txn_id, [LockTarget(table, lock_type, operation, partition)],
                    timeout_s=timeout_s, agent=agent)


def lock_all(conn: HmsConnection, txn_id: int, targets: Sequence[LockTarget], *,
             timeout_s: float = LOCK_TIMEOUT_S, agent: str = "") -> int:
    """Take one lock request with a component per target for transaction `txn_id`, and wait
    until all of them are granted (`check_lock` polled), as Hive's DbTxnManager locks a
    query's tables: one round trip for them all, and the server grants them together, so
    two requests never each hold a part the other waits for.

    Returns:
        The lock id. It is released when the transaction commits or aborts.

    Raises:
        ValueError: no target.
        CommitConflictError: not granted within `timeout_s` (naming the lock that blocks it),
            refused, or the transaction is no longer open.
        MetastoreError: the metastore failed.
    """
    if not targets:
        raise ValueError(f"no table to lock for transaction {txn_id}")
    t = _stubs.ttypes()
    components = [t.LockComponent(
        type=getattr(t.LockType, x.lock_type),
        level=t.LockLevel.PARTITION if x.partition else t.LockLevel.TABLE,
        dbname=x.table.database, tablename=x.table.table_name, partitionname=x.partition,
        operationType=getattr(t.DataOperationType, x.operation),
        # Sent explicitly: Thrift's Python code sends a False default, and the server then
        # leaves the table out of the transaction's components (nothing to compact or clean).
        isTransactional=True,
        isDynamicPartitionWrite=(bool(x.table.partition_columns) and x.partition is None
                                 and x.operation != "SELECT")) for x in targets]
    # HIVE_LOCKS.HL_AGENT_INFO is a VARCHAR(128): a longer agent (a stream's names its
    # checkpoint) fails the lock with an internal error, so it is cut.
    request = t.LockRequest(component=components, txnid=txn_id, user=getpass.getuser(),
                            hostname=socket.gethostname(),
                            agentInfo=(agent or AGENT_INFO)[:LOCK_AGENT_CHARS])
    gone = (t.NoSuchTxnException, t.TxnAbortedException)
    what = " and the ".join(x.describe() for x in targets)
    try:
        response = conn.call("lock", request, expect=gone)
        started = time.monotonic()
        pause = 0.05
        while response.state == t.LockState.WAITING:
            waited = time.monotonic() - started
            if waited >= timeout_s:
                blocker = "".join(_blocker(conn, table, response.lockid)
                                  for table in {x.table.name: x.table for x in targets}.values())
                raise CommitConflictError(
                    f"Cannot take the {what} (transaction {txn_id}) in the Hive Metastore at "
                    f"{conn.uri}: lock {response.lockid} still waits after {waited:.0f} s"
                    f"{blocker}",
                    hint="wait for the blocking transaction to finish, or abort it")
            time.sleep(min(pause, timeout_s - waited))
            pause = min(pause * 2, 1.0)
            response = conn.call("check_lock", t.CheckLockRequest(
                lockid=response.lockid, txnid=txn_id,
                elapsed_ms=int((time.monotonic() - started) * 1000)),
                expect=gone + (t.NoSuchLockException,))
    except (t.NoSuchTxnException, t.TxnAbortedException, t.NoSuchLockException) as e:
        raise _gone(conn, [txn_id], f"take the {what}", e) from e
    if response.state != t.LockState.ACQUIRED:
        state = t.LockState._VALUES_TO_NAMES.get(response.state, response.state)
        raise CommitConflictError(
            f"Cannot take the {what} (transaction {txn_id}) in the Hive Metastore at "
            f"{conn.uri}: the server answered {state}"
            f"{': ' + response.errorMessage if response.errorMessage else ''}")
    return int(response.lockid)


def register_partitions(conn: HmsConnection, txn_id: int, write_id: int, table: HiveTable,
                        partition_names: Sequence[str],
                        operation: Operation = "INSERT") -> None:
    """Tell the metastore which partitions a dynamic-partition write touched
    (`add_dynamic_partitions`), before commit, so its compactor and cleaner know them.

    Raises:
        CommitConflictError: the transaction is no longer open.
        MetastoreError: the metastore failed.
    """
    if not partition_names:
        return
    t = _stubs.ttypes()
    gone = (t.NoSuchTxnException, t.TxnAbortedException)
    try:
        conn.call("add_dynamic_partitions", t.AddDynamicPartitions(
            txnid=txn_id, writeid=write_id, dbname=table.database, tablename=table.table_name,
            partitionnames=list(partition_names),
            operationType=getattr(t.DataOperationType, operation)), expect=gone)
    except gone as e:
        raise _gone(conn, [txn_id], f"register the partitions of {table.name}", e) from e


def heartbeat(conn: HmsConnection, first_txn: int, last_txn: int) -> HeartbeatResult:
    """Keep transactions `first_txn..last_txn` alive (`heartbeat_txn_range`).

    Raises:
        MetastoreError: the metastore failed.
    """
    t = _stubs.ttypes()
    response = conn.call("heartbeat_txn_range",
                         t.HeartbeatTxnRangeRequest(min=first_txn, max=last_txn))
    return HeartbeatResult(frozenset(response.aborted or ()), frozenset(response.nosuch or ()))


def commit_txn(conn: HmsConnection, txn_id: int, *,
               key_value: tuple[int, str, str] | None = None,
               check_write_set: bool = False) -> None:
    """Commit a transaction; its locks go with it.

    Args:
        key_value: (table id, key, value) that Hive 4 writes into that table's parameters in
            the commit's own database transaction. The key must start with `_meta` and the
            parameter must already exist (the server UPDATEs exactly one row, else the commit
            fails). Hive 3 ignores the field.
        check_write_set: ask Hive 4 for its write-write conflict check (it skips it when
            the request says EXCL_WRITE locks serialize writers, Thrift's default; our
            updaters hold SHARED_WRITE). Hive 3 always checks an UPDATE/DELETE transaction.

    Raises:
        CommitConflictError: the server aborted the transaction (timeout) or does not know it.
        MetastoreError: the metastore failed; whether the commit happened is then unknown.
    """
    t = _stubs.ttypes()
    request = t.CommitTxnRequest(txnid=txn_id)
    if check_write_set:
        request.exclWriteEnabled = False
    if key_value is not None:
        table_id, key, value = key_value
        request.keyValue = t.CommitTxnKeyValue(tableId=table_id, key=key, value=value)
    gone = (t.NoSuchTxnException, t.TxnAbortedException)
    try:
        conn.call("commit_txn", request, expect=gone)
    except gone as e:
        raise _gone(conn, [txn_id], "commit", e) from e


def abort_txn(conn: HmsConnection, txn_id: int) -> bool:
    """Abort a transaction. True when the server accepted it (Hive 3.1 and 4.0.1 accept one
    already aborted again); False when it refused because the transaction is not open.

    Raises:
        MetastoreError: the metastore failed.
    """
    t = _stubs.ttypes()
    try:
        conn.call("abort_txn", t.AbortTxnRequest(txnid=txn_id),
                  expect=(t.NoSuchTxnException, t.TxnAbortedException))
    except (t.NoSuchTxnException, t.TxnAbortedException):
        return False
    return True


def txn_snapshot(conn: HmsConnection) -> TxnSnapshot:
    """The metastore's open and aborted transactions now (`get_open_txns`).

    Raises:
        MetastoreError: the metastore failed.
    """
    response = conn.call("get_open_txns")
    aborted_bits = _bits(response.abortedBits)
    open_ids: list[int] = []
    aborted: list[int] = []
    for i, txn in enumerate(response.open_txns or ()):
        (aborted if i in aborted_bits else open_ids).append(txn)
    return TxnSnapshot(response.txn_high_water_mark, tuple(open_ids), tuple(aborted))


def snapshot(conn: HmsConnection, table: str, *,
             txns: TxnSnapshot | None = None) -> ValidWriteIdList:
    """The write ids of `table` a reader may see now (or as of `txns`).

    Raises:
        MetastoreError: the metastore failed.
    """
    return snapshots(conn, [table], txns=txns)[table]


def snapshots(conn: HmsConnection, tables: Sequence[str], *,
              txns: TxnSnapshot | None = None, whole: bool = True) -> dict[str, ValidWriteIdList]:
    """The write ids of each of `tables` a reader may see now (or as of `txns`), in one
    `get_valid_write_ids` call; keyed as given.

    Hive answers a list under which no write id left in TXN_TO_WRITE_ID is valid (its
    housekeeping removes committed transactions' rows) shortened: its lowest invalid write id
    as the high watermark and the only one listed, the others being above it. With `whole`,
    such an answer is made whole with two more calls: the high watermark the highest write id
    allocated, every open and aborted one listed (the `Metastore.snapshot` contract).

    Raises:
        MetastoreError: the metastore failed.
    """
    txns = txns if txns is not None else txn_snapshot(conn)
    out = _snapshots(conn, tables, txns)
    short = [table for table, ids in out.items()
             if _invalid(ids) == (ids.high_watermark,)]
    if not whole or not short:
        return out
    allocated = _snapshots(conn, short, TxnSnapshot(txns.high_watermark, (), ()))
    opened = _snapshots(conn, short, TxnSnapshot(txns.high_watermark, txns.open_txns, ()))
    for table in short:
        ids, top = out[table], allocated[table].high_watermark
        if top <= ids.high_watermark:
            continue
        invalid = {*_invalid(ids), *range(ids.high_watermark + 1, top + 1)}
        o = opened[table]
        open_ids = {*_invalid(o), *range(o.high_watermark + 1, top + 1)} & invalid
        out[table] = ValidWriteIdList(ids.table, top, tuple(sorted(open_ids)),
                                      tuple(sorted(invalid - open_ids)))
    return out


def _invalid(ids: ValidWriteIdList) -> tuple[int, ...]:
    return tuple(sorted((*ids.open_write_ids, *ids.aborted_write_ids)))


def _snapshots(conn: HmsConnection, tables: Sequence[str],
               txns: TxnSnapshot) -> dict[str, ValidWriteIdList]:
    """`get_valid_write_ids` for `tables` as the server answers it."""
    if not tables:
        return {}
    t = _stubs.ttypes()
    names = {"{}.{}".format(*qualified_name(table)): table for table in tables}
    response = conn.call("get_valid_write_ids", t.GetValidWriteIdsRequest(
        fullTableNames=list(names), validTxnList=txns.to_hive_string()))
    out = {}
    for ids in response.tblValidWriteIds:
        aborted_bits = _bits(ids.abortedBits)
        open_ids: list[int] = []
        aborted: list[int] = []
        for i, write_id in enumerate(ids.invalidWriteIds or ()):
            (aborted if i in aborted_bits else open_ids).append(write_id)
        given = names.get(ids.fullTableName.lower(), ids.fullTableName)
        out[given] = ValidWriteIdList(ids.fullTableName, ids.writeIdHighWaterMark,
                                      tuple(open_ids), tuple(aborted))
    missing = [table for table in tables if table not in out]
    if missing:
        raise MetastoreError(f"The Hive Metastore at {conn.uri} answered get_valid_write_ids "
                             f"without {missing}", location=conn.uri)
    return out


def _bits(data: bytes | None) -> set[int]:
    """The set bits of a java.util.BitSet's toByteArray (little-endian)."""
    return {i * 8 + b for i, byte in enumerate(data or b"") for b in range(8) if byte >> b & 1}


def _blocker(conn: HmsConnection, table: HiveTable, lock_id: int) -> str:
    # Best effort: name the lock ours waits behind, as SHOW LOCKS would.
    t = _stubs.ttypes()
    try:
        locks = conn.call("show_locks", t.ShowLocksRequest(
            dbname=table.database, tablename=table.table_name)).locks or []
    except MetastoreError:  # the message is still right without the blocker
        return ""
    ours = next((lk for lk in locks if lk.lockid == lock_id), None)
    if ours is None or not ours.blockedByExtId:
        return ""
    holder = next((lk for lk in locks if lk.lockid == ours.blockedByExtId), None)
    if holder is None:
        return f", behind lock {ours.blockedByExtId}"
    kind = t.LockType._VALUES_TO_NAMES.get(holder.type, holder.type)
    return (f", behind lock {holder.lockid} ({kind} of transaction {holder.txnid}, user "
            f"{holder.user}@{holder.hostname}, agent {holder.agentInfo})")


def _gone(conn: HmsConnection, txn_ids: Sequence[int], action: str,
          e: Any) -> CommitConflictError:
    ids = ", ".join(map(str, txn_ids))
    return CommitConflictError(
        f"Cannot {action} in transaction {ids}: the Hive Metastore at {conn.uri} no longer has "
        f"it open ({getattr(e, 'message', None) or type(e).__name__})",
        hint="it was aborted, probably because no heartbeat reached the server within "
             "hive.txn.timeout; the write must be redone in a new transaction")
