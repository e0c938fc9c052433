"""Transaction lifecycle: open (with write ids), commit, abort, heartbeat, time-outs.

Mirrors Hive's `TxnHandler.openTxns`, `allocateTableWriteIds`, `commitTxn` (here with sink
progress, Kafka offsets and the committed-file manifest in the same database transaction, as
`commitTxnWithKeyValue` does for key-values), `abortTxn`, `heartbeat` and `performTimeOuts`.
Every state change is compare-and-swap.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import sqlalchemy as sa

from ingest.acid.committed import CommittedFile
from ingest.errors import CommitConflictError, ConfigError, IngestError
from ingest.faults import crash_point
from ingest.txn._db import SqlStore, TableRef, inserted_id
from ingest.txn._schema import sink_progress, tables, txn_offsets, txn_to_write_id, txns
from ingest.txn.manifest import record_files, require_manifest
from ingest.txn.model import OffsetRange, SinkProgress, Transaction, TxnState


class TransactionStore(SqlStore):
    """The transaction half of `Metastore`; see the module docstring."""

    def open_transaction(
        self, table: TableRef, *, agent: str = "", also: Sequence[TableRef] = ()
    ) -> Transaction:
        """Open one transaction and allocate its write id on `table` (and on each of `also`).

        Args:
            table: the table the transaction writes.
            agent: who opened it, e.g. "host:pid:sink".
            also: further tables written in the same transaction (e.g. the dead-letter table);
                they must live in this metastore.

        Returns:
            The open transaction with its write ids.

        Raises:
            TableNotFoundError: a table is not in this metastore.
            MetastoreError: the database failed.
        """
        return self._open(table, 1, agent=agent, also=also)[0]

    def allocate_write_ids(
        self, table: TableRef, count: int, *, agent: str = ""
    ) -> list[Transaction]:
        """Open `count` transactions at once with consecutive write ids W..W+count-1.

        Hive Streaming's transaction batch: each transaction is committed or aborted on its
        own, and all may write one `delta_W_{W+count-1}` directory.

        Raises:
            ConfigError: count < 1.
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        if count < 1:
            raise ConfigError(f"Cannot allocate {count} write ids: count must be at least 1")
        return self._open(table, count, agent=agent, also=())

    def _open(
        self, table: TableRef, count: int, *, agent: str, also: Sequence[TableRef]
    ) -> list[Transaction]:
        with self._translate("open transactions"), self._write() as c:
            name = self._resolve(c, table)
            others = [self._resolve(c, t) for t in also]
            if name in others or len(set(others)) != len(others):
                raise ConfigError(
                    f"Cannot open a transaction on {[name, *others]}: a table is repeated"
                )
            now = self._clock()
            first = {n: self._take_write_ids(c, n, count) for n in [name, *others]}
            out = []
            for i in range(count):
                txn_id = insert_txn(c, agent, now)
                for n, w in first.items():
                    c.execute(sa.insert(txn_to_write_id).values(
                        txn_id=txn_id, table_name=n, write_id=w + i, is_primary=int(n == name)))
                other_ids = tuple((n, first[n] + i) for n in others)
                out.append(Transaction(txn_id, name, first[name] + i, now, agent, other_ids))
        return out

    @staticmethod
    def _take_write_ids(c: sa.Connection, name: str, count: int) -> int:
        """Hive's NEXT_WRITE_ID: take `count` ids of table `name`, return the first."""
        first = int(c.execute(sa.select(tables.c.next_write_id)
                              .where(tables.c.name == name)).scalar_one())
        c.execute(sa.update(tables).where(tables.c.name == name)
                  .values(next_write_id=first + count))
        return first

    def allocate_write_id(self, txn: Transaction, table: TableRef) -> Transaction:
        """Add another table to an open transaction (Hive's allocateTableWriteIds).

        Returns:
            `txn` with the new table's write id in `other_write_ids`; if the transaction
            already writes the table, its existing write id is kept.

        Raises:
            TableNotFoundError: no such table.
            CommitConflictError: the transaction is no longer open.
            MetastoreError: the database failed.
        """
        with self._translate("allocate a write id"), self._write() as c:
            name = self._resolve(c, table)
            self._require_open(c, txn, "allocate a write id for")
            if name in txn.write_ids:
                return txn
            write_id = self._take_write_ids(c, name, 1)
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
    ) -> None:
        """Commit an open transaction, recording sink progress, Kafka offsets and the
        committed-file manifest atomically.

        Compare-and-swap: the transaction moves from open to committed only if it is still
        open; the sink's (sink_id, batch_id) may map to one committed write id only.

        Args:
            txn: the transaction to commit.
            sink: the streaming sink's micro-batch this commit completes.
            offsets: the Kafka ranges the transaction's rows came from.
            files: per table the transaction writes (by name or location), the bucket files
                it wrote (closed or flushed), each with the transaction's write id of that
                table; an entry replaces the path's earlier one (docs/format.md §20).

        Raises:
            CommitConflictError: the transaction is not open (aborted, e.g. by a timeout, or
                already committed), the sink's batch was already committed, or a file entry
                would lower a committed length recorded before.
            ConfigError: an offset range is malformed, or a file entry names a table the
                transaction does not write, another write id, or a path twice.
            TableNotFoundError: `files` names an unknown table.
            MetastoreError: the database failed.
        """
        ranges = [OffsetRange(*o) for o in offsets]
        for r in ranges:
            if not 0 <= r.from_offset <= r.until_offset:
                raise ConfigError(
                    f"Cannot commit transaction {txn.txn_id}: offset range {tuple(r)} must "
                    "satisfy 0 <= from_offset <= until_offset"
                )
        with self._translate(f"commit transaction {txn.txn_id}"), self._write() as c:
            if sink is not None:
                sink = SinkProgress(*sink)
                self._check_sink_batch(c, txn, sink)
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
            self._record_commit_files(c, txn, files or {})

    def _record_commit_files(self, c: sa.Connection, txn: Transaction,
                             files: Mapping[str, Iterable[CommittedFile]]) -> None:
        write_ids = txn.write_ids
        for table, entries in files.items():
            name = self._resolve(c, table)
            if name not in write_ids:
                raise ConfigError(
                    f"Cannot commit transaction {txn.txn_id} with files of {name}: it writes "
                    f"{sorted(write_ids)} only")
            entries = list(entries)
            if entries:
                require_manifest(self.schema_version, self.location)
                record_files(c, name, entries, write_id=write_ids[name])

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
        """Abort a transaction; aborting an aborted one does nothing.

        Raises:
            CommitConflictError: the transaction is already committed.
            MetastoreError: the database failed.
        """
        with self._translate(f"abort transaction {txn.txn_id}"), self._write() as c:
            state = self._state(c, txn)
            if state != "aborted":
                self._swap_state(c, txn, "aborted", reason, "abort")

    def heartbeat(self, txn: Transaction) -> None:
        """Record that the writer of an open transaction is alive.

        Raises:
            CommitConflictError: the transaction is no longer open (e.g. it timed out).
            MetastoreError: the database failed.
        """
        with self._translate(f"heartbeat transaction {txn.txn_id}"), self._write() as c:
            cur = c.execute(sa.update(txns)
                            .where(txns.c.txn_id == txn.txn_id, txns.c.state == "open")
                            .values(heartbeat_at=self._clock()))
            if cur.rowcount != 1:
                raise self._conflict(c, txn, "heartbeat")

    def abort_timed_out(self, timeout_s: float) -> list[Transaction]:
        """Abort every open transaction whose last heartbeat is older than `timeout_s`.

        Hive's `performTimeOuts` (hive.txn.timeout).

        Returns:
            The transactions aborted, by txn id.

        Raises:
            MetastoreError: the database failed.
        """
        with self._translate("abort timed-out transactions"), self._write() as c:
            now = self._clock()
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

    @contextmanager
    def transaction(
        self,
        table: TableRef,
        *,
        agent: str = "",
        also: Sequence[TableRef] = (),
        sink: SinkProgress | None = None,
        offsets: Iterable[OffsetRange] = (),
    ) -> Iterator[Transaction]:
        """Open a transaction; commit it on a clean exit, abort it if the block raises.

        Example:
            with store.transaction("default.events", agent="host:1:sink") as txn:
                write_delta(txn.write_id)

        Raises:
            CommitConflictError: the commit lost (see `commit`).
            TableNotFoundError: no such table.
            MetastoreError: the database failed.
        """
        txn = self.open_transaction(table, agent=agent, also=also)
        try:
            yield txn
        except BaseException as e:
            try:
                self.abort(txn, reason=f"aborted on error: {type(e).__name__}: {e}")
            except IngestError as abort_error:
                e.add_note(f"Also failed to abort transaction {txn.txn_id}: {abort_error}")
            raise
        self.commit(txn, sink=sink, offsets=offsets)

    def _state(self, c: sa.Connection, txn: Transaction) -> TxnState:
        row = c.execute(sa.select(txns.c.state).where(txns.c.txn_id == txn.txn_id)).first()
        if row is None:
            raise CommitConflictError(
                f"Transaction {txn.txn_id} does not exist in metastore {self.location}",
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
                        .values(state=to, finished_at=self._clock(), reason=reason))
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
