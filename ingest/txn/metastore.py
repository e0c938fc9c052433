"""The metastore interface: what the table layer asks of Hive's metastore, whatever holds it.

Tables (`createTable`, `getTable`, `dropTable`, `alter_table`), transactions and write ids
(`openTxns`, `allocateTableWriteIds`, `commitTxn` with key-values, `abortTxn`, `heartbeat`,
`performTimeOuts`), snapshots (`getValidWriteIds`), registered readers (MIN_HISTORY_LEVEL),
the compaction history (COMPACTION_QUEUE) and ingest's committed-file manifest. `open(url)`
picks the implementation by the URL's scheme (`registry`); the SQL one is `ingest.txn.sql`.
The docstrings of the abstract methods are the contract every implementation keeps.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import ClassVar, Literal, Self

import pyarrow as pa

from ingest.acid.format import CommittedFile, ValidWriteIdList
from ingest.errors import ConfigError, IngestError
from ingest.txn.model import (
    TXN_STATES,
    CompactionInfo,
    CompactorVisibility,
    MetastoreCapabilities,
    OffsetRange,
    PinnedView,
    ReaderInfo,
    SinkProgress,
    TableDefinition,
    TableIdentifier,
    Transaction,
    TransactionInfo,
    TxnState,
    table_not_found,
)
from ingest.txn.registry import backend_for, strip_userinfo, url_scheme

# How often a held reader registration is refreshed; it counts as dead after the transaction
# time-out (300 s by default), so a few beats may fail before the cleaner ignores it.
READER_HEARTBEAT_S = 60.0


class Metastore(abc.ABC):
    """Transactional-table metadata shared by any number of processes (and hosts).

    Open one with `Metastore.open(url)`; close it with `close()` or use it as a context
    manager. One object may be shared by a process's threads.

    Attributes:
        url: the URL it was opened with (with its password, if any: it reopens it).
        location: how messages name it, never with a password (a file path, a URL).
        keeps_sink_progress: the backend commits a stream's micro-batch id and Kafka offset
            ranges with the micro-batch's transaction (exactly once across restarts,
            docs/invariants.md, 4); the streaming job refuses one that does not.
        refuses_transaction_batches: None when the backend's tables may hold transaction
            batches (`allocate_write_ids`: K micro-batches appending to one delta
            directory, `--txns-per-delta` K > 1); otherwise why not, as a clause the
            streaming job quotes when it refuses K > 1 before creating anything.
    """

    keeps_sink_progress: ClassVar[bool] = True
    refuses_transaction_batches: ClassVar[str | None] = None

    def __init__(self, *, url: str, location: str) -> None:
        """Record the URL and name; implementations are made by `open`."""
        self.url = url
        self.location = location

    # -- opening ----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str,
        *,
        create: bool = True,
        read_only: bool = False,
        busy_timeout_s: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> Self:
        """Open (and if needed create) the metastore at `url`, with the implementation
        registered for its scheme (`ingest.txn.register_metastore`).

        Args:
            url: `sqlite:///abs/path.sqlite`, `sqlite://:memory:` (private to this object),
                `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE`, or a URL of another
                registered scheme.
            create: create the metastore (a file and its tables, a database's tables) when
                missing or empty. Without it an empty one is an error, never rebuilt.
            read_only: nothing is created or changed, and any write fails (read-only
                commands, docs/invariants.md, 7). Implies create=False.
            busy_timeout_s: how long a write waits for another process's write lock.
            clock: seconds since the epoch, for open/heartbeat times (tests pass a fake one).

        Returns:
            The open metastore.

        Raises:
            ConfigError: no backend is registered for the URL's scheme (the message names
                the scheme and the supported ones), its module cannot be imported (a missing
                optional dependency names the extra), it is not an implementation of the
                class `open` was called on, or the backend rejects the URL.
            MetastoreError: the metastore is missing (create=False), empty (create=False),
                unreadable or not a metastore; the server cannot be reached or refuses the
                credentials.
            UnsupportedFormatError: the metastore was written by a newer ingest.
        """
        backend = cls._backend(url)
        return backend._connect(url, create=create and not read_only, read_only=read_only,
                                busy_timeout_s=busy_timeout_s, clock=clock)

    @classmethod
    def open_for_reading(cls, url: str) -> Self:
        """Open an existing metastore for a reading command that registers its snapshot.

        Opened so that `reading` can register a lease when this process may write the
        metastore, and read-only otherwise (`reading` then goes on unregistered). Never
        creates, rebuilds or upgrades a metastore.

        Raises:
            ConfigError: as `open`.
            MetastoreError: the metastore is missing, empty, unreadable or not a metastore.
            UnsupportedFormatError: it was written by a newer ingest.
        """
        return cls._backend(url)._connect_for_reading(url)

    @classmethod
    def _backend(cls, url: str) -> type[Self]:
        backend = backend_for(url)
        if not (isinstance(backend, type) and issubclass(backend, cls)):
            raise ConfigError(
                f"Cannot open metastore {strip_userinfo(url)!r} as a {cls.__name__}: the "
                f"{url_scheme(url)}:// backend is {getattr(backend, '__name__', backend)}, "
                f"not a {cls.__name__}")
        return backend

    @classmethod
    @abc.abstractmethod
    def _connect(cls, url: str, *, create: bool, read_only: bool, busy_timeout_s: float,
                 clock: Callable[[], float]) -> Self:
        """Open the metastore at `url`, a URL of a scheme this class is registered for;
        `open` has resolved the backend and made `create` False when `read_only`.

        Raises:
            See `open`.
        """

    @classmethod
    @abc.abstractmethod
    def _connect_for_reading(cls, url: str) -> Self:
        """`open_for_reading` for a URL of a scheme this class is registered for.

        Raises:
            See `open_for_reading`.
        """

    @classmethod
    def redact_url(cls, url: str) -> str:
        """`url` fit to print: without a password (by default without any user information).

        Raises:
            ConfigError: an implementation cannot parse the URL.
        """
        return strip_userinfo(url)

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection; the object is unusable afterwards. Closing twice is
        allowed."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    @property
    @abc.abstractmethod
    def capabilities(self) -> MetastoreCapabilities:
        """What this open metastore records beyond tables and transactions (it may depend on
        how it was opened, e.g. an older schema read without upgrading)."""

    # -- tables -----------------------------------------------------------------------------

    @abc.abstractmethod
    def create_table(self, defn: TableDefinition, *, next_write_id: int = 1) -> TableDefinition:
        """Record a new transactional table.

        Args:
            defn: the table.
            next_write_id: the first write id to hand out; above 1 when the table adopts
                data already on disk, so no new write reuses an id found there.

        Returns:
            The definition as stored.

        Raises:
            ConfigError: next_write_id < 1.
            TableExistsError: a table with that name or location exists.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def set_properties(self, table: TableIdentifier, properties: dict[str, str]) -> TableDefinition:
        """Set table properties (Hive's ALTER TABLE ... SET TBLPROPERTIES); others are kept.

        Returns:
            The definition as stored afterwards.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """

    def alter_columns(self, table: TableIdentifier, row_schema: pa.Schema, *,
                      expected: pa.Schema) -> TableDefinition:
        """Record the table's new row schema (Hive's ALTER TABLE ... ADD/CHANGE COLUMNS), in
        one metastore transaction that succeeds only if the stored schema still equals
        `expected` (compare-and-swap). The caller has checked the change (`ingest.table`);
        no data file changes. A backend that cannot do it keeps this refusal.

        Returns:
            The definition as stored afterwards.

        Raises:
            ConfigError: this metastore cannot change a table's columns.
            CommitConflictError: the schema changed since `expected` was read.
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """
        raise ConfigError(
            f"Cannot alter the columns of table {table}: not supported on the metastore at "
            f"{self.location} yet", hint="use ingest's SQL metastore (sqlite:// or postgresql://)")

    @abc.abstractmethod
    def find_table(self, table: TableIdentifier) -> TableDefinition | None:
        """The table with this name or location, or None.

        Raises:
            MetastoreError: the metastore failed.
        """

    def get_table(self, table: TableIdentifier) -> TableDefinition:
        """The table with this name or location.

        Raises:
            TableNotFoundError: no such table in this metastore.
            MetastoreError: the metastore failed.
        """
        found = self.find_table(table)
        if found is None:
            raise table_not_found(table, self.location)
        return found

    def find_tables(self, tables: Sequence[TableIdentifier]) -> list[TableDefinition | None]:
        """`find_table` of each of `tables`, in their order (None where there is none).

        One call for many tables (a micro-batch of a many-table stream checks each table it
        wrote): here a look-up each; a backend that can reads them together. Each result is
        what `find_table` would give; several reads need not be one snapshot.

        Raises:
            ConfigError: a name that is not `table` or `db.table`.
            MetastoreError: the metastore failed.
        """
        return [self.find_table(t) for t in tables]

    def get_tables(self, tables: Sequence[TableIdentifier]) -> list[TableDefinition]:
        """`get_table` of each of `tables`, in their order (`find_tables`).

        Raises:
            TableNotFoundError: one is not in this metastore (the first missing one, in the
                given order, with `get_table`'s message).
            MetastoreError: the metastore failed.
        """
        found = self.find_tables(tables)
        for table, defn in zip(tables, found, strict=True):
            if defn is None:
                raise table_not_found(table, self.location)
        return [defn for defn in found if defn is not None]

    def side_tables(self, table: TableIdentifier) -> list[str]:
        """The names of the hidden tables this backend keeps beside `table` for its own
        bookkeeping (the Hive Metastore's progress and manifest tables, docs/format.md §20),
        those that exist; each is a full-ACID table of the metastore that the table layer
        compacts and cleans like any other. Empty here: the SQL metastores keep that
        bookkeeping in their own tables.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """
        self.get_table(table)
        return []

    @abc.abstractmethod
    def list_tables(self) -> list[TableDefinition]:
        """Every table, ordered by name.

        Raises:
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def drop_table(self, table: TableIdentifier) -> None:
        """Forget a table, its write ids, sink progress and committed-file entries. Files are
        not touched.

        Raises:
            TableNotFoundError: no such table.
            CommitConflictError: a transaction writing the table is still open.
            MetastoreError: the metastore failed.
        """

    # -- transactions and write ids ---------------------------------------------------------

    @abc.abstractmethod
    def open_transaction(
        self, table: TableIdentifier, *, agent: str = "", also: Sequence[TableIdentifier] = (),
        operation: Literal["insert", "delete"] = "insert",
    ) -> Transaction:
        """Open one transaction and allocate its write id on `table` (and on each of `also`).

        Args:
            table: the table the transaction writes.
            agent: who opened it, e.g. "host:pid:sink".
            also: further tables written in the same transaction (e.g. the dead-letter table);
                they must live in this metastore.
            operation: what it writes to `table`: rows ("insert") or delete events
                ("delete"). A metastore with Hive's locks takes the lock Hive takes for that
                operation before this returns, so a snapshot taken afterwards sees every
                conflicting write committed before (a serial metastore needs none).

        Returns:
            The open transaction with its write ids.

        Raises:
            ConfigError: a table is given twice.
            TableNotFoundError: a table is not in this metastore.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def allocate_write_ids(
        self, table: TableIdentifier, count: int, *, agent: str = ""
    ) -> list[Transaction]:
        """Open `count` transactions at once with consecutive write ids W..W+count-1.

        Hive Streaming's transaction batch: each transaction is committed or aborted on its
        own, and all may write one `delta_W_{W+count-1}` directory.

        Raises:
            ConfigError: count < 1.
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def allocate_write_id(self, txn: Transaction, table: TableIdentifier) -> Transaction:
        """Add another table to an open transaction (Hive's allocateTableWriteIds).

        Returns:
            `txn` with the new table's write id in `other_write_ids`; if the transaction
            already writes the table, its existing write id is kept.

        Raises:
            TableNotFoundError: no such table.
            CommitConflictError: the transaction is no longer open.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
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
        """Commit an open transaction, recording sink progress, Kafka offsets and the
        committed-file manifest atomically.

        Compare-and-swap: the transaction moves from open to committed only if it is still
        open; the sink's (sink_id, batch_id) may map to one committed write id only. With
        `updated`, first committer wins (Hive's write set, docs/format.md §24): if another
        transaction that committed after this one opened declared one of the same
        (partition, bucket) pairs of the table, this one is aborted instead;
        `table_updated` declares the same of other tables the transaction writes (by name or
        location), each checked against its own table's write set.

        Args:
            txn: the transaction to commit.
            sink: the streaming sink's micro-batch this commit completes.
            offsets: the Kafka ranges the transaction's rows came from: with
                `table_offsets`, those of every topic the micro-batch planned, the primary
                table's (the stream's position).
            table_offsets: per other table the transaction writes (by name or location),
                the ranges of its own topics, each one of `offsets`
                (docs/many-tables.md): `offset_ranges` of such a table then gives these
                alone, and of a table absent here none. Without it every table the
                transaction writes gets all of `offsets`.
            files: per table the transaction writes (by name or location), the bucket files
                it wrote (closed or flushed), each with the transaction's write id of that
                table; an entry replaces the path's earlier one (docs/format.md §20).

        Raises:
            CommitConflictError: the transaction is not open (aborted, e.g. by a timeout, or
                already committed), the sink's batch was already committed, or a file entry
                would lower a committed length recorded before.
            ConfigError: an offset range is malformed, or a file entry names a table the
                transaction does not write, another write id, or a path twice; or
                `table_offsets` names the primary table, one the transaction does not write,
                or a range not in `offsets` (`ingest.txn.table_ranges`).
            TableNotFoundError: `files` or `table_offsets` names an unknown table.
            MetastoreError: the metastore failed, or `files` has entries and it keeps no
                manifest.
        """

    @abc.abstractmethod
    def abort(self, txn: Transaction, *, reason: str = "aborted by its writer") -> None:
        """Abort a transaction; aborting an aborted one does nothing.

        Raises:
            CommitConflictError: the transaction is already committed, or unknown here.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def heartbeat(self, txn: Transaction) -> None:
        """Record that the writer of an open transaction is alive.

        Raises:
            CommitConflictError: the transaction is no longer open (e.g. it timed out).
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def abort_timed_out(self, timeout_s: float) -> list[Transaction]:
        """Abort every open transaction whose last heartbeat is older than `timeout_s`.

        Hive's `performTimeOuts` (hive.txn.timeout).

        Returns:
            The transactions aborted, by txn id.

        Raises:
            MetastoreError: the metastore failed.
        """

    @contextmanager
    def transaction(
        self,
        table: TableIdentifier,
        *,
        agent: str = "",
        also: Sequence[TableIdentifier] = (),
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
            MetastoreError: the metastore failed.
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

    # -- snapshots, the read view, progress -------------------------------------------------

    @abc.abstractmethod
    def snapshot(self, table: TableIdentifier) -> ValidWriteIdList:
        """The table's valid write-id list now (Hive's getValidWriteIds), unregistered.

        The high watermark is the highest write id allocated; open and aborted ids are listed.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def leased_snapshot(
        self, table: TableIdentifier, *, agent: str, heartbeat_s: float = READER_HEARTBEAT_S,
        keep_lease: bool = False,
    ) -> AbstractContextManager[tuple[int | None, ValidWriteIdList]]:
        """Take the table's snapshot and keep it registered (leased) until the block ends.

        The snapshot and the registration are one atomic step, so no compaction can commit
        between them; the lease is heartbeated every `heartbeat_s` while the block runs and
        removed at its end (`end_reader`). A metastore that cannot register (opened
        read-only, not writable, or without reader leases) yields the snapshot unregistered.

        Args:
            keep_lease: when the block ends without an exception, leave the registration in
                place for others to heartbeat (`heartbeat_reader`) and end (`end_reader`);
                unrenewed, it lapses after the transaction time-out. For a read that goes
                on in other processes after this one stops, such as Spark's tasks.

        Yields:
            (the lease's reader id, or None when unregistered; the snapshot).

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def heartbeat_reader(self, reader_id: int) -> bool:
        """Renew a registration another process took; False when it is gone (it lapsed and
        a cleaner forgot it, or its reader ended it).

        Raises:
            MetastoreError: the metastore failed (a read-only one included).
        """

    @abc.abstractmethod
    def end_reader(self, reader_id: int) -> None:
        """Remove a registration; a failure is logged, never raised: the registration lapses
        by itself after the time-out, and the rows already read are not affected."""

    @contextmanager
    def reading(
        self, table: TableIdentifier, *, agent: str, heartbeat_s: float = READER_HEARTBEAT_S
    ) -> Iterator[ValidWriteIdList]:
        """`leased_snapshot` yielding the snapshot alone.

        Example:
            with store.reading("default.events", agent="host:1:cat") as snapshot:
                rows = read_table(location, snapshot)

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """
        with self.leased_snapshot(table, agent=agent, heartbeat_s=heartbeat_s) as (_, snapshot):
            yield snapshot

    @contextmanager
    def read_view(
        self, table: TableIdentifier, *, agent: str, snapshot: ValidWriteIdList | None = None,
        heartbeat_s: float = READER_HEARTBEAT_S, keep_lease: bool = False,
    ) -> Iterator[PinnedView]:
        """The table as of its committed snapshot, leased until the block ends, with the
        columns of that snapshot's schema version (`snapshot_schema`, docs/format.md §25).

        The one call every reader makes: the snapshot and its lease are one step
        (`leased_snapshot`), the manifest is read before it and the compactor's visibility
        and the columns after it (a compaction committed in between only adds an output the
        snapshot's own write-id checks accept, and the lease keeps its inputs either way).
        With `snapshot` given (a caller's own, e.g. an older one), that snapshot is used
        unleased. With `keep_lease`, a block that ends without an exception leaves the lease
        registered for the processes that go on reading (`leased_snapshot`).

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """
        name = self.get_table(table).name
        committed = self.committed_files(name)
        if snapshot is not None:
            version, columns = self.snapshot_schema(name, snapshot)
            yield PinnedView(name, snapshot, committed, self.compactor_visibility(name),
                             row_schema=columns, schema_version=version)
            return
        with self.leased_snapshot(name, agent=agent, heartbeat_s=heartbeat_s,
                                  keep_lease=keep_lease) as (lease, taken):
            version, columns = self.snapshot_schema(name, taken)
            yield PinnedView(name, taken, committed, self.compactor_visibility(name), lease,
                             row_schema=columns, schema_version=version)

    def snapshot_schema(self, table: TableIdentifier,
                        snapshot: ValidWriteIdList) -> tuple[int, pa.Schema]:
        """The schema version and row columns `snapshot` reads with (docs/format.md §25).

        A backend that keeps each column change as a committed transaction with a write id
        (the SQL metastores) answers the newest version whose change is in the snapshot (its
        write id at or below the high watermark): exactly the columns the table had when the
        snapshot was taken. Here, for a backend without that history, the table's current
        columns: read just after the snapshot, they hold every file in it too (a writer reads
        its columns before its write id is allocated, and columns only grow and widen).

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """
        defn = self.get_table(table)
        return defn.schema_version, defn.row_schema

    @abc.abstractmethod
    def transactions(
        self, table: TableIdentifier | None = None, *, states: Iterable[TxnState] = TXN_STATES
    ) -> list[TransactionInfo]:
        """One row per (transaction, table) in `states`, by txn id (a transaction's primary
        table first, then the others by name); only `table`'s rows if given.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """

    def write_id_states(self, table: TableIdentifier) -> dict[int, TxnState]:
        """Every allocated write id of the table mapped to its transaction's state.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """
        return {info.write_id: info.state for info in self.transactions(table)}

    @abc.abstractmethod
    def committed_write_id(self, sink_id: str, batch_id: int, *,
                           table: TableIdentifier | None = None) -> int | None:
        """The write id that committed this micro-batch of this sink, or None.

        Args:
            table: the table the sink writes; a backend that keeps progress per table (the
                Hive Metastore's) needs it, one that keeps it per metastore ignores it.

        Raises:
            TableNotFoundError: `table` is not in this metastore (where it is needed).
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def last_committed_batch(self, sink_id: str, *,
                             table: TableIdentifier | None = None) -> int | None:
        """The highest batch id this sink committed, or None (`table` as for
        `committed_write_id`).

        Raises:
            TableNotFoundError: `table` is not in this metastore (where it is needed).
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def offset_ranges(self, table: TableIdentifier) -> list[tuple[int, OffsetRange]]:
        """Kafka ranges of committed transactions that wrote `table`, with the write id,
        ordered by (write id, topic, partition).

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """

    # -- the committed-file manifest ---------------------------------------------------------

    @abc.abstractmethod
    def committed_files(self, table: TableIdentifier) -> dict[str, CommittedFile]:
        """Every manifest entry of the table, by path relative to its root, sorted by path.
        Empty for a metastore without a manifest (files then read as they are).

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def record_committed_files(self, table: TableIdentifier,
                               files: Iterable[CommittedFile]) -> None:
        """Record files written outside a transaction's commit (a compaction's outputs: the
        compactor commits nothing, its output is visible once written). An entry is updated
        only to a length at least the one recorded.

        Raises:
            TableNotFoundError: no such table.
            ConfigError: a path given twice.
            CommitConflictError: an entry would lower a recorded committed length.
            MetastoreError: the metastore failed, or it keeps no manifest
                (`capabilities.committed_files`).
        """

    @abc.abstractmethod
    def forget_committed_files(self, table: TableIdentifier, paths: Iterable[str]) -> int:
        """Remove entries (a cleaner deleting obsolete directories); returns how many went.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed, or it keeps no manifest
                (`capabilities.committed_files`).
        """

    # -- compactions ------------------------------------------------------------------------

    @abc.abstractmethod
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
        """Open a compactor transaction and record a 'working' compaction of one partition.

        One compaction per partition at a time: the check and the record are one atomic
        step. A 'working' compaction whose transaction ended, went silent for
        `stale_after_s`, or whose agent `is_alive` says is gone, is marked failed (and its
        transaction aborted) first, so a crashed compactor never blocks the next one.

        Args:
            table: the table.
            partition: the partition relative to the table root ("" when unpartitioned).
            kind: "major" or "minor".
            agent: who compacts, e.g. "host:pid:ingest-compact".
            stale_after_s: heartbeat age after which a working compactor counts as dead.
            is_alive: whether the process an agent string names still runs (None: assume so).

        Returns:
            (compaction id, the open compactor transaction; its write_id is 0).

        Raises:
            ConfigError: kind is neither "major" nor "minor".
            CommitConflictError: a live compaction of this partition is working.
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed, or it keeps no compaction history.
        """

    @abc.abstractmethod
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
        """Record a compaction whose output is in place ('ready for cleaning') and commit its
        transaction, atomically.

        Raises:
            CommitConflictError: the compaction is no longer 'working' or the transaction no
                longer open (another compactor took the partition over, or the transaction
                timed out); the output stays where it is and nothing is recorded.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def fail_compaction(self, compaction_id: int, txn: Transaction, error: str) -> None:
        """Record that a compaction failed and abort its transaction; a compaction that is no
        longer 'working' is left as it is.

        Raises:
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def forget_compaction(self, compaction_id: int, txn: Transaction) -> None:
        """Remove a 'working' compaction that found nothing to do, and abort its transaction.

        Raises:
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def compactor_visibility(self, table: TableIdentifier) -> CompactorVisibility:
        """Which of the table's compactor transactions are committed now, for readers of
        `_vT` directories, read in one consistent step.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def compactions(self, table: TableIdentifier) -> list[CompactionInfo]:
        """The table's compaction history, oldest first (empty for a metastore without one).

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def compactions_to_clean(self, table: TableIdentifier) -> list[CompactionInfo]:
        """Compactions of the table whose output is in place ('ready for cleaning'), with a
        committed compactor transaction or none: what the cleaner may finish.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def mark_compactions_cleaned(self, compaction_ids: Iterable[int]) -> None:
        """Record that the cleaner removed every input of these compactions (state
        'succeeded', `cleaned_at` now); compactions in another state are left alone.

        Raises:
            MetastoreError: the metastore failed.
        """

    # -- reader leases ------------------------------------------------------------------------

    @abc.abstractmethod
    def live_readers(self, table: TableIdentifier, *, timeout_s: float) -> list[ReaderInfo]:
        """The table's registered readers whose last heartbeat is within `timeout_s`, by
        reader id.

        Older registrations belong to readers that died without unregistering; they are
        ignored (and left for `forget_dead_readers`). Empty without reader leases.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """

    @abc.abstractmethod
    def forget_dead_readers(self, *, timeout_s: float) -> int:
        """Delete registrations silent for longer than `timeout_s`; returns how many.

        Raises:
            MetastoreError: the metastore failed.
        """


__all__ = ["READER_HEARTBEAT_S", "Metastore"]
