"""The shared state of `HiveMetastore`: its connection (replaced when the server dropped it),
its caches, and the table lookups and aborts every part of it uses. The parts are mixins in
`_table_ops.py`, `_commit.py`, `_progress_ops.py`, `_manifest_ops.py`, `_read_ops.py` and
`_compaction_ops.py`; `metastore.py` puts them together.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Self, TypeVar

from ingest.errors import CommitConflictError, MetastoreError
from ingest.txn.hms import _stubs
from ingest.txn.hms._catalog import find_hive_table
from ingest.txn.hms._states import txn_rows
from ingest.txn.hms.compactions import ParameterHistory, QueueHistory
from ingest.txn.hms.connection import HmsConnection, connect
from ingest.txn.hms.heartbeat import Heartbeater
from ingest.txn.hms.manifest import MANIFEST, HmsManifest
from ingest.txn.hms.progress import (
    PROGRESS,
    ProgressCache,
    ensure_progress_table,
    find_progress_table,
)
from ingest.txn.hms.side import is_side_table
from ingest.txn.hms.tables import HiveTable, get_tables
from ingest.txn.metastore import Metastore
from ingest.txn.model import (
    MetastoreCapabilities,
    TableRef,
    Transaction,
    TxnState,
    table_key,
    table_not_found,
)

_T = TypeVar("_T")

RECONNECT_S = 15.0
"""How long a dropped connection is retried (with growing pauses) before a call fails."""


class HmsBase(Metastore):
    """The connection, caches and lookups of a `HiveMetastore` (see there)."""

    reconnect_s = RECONNECT_S

    def __init__(self, conn: HmsConnection, *, url: str, read_only: bool,
                 clock: Callable[[], float], leases: bool | None = None) -> None:
        """Wrap an open connection; use `Metastore.open` instead. `leases`: whether reads
        take leases (default: unless `read_only`)."""
        super().__init__(url=url, location=conn.uri)
        self._connection = conn
        self._closed = False
        self._progress = ProgressCache()
        self._manifest = HmsManifest(conn.uri)
        self._leases = not read_only if leases is None else leases
        self._progress_tables: dict[str, HiveTable] = {}  # target name -> its progress table
        self._manifest_tables: dict[str, HiveTable] = {}  # target name -> its manifest table
        self._read_only = read_only
        self._clock = clock
        self._lock = threading.RLock()
        self._beats: dict[int, Heartbeater] = {}
        self._tables: dict[int, dict[str, HiveTable]] = {}  # txn id -> tables it writes
        self._queue: QueueHistory | None = None
        self._params: ParameterHistory | None = None
        self._compacting: dict[int, tuple[str, str]] = {}  # compaction -> (table, partition)
        self._delete_locked: set[tuple[int, str]] = set()  # (txn id, table) holding DELETE

    @property
    def server_version(self) -> str:
        return self._conn.info.version

    @property
    def _conn(self) -> HmsConnection:
        """The connection; one the server dropped is replaced first (`_reconnect`)."""
        if self._connection.broken and not self._closed:
            self._connection = self._reconnect(self._connection)
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
                return connect(lost.uri)
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

    def _read_retrying(self, read: Callable[[], _T]) -> _T:
        """Run a read; if the connection broke under it, run it once more on a new one."""
        try:
            return read()
        except MetastoreError:
            if not self._connection.broken or self._closed:
                raise
            return read()

    @classmethod
    def _connect(cls, url: str, *, create: bool, read_only: bool, busy_timeout_s: float,
                 clock: Callable[[], float]) -> Self:
        """Connect (the server always exists: `create` changes nothing); `busy_timeout_s`
        bounds how long a lock is waited for."""
        return cls(connect(url), url=url, read_only=read_only, clock=clock)

    @classmethod
    def _connect_for_reading(cls, url: str) -> Self:
        """A connection that writes nothing but its reads' leases (read transactions)."""
        return cls(connect(url), url=url, read_only=True, clock=time.time, leases=True)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for beats in self._beats.values():
                beats.stop()
            self._beats.clear()
            self._connection.close()

    @property
    def capabilities(self) -> MetastoreCapabilities:
        return MetastoreCapabilities(committed_files=True, reader_leases=self._leases,
                                     compaction_history=True,
                                     visibility_suffix=self._conn.info.major >= 4)

    def _writable(self, action: str) -> None:
        if self._read_only:
            raise MetastoreError(f"Cannot {action}: the Hive Metastore at {self.location} was "
                                 "opened read-only", location=self.location)

    def _hive_table(self, table: TableRef) -> HiveTable:
        """The full-ACID Hive table `table` names.

        Raises:
            TableNotFoundError: no such table.
            UnsupportedFormatError: it is not full-ACID ORC.
        """
        found = find_hive_table(self._conn, table)
        if found is None:
            raise table_not_found(table, self.location)
        found.require_full_acid(self.location)
        return found

    def _hive_tables(self, refs: Sequence[TableRef]) -> list[HiveTable]:
        """The full-ACID Hive tables `refs` name, in order. Named tables are looked up with
        their side tables in one call per database (`get_tables`), which also refreshes
        what this object knows of the side tables (the commit writes them; one that is not
        full-ACID is left to the commit's own lookup, which refuses it).

        Raises:
            TableNotFoundError: no such table.
            UnsupportedFormatError: one is not full-ACID ORC.
            MetastoreError: the metastore failed.
        """
        keys = [table_key(r) for r in refs]
        if any(what != "name" for what, _ in keys):
            return [self._hive_table(r) for r in refs]
        names = [name for _, name in keys]
        targets = [n for n in names if not is_side_table(n)]
        sides = {n: (PROGRESS.name(n), MANIFEST.name(n)) for n in targets}
        found = get_tables(self._conn, [*names, *(x for pair in sides.values() for x in pair)])
        for ref, name in zip(refs, names, strict=True):
            if name not in found:
                raise table_not_found(ref, self.location)
            found[name].require_full_acid(self.location)
        for n, (progress, manifest) in sides.items():
            target = found[n].name  # the caches' key: the metastore's (lower-case) name
            for cache, side in ((self._progress_tables, progress),
                                (self._manifest_tables, manifest)):
                if side in found and found[side].full_acid_problem() is None:
                    cache[target] = found[side]
                else:
                    cache.pop(target, None)
        return [found[n] for n in names]

    def _progress_table(self, target: HiveTable, *, create: bool) -> HiveTable | None:
        """The target's progress table (None when missing and not `create`)."""
        found = self._progress_tables.get(target.name)
        if found is None:
            found = (ensure_progress_table(self._conn, target) if create
                     else find_progress_table(self._conn, target))
            if found is None:
                return None
            found.require_full_acid(self.location)
            self._progress_tables[target.name] = found
        return found

    def _forget_txn(self, txn_id: int) -> None:
        self._tables.pop(txn_id, None)
        self._delete_locked = {k for k in self._delete_locked if k[0] != txn_id}

    def _txn_state(self, txn_id: int) -> TxnState | None:
        """The transaction's state as `get_open_txns_info` tells it: "open" or "aborted" while
        listed, "committed" once handed out (up to the high watermark) and listed no more,
        None when never handed out. (Hive also forgets an aborted transaction that recorded
        no component; such a one reads as committed here.)

        Raises:
            MetastoreError: the metastore failed.
        """
        high, rows = txn_rows(self._conn)
        listed = next((r.state for r in rows if r.txn_id == txn_id), None)
        if listed is not None:
            return listed
        return "committed" if 0 < txn_id <= high else None

    def _ended(self, txn_id: int, action: str, state: TxnState | None,
               what: str = "") -> CommitConflictError:
        """The refusal to `action` a transaction that is not open (`_txn_state`)."""
        where = f"the Hive Metastore at {self.location}"
        return CommitConflictError(
            f"Cannot {action} transaction {txn_id}{what}: "
            + (f"it does not exist in {where}" if state is None else f"it is {state} in {where}"),
            hint="abort the batch and write it again in a new transaction"
            if state == "aborted" else None)

    def _require_open(self, txn: Transaction, action: str) -> None:
        """Refuse `txn` unless the metastore has it open. For a transaction this object does
        not hold open (`_beats`): Hive's `commit_txn` accepts a committed one again, and its
        `allocate_table_write_ids` fails with an internal error on an ended one.

        Raises:
            CommitConflictError: it is committed, aborted, or unknown to the metastore.
            MetastoreError: the metastore failed.
        """
        state = self._txn_state(txn.txn_id)
        if state != "open":
            raise self._ended(txn.txn_id, action, state,
                              f" (write id {txn.write_id} of {txn.table})")

    def _abort(self, txn_id: int) -> None:
        t = _stubs.ttypes()
        try:
            self._conn.call("abort_txn", t.AbortTxnRequest(txnid=txn_id),
                            expect=(t.NoSuchTxnException, t.TxnAbortedException))
        except t.TxnAbortedException:
            return
        except t.NoSuchTxnException as e:
            state = self._txn_state(txn_id)
            if state == "aborted":
                return
            raise self._ended(txn_id, "abort", state) from e

    def _abort_quietly(self, txn_id: int) -> None:
        self._forget_txn(txn_id)
        beats = self._beats.pop(txn_id, None)
        if beats is not None:
            beats.stop()
        try:
            self._abort(txn_id)
        except (MetastoreError, CommitConflictError):
            pass  # the caller's error says what failed; the server's timeout aborts it


__all__ = ["HmsBase"]
