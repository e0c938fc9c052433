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
- `commit_txn`: sent once more on the new connection, which is also the lookup. Hive's
  commit_txn of a transaction that is not open asks its state and answers success when it
  committed (TXNS says so, or, its TXNS row gone, COMPLETED_TXN_COMPONENTS holds its writes),
  TxnAbortedException when it aborted, NoSuchTxnException when it knows it no more; an open
  one it commits. The transaction list alone (`get_open_txns_info`: listed no more and at or
  below the high-water mark) would not do: Hive's housekeeper (AcidHouseKeeperService and
  Hive 4's AcidTxnCleanerService, `cleanEmptyAbortedAndCommittedTxns`; Hive 3.1's
  `cleanEmptyAbortedTxns`) deletes from TXNS the aborted transactions that have no
  TXN_COMPONENTS row (and, on Hive 4, the committed ones) once they are older than
  metastore.txn.opentxn.timeout, so an aborted transaction vanishes as a committed one does.
  The write ids' states in `get_valid_write_ids` do no better: Hive derives them from the
  transaction list the request carries (a write id is aborted only while its transaction is
  listed aborted). A transaction Hive knows no more is reported as an unknown outcome, never
  as committed.

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
    """`commit_txn`; if the call is cut off, it is sent once more on a new connection, whose
    answer says what happened (the module's docstring): success, the transaction is
    committed (by the lost call or by this one).

    Raises:
        CommitConflictError: the server aborted the transaction (whether before the lost call
            or not, the commit did not happen), or refused the commit (write-set conflict).
        MetastoreError: the metastore failed, or it no longer knows the transaction after the
            lost call: whether the commit happened is then unknown.
    """
    try:
        commit_txn(conn, txn_id, check_write_set=check_write_set)
        return
    except MetastoreError as e:
        if not conn.broken:
            raise
        lost = e
    fresh = reconnect()
    t = _stubs.ttypes()
    try:
        commit_txn(fresh, txn_id, check_write_set=check_write_set)
    except CommitConflictError as e:
        if isinstance(e.__cause__, t.NoSuchTxnException):
            raise MetastoreError(
                f"Cannot tell whether transaction {txn_id} committed: its commit call was cut "
                f"off ({lost.message}) and the Hive Metastore at {fresh.uri} no longer knows it",
                location=fresh.uri) from e
        if isinstance(e.__cause__, t.TxnAbortedException):
            raise CommitConflictError(
                f"Transaction {txn_id} was aborted in the Hive Metastore at {fresh.uri}: its "
                f"commit call was cut off ({lost.message}) and did not commit it",
                hint="write the batch again in a new transaction") from e
        raise


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


__all__ = ["ATTEMPT_MARK", "allocate_write_id_settled", "commit_txn_settled", "open_txn_settled",
           "tag_host"]
