"""`HiveMetastore`: the `Metastore` behind `thrift://host:port`, kept in a Hive Metastore (Hive
4.x, 3.1) so that Hive, Trino and Spark see our tables and our commits.

Transactions follow Hive Streaming v2: `open_txns`, `allocate_table_write_ids`, a SHARED_READ
lock for INSERT, heartbeats on a connection of their own at half `hive.txn.timeout`, then the
written partitions added (`add_partitions`, `add_dynamic_partitions`) and `commit_txn`, or
`abort_txn`. Not yet kept here: the committed-file manifest, reader leases, the
compaction history, sink progress and Kafka offsets; `capabilities` says so, and the calls
only the stream, `compact` and `clean` make refuse with a `ConfigError` before any change.
"""

from __future__ import annotations

import getpass
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import NoReturn, Self

from ingest.acid import ValidWriteIdList
from ingest.acid.format import CommittedFile, parse_partition
from ingest.errors import CommitConflictError, ConfigError, TableExistsError
from ingest.txn.errors import MetastoreError
from ingest.txn.hms import _stubs
from ingest.txn.hms._catalog import (
    all_tables,
    find_hive_table,
    register_table,
    seed_write_ids,
    set_parameters,
    to_definition,
)
from ingest.txn.hms._states import table_transactions, txn_rows, write_id_of, write_id_states
from ingest.txn.hms.connection import HmsConnection, connect
from ingest.txn.hms.heartbeat import Heartbeater
from ingest.txn.hms.tables import HiveTable, add_partitions, drop_table
from ingest.txn.hms.txns import (
    allocate_write_ids,
    commit_txn,
    heartbeat,
    lock,
    register_partitions,
    snapshot,
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


def _unsupported(what: str) -> NoReturn:
    raise ConfigError(f"{what} is not supported on a Hive Metastore yet",
                      hint="use a SQLite or PostgreSQL metastore (--metastore sqlite:///... or "
                           "postgresql://...) for this table")


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

    keeps_sink_progress = False

    def __init__(self, conn: HmsConnection, *, url: str, read_only: bool,
                 clock: Callable[[], float]) -> None:
        """Wrap an open connection; use `Metastore.open` instead."""
        super().__init__(url=url, location=conn.uri)
        self._conn = conn
        self._read_only = read_only
        self._clock = clock
        self._lock = threading.RLock()
        self._beats: dict[int, Heartbeater] = {}
        self._tables: dict[int, dict[str, HiveTable]] = {}  # txn id -> tables it writes

    @property
    def server_version(self) -> str:
        return self._conn.info.version

    # -- opening ----------------------------------------------------------------------------

    @classmethod
    def _connect(cls, url: str, *, create: bool, read_only: bool, busy_timeout_s: float,
                 clock: Callable[[], float]) -> Self:
        """Connect (the server always exists: `create` changes nothing); `busy_timeout_s`
        bounds how long a lock is waited for."""
        return cls(connect(url), url=url, read_only=read_only, clock=clock)

    @classmethod
    def _connect_for_reading(cls, url: str) -> Self:
        """A connection that never writes: reads here are never registered anyway."""
        return cls(connect(url), url=url, read_only=True, clock=time.time)

    def close(self) -> None:
        with self._lock:
            for beats in self._beats.values():
                beats.stop()
            self._beats.clear()
            self._conn.close()

    @property
    def capabilities(self) -> MetastoreCapabilities:
        return MetastoreCapabilities(committed_files=False, reader_leases=False,
                                     compaction_history=False)

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

    def find_table(self, table: TableRef) -> TableDefinition | None:
        """The table, or None; a Hive table that is not full-ACID ORC is refused.

        Raises:
            UnsupportedFormatError: the table exists but is not full-ACID ORC (naming the
                property), so no command treats it as ours.
            MetastoreError: the metastore failed.
        """
        with self._lock:
            found = find_hive_table(self._conn, table)
            return None if found is None else to_definition(found, self.location)

    def list_tables(self) -> list[TableDefinition]:
        """The full-ACID ORC tables of every database (others are left out)."""
        with self._lock:
            return [to_definition(t, self.location) for t in all_tables(self._conn)
                    if t.full_acid_problem() is None]

    def drop_table(self, table: TableRef) -> None:
        with self._lock:
            self._writable("drop a table")
            drop_table(self._conn, self._hive_table(table).name, delete_data=False)

    # -- transactions and write ids ---------------------------------------------------------

    def open_transaction(
        self, table: TableRef, *, agent: str = "", also: Sequence[TableRef] = ()
    ) -> Transaction:
        with self._lock:
            self._writable("open a transaction")
            tables = [self._hive_table(t) for t in [table, *also]]
            names = [t.name for t in tables]
            if len(set(names)) != len(names):
                raise ConfigError(f"Cannot open a transaction on {names}: a table is repeated")
            txn_id = self._open_txn(agent)
            opened_at = self._clock()
            try:
                self._beats[txn_id] = Heartbeater(self.location, txn_id).start()
                write_ids = {t.name: allocate_write_ids(self._conn, t.name, [txn_id])[txn_id]
                             for t in tables}
                for t in tables:
                    lock(self._conn, txn_id, t)
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
            lock(self._conn, txn.txn_id, found)
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
    ) -> None:
        """See `Metastore.commit`. Here `files` names what the write touched but is not
        recorded (no manifest yet, `capabilities.committed_files` is False): the partitions
        of its paths are added to the metastore and registered with the transaction before
        the commit, and a write of delete deltas takes Hive's lock for DELETE (SHARED_WRITE)
        first. Sink progress and offsets are refused (`ConfigError`)."""
        ranges = list(offsets)
        if sink is not None or ranges:
            _unsupported("Recording a stream's progress and Kafka offsets (exactly-once)")
        with self._lock:
            self._writable(f"commit transaction {txn.txn_id}")
            tables = self._tables.get(txn.txn_id) or {
                n: self._hive_table(n) for n in txn.write_ids}
            for name, entries in (files or {}).items():
                table = _table_for(tables.values(), name)
                if table is None:
                    raise ConfigError(f"Cannot commit transaction {txn.txn_id} with files of "
                                      f"{name}: it writes {sorted(txn.write_ids)} only")
                self._register_written(txn, table, [e.path for e in entries])
            beats = self._beats.pop(txn.txn_id, None)
            if beats is not None:
                try:
                    beats.check()
                finally:
                    beats.stop()  # a heartbeat after the commit would find it gone
            commit_txn(self._conn, txn.txn_id)
            self._tables.pop(txn.txn_id, None)

    def _register_written(self, txn: Transaction, table: HiveTable, paths: list[str]) -> None:
        deletes = any(p.split("/")[-2].startswith("delete_delta_") for p in paths if "/" in p)
        if deletes:
            lock(self._conn, txn.txn_id, table, lock_type="SHARED_WRITE", operation="DELETE")
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
                            operation="DELETE" if deletes else "INSERT")

    def abort(self, txn: Transaction, *, reason: str = "aborted by its writer") -> None:
        """See `Metastore.abort`; the metastore keeps no reason."""
        with self._lock:
            beats = self._beats.pop(txn.txn_id, None)
            if beats is not None:
                beats.stop()
            self._tables.pop(txn.txn_id, None)
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
            return snapshot(self._conn, self._hive_table(table).name)

    @contextmanager
    def _unleased(self, table: TableRef) -> Iterator[tuple[int | None, ValidWriteIdList]]:
        yield None, self.snapshot(table)

    def leased_snapshot(
        self, table: TableRef, *, agent: str, heartbeat_s: float = READER_HEARTBEAT_S,
        keep_lease: bool = False,
    ) -> AbstractContextManager[tuple[int | None, ValidWriteIdList]]:
        """The snapshot, never registered: the metastore has no reader leases here
        (`capabilities.reader_leases` is False)."""
        return self._unleased(table)

    def heartbeat_reader(self, reader_id: int) -> bool:
        return False  # no registration is ever taken here

    def end_reader(self, reader_id: int) -> None:
        return None

    def transactions(
        self, table: TableRef | None = None, *, states: Iterable[TxnState] = TXN_STATES
    ) -> list[TransactionInfo]:
        """See `Metastore.transactions`. Committed write ids come with txn id 0: the
        metastore does not say which transaction wrote them."""
        wanted = tuple(states)
        with self._lock:
            names = ([self._hive_table(table).name] if table is not None
                     else [t.name for t in all_tables(self._conn)
                           if t.full_acid_problem() is None])
            rows = [r for n in names for r in table_transactions(self._conn, n, wanted)]
        return sorted(rows, key=lambda r: (r.txn_id, r.table, r.write_id))

    def write_id_states(self, table: TableRef) -> dict[int, TxnState]:
        return write_id_states(self.snapshot(table))

    def committed_write_id(self, sink_id: str, batch_id: int) -> int | None:
        _unsupported("The streaming job's exactly-once progress")

    def last_committed_batch(self, sink_id: str) -> int | None:
        _unsupported("The streaming job's exactly-once progress")

    def offset_ranges(self, table: TableRef) -> list[tuple[int, OffsetRange]]:
        """None recorded: commits with offsets are refused here."""
        with self._lock:
            self._hive_table(table)
        return []

    def write_id_of(self, txn_id: int, table: TableRef) -> int | None:
        """The write id transaction `txn_id` holds on `table`, or None.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """
        with self._lock:
            name = self._hive_table(table).name
            return write_id_of(self._conn, name, txn_id, txn_snapshot(self._conn).high_watermark)

    # -- the committed-file manifest (not kept here yet) -------------------------------------

    def committed_files(self, table: TableRef) -> dict[str, CommittedFile]:
        with self._lock:
            self._hive_table(table)
        return {}

    def record_committed_files(self, table: TableRef, files: Iterable[CommittedFile]) -> None:
        _unsupported("The committed-file manifest (used by compaction)")

    def forget_committed_files(self, table: TableRef, paths: Iterable[str]) -> int:
        _unsupported("The committed-file manifest (used by cleaning)")

    # -- compactions (not kept here yet) ------------------------------------------------------

    def begin_compaction(self, table: TableRef, partition: str, kind: str, *, agent: str,
                         stale_after_s: float,
                         is_alive: Callable[[str], bool] | None = None) -> tuple[int, Transaction]:
        _unsupported("Compaction (`ingest compact`)")

    def finish_compaction(self, compaction_id: int, txn: Transaction, *, highest_write_id: int,
                          rows: int, inputs: Sequence[str], outputs: Sequence[str]) -> None:
        _unsupported("Compaction (`ingest compact`)")

    def fail_compaction(self, compaction_id: int, txn: Transaction, error: str) -> None:
        _unsupported("Compaction (`ingest compact`)")

    def forget_compaction(self, compaction_id: int, txn: Transaction) -> None:
        _unsupported("Compaction (`ingest compact`)")

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
        with self._lock:
            self._hive_table(table)
        return []

    def compactions_to_clean(self, table: TableRef) -> list[CompactionInfo]:
        _unsupported("Cleaning (`ingest clean`)")

    def mark_compactions_cleaned(self, compaction_ids: Iterable[int]) -> None:
        _unsupported("Cleaning (`ingest clean`)")

    # -- reader leases (none here) ------------------------------------------------------------

    def live_readers(self, table: TableRef, *, timeout_s: float) -> list[ReaderInfo]:
        with self._lock:
            self._hive_table(table)
        return []

    def forget_dead_readers(self, *, timeout_s: float) -> int:
        return 0


__all__ = ["HiveMetastore"]
