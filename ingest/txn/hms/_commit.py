"""`HiveMetastore`'s write transactions in Hive Streaming v2's order: `open_txns`, a heartbeat on
a connection of its own, `allocate_table_write_ids` per table, one lock request for them all;
at commit the written partitions (`add_partitions`, `add_dynamic_partitions`), the side
tables' rows (a write id on each, one EXCLUSIVE lock request, one snapshot, the checks, one
delta each), then `commit_txn`; `abort_txn` on every failure.

A connection lost between calls is replaced at the next one (`Session.conn`, on any live
host); an `open_txns`, `allocate_table_write_ids` or `commit_txn` cut off mid-flight has its outcome
established on the new connection before anything is redone (`thrift/outcome.py`): no orphan
transaction, no second write id, no commit lost or made twice. Other write calls cut off
(locks, partitions) fail the write, which is aborted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from ingest.acid.format import CommittedFile, parse_partition
from ingest.errors import CommitConflictError, ConfigError
from ingest.faults import crash_point
from ingest.txn.hms._catalog import find_hive_table
from ingest.txn.hms._manifest_ops import ManifestOps
from ingest.txn.hms._progress_ops import ProgressOps
from ingest.txn.hms._session import Session
from ingest.txn.hms._states import txn_rows
from ingest.txn.hms.side import checked, is_side_table, write_progress
from ingest.txn.hms.thrift import (
    Heartbeater,
    HiveTable,
    LockTarget,
    Operation,
    add_partitions,
    allocate_write_id_settled,
    commit_txn_settled,
    heartbeat,
    lock,
    lock_all,
    open_txn_settled,
    register_partitions,
    snapshots,
)
from ingest.txn.locations import normalize_location
from ingest.txn.model import (
    OffsetRange,
    SinkProgress,
    TableIdentifier,
    Transaction,
    table_key,
    table_not_found,
)
from ingest.txn.table_ranges import checked_table_ranges

TRANSACTION_BATCHES_REFUSED = (
    "transaction batches (several micro-batches appending to one delta directory) are not "
    "supported on a Hive Metastore, whose tables other engines read: Trino does not read "
    "Hive-Streaming-style transaction batches (trino#4044) and Doris ignores the "
    "_flush_length side files, so both would misread such a delta")
"""Why `HiveMetastore` refuses `allocate_write_ids` (`Metastore.refuses_transaction_batches`)."""


def _table_for(tables: Iterable[HiveTable], ref: str) -> HiveTable | None:
    what, value = table_key(ref)
    return next((t for t in tables if (t.name if what == "name"
                                       else normalize_location(t.location)) == value), None)


def _checked_ranges(txn: Transaction, offsets: Iterable[OffsetRange]) -> list[OffsetRange]:
    ranges = list(offsets)
    for r in ranges:
        if not r.topic or r.partition < 0 or not 0 <= r.from_offset <= r.until_offset:
            raise ConfigError(f"Cannot commit transaction {txn.txn_id}: offset range {r} is "
                              "malformed (expected a topic, a partition >= 0 and 0 <= from <= "
                              "until)")
    return ranges


class Commits:
    """Write transactions of a `HiveMetastore` (see `Metastore` for the contract). The
    commit writes the side tables' rows through the progress and manifest parts."""

    def __init__(self, session: Session, progress: ProgressOps, manifest: ManifestOps) -> None:
        self._s = session
        self._progress = progress
        self._manifest = manifest

    def open_transaction(
        self, table: TableIdentifier, *, agent: str = "", also: Sequence[TableIdentifier] = (),
        operation: Literal["insert", "delete"] = "insert",
    ) -> Transaction:
        """See `Metastore.open_transaction`. Each table is locked as Hive locks it for the
        operation before this returns, all in one lock request: SHARED_READ for INSERT, and
        on `table` for a delete the DELETE lock (`_delete_target`). The tables and their side
        tables are looked up in one call (`Session.hive_tables`)."""
        with self._s.lock:
            self._s.writable("open a transaction")
            tables = self._s.hive_tables([table, *also])
            names = [t.name for t in tables]
            if len(set(names)) != len(names):
                raise ConfigError(f"Cannot open a transaction on {names}: a table is repeated")
            txn_id = self._open_txn(agent)
            opened_at = self._s.clock()
            try:
                self._s.beats[txn_id] = Heartbeater(self._s.location, txn_id,
                                                    info=self._s.conn.info, fresh=True).start()
                write_ids = {t.name: self._write_id(t.name, txn_id) for t in tables}
                # One lock request for every table: one round trip, granted together.
                deleting = operation == "delete"
                lock_all(self._s.conn, txn_id, [
                    self._delete_target(t) if deleting and i == 0 else LockTarget(t)
                    for i, t in enumerate(tables)], agent=agent)
                if deleting:
                    self._s.delete_locked.add((txn_id, tables[0].name))
            except BaseException:
                self._s.abort_quietly(txn_id)
                raise
            self._s.txn_tables[txn_id] = {t.name: t for t in tables}
            first = names[0]
            return Transaction(txn_id, first, write_ids[first], opened_at, agent,
                               tuple((n, write_ids[n]) for n in names[1:]))

    def _write_id(self, table: str, txn_id: int) -> int:
        return allocate_write_id_settled(self._s.conn, lambda: self._s.conn, table, txn_id)

    def _open_txn(self, agent: str) -> int:
        return open_txn_settled(self._s.conn, lambda: self._s.conn, agent or "ingest")

    def allocate_write_ids(
        self, table: TableIdentifier, count: int, *, agent: str = ""
    ) -> list[Transaction]:
        raise ConfigError(f"Cannot allocate {count} write ids at once on "
                          f"{table_key(table)[1]} in {self._s.location}: "
                          f"{TRANSACTION_BATCHES_REFUSED}",
                          hint="open one transaction per delta (--txns-per-delta 1)")

    def allocate_write_id(self, txn: Transaction, table: TableIdentifier) -> Transaction:
        """See `Metastore.allocate_write_id`. A transaction this object does not hold open is
        checked with the metastore first (`Session.require_open`)."""
        with self._s.lock:
            self._s.writable("allocate a write id")
            found = self._s.hive_table(table)
            if found.name in txn.write_ids:
                return txn
            beats = self._s.beats.get(txn.txn_id)
            if beats is None:
                self._s.require_open(txn, "allocate a write id in")
            else:
                beats.check()
            write_id = self._write_id(found.name, txn.txn_id)
            lock(self._s.conn, txn.txn_id, found, agent=txn.agent)
            self._s.txn_tables.setdefault(txn.txn_id, {})[found.name] = found
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
        table_offsets: Mapping[str, Iterable[OffsetRange]] | None = None,
        table_updated: Mapping[str, Mapping[str, Iterable[int]]] | None = None,
    ) -> None:
        """See `Metastore.commit`. The partitions of `files`' paths are added to the
        metastore and registered with the transaction before the commit, and a write of
        delete deltas that did not say so when it opened takes Hive's lock for DELETE now.
        Sink progress and offsets become a row of the primary table's progress table, and
        `files` rows of each table's manifest table (`manifest.py`), under write ids of this
        same transaction, so `commit_txn` makes them visible with the data or not at all. With
        `updated` (keyed writes), the partitions are registered as UPDATE and Hive's own
        write-set check at `commit_txn` applies (partition granularity; `updated`'s buckets
        are not sent; `table_updated`'s tables likewise). Offsets are also a row (without the
        sink) of the progress table of each other table the transaction writes, so
        `offset_ranges` finds them there too (with `table_offsets`, only that table's own
        ranges, and no row for a table without any). A
        transaction this object does not hold open is checked with the metastore first
        (`Session.require_open`)."""
        ranges = _checked_ranges(txn, offsets)
        with self._s.lock:
            self._s.writable(f"commit transaction {txn.txn_id}")
            if txn.txn_id not in self._s.beats:
                self._s.require_open(txn, "commit")
            tables = self._s.txn_tables.get(txn.txn_id) or {
                n: self._s.hive_table(n) for n in txn.write_ids}
            listed: dict[str, tuple[HiveTable, list[CommittedFile]]] = {}
            updating = {t.name for n, one in (table_updated or {}).items() if one
                        for t in [_table_for(tables.values(), n)] if t is not None}
            for name, entries in (files or {}).items():
                table = _table_for(tables.values(), name)
                if table is None:
                    if find_hive_table(self._s.conn, name) is None:
                        raise table_not_found(name, self._s.location)
                    raise ConfigError(f"Cannot commit transaction {txn.txn_id} with files of "
                                      f"{name}: it writes {sorted(txn.write_ids)} only")
                written = list(entries)
                self._register_written(txn, table, [e.path for e in written],
                                       update=(bool(updated) and table.name == txn.table)
                                       or table.name in updating)
                if written and not is_side_table(table.name):  # side tables keep no manifest
                    listed[table.name] = (table, checked(table.name, written,
                                                         txn.write_id_for(table.name)))
            target = None
            if sink is not None or ranges:
                target = tables.get(txn.table) or self._s.hive_table(txn.table)
            others = self._offsets_of_others(txn, tables, ranges, table_offsets)
            self._write_side_tables(txn, target, sink, ranges, listed, others)
            crash_point("metastore.during_commit")  # a kill here leaves it all uncommitted
            beats = self._s.beats.pop(txn.txn_id, None)
            if beats is not None:
                try:
                    beats.check()
                finally:
                    beats.stop()  # a heartbeat after the commit would find it gone
            commit_txn_settled(self._s.conn, lambda: self._s.conn, txn.txn_id,
                               check_write_set=bool(updated) or bool(updating))
            self._s.forget_txn(txn.txn_id)

    def _offsets_of_others(
        self, txn: Transaction, tables: Mapping[str, HiveTable], ranges: list[OffsetRange],
        table_offsets: Mapping[str, Iterable[OffsetRange]] | None,
    ) -> list[tuple[HiveTable, int, list[OffsetRange]]]:
        """Each other table the commit gives offsets (in its progress table): with its write
        id and its ranges, all of `ranges` or its own of `table_offsets`."""
        if table_offsets is None:
            return [(tables.get(n) or self._s.hive_table(n), w, ranges)
                    for n, w in txn.other_write_ids if ranges and not is_side_table(n)]
        named = []
        for name, own in table_offsets.items():
            table = _table_for(tables.values(), name) or self._s.hive_table(name)
            named.append((table.name, own))
        checked = checked_table_ranges(txn, ranges, named)
        return [(tables.get(n) or self._s.hive_table(n), txn.write_id_for(n), own)
                for n, own in checked.items() if own and not is_side_table(n)]

    def _delete_target(self, table: HiveTable) -> LockTarget:
        """Hive's lock for DELETE on a full-ACID table: EXCL_WRITE on Hive 4 (its default,
        hive.txn.xlock.write=true: deletes of a table run one at a time, readers and inserts
        go on), SHARED_WRITE on 3.1 (which has no EXCL_WRITE; its commit aborts the later of
        two deletes whose write sets overlap)."""
        return LockTarget(table,
                          "EXCL_WRITE" if self._s.conn.info.major >= 4 else "SHARED_WRITE",
                          "DELETE")

    def _lock_for_delete(self, txn_id: int, table: HiveTable, agent: str) -> None:
        """Take Hive's lock for DELETE (`_delete_target`) on `table` in `txn_id`.

        Raises:
            CommitConflictError: not granted in time, or the transaction is no longer open.
            MetastoreError: the metastore failed.
        """
        lock_all(self._s.conn, txn_id, [self._delete_target(table)], agent=agent)
        self._s.delete_locked.add((txn_id, table.name))

    def _write_side_tables(self, txn: Transaction, target: HiveTable | None,
                           sink: SinkProgress | None, ranges: list[OffsetRange],
                           listed: Mapping[str, tuple[HiveTable, list[CommittedFile]]],
                           others: Sequence[tuple[HiveTable, int, list[OffsetRange]]] = ()
                           ) -> None:
        """Write the commit's side-table rows inside transaction `txn` (docs/invariants.md,
        8.6 and 8.11): with a `target`, the micro-batch's progress row; for each of `others`
        (a table, its write id, its ranges), those ranges without the sink in its progress
        table; for each table of `listed`, its manifest entries. A write id of each side
        table, then one EXCLUSIVE lock request on them all (so the checks below and the
        commit are one step against every other writer of these side tables; released by the
        commit or abort), one snapshot of them all, the check that the batch is not
        committed and that no entry lowers a committed length, then one delta each.

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
            progress = self._s.progress_table(target, create=True)
            assert progress is not None
        # (progress table, its table's write id, its ranges)
        offsets_of: list[tuple[HiveTable, int, list[OffsetRange]]] = []
        for table, write_id, its_ranges in others:
            found = self._s.progress_table(table, create=True)
            assert found is not None
            offsets_of.append((found, write_id, its_ranges))
        manifests = {name: self._manifest.manifest_table(listed[name][0])
                     for name in sorted(listed)}
        sides = [*([progress] if progress is not None else []), *(p for p, _, _ in offsets_of),
                 *manifests.values()]
        if not sides:
            return
        own = {s.name: self._write_id(s.name, txn.txn_id) for s in sides}
        lock_all(self._s.conn, txn.txn_id,
                 [LockTarget(s, "EXCLUSIVE", "INSERT") for s in sides], agent=txn.agent)
        # Taken under the lock: every commit of these side tables before ours is in it.
        ids = snapshots(self._s.conn, [s.name for s in sides])
        if progress is not None:
            assert target is not None
            if sink is not None:
                done = self._progress.committed_write_id_in(
                    progress, sink.sink_id, sink.batch_id, ids=ids[progress.name])
                if done is not None:
                    raise CommitConflictError(
                        f"Cannot commit transaction {txn.txn_id}: micro-batch {sink.batch_id} "
                        f"of sink {sink.sink_id!r} was already committed as write id {done} "
                        f"of {target.name}",
                        hint="the batch is a replay; its rows are in the table")
            write_progress(progress, own[progress.name], sink, txn.write_id, ranges)
        for table, write_id, table_ranges in offsets_of:
            write_progress(table, own[table.name], None, write_id, table_ranges)
        for name, table in manifests.items():
            self._manifest.manifest.write_locked(
                self._s.conn, table, own[table.name], listed[name][0], ids=ids[table.name],
                record=listed[name][1])

    def _register_written(self, txn: Transaction, table: HiveTable, paths: list[str], *,
                          update: bool = False) -> None:
        deletes = any(p.split("/")[-2].startswith("delete_delta_") for p in paths if "/" in p)
        operation: Operation = "UPDATE" if update else "DELETE" if deletes else "INSERT"
        if operation != "INSERT" and (txn.txn_id, table.name) not in self._s.delete_locked:
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
        names = add_partitions(self._s.conn, table, [list(v) for v in values])
        register_partitions(self._s.conn, txn.txn_id, txn.write_id_for(table.name), table,
                            names, operation=operation)

    def abort(self, txn: Transaction, *, reason: str = "aborted by its writer") -> None:
        """See `Metastore.abort`; the metastore keeps no reason."""
        with self._s.lock:
            beats = self._s.beats.pop(txn.txn_id, None)
            if beats is not None:
                beats.stop()
            self._s.forget_txn(txn.txn_id)
            self._s.abort(txn.txn_id)

    def heartbeat(self, txn: Transaction) -> None:
        with self._s.lock:
            result = heartbeat(self._s.conn, txn.txn_id, txn.txn_id)
        if not result.ok:
            raise CommitConflictError(
                f"Transaction {txn.txn_id} is no longer open in the Hive Metastore at "
                f"{self._s.location} ({'aborted' if result.aborted else 'unknown there'})",
                hint="it was aborted, probably after hive.txn.timeout without a heartbeat")

    def abort_timed_out(self, timeout_s: float) -> list[Transaction]:
        """See `Metastore.abort_timed_out`; the transactions returned name no table (the
        metastore aborts silent ones by itself after `hive.txn.timeout` too)."""
        with self._s.lock:
            self._s.writable("abort timed-out transactions")
            _, rows = txn_rows(self._s.conn)
            now = self._s.clock()
            out = []
            for row in rows:
                if row.state == "open" and now - row.heartbeat_at > timeout_s:
                    try:
                        self._s.abort(row.txn_id)
                    except CommitConflictError:
                        continue  # it finished meanwhile
                    out.append(Transaction(row.txn_id, "", 0, row.opened_at, row.agent))
            return out


__all__ = ["Commits"]
