"""`HiveMetastore`: the `Metastore` behind `thrift://host:port`, kept in a Hive Metastore (Hive
4.x, 3.1) so that Hive, Trino and Spark see our tables and our commits.

Transactions follow Hive Streaming v2: `open_txns`, `allocate_table_write_ids`, a SHARED_READ
lock for INSERT, heartbeats on a connection of their own at half `hive.txn.timeout`, then the
written partitions added (`add_partitions`, `add_dynamic_partitions`) and `commit_txn`, or
`abort_txn`. Compactions: Hive 4's compaction queue, or a table parameter on Hive 3
(`ingest.txn.hms.compactions`); the cleaner waits for the open transactions and the locks held
outside one (`live_readers`). A streaming sink's progress (micro-batch id, Kafka offset
ranges) and the committed-file manifest are rows of hidden side tables written in the same
HMS transaction as the data (`progress.py`, `manifest.py`, docs/invariants.md, 8.11). A
reader's lease is a read transaction holding a SHARED_READ lock (`leases.py`).

A connection the server dropped (it was restarted, or stopped) is replaced by a new one at
the next call, retried for up to `RECONNECT_S`; reads that failed on it are retried once.
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Literal, NoReturn, Self, TypeVar

import pyarrow as pa

from ingest.acid import ValidWriteIdList
from ingest.acid.format import CommittedFile, parse_partition
from ingest.errors import CommitConflictError, ConfigError, TableExistsError
from ingest.faults import crash_point
from ingest.txn.errors import MetastoreError
from ingest.txn.hms import _stubs
from ingest.txn.hms._catalog import (
    all_tables,
    find_hive_table,
    register_table,
    seed_write_ids,
    set_columns,
    set_parameters,
    to_definition,
)
from ingest.txn.hms._states import table_transactions, txn_rows, write_id_of, write_id_states
from ingest.txn.hms.compactions import (
    ParameterHistory,
    QueueHistory,
    Txns,
    check_kind,
    open_compactor_txn,
    table_locks,
)
from ingest.txn.hms.connection import HmsConnection, connect
from ingest.txn.hms.heartbeat import Heartbeater
from ingest.txn.hms.leases import begin_read, end_read, holding, renew_read
from ingest.txn.hms.manifest import MANIFEST, HmsManifest, checked, own_transaction
from ingest.txn.hms.progress import (
    PROGRESS,
    ProgressCache,
    ProgressRow,
    ensure_progress_table,
    find_progress_table,
    write_progress,
)
from ingest.txn.hms.side import is_side_table
from ingest.txn.hms.tables import HiveTable, add_partitions, drop_table, get_tables, hive_columns
from ingest.txn.hms.txns import (
    LockTarget,
    Operation,
    allocate_write_ids,
    commit_txn,
    heartbeat,
    lock,
    lock_all,
    register_partitions,
    snapshot,
    snapshots,
    txn_snapshot,
)
from ingest.txn.locations import normalize_location
from ingest.txn.metastore import READER_HEARTBEAT_S, Metastore
from ingest.txn.model import (
    TXN_STATES,
    CompactionInfo,
    CompactorVisibility,
    MetastoreCapabilities,
    OffsetRange,
    ReaderInfo,
    SinkProgress,
    TableDefinition,
    TableRef,
    Transaction,
    TransactionInfo,
    TxnState,
    table_key,
    table_not_found,
)

_T = TypeVar("_T")

RECONNECT_S = 15.0
"""How long a dropped connection is retried (with growing pauses) before a call fails."""


def _unsupported(what: str) -> NoReturn:
    raise ConfigError(f"{what} is not supported on a Hive Metastore yet",
                      hint="use a SQLite or PostgreSQL metastore (--metastore sqlite:///... or "
                           "postgresql://...) for this table")


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


def _table_for(tables: Iterable[HiveTable], ref: str) -> HiveTable | None:
    what, value = table_key(ref)
    return next((t for t in tables if (t.name if what == "name"
                                       else normalize_location(t.location)) == value), None)


class HiveMetastore(Metastore):
    """A `Metastore` in a Hive Metastore reached over Thrift; see `Metastore` for the contract.

    One connection serves the object's calls (one at a time: it may be shared by threads);
    each open transaction is heartbeated by a `Heartbeater` on a connection of its own.

    Attributes:
        server_version: what the server says it is ("4.0.1"; Hive 3.1 says "3.0").
    """

    keeps_sink_progress = True
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

    # -- opening ----------------------------------------------------------------------------

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
        what this object knows of the side tables (the commit writes them).

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
            for cache, side in ((self._progress_tables, progress),
                                (self._manifest_tables, manifest)):
                if side in found:
                    cache[n] = found[side]
                else:
                    cache.pop(n, None)
        return [found[n] for n in names]

    # -- tables -----------------------------------------------------------------------------

    def create_table(self, defn: TableDefinition, *, next_write_id: int = 1) -> TableDefinition:
        if next_write_id < 1:
            raise ConfigError(f"Cannot create table {defn.name}: next_write_id is "
                              f"{next_write_id}, expected 1 or more")
        with self._lock:
            self._writable(f"create table {defn.name}")
            there = find_hive_table(self._conn, defn.location)
            if there is not None:
                raise TableExistsError(
                    f"Cannot create table {defn.name} at {defn.location}: table {there.name} of "
                    f"the Hive Metastore at {self.location} has that location",
                    table=there.name)
            table = register_table(self._conn, defn)
            if next_write_id > 1:
                seed_write_ids(self._conn, table, next_write_id)
            return to_definition(table, self.location)

    def set_properties(self, table: TableRef, properties: dict[str, str]) -> TableDefinition:
        with self._lock:
            self._writable("set table properties")
            found = self._hive_table(table)
            set_parameters(self._conn, found, properties)
            return to_definition(self._hive_table(found.name), self.location)

    def alter_columns(self, table: TableRef, row_schema: pa.Schema, *,
                      expected: pa.Schema) -> TableDefinition:
        """See `Metastore.alter_columns`: `alter_table_with_cascade`, so partitions get the
        new columns too. The Hive Metastore has no compare-and-swap on columns: they are
        checked just before the call, under this store's lock only.
        """
        with self._lock:
            self._writable("alter table columns")
            found = self._hive_table(table)
            if [(c.name.lower(), c.type) for c in found.columns] != [
                    (c.name.lower(), c.type) for c in hive_columns(expected)]:
                raise CommitConflictError(
                    f"Cannot alter the columns of table {found.name}: its columns were changed "
                    "by another process meanwhile", hint="read the table again and retry")
            set_columns(self._conn, found, hive_columns(row_schema))
            return to_definition(self._hive_table(found.name), self.location)

    def find_table(self, table: TableRef) -> TableDefinition | None:
        """The table, or None; a Hive table that is not full-ACID ORC is refused.

        Raises:
            UnsupportedFormatError: the table exists but is not full-ACID ORC (naming the
                property), so no command treats it as ours.
            MetastoreError: the metastore failed.
        """
        with self._lock:
            found = self._read_retrying(lambda: find_hive_table(self._conn, table))
            return None if found is None else to_definition(found, self.location)

    def list_tables(self) -> list[TableDefinition]:
        """The full-ACID ORC tables of every database (others are left out, and so are the
        hidden side tables: progress, manifest)."""
        with self._lock:
            return [to_definition(t, self.location) for t in all_tables(self._conn)
                    if t.full_acid_problem() is None and not is_side_table(t.name)]

    def drop_table(self, table: TableRef) -> None:
        """See `Metastore.drop_table`; the table's side tables (progress, manifest) go
        too."""
        with self._lock:
            self._writable("drop a table")
            found = self._hive_table(table)
            drop_table(self._conn, found.name, delete_data=False)
            for side in (find_progress_table(self._conn, found),
                         MANIFEST.find(self._conn, found)):
                if side is not None:
                    drop_table(self._conn, side.name, delete_data=False)
            self._progress_tables.pop(found.name, None)
            self._manifest_tables.pop(found.name, None)

    def side_tables(self, table: TableRef) -> list[str]:
        """See `Metastore.side_tables`: the names of `table`'s progress and manifest tables
        that exist (none for a side table itself: they have none). Names, not locations: a
        name is one lookup here, a location a walk over every table."""
        with self._lock:
            found = self._hive_table(table)
            if is_side_table(found.name):
                return []
            sides = (find_progress_table(self._conn, found), MANIFEST.find(self._conn, found))
            return [t.name for t in sides if t is not None]

    # -- transactions and write ids ---------------------------------------------------------

    def open_transaction(
        self, table: TableRef, *, agent: str = "", also: Sequence[TableRef] = (),
        operation: Literal["insert", "delete"] = "insert",
    ) -> Transaction:
        """See `Metastore.open_transaction`. Each table is locked as Hive locks it for the
        operation before this returns: SHARED_READ for INSERT, and on `table` for a delete
        the DELETE lock (`_delete_lock`)."""
        with self._lock:
            self._writable("open a transaction")
            tables = self._hive_tables([table, *also])
            names = [t.name for t in tables]
            if len(set(names)) != len(names):
                raise ConfigError(f"Cannot open a transaction on {names}: a table is repeated")
            txn_id = self._open_txn(agent)
            opened_at = self._clock()
            try:
                self._beats[txn_id] = Heartbeater(self.location, txn_id, info=self._conn.info,
                                                  fresh=True).start()
                write_ids = {t.name: allocate_write_ids(self._conn, t.name, [txn_id])[txn_id]
                             for t in tables}
                # One lock request for every table: one round trip, granted together.
                deleting = operation == "delete"
                lock_all(self._conn, txn_id, [
                    self._delete_target(t) if deleting and i == 0 else LockTarget(t)
                    for i, t in enumerate(tables)], agent=agent)
                if deleting:
                    self._delete_locked.add((txn_id, tables[0].name))
            except BaseException:
                self._abort_quietly(txn_id)
                raise
            self._tables[txn_id] = {t.name: t for t in tables}
            first = names[0]
            return Transaction(txn_id, first, write_ids[first], opened_at, agent,
                               tuple((n, write_ids[n]) for n in names[1:]))

    def _open_txn(self, agent: str) -> int:
        t = _stubs.ttypes()
        response = self._conn.call("open_txns", t.OpenTxnRequest(
            num_txns=1, user=getpass.getuser(), hostname=socket.gethostname(),
            agentInfo=agent or "ingest"))
        return int(response.txn_ids[0])

    def allocate_write_ids(
        self, table: TableRef, count: int, *, agent: str = ""
    ) -> list[Transaction]:
        _unsupported("A transaction batch (txns_per_delta > 1)")

    def allocate_write_id(self, txn: Transaction, table: TableRef) -> Transaction:
        with self._lock:
            self._writable("allocate a write id")
            found = self._hive_table(table)
            if found.name in txn.write_ids:
                return txn
            write_id = allocate_write_ids(self._conn, found.name, [txn.txn_id])[txn.txn_id]
            lock(self._conn, txn.txn_id, found, agent=txn.agent)
            self._tables.setdefault(txn.txn_id, {})[found.name] = found
            return Transaction(txn.txn_id, txn.table, txn.write_id, txn.opened_at, txn.agent,
                               (*txn.other_write_ids, (found.name, write_id)))

    def commit(
        self,
        txn: Transaction,
        *,
        sink: SinkProgress | None = None,
        offsets: Iterable[OffsetRange] = (),
        files: Mapping[str, Iterable[CommittedFile]] | None = None,
        updated: Mapping[str, Iterable[int]] | None = None,
    ) -> None:
        """See `Metastore.commit`. The partitions of `files`' paths are added to the
        metastore and registered with the transaction before the commit, and a write of
        delete deltas that did not say so when it opened takes Hive's lock for DELETE now.
        Sink progress and offsets become a row of the primary table's progress table, and
        `files` rows of each table's manifest table (`manifest.py`), under write ids of this
        same transaction, so `commit_txn` makes them visible with the data or not at all. With
        `updated` (keyed writes), the partitions are registered as UPDATE and Hive's own
        write-set check at `commit_txn` applies (partition granularity; `updated`'s buckets
        are not sent)."""
        ranges = _checked_ranges(txn, offsets)
        with self._lock:
            self._writable(f"commit transaction {txn.txn_id}")
            tables = self._tables.get(txn.txn_id) or {
                n: self._hive_table(n) for n in txn.write_ids}
            listed: dict[str, tuple[HiveTable, list[CommittedFile]]] = {}
            for name, entries in (files or {}).items():
                table = _table_for(tables.values(), name)
                if table is None:
                    raise ConfigError(f"Cannot commit transaction {txn.txn_id} with files of "
                                      f"{name}: it writes {sorted(txn.write_ids)} only")
                written = list(entries)
                self._register_written(txn, table, [e.path for e in written],
                                       update=bool(updated) and table.name == txn.table)
                if written and not is_side_table(table.name):  # side tables keep no manifest
                    listed[table.name] = (table, checked(table.name, written,
                                                         txn.write_id_for(table.name)))
            target = None
            if sink is not None or ranges:
                target = tables.get(txn.table) or self._hive_table(txn.table)
            self._write_side_tables(txn, target, sink, ranges, listed)
            crash_point("metastore.during_commit")  # a kill here leaves it all uncommitted
            beats = self._beats.pop(txn.txn_id, None)
            if beats is not None:
                try:
                    beats.check()
                finally:
                    beats.stop()  # a heartbeat after the commit would find it gone
            commit_txn(self._conn, txn.txn_id, check_write_set=bool(updated))
            self._forget_txn(txn.txn_id)

    def _forget_txn(self, txn_id: int) -> None:
        self._tables.pop(txn_id, None)
        self._delete_locked = {k for k in self._delete_locked if k[0] != txn_id}

    def _delete_target(self, table: HiveTable) -> LockTarget:
        """Hive's lock for DELETE on a full-ACID table: EXCL_WRITE on Hive 4 (its default,
        hive.txn.xlock.write=true: deletes of a table run one at a time, readers and inserts
        go on), SHARED_WRITE on 3.1 (which has no EXCL_WRITE; its commit aborts the later of
        two deletes whose write sets overlap)."""
        return LockTarget(table, "EXCL_WRITE" if self._conn.info.major >= 4 else "SHARED_WRITE",
                          "DELETE")

    def _lock_for_delete(self, txn_id: int, table: HiveTable, agent: str) -> None:
        """Take Hive's lock for DELETE (`_delete_target`) on `table` in `txn_id`.

        Raises:
            CommitConflictError: not granted in time, or the transaction is no longer open.
            MetastoreError: the metastore failed.
        """
        lock_all(self._conn, txn_id, [self._delete_target(table)], agent=agent)
        self._delete_locked.add((txn_id, table.name))

    def _write_side_tables(self, txn: Transaction, target: HiveTable | None,
                           sink: SinkProgress | None, ranges: list[OffsetRange],
                           listed: Mapping[str, tuple[HiveTable, list[CommittedFile]]]) -> None:
        """Write the commit's side-table rows inside transaction `txn` (docs/invariants.md,
        8.6 and 8.11): with a `target`, the micro-batch's progress row; for each table of
        `listed`, its manifest entries. A write id of each side table, then one EXCLUSIVE
        lock request on them all (so the checks below and the commit are one step against
        every other writer of these side tables; released by the commit or abort), one
        snapshot of them all, the check that the batch is not committed and that no entry
        lowers a committed length, then one delta each.

        Raises:
            ConfigError: progress on a side table.
            CommitConflictError: the sink's batch is already committed (another writer), an
                entry would lower a committed length, the lock was not granted in time, or
                the transaction is no longer open.
            OSError: a delta could not be written.
            MetastoreError: the metastore failed.
        """
        progress = None
        if target is not None:
            if is_side_table(target.name):
                raise ConfigError(
                    f"Cannot commit transaction {txn.txn_id} with stream progress on "
                    f"{target.name}: it is a hidden side table of ingest, which keeps no "
                    "progress of its own",
                    hint="write the stream into its target table, not into a side table")
            progress = self._progress_table(target, create=True)
            assert progress is not None
        manifests = {name: self._manifest_table(listed[name][0]) for name in sorted(listed)}
        sides = ([progress] if progress is not None else []) + list(manifests.values())
        if not sides:
            return
        own = {s.name: allocate_write_ids(self._conn, s.name, [txn.txn_id])[txn.txn_id]
               for s in sides}
        lock_all(self._conn, txn.txn_id, [LockTarget(s, "EXCLUSIVE", "INSERT") for s in sides],
                 agent=txn.agent)
        # Taken under the lock: every commit of these side tables before ours is in it.
        ids = snapshots(self._conn, [s.name for s in sides])
        if progress is not None:
            assert target is not None
            if sink is not None:
                done = self._committed_write_id(progress, sink.sink_id, sink.batch_id,
                                                ids=ids[progress.name])
                if done is not None:
                    raise CommitConflictError(
                        f"Cannot commit transaction {txn.txn_id}: micro-batch {sink.batch_id} "
                        f"of sink {sink.sink_id!r} was already committed as write id {done} "
                        f"of {target.name}",
                        hint="the batch is a replay; its rows are in the table")
            write_progress(progress, own[progress.name], sink, txn.write_id, ranges)
        for name, table in manifests.items():
            self._manifest.write_locked(self._conn, table, own[table.name], listed[name][0],
                                        ids=ids[table.name], record=listed[name][1])

    def _manifest_table(self, target: HiveTable) -> HiveTable:
        """The target's manifest table (registered first when missing), looked up once per
        target (forgotten when this object drops the target)."""
        found = self._manifest_tables.get(target.name)
        if found is None:
            found = self._manifest_tables[target.name] = self._manifest.table(self._conn, target)
        return found

    def _register_written(self, txn: Transaction, table: HiveTable, paths: list[str], *,
                          update: bool = False) -> None:
        deletes = any(p.split("/")[-2].startswith("delete_delta_") for p in paths if "/" in p)
        operation: Operation = "UPDATE" if update else "DELETE" if deletes else "INSERT"
        if operation != "INSERT" and (txn.txn_id, table.name) not in self._delete_locked:
            # Late (the writer did not open with operation="delete"), but still before the
            # commit, so the metastore knows the transaction deleted or updated.
            self._lock_for_delete(txn.txn_id, table, txn.agent)
        if not table.partition_columns:
            return
        keys = [c.name for c in table.partition_columns]
        values: dict[tuple[str | None, ...], None] = {}
        for path in paths:
            parts = [parse_partition(p) for p in path.split("/")[:len(keys)]]
            if any(p is None for p in parts) or [p[0] for p in parts if p] != keys:
                raise ConfigError(f"Cannot commit transaction {txn.txn_id}: file {path} of "
                                  f"{table.name} is not in a partition {'/'.join(keys)}")
            values[tuple(p[1] for p in parts if p)] = None
        names = add_partitions(self._conn, table, [list(v) for v in values])
        register_partitions(self._conn, txn.txn_id, txn.write_id_for(table.name), table, names,
                            operation=operation)

    def abort(self, txn: Transaction, *, reason: str = "aborted by its writer") -> None:
        """See `Metastore.abort`; the metastore keeps no reason."""
        with self._lock:
            beats = self._beats.pop(txn.txn_id, None)
            if beats is not None:
                beats.stop()
            self._forget_txn(txn.txn_id)
            self._abort(txn.txn_id)

    def _abort(self, txn_id: int) -> None:
        t = _stubs.ttypes()
        try:
            self._conn.call("abort_txn", t.AbortTxnRequest(txnid=txn_id),
                            expect=(t.NoSuchTxnException, t.TxnAbortedException))
        except t.TxnAbortedException:
            return
        except t.NoSuchTxnException as e:
            _, rows = txn_rows(self._conn)
            if any(r.txn_id == txn_id and r.state == "aborted" for r in rows):
                return
            raise CommitConflictError(
                f"Cannot abort transaction {txn_id}: the Hive Metastore at {self.location} does "
                "not have it open (it committed, or it is unknown there)") from e

    def _abort_quietly(self, txn_id: int) -> None:
        self._forget_txn(txn_id)
        beats = self._beats.pop(txn_id, None)
        if beats is not None:
            beats.stop()
        try:
            self._abort(txn_id)
        except (MetastoreError, CommitConflictError):
            pass  # the caller's error says what failed; the server's timeout aborts it

    def heartbeat(self, txn: Transaction) -> None:
        with self._lock:
            result = heartbeat(self._conn, txn.txn_id, txn.txn_id)
        if not result.ok:
            raise CommitConflictError(
                f"Transaction {txn.txn_id} is no longer open in the Hive Metastore at "
                f"{self.location} ({'aborted' if result.aborted else 'unknown there'})",
                hint="it was aborted, probably after hive.txn.timeout without a heartbeat")

    def abort_timed_out(self, timeout_s: float) -> list[Transaction]:
        """See `Metastore.abort_timed_out`; the transactions returned name no table (the
        metastore aborts silent ones by itself after `hive.txn.timeout` too)."""
        with self._lock:
            self._writable("abort timed-out transactions")
            _, rows = txn_rows(self._conn)
            now = self._clock()
            out = []
            for row in rows:
                if row.state == "open" and now - row.heartbeat_at > timeout_s:
                    try:
                        self._abort(row.txn_id)
                    except CommitConflictError:
                        continue  # it finished meanwhile
                    out.append(Transaction(row.txn_id, "", 0, row.opened_at, row.agent))
            return out

    # -- snapshots, progress ------------------------------------------------------------------

    def snapshot(self, table: TableRef) -> ValidWriteIdList:
        with self._lock:
            return self._read_retrying(
                lambda: snapshot(self._conn, self._hive_table(table).name))

    @contextmanager
    def _leased(self, table: TableRef, agent: str, heartbeat_s: float,
                keep_lease: bool) -> Iterator[tuple[int | None, ValidWriteIdList]]:
        if not self._leases:
            yield None, self.snapshot(table)
            return
        with self._lock:
            found = self._hive_table(table)
            reader_id, taken = begin_read(self._conn, found, agent=agent)
            # Within the server's time-out whatever the caller asks: it aborts silent ones.
            interval_s = min(heartbeat_s, self._conn.info.heartbeat_interval_s)
        with holding(self._connection.uri, reader_id, interval_s=interval_s, keep=keep_lease,
                     end=self.end_reader, info=self._connection.info):
            yield reader_id, taken

    def leased_snapshot(
        self, table: TableRef, *, agent: str, heartbeat_s: float = READER_HEARTBEAT_S,
        keep_lease: bool = False,
    ) -> AbstractContextManager[tuple[int | None, ValidWriteIdList]]:
        """See `Metastore.leased_snapshot`. The lease is a read transaction of the metastore
        holding a SHARED_READ lock for SELECT on the table (Hive's and Trino's way to read,
        `leases.py`); its id is the transaction id. Heartbeated every `heartbeat_s`, or half
        the server's `hive.txn.timeout` when that is shorter. Opened read-only
        (`Metastore.open(..., read_only=True)`), nothing is registered.

        Raises:
            TableNotFoundError: no such table.
            CommitConflictError: the SHARED_READ lock was not granted in time (an EXCLUSIVE
                lock on the table, e.g. a DROP TABLE's, is held).
            MetastoreError: the metastore failed.
        """
        return self._leased(table, agent, heartbeat_s, keep_lease)

    def heartbeat_reader(self, reader_id: int) -> bool:
        """See `Metastore.heartbeat_reader`: heartbeats the read transaction."""
        if not self._leases:
            self._writable(f"renew reader lease {reader_id}")
        with self._lock:
            return renew_read(self._conn, reader_id)

    def end_reader(self, reader_id: int) -> None:
        """See `Metastore.end_reader`: commits the read transaction, releasing its lock."""
        with self._lock:
            try:
                conn = self._conn
            except MetastoreError:
                conn = None
            if conn is not None:
                end_read(conn, reader_id, location=self.location)

    def transactions(
        self, table: TableRef | None = None, *, states: Iterable[TxnState] = TXN_STATES
    ) -> list[TransactionInfo]:
        """See `Metastore.transactions`. Committed write ids come with txn id 0: the
        metastore does not say which transaction wrote them."""
        wanted = tuple(states)
        with self._lock:
            names = ([self._hive_table(table).name] if table is not None
                     else [t.name for t in all_tables(self._conn)
                           if t.full_acid_problem() is None and not is_side_table(t.name)])
            return table_transactions(self._conn, names, wanted)

    def write_id_states(self, table: TableRef) -> dict[int, TxnState]:
        return write_id_states(self.snapshot(table))

    def committed_write_id(self, sink_id: str, batch_id: int, *,
                           table: TableRef | None = None) -> int | None:
        """See `Metastore.committed_write_id`. Progress is kept per target table here:
        `table` names it; without it, the part of `sink_id` before `@` (the streaming job's
        sink ids are `<db.table>@<checkpoint>`).

        Raises:
            ConfigError: neither `table` nor the sink id names a table.
            TableNotFoundError: the target table is not in the metastore.
            MetastoreError: the metastore failed.
        """
        with self._lock:
            progress = self._progress_of(sink_id, table)
            if progress is None:
                return None
            return self._read_retrying(
                lambda: self._committed_write_id(progress, sink_id, batch_id))

    def last_committed_batch(self, sink_id: str, *,
                             table: TableRef | None = None) -> int | None:
        """See `Metastore.last_committed_batch` and, for `table`, `committed_write_id`.

        Raises:
            ConfigError: neither `table` nor the sink id names a table.
            TableNotFoundError: the target table is not in the metastore.
            MetastoreError: the metastore failed.
        """
        with self._lock:
            progress = self._progress_of(sink_id, table)
            if progress is None:
                return None
            rows = self._read_retrying(lambda: self._progress_rows(progress))
        batches = [r.batch_id for r in rows if r.sink_id == sink_id and r.batch_id is not None]
        return max(batches, default=None)

    def _progress_of(self, sink_id: str, table: TableRef | None) -> HiveTable | None:
        """The progress table of the sink's target table, or None before its first commit."""
        return self._read_retrying(lambda: self._progress_table(
            self._sink_target(sink_id, table), create=False))

    def offset_ranges(self, table: TableRef) -> list[tuple[int, OffsetRange]]:
        """See `Metastore.offset_ranges`: the ranges of the table's progress rows."""
        with self._lock:
            progress = self._progress_table(self._hive_table(table), create=False)
            rows = [] if progress is None else self._progress_rows(progress)
        out = [(r.write_id, o) for r in rows for o in r.offsets]
        return sorted(out, key=lambda x: (x[0], x[1].topic, x[1].partition))

    def _sink_target(self, sink_id: str, table: TableRef | None) -> HiveTable:
        if table is None:
            named = sink_id.split("@", 1)[0] if "@" in sink_id else ""
            if "." not in named:
                raise ConfigError(
                    f"Cannot read the progress of sink {sink_id!r} in the Hive Metastore at "
                    f"{self.location}: progress is kept per table there, and neither the call "
                    "nor the sink id (expected '<db.table>@...') names the table",
                    hint="pass table= to committed_write_id / last_committed_batch")
            table = named
        return self._hive_table(table)

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

    def _progress_rows(self, progress: HiveTable) -> list[ProgressRow]:
        return self._progress.rows(progress, snapshot(self._conn, progress.name))

    def _committed_write_id(self, progress: HiveTable, sink_id: str, batch_id: int, *,
                            ids: ValidWriteIdList | None = None) -> int | None:
        rows = (self._progress_rows(progress) if ids is None
                else self._progress.rows(progress, ids))
        found = [r.write_id for r in rows if r.sink_id == sink_id and r.batch_id == batch_id]
        return found[0] if found else None

    def write_id_of(self, txn_id: int, table: TableRef) -> int | None:
        """The write id transaction `txn_id` holds on `table`, or None.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """
        with self._lock:
            name = self._hive_table(table).name
            return write_id_of(self._conn, name, txn_id, txn_snapshot(self._conn).high_watermark)

    # -- the committed-file manifest (ingest.txn.hms.manifest) -----------------------------

    def committed_files(self, table: TableRef) -> dict[str, CommittedFile]:
        """See `Metastore.committed_files`: the committed snapshot of the table's manifest
        table, folded (empty when no commit recorded files yet).

        Raises:
            TableNotFoundError: no such table.
            CorruptFileError: a committed delta of the manifest table does not read.
            MetastoreError: the metastore failed.
        """
        with self._lock:
            found = self._read_retrying(lambda: self._hive_table(table))
            if is_side_table(found.name):
                return {}  # side tables keep no manifest (no side tables of side tables)
            return self._read_retrying(lambda: self._manifest.entries(self._conn, found))

    def record_committed_files(self, table: TableRef, files: Iterable[CommittedFile]) -> None:
        """See `Metastore.record_committed_files`: in a transaction of its own. Nothing is
        recorded for a side table (its compaction's outputs): it keeps no manifest, so that
        compacting it makes no side table of a side table."""
        entries = list(files)
        if not entries:
            return
        with self._lock:
            self._writable("record committed files")
            found = self._hive_table(table)
            if is_side_table(found.name):
                return
            agent = _manifest_agent()
            with own_transaction(self._conn, agent=agent) as txn_id:
                self._manifest.write(self._conn, txn_id, found, record=entries, agent=agent)

    def forget_committed_files(self, table: TableRef, paths: Iterable[str]) -> int:
        """See `Metastore.forget_committed_files`: in a transaction of its own, none when
        no path is listed (always for a side table, which keeps no manifest)."""
        wanted = list(paths)
        forgotten = 0
        with self._lock:
            self._writable("forget committed files")
            found = self._hive_table(table)
            if is_side_table(found.name) or not set(wanted) & set(
                    self._manifest.entries(self._conn, found)):
                return 0
            agent = _manifest_agent()
            with own_transaction(self._conn, agent=agent) as txn_id:
                forgotten = self._manifest.write(self._conn, txn_id, found, forget=wanted,
                                                 agent=agent)
        return forgotten

    # -- compactions (ingest.txn.hms.compactions) -------------------------------------------

    def _history(self) -> tuple[QueueHistory | None, ParameterHistory]:
        if self._queue is None and self._conn.info.major >= 4:
            self._queue = QueueHistory(self._conn)
        if self._params is None:
            self._params = ParameterHistory(self._conn, self.location)
        return self._queue, self._params

    def begin_compaction(self, table: TableRef, partition: str, kind: str, *, agent: str,
                         stale_after_s: float,
                         is_alive: Callable[[str], bool] | None = None) -> tuple[int, Transaction]:
        """See `Metastore.begin_compaction`: on Hive 4 a compaction in Hive's queue (SHOW
        COMPACTIONS) with a COMPACTION transaction; on Hive 3 a record in the table parameter
        `ingest_compactions` (`ingest.txn.hms.compactions`)."""
        check_kind(kind)
        with self._lock:
            self._writable("compact")
            found = self._hive_table(table)
            queue, params = self._history()
            txns = Txns.read(self._conn)
            now = self._clock()
            if queue is not None:
                queue.take_over_dead(found, partition, txns, stale_after_s=stale_after_s,
                                     now=now, is_alive=is_alive, abort=self._abort_quietly)
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
                    self._abort_quietly(r["txn"])
                    params.set_state(found.name, partition, r["id"], state="failed",
                                     finished=now, error=why)
            txn_id = open_compactor_txn(self._conn, agent)
            self._beats[txn_id] = Heartbeater(self.location, txn_id, info=self._conn.info).start()
            try:
                if queue is not None:
                    cid = queue.begin(found, partition, kind, txn_id, agent)
                else:
                    cid = txn_id
                    params.add(found.name, partition, {
                        "id": cid, "txn": txn_id, "kind": kind, "state": "working",
                        "agent": agent, "started": now})
            except BaseException:
                self._abort_quietly(txn_id)
                raise
            self._compacting[cid] = (found.name, partition)
            return cid, Transaction(txn_id, found.name, 0, now, agent)

    def _compaction(self, compaction_id: int, txn: Transaction) -> tuple[HiveTable, str]:
        where = self._compacting.get(compaction_id)
        if where is None:
            raise CommitConflictError(
                f"Cannot record compaction {compaction_id} (transaction {txn.txn_id}): this "
                f"connection to {self.location} did not begin it",
                hint="a compaction is recorded by the process that began it")
        return self._hive_table(where[0]), where[1]

    def finish_compaction(self, compaction_id: int, txn: Transaction, *, highest_write_id: int,
                          rows: int, inputs: Sequence[str], outputs: Sequence[str]) -> None:
        """See `Metastore.finish_compaction`: Hive 4 marks the queued compaction compacted,
        then commits its transaction (Hive's Worker order; the commit records
        CQ_NEXT_TXN_ID); Hive 3 commits, then records the history."""
        with self._lock:
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
            beats = self._beats.pop(txn.txn_id, None)
            if beats is not None:
                try:
                    beats.check()
                finally:
                    beats.stop()
            commit_txn(self._conn, txn.txn_id)
            self._compacting.pop(compaction_id, None)
            if queue is None:
                params.set_state(found.name, partition, compaction_id,
                                 state="ready for cleaning", finished=self._clock(),
                                 hwm=highest_write_id, rows=rows, inputs=list(inputs),
                                 outputs=list(outputs),
                                 next_txn=txn_snapshot(self._conn).high_watermark)

    def fail_compaction(self, compaction_id: int, txn: Transaction, error: str) -> None:
        self._end_compaction(compaction_id, txn, "failed", error)

    def forget_compaction(self, compaction_id: int, txn: Transaction) -> None:
        self._end_compaction(compaction_id, txn, "refused", None)

    def _end_compaction(self, compaction_id: int, txn: Transaction, how: str,
                        error: str | None) -> None:
        with self._lock:
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
                                     finished=self._clock(), error=error)
            finally:
                self._compacting.pop(compaction_id, None)
                self._abort_quietly(txn.txn_id)

    def compactor_visibility(self, table: TableRef) -> CompactorVisibility:
        """From the metastore's transactions: a `_vT` directory (Hive 4's compactor output)
        is visible once T committed, i.e. T is allocated and neither open nor aborted."""
        with self._lock:
            self._hive_table(table)
            txns = txn_snapshot(self._conn)
        return CompactorVisibility(txns.high_watermark,
                                   frozenset(txns.open_txns) | frozenset(txns.aborted_txns),
                                   frozenset(txns.aborted_txns))

    def compactions(self, table: TableRef) -> list[CompactionInfo]:
        """See `Metastore.compactions`: Hive 4's SHOW COMPACTIONS for the table (Hive's own
        compactions too; ingest's "nothing to compact" left out), or the Hive 3 record."""
        with self._lock:
            found = self._hive_table(table)
            queue, params = self._history()
            txns = Txns.read(self._conn)
            if queue is not None:
                return queue.history(found, txns)
            return params.history(found.name, txns)

    def compactions_to_clean(self, table: TableRef) -> list[CompactionInfo]:
        return [c for c in self.compactions(table)
                if c.state == "ready for cleaning" and c.txn_state == "committed"]

    def mark_compactions_cleaned(self, compaction_ids: Iterable[int]) -> None:
        """See `Metastore.mark_compactions_cleaned`: ids this object read with
        `compactions_to_clean` (Hive's `mark_cleaned` needs the table and partition)."""
        ids = list(compaction_ids)
        if not ids:
            return
        with self._lock:
            self._writable("record cleaned compactions")
            queue, params = self._history()
            if queue is not None:
                queue.mark_cleaned(ids)
            else:
                params.mark_cleaned(ids, self._clock())

    # -- reader leases (none here) ------------------------------------------------------------

    def live_readers(self, table: TableRef, *, timeout_s: float) -> list[ReaderInfo]:
        """See `Metastore.live_readers`. The metastore registers no leases here; what stands
        for them is Hive's own rule: every open transaction (any table: a Hive or Trino query
        reads inside one), as a reader whose `min_open_txn` is its txn id, and every lock on
        the table held outside a transaction (`min_open_txn` 0: older than any compaction).
        The server times transactions out itself, so `timeout_s` is not used."""
        with self._lock:
            found = self._hive_table(table)
            txns = Txns.read(self._conn)
            locks = table_locks(self._conn, found)
        out = [ReaderInfo(r.txn_id, found.name, r.agent or "?", r.txn_id, r.opened_at,
                          r.heartbeat_at) for r in txns.rows.values() if r.state == "open"]
        out += [ReaderInfo(-lk.lockid, found.name, f"lock {lk.lockid} of {lk.user}@"
                           f"{lk.hostname} ({lk.agentInfo or '?'})", 0,
                           (lk.acquiredat or 0) / 1000, (lk.lastheartbeat or 0) / 1000)
                for lk in locks if not lk.txnid]
        return sorted(out, key=lambda r: r.reader_id)

    def forget_dead_readers(self, *, timeout_s: float) -> int:
        return 0


def _manifest_agent() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:ingest-manifest"


def _checked_ranges(txn: Transaction, offsets: Iterable[OffsetRange]) -> list[OffsetRange]:
    ranges = list(offsets)
    for r in ranges:
        if not r.topic or r.partition < 0 or not 0 <= r.from_offset <= r.until_offset:
            raise ConfigError(f"Cannot commit transaction {txn.txn_id}: offset range {r} is "
                              "malformed (expected a topic, a partition >= 0 and 0 <= from <= "
                              "until)")
    return ranges


__all__ = ["HiveMetastore"]
