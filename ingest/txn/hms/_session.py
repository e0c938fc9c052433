"""One `HiveMetastore`'s session with the server, shared by all its parts: the connection
(replaced when the server dropped it), the lock that makes its calls one at a time, the
transactions it holds open (their heartbeats, the tables they write), the side-table caches,
and the table lookups and aborts every part uses. The Hive Metastore's counterpart of the
SQL backend's `Database` (`ingest.txn.sql._database`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from ingest.errors import CommitConflictError, MetastoreError
from ingest.txn.hms._catalog import find_hive_table
from ingest.txn.hms._states import txn_rows
from ingest.txn.hms.side import (
    MANIFEST,
    PROGRESS,
    ensure_progress_table,
    find_progress_table,
    is_side_table,
)
from ingest.txn.hms.thrift import Heartbeater, HiveTable, HmsConnection, connect, get_tables, ttypes
from ingest.txn.model import TableIdentifier, Transaction, TxnState, table_key, table_not_found

_T = TypeVar("_T")

RECONNECT_S = 15.0
"""How long a dropped connection is retried (with growing pauses) before a call fails."""


class Session:
    """The connection, lock, open transactions, caches and lookups of one `HiveMetastore`.

    Attributes:
        location: how messages name the metastore (its `thrift://` URI, every host of it;
            the connection's `uri` names the host it is on).
        read_only: opened read-only (`writable` refuses writes).
        leases: reads take leases (read transactions).
        clock: seconds since the epoch, for the times recorded.
        lock: held by every call of every part, so one connection serves threads in turn.
        beats: txn id -> the heartbeat of each transaction this session holds open.
        txn_tables: txn id -> the tables it writes, by name.
        delete_locked: (txn id, table name) pairs holding Hive's lock for DELETE.
        progress_tables: target name -> its progress table.
        manifest_tables: target name -> its manifest table.
    """

    reconnect_s = RECONNECT_S

    def __init__(self, conn: HmsConnection, *, read_only: bool,
                 clock: Callable[[], float], leases: bool | None = None) -> None:
        """Hold an open connection. `leases`: whether reads take leases (default: unless
        `read_only`)."""
        self.location = conn.service_uri
        self._connection = conn
        self._closed = False
        self.leases = not read_only if leases is None else leases
        self.progress_tables: dict[str, HiveTable] = {}
        self.manifest_tables: dict[str, HiveTable] = {}
        self.read_only = read_only
        self.clock = clock
        self.lock = threading.RLock()
        self.beats: dict[int, Heartbeater] = {}
        self.txn_tables: dict[int, dict[str, HiveTable]] = {}
        self.delete_locked: set[tuple[int, str]] = set()

    # -- the connection ---------------------------------------------------------------------

    @property
    def conn(self) -> HmsConnection:
        """The connection; one the server dropped is replaced first (`_reconnect`)."""
        if self._connection.broken and not self._closed:
            self._connection = self._reconnect(self._connection)
        return self._connection

    @property
    def current(self) -> HmsConnection:
        """The connection as it is, not replaced when broken (for its URI and server info)."""
        return self._connection

    def _reconnect(self, lost: HmsConnection) -> HmsConnection:
        """A new connection, retried with pauses of 0.5, 1, 2... s for up to `reconnect_s`.

        Raises:
            MetastoreError: the server did not answer within the time, naming the attempts
                and the last failure.
        """
        deadline = time.monotonic() + self.reconnect_s
        pause, attempts = 0.5, 0
        while True:
            attempts += 1
            try:
                return connect(lost.service_uri, avoid=lost.uri)
            except MetastoreError as e:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise MetastoreError(
                        f"Lost the Hive Metastore at {self.location}: {attempts} attempts to "
                        f"reconnect over {self.reconnect_s:g} s failed; the last one: "
                        f"{e.message}", location=self.location,
                        hint="check that the metastore runs; a restarted job continues "
                             "exactly once from its checkpoint") from e
                time.sleep(min(pause, left))
                pause *= 2

    def read_retrying(self, read: Callable[[], _T]) -> _T:
        """Run a read; if the connection broke under it, run it once more on a new one."""
        try:
            return read()
        except MetastoreError:
            if not self._connection.broken or self._closed:
                raise
            return read()

    def close(self) -> None:
        """Stop the heartbeats of the transactions held open and close the connection."""
        with self.lock:
            self._closed = True
            for beats in self.beats.values():
                beats.stop()
            self.beats.clear()
            self._connection.close()

    def writable(self, action: str) -> None:
        """Refuse to `action` when opened read-only.

        Raises:
            MetastoreError: the session is read-only.
        """
        if self.read_only:
            raise MetastoreError(f"Cannot {action}: the Hive Metastore at {self.location} was "
                                 "opened read-only", location=self.location)

    # -- table lookups ------------------------------------------------------------------------

    def hive_table(self, table: TableIdentifier) -> HiveTable:
        """The full-ACID Hive table `table` names.

        Raises:
            TableNotFoundError: no such table.
            UnsupportedFormatError: it is not full-ACID ORC.
        """
        found = find_hive_table(self.conn, table)
        if found is None:
            raise table_not_found(table, self.location)
        found.require_full_acid(self.location)
        return found

    def hive_tables(self, refs: Sequence[TableIdentifier]) -> list[HiveTable]:
        """The full-ACID Hive tables `refs` name, in order. Named tables are looked up with
        their side tables in one call per database (`get_tables`), which also refreshes
        what this session knows of the side tables (the commit writes them; one that is not
        full-ACID is left to the commit's own lookup, which refuses it).

        Raises:
            TableNotFoundError: no such table.
            UnsupportedFormatError: one is not full-ACID ORC.
            MetastoreError: the metastore failed.
        """
        keys = [table_key(r) for r in refs]
        if any(what != "name" for what, _ in keys):
            return [self.hive_table(r) for r in refs]
        names = [name for _, name in keys]
        targets = [n for n in names if not is_side_table(n)]
        sides = {n: (PROGRESS.name(n), MANIFEST.name(n)) for n in targets}
        found = get_tables(self.conn, [*names, *(x for pair in sides.values() for x in pair)])
        for ref, name in zip(refs, names, strict=True):
            if name not in found:
                raise table_not_found(ref, self.location)
            found[name].require_full_acid(self.location)
        for n, (progress, manifest) in sides.items():
            target = found[n].name  # the caches' key: the metastore's (lower-case) name
            for cache, side in ((self.progress_tables, progress),
                                (self.manifest_tables, manifest)):
                if side in found and found[side].full_acid_problem() is None:
                    cache[target] = found[side]
                else:
                    cache.pop(target, None)
        return [found[n] for n in names]

    def progress_table(self, target: HiveTable, *, create: bool) -> HiveTable | None:
        """The target's progress table (None when missing and not `create`)."""
        found = self.progress_tables.get(target.name)
        if found is None:
            found = (ensure_progress_table(self.conn, target) if create
                     else find_progress_table(self.conn, target))
            if found is None:
                return None
            found.require_full_acid(self.location)
            self.progress_tables[target.name] = found
        return found

    # -- transactions -----------------------------------------------------------------------

    def forget_txn(self, txn_id: int) -> None:
        """Drop what the session knows of a transaction that ended (not its heartbeat)."""
        self.txn_tables.pop(txn_id, None)
        self.delete_locked = {k for k in self.delete_locked if k[0] != txn_id}

    def txn_state(self, txn_id: int) -> TxnState | None:
        """The transaction's state as `get_open_txns_info` tells it: "open" or "aborted" while
        listed, "committed" once handed out (up to the high watermark) and listed no more,
        None when never handed out. (Hive also forgets an aborted transaction that recorded
        no component; such a one reads as committed here.)

        Raises:
            MetastoreError: the metastore failed.
        """
        high, rows = txn_rows(self.conn)
        listed = next((r.state for r in rows if r.txn_id == txn_id), None)
        if listed is not None:
            return listed
        return "committed" if 0 < txn_id <= high else None

    def ended(self, txn_id: int, action: str, state: TxnState | None,
              what: str = "") -> CommitConflictError:
        """The refusal to `action` a transaction that is not open (`txn_state`)."""
        where = f"the Hive Metastore at {self.location}"
        return CommitConflictError(
            f"Cannot {action} transaction {txn_id}{what}: "
            + (f"it does not exist in {where}" if state is None else f"it is {state} in {where}"),
            hint="abort the batch and write it again in a new transaction"
            if state == "aborted" else None)

    def require_open(self, txn: Transaction, action: str) -> None:
        """Refuse `txn` unless the metastore has it open. For a transaction this session does
        not hold open (`beats`): Hive's `commit_txn` accepts a committed one again, and its
        `allocate_table_write_ids` fails with an internal error on an ended one.

        Raises:
            CommitConflictError: it is committed, aborted, or unknown to the metastore.
            MetastoreError: the metastore failed.
        """
        state = self.txn_state(txn.txn_id)
        if state != "open":
            raise self.ended(txn.txn_id, action, state,
                             f" (write id {txn.write_id} of {txn.table})")

    def abort(self, txn_id: int) -> None:
        """`abort_txn`; one already aborted is no error.

        Raises:
            CommitConflictError: the transaction is committed or unknown to the metastore.
            MetastoreError: the metastore failed.
        """
        t = ttypes()
        try:
            self.conn.call("abort_txn", t.AbortTxnRequest(txnid=txn_id),
                           expect=(t.NoSuchTxnException, t.TxnAbortedException))
        except t.TxnAbortedException:
            return
        except t.NoSuchTxnException as e:
            state = self.txn_state(txn_id)
            if state == "aborted":
                return
            raise self.ended(txn_id, "abort", state) from e

    def abort_quietly(self, txn_id: int) -> None:
        """Forget, stop heartbeating and abort a transaction after another error."""
        self.forget_txn(txn_id)
        beats = self.beats.pop(txn_id, None)
        if beats is not None:
            beats.stop()
        try:
            self.abort(txn_id)
        except (MetastoreError, CommitConflictError):
            pass  # the caller's error says what failed; the server's timeout aborts it


__all__ = ["RECONNECT_S", "Session"]
