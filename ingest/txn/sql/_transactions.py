"""Transaction lifecycle in SQL: open (with write ids), commit, abort, heartbeat, time-outs.

Mirrors Hive's `TxnHandler.openTxns`, `allocateTableWriteIds`, `commitTxn` (here with sink
progress, Kafka offsets and the committed-file manifest in the same database transaction, as
`commitTxnWithKeyValue` does for key-values), `abortTxn`, `heartbeat` and `performTimeOuts`.
Every state change is compare-and-swap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import sqlalchemy as sa

from ingest.acid.format import CommittedFile
from ingest.errors import CommitConflictError, ConfigError
from ingest.faults import crash_point
from ingest.txn.model import OffsetRange, SinkProgress, TableIdentifier, Transaction, TxnState
from ingest.txn.sql._database import IDENTIFIERS_A_READ, Database, inserted_id
from ingest.txn.sql._manifest import Manifest
from ingest.txn.sql._schema import sink_progress, tables, txn_offsets, txn_to_write_id, txns
from ingest.txn.sql._table_offsets import TableOffsets
from ingest.txn.sql._write_set import WriteSet, WriteSets


class Transactions:
    """The `txns`, `txn_to_write_id`, `sink_progress` and `txn_offsets` writes of one
    database; a commit records its files through the `Manifest`, each table's own ranges
    through `TableOffsets`, and checks and records what it updated through the `WriteSets`."""

    def __init__(self, db: Database, manifest: Manifest) -> None:
        self._db = db
        self._manifest = manifest
        self._write_sets = WriteSets(db)
        self._table_offsets = TableOffsets(db)

    def open_transaction(
        self, table: TableIdentifier, *, agent: str = "", also: Sequence[TableIdentifier] = ()
    ) -> Transaction:
        """See `Metastore.open_transaction`; one write transaction."""
        return self._open(table, 1, agent=agent, also=also)[0]

    def allocate_write_ids(
        self, table: TableIdentifier, count: int, *, agent: str = ""
    ) -> list[Transaction]:
        """See `Metastore.allocate_write_ids`; one write transaction."""
        if count < 1:
            raise ConfigError(f"Cannot allocate {count} write ids: count must be at least 1")
        return self._open(table, count, agent=agent, also=())

    def _open(
        self, table: TableIdentifier, count: int, *, agent: str, also: Sequence[TableIdentifier]
    ) -> list[Transaction]:
        # A transaction on many tables (a micro-batch of a many-table stream: a hundred) is
        # a few statements, not a few per table: the names resolved together, every table's
        # write ids taken together. Same ids and errors as table by table: all of it runs
        # in the one write transaction, which no other writer interleaves (SQLite's write
        # lock, PostgreSQL's advisory lock: docs/invariants.md, 9).
        with self._db.translate("open transactions"), self._db.write() as c:
            name, *others = self._db.resolve_many(c, [table, *also])
            if name in others or len(set(others)) != len(others):
                raise ConfigError(
                    f"Cannot open a transaction on {[name, *others]}: a table is repeated"
                )
            now = self._db.clock()
            first = self._take_write_ids(c, [name, *others], count)
            out = []
            rows = []
            for i in range(count):
                txn_id = insert_txn(c, agent, now)
                rows += [{"txn_id": txn_id, "table_name": n, "write_id": w + i,
                          "is_primary": int(n == name)} for n, w in first.items()]
                other_ids = tuple((n, first[n] + i) for n in others)
                out.append(Transaction(txn_id, name, first[name] + i, now, agent, other_ids))
            c.execute(sa.insert(txn_to_write_id), rows)
        return out

    @staticmethod
    def _take_write_ids(c: sa.Connection, names: Sequence[str], count: int) -> dict[str, int]:
        """Hive's NEXT_WRITE_ID: take `count` ids of each table of `names` (known to exist),
        return each one's first, in the order of `names`."""
        first: dict[str, int] = {}
        for at in range(0, len(names), IDENTIFIERS_A_READ):
            chunk = list(names[at:at + IDENTIFIERS_A_READ])
            first.update((str(n), int(w)) for n, w in c.execute(
                sa.select(tables.c.name, tables.c.next_write_id).where(tables.c.name.in_(chunk))))
            c.execute(sa.update(tables).where(tables.c.name.in_(chunk))
                      .values(next_write_id=tables.c.next_write_id + count))
        return {n: first[n] for n in names}

    def allocate_write_id(self, txn: Transaction, table: TableIdentifier) -> Transaction:
        """See `Metastore.allocate_write_id`; one write transaction."""
        with self._db.translate("allocate a write id"), self._db.write() as c:
            name = self._db.resolve(c, table)
            self._require_open(c, txn, "allocate a write id for")
            if name in txn.write_ids:
                return txn
            write_id = self._take_write_ids(c, [name], 1)[name]
            c.execute(sa.insert(txn_to_write_id).values(
                txn_id=txn.txn_id, table_name=name, write_id=write_id, is_primary=0))
        return Transaction(
            txn.txn_id,
            txn.table,
            txn.write_id,
            txn.opened_at,
            txn.agent,
            (*txn.other_write_ids, (name, write_id)),
        )

    def commit(
        self,
        txn: Transaction,
        *,
        sink: SinkProgress | None = None,
        offsets: Iterable[OffsetRange] = (),
        files: Mapping[str, Iterable[CommittedFile]] | None = None,
        updated: WriteSet | None = None,
        table_offsets: Mapping[str, Iterable[OffsetRange]] | None = None,
        table_updated: Mapping[str, WriteSet] | None = None,
    ) -> None:
        """See `Metastore.commit`: every record in one write transaction; a write-write
        conflict aborts the transaction in that same write transaction."""
        ranges = [OffsetRange(*o) for o in offsets]
        for r in ranges:
            if not 0 <= r.from_offset <= r.until_offset:
                raise ConfigError(
                    f"Cannot commit transaction {txn.txn_id}: offset range {tuple(r)} must "
                    "satisfy 0 <= from_offset <= until_offset"
                )
        conflict = None
        with self._db.translate(f"commit transaction {txn.txn_id}"), self._db.write() as c:
            if sink is not None:
                sink = SinkProgress(*sink)
                self._check_sink_batch(c, txn, sink)
            # Each table's write set is checked against that table's (the primary's and,
            # with several tables, each other's): the first conflict aborts the whole.
            sets = [(txn.table, updated)] if updated else []
            sets += [(name, one) for name, one in (table_updated or {}).items() if one]
            if sets:
                self._require_open(c, txn, "commit")
            for name, one in sets:
                conflict = self._write_sets.check_and_record(
                    c, txn, self._db.resolve(c, name), one)
                if conflict is not None:
                    break
            if conflict is not None:
                # The loser aborts at once, as Hive's commitTxn does: nothing can commit it.
                self._swap_state(c, txn, "aborted", conflict, "abort")
            else:
                self._commit_records(c, txn, sink, ranges, files or {}, table_offsets)
        if conflict is not None:
            self._raise_conflict(txn, conflict)

    def _commit_records(self, c: sa.Connection, txn: Transaction, sink: SinkProgress | None,
                        ranges: list[OffsetRange],
                        files: Mapping[str, Iterable[CommittedFile]],
                        table_offsets: Mapping[str, Iterable[OffsetRange]] | None) -> None:
        self._swap_state(c, txn, "committed", None, "commit")
        crash_point("metastore.during_commit")  # a kill here must roll the commit back
        if sink is not None:
            c.execute(sa.insert(sink_progress).values(
                sink_id=sink.sink_id, batch_id=sink.batch_id, txn_id=txn.txn_id,
                table_name=txn.table, write_id=txn.write_id))
        if ranges:
            c.execute(sa.insert(txn_offsets), [
                {"txn_id": txn.txn_id, "topic": r.topic, "partition": r.partition,
                 "from_offset": r.from_offset, "until_offset": r.until_offset}
                for r in ranges])
        # Every table the commit names, looked up once (a many-table commit names hundreds).
        names = self._db.resolve_all(c, [*files, *(table_offsets or {})])
        if table_offsets is not None:
            self._table_offsets.record(c, txn, ranges, table_offsets, names=names)
        self._record_commit_files(c, txn, files, names)

    @staticmethod
    def _raise_conflict(txn: Transaction, reason: str) -> None:
        raise CommitConflictError(
            f"Cannot commit transaction {txn.txn_id} (write id {txn.write_id} of {txn.table}): "
            f"{reason}; it is aborted",
            hint="retry the write (e.g. run the same `ingest upsert` again): it then reads "
            "the rows the other writer committed")

    def _record_commit_files(self, c: sa.Connection, txn: Transaction,
                             files: Mapping[str, Iterable[CommittedFile]],
                             names: Mapping[str, str]) -> None:
        write_ids = txn.write_ids
        recorded: list[tuple[str, list[CommittedFile], int | None]] = []
        for table, entries in files.items():
            name = names[table]
            if name not in write_ids:
                raise ConfigError(
                    f"Cannot commit transaction {txn.txn_id} with files of {name}: it writes "
                    f"{sorted(write_ids)} only")
            entries = list(entries)
            if entries:
                recorded.append((name, entries, write_ids[name]))
        if recorded:
            # Every table's entries in a few statements: a many-table commit stays short.
            self._manifest.require("record committed files")
            self._manifest.record_tables(c, recorded)

    def _check_sink_batch(
        self, c: sa.Connection, txn: Transaction, sink: SinkProgress
    ) -> None:
        row = c.execute(
            sa.select(sink_progress.c.txn_id, sink_progress.c.table_name,
                      sink_progress.c.write_id)
            .where(sink_progress.c.sink_id == sink.sink_id,
                   sink_progress.c.batch_id == sink.batch_id)).first()
        if row is not None:
            raise CommitConflictError(
                f"Cannot commit transaction {txn.txn_id}: batch {sink.batch_id} of sink "
                f"{sink.sink_id!r} was already committed as write id {row[2]} of {row[1]} "
                f"(transaction {row[0]})",
                hint="the batch is a replay: skip it and abort this transaction",
            )

    def abort(self, txn: Transaction, *, reason: str = "aborted by its writer") -> None:
        """See `Metastore.abort`."""
        with self._db.translate(f"abort transaction {txn.txn_id}"), self._db.write() as c:
            state = self._state(c, txn)
            if state != "aborted":
                self._swap_state(c, txn, "aborted", reason, "abort")

    def heartbeat(self, txn: Transaction) -> None:
        """See `Metastore.heartbeat`; compare-and-swap on the open state."""
        with self._db.translate(f"heartbeat transaction {txn.txn_id}"), self._db.write() as c:
            cur = c.execute(sa.update(txns)
                            .where(txns.c.txn_id == txn.txn_id, txns.c.state == "open")
                            .values(heartbeat_at=self._db.clock()))
            if cur.rowcount != 1:
                raise self._conflict(c, txn, "heartbeat")

    def abort_timed_out(self, timeout_s: float) -> list[Transaction]:
        """See `Metastore.abort_timed_out`; one write transaction."""
        with self._db.translate("abort timed-out transactions"), self._db.write() as c:
            now = self._db.clock()
            rows = c.execute(
                sa.select(txns.c.txn_id, txns.c.heartbeat_at)
                .where(txns.c.state == "open", txns.c.heartbeat_at < now - timeout_s)
                .order_by(txns.c.txn_id)).all()
            out = []
            for txn_id, heartbeat_at in rows:
                reason = (
                    f"timed out: no heartbeat for {now - heartbeat_at:.1f} s "
                    f"(timeout {timeout_s:g} s)"
                )
                c.execute(sa.update(txns)
                          .where(txns.c.txn_id == txn_id, txns.c.state == "open")
                          .values(state="aborted", finished_at=now, reason=reason))
                out.append(self._load(c, int(txn_id)))
        return out

    def _state(self, c: sa.Connection, txn: Transaction) -> TxnState:
        row = c.execute(sa.select(txns.c.state).where(txns.c.txn_id == txn.txn_id)).first()
        if row is None:
            raise CommitConflictError(
                f"Transaction {txn.txn_id} does not exist in metastore {self._db.location}",
                hint="it was opened against another metastore",
            )
        state: TxnState = row[0]
        return state

    def _require_open(self, c: sa.Connection, txn: Transaction, action: str) -> None:
        if self._state(c, txn) != "open":
            raise self._conflict(c, txn, action)

    def _swap_state(
        self, c: sa.Connection, txn: Transaction, to: TxnState, reason: str | None, action: str
    ) -> None:
        cur = c.execute(sa.update(txns)
                        .where(txns.c.txn_id == txn.txn_id, txns.c.state == "open")
                        .values(state=to, finished_at=self._db.clock(), reason=reason))
        if cur.rowcount != 1:
            raise self._conflict(c, txn, action)

    def _conflict(
        self, c: sa.Connection, txn: Transaction, action: str
    ) -> CommitConflictError:
        state = self._state(c, txn)
        row = c.execute(sa.select(txns.c.reason).where(txns.c.txn_id == txn.txn_id)).first()
        why = f" ({row[0]})" if row and row[0] else ""
        return CommitConflictError(
            f"Cannot {action} transaction {txn.txn_id} (write id {txn.write_id} of {txn.table}):"
            f" it is {state}{why}",
            hint="abort the batch and write it again in a new transaction"
            if state == "aborted"
            else None,
        )

    def _load(self, c: sa.Connection, txn_id: int) -> Transaction:
        head = c.execute(sa.select(txns.c.agent, txns.c.opened_at)
                         .where(txns.c.txn_id == txn_id)).one()
        # The primary table first, then the others by name (SQLite's insertion order, its
        # rowid, has no portable equivalent).
        ids = list(c.execute(
            sa.select(txn_to_write_id.c.table_name, txn_to_write_id.c.write_id,
                      txn_to_write_id.c.is_primary)
            .where(txn_to_write_id.c.txn_id == txn_id)).all())
        ids.sort(key=lambda r: (-r[2], r[0]))
        if not ids:
            return Transaction(txn_id, "", 0, head[1], head[0])
        (name, write_id, _), *rest = ids
        return Transaction(
            txn_id, name, write_id, head[1], head[0], tuple((n, w) for n, w, _ in rest)
        )


def insert_txn(c: sa.Connection, agent: str, now: float) -> int:
    """Open one transaction row (Hive's openTxns) and return its txn id."""
    result = c.execute(sa.insert(txns).values(state="open", agent=agent, opened_at=now,
                                              heartbeat_at=now))
    return inserted_id(result)


__all__ = ["Transactions", "insert_txn"]
