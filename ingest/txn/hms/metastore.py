"""`HiveMetastore`: the `Metastore` behind `thrift://host:port`, kept in a Hive Metastore (Hive
4.x, 3.1) so that Hive, Trino and Spark see our tables and our commits.

Transactions follow Hive Streaming v2: `open_txns`, `allocate_table_write_ids`, one lock
request (SHARED_READ for INSERT on every table written), heartbeats on a connection of their
own at half `hive.txn.timeout`, then the written partitions added (`add_partitions`,
`add_dynamic_partitions`) and `commit_txn`, or `abort_txn`. Compactions: Hive 4's compaction
queue, or a table parameter on Hive 3 (`ingest.txn.hms.compactions`); the cleaner waits for
the open transactions and the locks held outside one (`live_readers`). A streaming sink's
progress (micro-batch id, Kafka offset ranges) and the committed-file manifest are rows of
hidden side tables written in the same HMS transaction as the data (`progress.py`,
`manifest.py`, docs/invariants.md, 8.11). A reader's lease is a read transaction holding a
SHARED_READ lock (`leases.py`).

A connection the server dropped (it was restarted, or stopped) is replaced by a new one at
the next call, retried for up to `RECONNECT_S`; reads that failed on it are retried once.

Built by composition, as the SQL backend is (`ingest.txn.sql._store`): one `Session` (the
connection, its lock, the transactions held open, the side-table caches, table lookups;
`_session.py`) shared by parts that each own a concern: `TableOps` (`_table_ops.py`),
`Commits` the write transactions and their commit (`_commit.py`), `ProgressOps` sink
progress (`_progress_ops.py`), `ManifestOps` the committed-file manifest
(`_manifest_ops.py`), `ReadOps` snapshots and leases (`_read_ops.py`) and `CompactionOps`
(`_compaction_ops.py`). This class only connects and hands each call to its part; the
contract of every method is `Metastore`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Literal, Self

import pyarrow as pa

from ingest.acid.format import CommittedFile, ValidWriteIdList
from ingest.txn.hms._commit import TRANSACTION_BATCHES_REFUSED, Commits
from ingest.txn.hms._compaction_ops import CompactionOps
from ingest.txn.hms._manifest_ops import ManifestOps
from ingest.txn.hms._progress_ops import ProgressOps
from ingest.txn.hms._read_ops import ReadOps
from ingest.txn.hms._session import RECONNECT_S, Session
from ingest.txn.hms._table_ops import TableOps
from ingest.txn.hms.side import HmsManifest
from ingest.txn.hms.thrift import HiveTable, HmsConnection, connect
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
    TableIdentifier,
    Transaction,
    TransactionInfo,
    TxnState,
)


class HiveMetastore(Metastore):
    """A `Metastore` in a Hive Metastore reached over Thrift; see `Metastore` for the contract.

    One connection serves the object's calls (one at a time: it may be shared by threads);
    each open transaction is heartbeated by a `Heartbeater` on a connection of its own (the
    server's version and timeout reused from this one's, so it costs no calls to open).

    Attributes:
        server_version: what the server says it is ("4.0.1"; Hive 3.1 says "3.0").
    """

    keeps_sink_progress = True
    refuses_transaction_batches = TRANSACTION_BATCHES_REFUSED

    def __init__(self, session: Session, *, url: str) -> None:
        """Wrap an open session; use `Metastore.open` instead."""
        super().__init__(url=url, location=session.location)
        self._session = session
        self._table_ops = TableOps(session)
        self._progress_ops = ProgressOps(session)
        self._manifest_ops = ManifestOps(session)
        self._commits = Commits(session, self._progress_ops, self._manifest_ops)
        self._read_ops = ReadOps(session)
        self._compaction_ops = CompactionOps(session)

    # -- opening ----------------------------------------------------------------------------

    @classmethod
    def _connect(cls, url: str, *, create: bool, read_only: bool, busy_timeout_s: float,
                 clock: Callable[[], float]) -> Self:
        """Connect (the server always exists: `create` changes nothing); `busy_timeout_s`
        bounds how long a lock is waited for."""
        return cls(Session(connect(url), read_only=read_only, clock=clock), url=url)

    @classmethod
    def redact_url(cls, url: str) -> str:
        """`url` without user information: only its authority's (which ends at '?'); a
        Kerberos principal in the query (`principal=hive/_HOST@REALM`) is no secret."""
        scheme, sep, rest = url.partition("://")
        split = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
        return f"{scheme}{sep}{rest[:split].rpartition('@')[2]}{rest[split:]}"

    @classmethod
    def _connect_for_reading(cls, url: str) -> Self:
        """A connection that writes nothing but its reads' leases (read transactions)."""
        return cls(Session(connect(url), read_only=True, clock=time.time, leases=True),
                   url=url)

    def close(self) -> None:
        self._session.close()

    @property
    def capabilities(self) -> MetastoreCapabilities:
        return MetastoreCapabilities(committed_files=True, reader_leases=self._session.leases,
                                     compaction_history=True,
                                     visibility_suffix=self._session.conn.info.major >= 4)

    @property
    def server_version(self) -> str:
        return self._session.conn.info.version

    # What tests reach inside for: the connection (to count its calls), a table lookup and
    # the manifest's writer (to write a side table's delta without committing it).

    @property
    def _conn(self) -> HmsConnection:
        return self._session.conn

    def _hive_table(self, table: TableIdentifier) -> HiveTable:
        return self._session.hive_table(table)

    @property
    def _manifest(self) -> HmsManifest:
        return self._manifest_ops.manifest

    # -- tables -----------------------------------------------------------------------------

    def create_table(self, defn: TableDefinition, *, next_write_id: int = 1) -> TableDefinition:
        return self._table_ops.create_table(defn, next_write_id=next_write_id)

    def set_properties(self, table: TableIdentifier, properties: dict[str, str]) -> TableDefinition:
        return self._table_ops.set_properties(table, properties)

    def alter_columns(self, table: TableIdentifier, row_schema: pa.Schema, *,
                      expected: pa.Schema) -> TableDefinition:
        return self._table_ops.alter_columns(table, row_schema, expected=expected)

    def find_table(self, table: TableIdentifier) -> TableDefinition | None:
        return self._table_ops.find_table(table)

    def find_tables(self, tables: Sequence[TableIdentifier]) -> list[TableDefinition | None]:
        return self._table_ops.find_tables(tables)

    def list_tables(self) -> list[TableDefinition]:
        return self._table_ops.list_tables()

    def drop_table(self, table: TableIdentifier) -> None:
        self._table_ops.drop_table(table)

    def side_tables(self, table: TableIdentifier) -> list[str]:
        return self._table_ops.side_tables(table)

    # -- transactions -----------------------------------------------------------------------

    def open_transaction(
        self, table: TableIdentifier, *, agent: str = "", also: Sequence[TableIdentifier] = (),
        operation: Literal["insert", "delete"] = "insert",
    ) -> Transaction:
        return self._commits.open_transaction(table, agent=agent, also=also,
                                              operation=operation)

    def allocate_write_ids(
        self, table: TableIdentifier, count: int, *, agent: str = ""
    ) -> list[Transaction]:
        return self._commits.allocate_write_ids(table, count, agent=agent)

    def allocate_write_id(self, txn: Transaction, table: TableIdentifier) -> Transaction:
        return self._commits.allocate_write_id(txn, table)

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
        self._commits.commit(txn, sink=sink, offsets=offsets, files=files, updated=updated,
                             table_offsets=table_offsets, table_updated=table_updated)

    def abort(self, txn: Transaction, *, reason: str = "aborted by its writer") -> None:
        self._commits.abort(txn, reason=reason)

    def heartbeat(self, txn: Transaction) -> None:
        self._commits.heartbeat(txn)

    def abort_timed_out(self, timeout_s: float) -> list[Transaction]:
        return self._commits.abort_timed_out(timeout_s)

    # -- snapshots, readers and progress ------------------------------------------------------

    def snapshot(self, table: TableIdentifier) -> ValidWriteIdList:
        return self._read_ops.snapshot(table)

    def leased_snapshot(
        self, table: TableIdentifier, *, agent: str, heartbeat_s: float = READER_HEARTBEAT_S,
        keep_lease: bool = False,
    ) -> AbstractContextManager[tuple[int | None, ValidWriteIdList]]:
        return self._read_ops.leased_snapshot(table, agent=agent, heartbeat_s=heartbeat_s,
                                              keep_lease=keep_lease)

    def heartbeat_reader(self, reader_id: int) -> bool:
        return self._read_ops.heartbeat_reader(reader_id)

    def end_reader(self, reader_id: int) -> None:
        self._read_ops.end_reader(reader_id)

    def transactions(
        self, table: TableIdentifier | None = None, *, states: Iterable[TxnState] = TXN_STATES
    ) -> list[TransactionInfo]:
        return self._read_ops.transactions(table, states=states)

    def write_id_states(self, table: TableIdentifier) -> dict[int, TxnState]:
        return self._read_ops.write_id_states(table)

    def write_id_of(self, txn_id: int, table: TableIdentifier) -> int | None:
        return self._read_ops.write_id_of(txn_id, table)

    def committed_write_id(self, sink_id: str, batch_id: int, *,
                           table: TableIdentifier | None = None) -> int | None:
        return self._progress_ops.committed_write_id(sink_id, batch_id, table=table)

    def last_committed_batch(self, sink_id: str, *,
                             table: TableIdentifier | None = None) -> int | None:
        return self._progress_ops.last_committed_batch(sink_id, table=table)

    def offset_ranges(self, table: TableIdentifier) -> list[tuple[int, OffsetRange]]:
        return self._progress_ops.offset_ranges(table)

    # -- the committed-file manifest ----------------------------------------------------------

    def committed_files(self, table: TableIdentifier) -> dict[str, CommittedFile]:
        return self._manifest_ops.committed_files(table)

    def record_committed_files(self, table: TableIdentifier,
                               files: Iterable[CommittedFile]) -> None:
        self._manifest_ops.record_committed_files(table, files)

    def forget_committed_files(self, table: TableIdentifier, paths: Iterable[str]) -> int:
        return self._manifest_ops.forget_committed_files(table, paths)

    # -- compactions ------------------------------------------------------------------------

    def begin_compaction(
        self,
        table: TableIdentifier,
        partition: str,
        kind: str,
        *,
        agent: str,
        stale_after_s: float,
        is_alive: Callable[[str], bool] | None = None,
    ) -> tuple[int, Transaction]:
        return self._compaction_ops.begin_compaction(
            table, partition, kind, agent=agent, stale_after_s=stale_after_s, is_alive=is_alive)

    def finish_compaction(
        self,
        compaction_id: int,
        txn: Transaction,
        *,
        highest_write_id: int,
        rows: int,
        inputs: Sequence[str],
        outputs: Sequence[str],
    ) -> None:
        self._compaction_ops.finish_compaction(compaction_id, txn,
                                               highest_write_id=highest_write_id, rows=rows,
                                               inputs=inputs, outputs=outputs)

    def fail_compaction(self, compaction_id: int, txn: Transaction, error: str) -> None:
        self._compaction_ops.fail_compaction(compaction_id, txn, error)

    def forget_compaction(self, compaction_id: int, txn: Transaction) -> None:
        self._compaction_ops.forget_compaction(compaction_id, txn)

    def compactor_visibility(self, table: TableIdentifier) -> CompactorVisibility:
        return self._compaction_ops.compactor_visibility(table)

    def compactions(self, table: TableIdentifier) -> list[CompactionInfo]:
        return self._compaction_ops.compactions(table)

    def compactions_to_clean(self, table: TableIdentifier) -> list[CompactionInfo]:
        return self._compaction_ops.compactions_to_clean(table)

    def mark_compactions_cleaned(self, compaction_ids: Iterable[int]) -> None:
        self._compaction_ops.mark_compactions_cleaned(compaction_ids)

    # -- reader leases ------------------------------------------------------------------------

    def live_readers(self, table: TableIdentifier, *, timeout_s: float) -> list[ReaderInfo]:
        return self._compaction_ops.live_readers(table, timeout_s=timeout_s)

    def forget_dead_readers(self, *, timeout_s: float) -> int:
        return self._compaction_ops.forget_dead_readers(timeout_s=timeout_s)


__all__ = ["RECONNECT_S", "HiveMetastore"]
