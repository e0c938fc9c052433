"""Write calls cut off mid-flight: their outcome is established before anything is redone.

A write call whose connection broke after the request was sent may or may not have happened
on the server; sending it again blindly could open a second transaction or commit twice. So,
on a new connection (to any host of the same backing database):

- `open_txns`: each attempt names a client host tagged uniquely for it (`tag_host`: Hive
  keeps it in TXNS.TXN_HOST and `get_open_txns_info` lists it; that call answers "Unknown"
  for the agent on Hive 4, so the agent cannot carry the tag); a transaction opened by the
  lost attempt is found by that tag and aborted, then one transaction is opened again.
- `allocate_table_write_ids`: Hive answers a transaction's write id of a table it already
  holds (one per transaction and table), so asking again is the lookup: the lost call's
  write id when it happened, else a new one.
- `commit_txn`: the transaction's state says what happened: still open, the commit did not
  happen (it is sent once more); listed no more, it committed; aborted, it did not.

Other write calls are not resent: their failure reaches the caller, who aborts the
transaction (`ingest.txn.hms._commit`).
"""

from __future__ import annotations

import getpass
import socket
import uuid
from collections.abc import Callable

from ingest.errors import CommitConflictError, MetastoreError
from ingest.txn.hms.thrift import _stubs
from ingest.txn.hms.thrift.connection import HmsConnection
from ingest.txn.hms.thrift.txns import AGENT_INFO, allocate_write_ids, commit_txn

ATTEMPT_MARK = "#attempt-"
"""What separates the client's host name from its attempt's tag in TXN_HOST."""
_HOST_CHARS = 128 - len(ATTEMPT_MARK) - 12
"""TXNS.TXN_HOST is 128 characters: the host name's share of it."""

Reconnect = Callable[[], HmsConnection]
"""A live connection, replacing the broken one (to another host when its host is gone)."""


def tag_host() -> str:
    """This client's host name with a tag no other attempt has."""
    return f"{socket.gethostname()[:_HOST_CHARS]}{ATTEMPT_MARK}{uuid.uuid4().hex[:12]}"


def open_txn_settled(conn: HmsConnection, reconnect: Reconnect, agent: str) -> int:
    """Open one transaction; if the call is cut off, abort the transaction it may have
    opened (found by its attempt's tag) and open one again on a new connection, once.

    Raises:
        MetastoreError: the metastore failed (twice, or other than by a lost connection).
    """
    tagged = tag_host()
    try:
        return _open(conn, agent, tagged)
    except MetastoreError:
        if not conn.broken:
            raise
    fresh = reconnect()
    for txn_id in _open_from(fresh, tagged):
        _abort(fresh, txn_id)  # the lost attempt's orphan
    return _open(fresh, agent, tag_host())


def allocate_write_id_settled(conn: HmsConnection, reconnect: Reconnect, table: str,
                               txn_id: int) -> int:
    """Transaction `txn_id`'s write id of `table`; a call cut off is asked again on a new
    connection (see the module's docstring: Hive then answers the lost call's write id).

    Raises:
        CommitConflictError: the server says the transaction is no longer open.
        MetastoreError: the metastore failed.
    """
    try:
        return allocate_write_ids(conn, table, [txn_id])[txn_id]
    except MetastoreError:
        if not conn.broken:
            raise
    return allocate_write_ids(reconnect(), table, [txn_id])[txn_id]


def commit_txn_settled(conn: HmsConnection, reconnect: Reconnect, txn_id: int, *,
                       check_write_set: bool = False) -> None:
    """`commit_txn`; if the call is cut off, the transaction's state on a new connection
    says whether it committed; still open, it is committed there once more.

    Raises:
        CommitConflictError: the server aborted the transaction or does not know it.
        MetastoreError: the metastore failed; whether the commit happened is then unknown.
    """
    try:
        commit_txn(conn, txn_id, check_write_set=check_write_set)
    except MetastoreError as lost:
        if not conn.broken:
            raise
        fresh = reconnect()
        state = txn_state(fresh, txn_id)
        if state == "open":  # the commit did not happen: once more, on the live host
            commit_txn(fresh, txn_id, check_write_set=check_write_set)
        elif state != "committed":
            raise CommitConflictError(
                f"Transaction {txn_id} was {state or 'unknown'} in the Hive Metastore at "
                f"{fresh.uri} after its commit call was cut off ({lost.message})",
                hint="write the batch again in a new transaction") from lost


def txn_state(conn: HmsConnection, txn_id: int) -> str | None:
    """"open" or "aborted" while `get_open_txns_info` lists it, "committed" once handed out
    and listed no more, None when never handed out.

    Raises:
        MetastoreError: the metastore failed.
    """
    t = _stubs.ttypes()
    response = conn.call("get_open_txns_info")
    for info in response.open_txns or ():
        if info.id == txn_id:
            return "aborted" if info.state == t.TxnState.ABORTED else "open"
    return "committed" if 0 < txn_id <= int(response.txn_high_water_mark) else None


def _open(conn: HmsConnection, agent: str, host: str) -> int:
    t = _stubs.ttypes()
    response = conn.call("open_txns", t.OpenTxnRequest(
        num_txns=1, user=getpass.getuser(), hostname=host, agentInfo=agent or AGENT_INFO))
    return int(response.txn_ids[0])


def _open_from(conn: HmsConnection, host: str) -> list[int]:
    t = _stubs.ttypes()
    response = conn.call("get_open_txns_info")
    return [i.id for i in response.open_txns or ()
            if i.hostname == host and i.state == t.TxnState.OPEN]


def _abort(conn: HmsConnection, txn_id: int) -> None:
    t = _stubs.ttypes()
    try:
        conn.call("abort_txn", t.AbortTxnRequest(txnid=txn_id),
                  expect=(t.NoSuchTxnException, t.TxnAbortedException))
    except (t.NoSuchTxnException, t.TxnAbortedException):
        pass  # gone already: nothing left open


__all__ = ["ATTEMPT_MARK", "allocate_write_id_settled", "commit_txn_settled",
           "open_txn_settled", "tag_host", "txn_state"]
