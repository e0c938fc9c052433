"""The Python entry point to a table: `open_table(location)` -> `Table`, read as Arrow.

`open_table` resolves the location, its filesystem and its metastore once; the `Table`
carries them (its storage options included: no process-wide state) and every table operation
is a method on it: reads (the metastore's committed snapshot by default, streamed through
`ingest.acid.read.scan`), and `load`, `load_file`, `delete`, `upsert`, `apply_changes`,
`compact`, `clean`, `verify`, `recover`, `alter`, `history`, `status`, which hand the table
itself (a `ingest.table.core.ResolvedTable`: nothing is resolved again) to the `ingest.table`
functions of those names. Reading
files without a metastore is an explicit choice (`metastore=False`). A `TableRef`
(`Table.ref`) is the resolved table as a small picklable value, for what crosses a process
boundary (the Spark sink's tasks, its maintenance thread, the compaction job): it opens again
with the metastore it names, never searching (`ref.open()`, `open_table(ref)`). Knows no ORC
bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from ingest.acid import has_directories
from ingest.acid.format import ValidWriteIdList
from ingest.acid.predicate import Predicate, parse_predicate
from ingest.acid.read import (
    ALL_ON_DISK,
    FilePlan,
    Partition,
    ReadView,
    ScanStats,
    ScanTask,
    SnapshotArg,
    SnapshotScan,
    all_on_disk,
    list_partitions,
    resolve_snapshot,
)
from ingest.errors import ConfigError, TableNotFoundError
from ingest.io import storage
from ingest.records import InputFormat
from ingest.table.core import (
    ResolvedTable,
    agent_name,
    check_columns,
    check_limit,
    check_snapshot_table,
    check_storage_options,
    find_table,
    locate_table,
    rows_as_table,
    table_schema,
)
from ingest.table.history import Commit, table_history
from ingest.table.maintain import (
    DEFAULT_TXN_TIMEOUT_S,
    CleanReport,
    CompactMode,
    CompactReport,
    PartitionClean,
    TableRecovery,
    VerifyReport,
    recover_table_with_metastore,
    verify_table,
)
from ingest.table.maintain import clean as clean_table
from ingest.table.maintain import compact as compact_table
from ingest.table.status import TableStatus, table_status
from ingest.table.write import (
    AlterResult,
    DeleteResult,
    LoadResult,
    MissingColumns,
    UpsertResult,
    alter_table,
    check_missing_columns,
    load_file,
)
from ingest.table.write import apply_changes as apply_change_events
from ingest.table.write import delete as delete_rows
from ingest.table.write import load as load_rows
from ingest.table.write import upsert as upsert_rows
from ingest.txn import (
    Metastore,
    OffsetRange,
    PinnedView,
    TableDefinition,
    redact_url,
)

if TYPE_CHECKING:
    import pandas as pd

MetastoreArg = str | Metastore | Literal[False] | None
"""None: the metastore `ingest` finds for the location; a metastore URL (`sqlite://`,
`postgresql://`, ...) or an open `Metastore` (left open); False: no metastore, read the files
as they are on disk."""

_NO_METASTORE_HINT = ("pass metastore=False to read the files without a metastore (every "
                      "write id on disk then counts as committed, so rows of open or aborted "
                      "transactions may show)")


@dataclass(frozen=True)
class TableRef:
    """A table resolved by `open_table`, as a value that crosses process boundaries (pickled
    to Spark tasks, handed to the maintenance thread and the compaction job) and opens again
    cheaply: `ref.open()` (or `open_table(ref)`) opens the metastore it names, no other, and
    reads the definition; nothing searches for a metastore again. Get one from `Table.ref`.

    Its repr and str never show a secret: the metastore URL without its password, the
    storage options' secret-looking values masked.

    Attributes:
        location: the table's location (its root, or a partition directory inside it).
        metastore: the URL of the metastore that lists it, as it was opened (a password in it
            included); None: the files alone, as on disk (`metastore=False`).
        storage_options: the fsspec options of the table's files (credentials among them).
    """

    location: str
    metastore: str | None
    storage_options: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # A plain dict of its own: picklable, and no caller's later change reaches it.
        object.__setattr__(self, "storage_options", dict(self.storage_options))

    def __repr__(self) -> str:
        try:
            shown = None if self.metastore is None else redact_url(self.metastore)
        except ConfigError:  # a URL its backend cannot parse: shown not at all
            shown = "***"
        return (f"TableRef({self.location!r}, metastore={shown!r}, "
                f"storage_options={storage.redacted(self.storage_options)!r})")

    __str__ = __repr__

    def at(self, location: str) -> TableRef:
        """Another table of the same metastore and storage options (the dead-letter table
        beside a stream's table, a side table)."""
        return replace(self, location=location)

    def open(self, metastore: Metastore | None = None) -> Table:
        """The table, opened again: see `open_table`.

        Args:
            metastore: the ref's metastore, already open (left open): the table is read
                from it, with no connection of its own.

        Raises:
            TableNotFoundError: the metastore no longer lists the table.
            MetastoreError: the metastore cannot be opened or read.
        """
        if metastore is None:
            return open_table(self)
        return _open(self.location, metastore, self.storage_options,
                     extra_hint=_NO_METASTORE_HINT)


def open_table(
    location: str | TableRef,
    *,
    metastore: MetastoreArg = None,
    storage_options: dict[str, Any] | None = None,
) -> Table:
    """Open a table for reading, loading and deleting.

    Args:
        location: the table root, or a partition directory inside it (reads then cover only
            that directory); a path or fsspec URL. Or a `TableRef`: the table it names,
            opened with its metastore and storage options (no search; `metastore` and
            `storage_options` are then not given).
        metastore: see `MetastoreArg`. With a metastore, reads use its committed snapshot.
        storage_options: fsspec options for the table's files (endpoint, credentials, ...);
            the `Table` carries a copy and every one of its reads and operations uses them
            (nothing is kept in the process: two tables may use two endpoints). None:
            fsspec's own config and environment (`FSSPEC_S3_*`).

    Returns:
        The table; it holds no open file or connection between calls.

    Raises:
        TableNotFoundError: no metastore lists a table at or above `location` (the hint
            names `metastore=False`).
        FileNotFoundError: with `metastore=False`, `location` is not a directory.
        MetastoreError: a metastore exists but cannot be read.
        ConfigError: `metastore` is neither None, False, a URL nor a `Metastore`;
            `storage_options` is not a dict; `location` is a URL no filesystem serves.
    """
    if isinstance(location, TableRef):
        if metastore is not None or storage_options is not None:
            raise ConfigError(
                f"Cannot open {location}: a TableRef names its metastore and storage options",
                hint="pass the TableRef alone, or a location with metastore= and "
                     "storage_options=")
        return _open(location.location,
                     location.metastore if location.metastore is not None else False,
                     location.storage_options, extra_hint=_NO_METASTORE_HINT)
    return _open(location, metastore, storage_options, extra_hint=_NO_METASTORE_HINT)


def _open(location: str, metastore: MetastoreArg, storage_options: object, *,
          extra_hint: str | None) -> Table:
    """`open_table`; a TableNotFoundError's hint gets `extra_hint` (the Python API's advice
    to read without a metastore; a command gives its own advice, so None).

    Raises:
        See `open_table`.
    """
    options = check_storage_options(storage_options, location=location) or {}
    storage.check_url(location)
    fs, path = storage.url_to_fs(location, options)
    path = str(path).rstrip("/") or "/"
    if metastore is False:
        if not fs.isdir(path):
            if not has_directories(fs):  # a missing bucket is named as such
                storage.check_bucket(fs, location, options)
            raise FileNotFoundError(f"Cannot read table, directory does not exist: {path}")
        return Table(fs, path, None, None, options)
    if metastore is None or isinstance(metastore, str):
        try:
            # A metastore named by URL must list the table: no search, no fallback.
            store, defn = locate_table(location, metastore)
        except TableNotFoundError as e:
            if extra_hint is None:
                raise
            raise TableNotFoundError(e.message, table=location,
                                     hint=f"{e.hint}; or {extra_hint}") from e
        try:
            # The URL as given (a password in it included) reopens the same metastore.
            return Table(fs, path, defn, metastore or store.url, options)
        finally:
            store.close()
    if isinstance(metastore, Metastore):
        return Table(fs, path, find_table(metastore, location, extra_hint), metastore,
                     options)
    raise ConfigError(f"Cannot open table {location}: metastore={metastore!r} is not a "
                      "metastore URL, a Metastore, None or False")


def _check_read(table: Table, columns: object, limit: object, snapshot: object,
                ) -> tuple[list[str] | None, int | None]:
    """The read arguments `Table.scan` takes, checked before anything is read.

    Raises:
        ConfigError: see `Table.scan`.
    """
    where = f"table {table.name}"
    checked_columns = check_columns(columns, where=where)
    checked_limit = check_limit(limit, where=where)
    if table.definition is not None:
        check_snapshot_table(snapshot, table.definition.name, where=where)
    return checked_columns, checked_limit


class Table(ResolvedTable):
    """A transactional table (or one of its partitions) as Python sees it.

    Reads return Arrow (`to_arrow`, `to_batches`) or pandas, so DuckDB, Polars and anything
    else that takes Arrow read the table too. Get one from `open_table`; it is the resolved
    table (`ResolvedTable`: filesystem, definition, metastore, storage options) every
    operation takes.
    """

    def __repr__(self) -> str:
        return f"Table({self.location!r})"

    # -- what the table is -------------------------------------------------------------------

    @property
    def ref(self) -> TableRef:
        """The table as a picklable value that opens again without a metastore search (for
        Spark tasks, threads and jobs): its location, its metastore's URL, its storage
        options."""
        return TableRef(self.location, self.metastore_url, self._storage_options)

    @property
    def schema(self) -> pa.Schema:
        """Row columns, then partition columns (strings): what `to_arrow()` returns.

        Without a metastore, the newest data file's row columns.
        """
        if self.definition is not None:
            return table_schema(self.definition)
        return SnapshotScan(self._path, ALL_ON_DISK, fs=self._fs).schema

    def partitions(self) -> list[Partition]:
        """The partition directories below the table (or the opened directory), by path.

        Raises:
            FileNotFoundError: the directory is gone.
        """
        return list_partitions(self._path, fs=self._fs)

    def snapshot(self) -> ValidWriteIdList:
        """The committed snapshot a read takes now: the metastore's valid write-id list, or
        without a metastore every write id named on disk.

        Raises:
            MetastoreError: the metastore cannot be read.
        """
        if self.definition is None:
            return all_on_disk(self._path, fs=self._fs, table=self.name)
        with self.store() as store:
            return store.snapshot(self.definition.name)

    def history(self) -> list[Commit]:
        """Every transaction that took a write id of this table, by write id, with its state
        and the Kafka offset ranges it committed.

        Raises:
            ConfigError: the table was opened without a metastore.
            MetastoreError: the metastore cannot be read.
        """
        defn = self.require_metastore("read its history")
        with self.store() as store:
            return table_history(store, defn)

    # -- reading -----------------------------------------------------------------------------

    def scan(
        self,
        columns: Sequence[str] | None = None,
        where: str | None = None,
        snapshot: SnapshotArg = None,
        *,
        limit: int | None = None,
        with_row_id: bool = False,
    ) -> TableScan:
        """A read, not started: `plan()`, `to_batches()`, `to_arrow()`, `to_pandas()`.

        Args:
            columns: a list of row and partition columns, in this order (default: all);
                an empty list returns the rows with no columns (their count).
            where: a condition in the `ingest delete --where` language, e.g.
                ``"dt = '2026-11-01' AND amount > 10"``; partition values are strings, and a
                null never matches. It prunes partitions and skips stripes by their ORC
                statistics, then is applied exactly.
            snapshot: None (the metastore's committed snapshot at read time), a
                `ValidWriteIdList` or Hive's string form of one, or "all-on-disk" (every
                write id on disk is committed: no metastore consulted). Without a metastore,
                None means "all-on-disk" and warns (`UnverifiedSnapshotWarning`).
            limit: stop after this many matching rows (0: none); None reads them all.
            with_row_id: add Hive's ROW__ID as a first column `row__id`.

        Raises:
            ConfigError: `where` does not parse or names an unknown column (checked here when
                the metastore knows the columns, else when reading); `columns` is a string
                rather than a list; `limit` is negative; `snapshot` is another table's.
        """
        columns, limit = _check_read(self, columns, limit, snapshot)
        if columns == [] and not with_row_id:
            return _RowsOnlyScan(self, where, snapshot, limit=limit)
        predicate = None
        if where is not None and self.definition is not None:
            predicate = parse_predicate(where, table_schema(self.definition), option="where")
        return TableScan(self, columns, predicate if predicate is not None else where,
                         snapshot, limit=limit, with_row_id=with_row_id)

    def to_batches(self, columns: Sequence[str] | None = None, where: str | None = None,
                   snapshot: SnapshotArg = None, *, limit: int | None = None,
                   with_row_id: bool = False) -> Iterator[pa.RecordBatch]:
        """Stream the rows as record batches, one ORC stripe at a time (bounded memory).

        Arguments as for `scan`. The snapshot is taken when iteration starts.

        Raises:
            See `TableScan.to_batches`.
        """
        return self.scan(columns, where, snapshot, limit=limit,
                         with_row_id=with_row_id).to_batches()

    def to_arrow(self, columns: Sequence[str] | None = None, where: str | None = None,
                 snapshot: SnapshotArg = None, *, limit: int | None = None,
                 with_row_id: bool = False) -> pa.Table:
        """Every row of the snapshot (matching `where`) as one Arrow table.

        Arguments as for `scan`.

        Raises:
            See `TableScan.to_batches`.
        """
        return self.scan(columns, where, snapshot, limit=limit,
                         with_row_id=with_row_id).to_arrow()

    def to_pandas(self, columns: Sequence[str] | None = None, where: str | None = None,
                  snapshot: SnapshotArg = None, *, limit: int | None = None) -> pd.DataFrame:
        """`to_arrow(...).to_pandas()`; needs pandas installed.

        Raises:
            See `TableScan.to_batches`.
        """
        return self.scan(columns, where, snapshot, limit=limit).to_pandas()

    # -- writing -----------------------------------------------------------------------------

    def load(self, data: Any, *, missing_columns: MissingColumns = "error") -> LoadResult:
        """Insert rows in one transaction (`ingest.table.write.load`).

        Args:
            data: a `pyarrow.Table` or `RecordBatch`, a list of dicts (one per row), a pandas
                DataFrame, or anything `pyarrow.table()` accepts; row and partition columns.
            missing_columns: a table column `data` lacks is refused ("error"), or loaded as
                NULL ("null").

        Raises:
            ConfigError: opened without a metastore, or at a partition instead of the root;
                `data` is not rows; a bad `missing_columns`.
            SchemaMismatchError, CommitConflictError, MetastoreError: see `load`.
        """
        check_missing_columns(missing_columns)
        defn = self.require_root("load rows")
        data = rows_as_table(data, where=defn.name, schema=table_schema(defn))
        return load_rows(self, data, missing_columns=missing_columns)

    def load_file(self, input_path: str, *, format: InputFormat | None = None,
                  missing_columns: MissingColumns = "error",
                  on_read_progress: Callable[[int, int, str], None] | None = None,
                  on_progress: Callable[[int, int, str], None] | None = None) -> LoadResult:
        """Insert the rows of a JSON Lines, CSV or Parquet file in one transaction
        (`ingest.table.write.load_file`; the file is read with the table's storage options when it
        lies in the table's bucket). `on_read_progress` gets (bytes read, file size, path),
        then "parsing"; `on_progress` gets (rows written, rows in all, the partition).

        Raises:
            ConfigError: opened without a metastore or at a partition; see `load_file`.
            SchemaMismatchError, CommitConflictError, MetastoreError: see `load_file`.
        """
        check_missing_columns(missing_columns)
        self.require_root("load rows")
        return load_file(self, input_path, format=format, missing_columns=missing_columns,
                         on_read_progress=on_read_progress, on_progress=on_progress)

    def delete(self, where: str, *, dry_run: bool = False) -> DeleteResult:
        """Delete the rows matching `where` in one transaction (`ingest.table.write.delete`).

        Raises:
            ConfigError: opened without a metastore or at a partition, or a bad `where`.
            CorruptFileError, CommitConflictError, MetastoreError: see `delete`.
        """
        self.require_root("delete rows")
        return delete_rows(self, where, dry_run=dry_run)

    def upsert(self, data: Any, *, key: Sequence[str], order_by: str | None = None,
               missing_columns: MissingColumns = "error") -> UpsertResult:
        """Make each row the current row of its key, in one transaction: updates as a delete
        event plus an insert event, one write id (`ingest.table.write.upsert`).

        Args:
            data: rows, as for `load`.
            key: the key columns; the table must be bucketed by them and partitioned (if at
                all) by key columns.
            order_by: a row column ordering a key's rows; rows older than the stored row's
                value are skipped.
            missing_columns: as for `load`.

        Raises:
            ConfigError: opened without a metastore or at a partition; a key or table that
                does not fit (see `check_keyed_table`).
            SchemaMismatchError, BadRecordError, CommitConflictError, MetastoreError: see
                `upsert`.
        """
        check_missing_columns(missing_columns)
        defn = self.require_root("upsert rows")
        rows = rows_as_table(data, where=defn.name, schema=table_schema(defn))
        return upsert_rows(self, rows, key=key, order_by=order_by,
                           missing_columns=missing_columns)

    def apply_changes(self, envelopes: Any, *, key: Sequence[str],
                      order_by: str | None = None,
                      cdc_format: Literal["debezium"] = "debezium") -> UpsertResult:
        """Apply Debezium change events (c/r/u upsert `after`, d and tombstones delete) in
        one transaction (`ingest.table.write.apply_changes`).

        Args:
            envelopes: the events, in order: dicts (an envelope, or a Kafka record
                `{"key": ..., "value": envelope or None}`), or an Arrow table or record
                batch of envelopes, one row each: `op` (string), `after` and `before`
                (structs of the row's columns), as a stream holds them after parsing (no
                Python objects are made).
            key, order_by: as for `upsert`; equal order values break ties c < r < u < d.
            cdc_format: the envelope format.

        Raises:
            ConfigError, BadRecordError: see `upsert` and `apply_changes`.
        """
        self.require_root("apply changes")
        return apply_change_events(self, envelopes, key=key, order_by=order_by,
                                   cdc_format=cdc_format)

    # -- maintenance and administration ------------------------------------------------------

    def compact(self, kind: CompactMode = "major", *, partitions: Sequence[str] | None = None,
                dry_run: bool = False,
                on_progress: Callable[[int, int, str], None] | None = None) -> CompactReport:
        """Compact the table partition by partition (`ingest.table.maintain.compact`; `on_progress`
        gets (partitions done, partitions in all, the partition) after each).

        Raises:
            ConfigError: opened without a metastore or at a partition; see `compact`.
            CommitConflictError, CorruptFileError, MetastoreError: see `compact`.
        """
        self.require_root("compact")
        return compact_table(self, kind=kind, partitions=partitions, dry_run=dry_run,
                             on_progress=on_progress)

    def clean(self, *, retention_s: float | None = None, dry_run: bool = False,
              partitions: Sequence[str] | None = None,
              txn_timeout_s: float = DEFAULT_TXN_TIMEOUT_S,
              on_partition: Callable[[PartitionClean], None] | None = None,
              on_progress: Callable[[int, int, str], None] | None = None) -> CleanReport:
        """Remove what no reader can use any more (`ingest.table.maintain.clean`).

        Raises:
            ConfigError: opened without a metastore or at a partition; see `clean`.
            CorruptFileError, MetastoreError, OSError: see `clean`.
        """
        self.require_root("clean")
        return clean_table(self, retention_s=retention_s, dry_run=dry_run,
                           partitions=partitions, txn_timeout_s=txn_timeout_s,
                           on_partition=on_partition, on_progress=on_progress)

    def side_tables(self) -> list[Table]:
        """The hidden tables the metastore keeps beside this one for its own bookkeeping
        (`Metastore.side_tables`: a Hive Metastore's progress and manifest tables; none for
        SQL metastores), each opened at its root with this table's metastore and storage
        options, so it is compacted and cleaned like any table (docs/format.md §20).

        Raises:
            ConfigError: opened without a metastore or at a partition.
            MetastoreError: the metastore failed.
        """
        defn = self.require_root("list the side tables")
        with self.store() as store:
            found = [store.get_table(name) for name in store.side_tables(defn.name)]
        out = []
        for side in found:
            fs, path = storage.url_to_fs(side.location, dict(self._storage_options))
            out.append(Table(fs, str(path).rstrip("/"), side, self._metastore,
                             self._storage_options))
        return out

    def verify(self, *, deep: bool = True, txn_timeout_s: float = DEFAULT_TXN_TIMEOUT_S,
               on_progress: Callable[[int, int, str], None] | None = None) -> VerifyReport:
        """Check the table's (or the opened partition's) files against its metastore,
        changing nothing (`ingest.table.maintain.verify_table`); without a metastore, the files
        only.
        `on_progress` gets (files done, files in all, the file) as bucket files are checked.

        Raises:
            ConfigError, FileNotFoundError, MetastoreError: see `verify_table`.
        """
        return verify_table(self, txn_timeout_s=txn_timeout_s, deep=deep,
                            on_progress=on_progress)

    def recover(self, *, dry_run: bool = False, backup_dir: str | None = None,
                backup: bool = True, txn_timeout_s: float = DEFAULT_TXN_TIMEOUT_S,
                check_data: bool = False,
                on_progress: Callable[[int, int, str], None] | None = None) -> TableRecovery:
        """Abort timed-out transactions and bring every bucket file back to its last
        complete footer, losing no committed row (`recover_table_with_metastore`;
        `on_progress` gets (files done, files in all, the file) after each bucket file).

        Raises:
            ConfigError, FileNotFoundError, MetastoreError: see
                `recover_table_with_metastore`.
        """
        return recover_table_with_metastore(
            self, dry_run=dry_run, backup_dir=backup_dir, backup=backup,
            txn_timeout_s=txn_timeout_s, check_data=check_data, on_progress=on_progress)

    def alter(self, properties: Mapping[str, str] | None = None, *,
              add_columns: str | Sequence[str] | None = None,
              change_columns: str | Sequence[str] = (),
              columns: str | None = None) -> AlterResult:
        """Set table properties, append columns or widen their types, by Hive's rules
        (`ingest.table.write.alter_table`). Afterwards this `Table` reads and loads with the
        stored definition; files written before read missing columns as nulls.
        `add_columns` and `change_columns` each take one column string or a list of them.

        Raises:
            ConfigError: opened without a metastore or at a partition, or a change Hive's
                rules refuse; see `alter_table`.
            CommitConflictError: the columns changed meanwhile; see `alter_table`.
            MetastoreError: see `alter_table`.
        """
        self.require_root("alter")
        result = alter_table(self, properties=properties, add_columns=add_columns,
                             change_columns=change_columns, columns=columns)
        self.definition = result.table
        return result

    def status(self, snapshot: ValidWriteIdList | str | None = None) -> TableStatus:
        """The table's (or the opened partition's) layout, backlog and transactions, as
        `ingest status` shows them (`ingest.table.status.table_status`).

        Raises:
            ConfigError, FileNotFoundError, MetastoreError: see `table_status`.
        """
        return table_status(self, snapshot=snapshot)

    # -- helpers -----------------------------------------------------------------------------

    @contextmanager
    def _read_view(self, snapshot: SnapshotArg) -> Iterator[ReadView | SnapshotArg]:
        """What a read uses, held for as long as it streams: with a metastore, its read view
        (the committed snapshot leased for this reader so the cleaner keeps what it reads,
        docs/invariants.md, 7; or the caller's own snapshot, checked against the same
        manifest); without one, the caller's snapshot argument as it is."""
        if self.definition is None:
            yield snapshot
            return
        given = None
        if snapshot is not None:
            given = (all_on_disk(self._path, fs=self._fs, table=self.definition.name)
                     if snapshot == ALL_ON_DISK else resolve_snapshot(snapshot, ()))
        with self.lease_store() as store, store.read_view(
                self.definition.name, agent=agent_name("read"), snapshot=given) as view:
            yield view


def pinned_schema(view: object, definition: TableDefinition | None) -> pa.Schema | None:
    """The row columns a read uses: its view's (those of its snapshot's schema version,
    docs/format.md §25), else the definition's; None without a metastore."""
    if isinstance(view, PinnedView) and view.row_schema is not None:
        return view.row_schema
    return definition.row_schema if definition is not None else None


@dataclass(frozen=True)
class ScanPlan:
    """What a read would do now: its snapshot, the partitions it keeps and prunes."""

    snapshot: ValidWriteIdList
    partitions: tuple[Partition, ...]
    partitions_pruned: int
    schema: pa.Schema


class TableScan:
    """One read of a `Table`, configured by `Table.scan`; `stats` describes the last read."""

    def __init__(self, table: Table, columns: Sequence[str] | None,
                 where: str | Predicate | None, snapshot: SnapshotArg, *, limit: int | None,
                 with_row_id: bool) -> None:
        self.table = table
        self.columns = list(columns) if columns is not None else None
        self.where = where
        self.snapshot = snapshot
        self.limit = limit
        self.with_row_id = with_row_id
        self.stats: ScanStats | None = None

    @contextmanager
    def _open(self) -> Iterator[SnapshotScan]:
        """Take the snapshot and plan under it; everything that reads files runs inside.

        The one place a read takes its snapshot, registered with the metastore for as long
        as the block runs.
        """
        t = self.table
        with t._read_view(self.snapshot) as view:
            scan = SnapshotScan(
                t._path, view, columns=self.columns, where=self.where,
                with_row_id=self.with_row_id, fs=t._fs, limit=self.limit,
                row_schema=pinned_schema(view, t.definition),
                table=t.definition.name if t.definition is not None else "",
                root=(storage.path_of(t.definition.location) if t.definition is not None
                      else None))
            self.stats = scan.stats
            yield scan

    def plan_files(self) -> FilePlan:
        """Take the read view and plan the read: its scan tasks, each a partition's bucket
        with its files, checked against the committed-file manifest; no row is read.

        Raises:
            See `to_batches`.
        """
        with self._open() as scan:
            return scan.plan

    def plan(self) -> ScanPlan:
        """Take a snapshot and plan the read without reading row data.

        Raises:
            See `to_batches`.
        """
        with self._open() as scan:
            return ScanPlan(scan.snapshot, tuple(scan.partitions),
                            scan.stats.partitions_pruned, scan.schema)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Stream the matching rows, one batch per stripe read.

        Raises:
            FileNotFoundError: the table's directory is gone.
            ConfigError: a bad snapshot string, unknown column or `where`.
            NotEnoughHistoryError: the snapshot is older than the table's bases.
            CorruptFileError: a data file is damaged (run `ingest recover`).
            UnsupportedFormatError: files this reader does not handle.
            MetastoreError: the metastore cannot be read.
        """
        with self._open() as scan:
            yield from scan.batches()

    def to_arrow(self) -> pa.Table:
        """Every matching row as one Arrow table.

        Raises:
            See `to_batches`.
        """
        with self._open() as scan:
            return scan.to_table()

    def to_pandas(self) -> pd.DataFrame:
        """`to_arrow().to_pandas()`.

        Raises:
            See `to_batches`.
        """
        return self.to_arrow().to_pandas()


class _RowsOnlyScan(TableScan):
    """A read of no columns: the matching rows, each with no values (`columns=[]`).

    Reads the table's cheapest column (a partition column is a constant) and drops it, so
    the row count is the snapshot's.
    """

    def __init__(self, table: Table, where: str | None, snapshot: SnapshotArg, *,
                 limit: int | None) -> None:
        parts = table.definition.partition_columns if table.definition is not None else ()
        # No column at all: a table without metastore whose directory holds no file yet.
        names = list(parts[:1]) or table.schema.names[:1]
        predicate = None
        if where is not None and table.definition is not None:
            predicate = parse_predicate(where, table_schema(table.definition), option="where")
        super().__init__(table, names, predicate if predicate is not None else where,
                         snapshot, limit=limit, with_row_id=False)

    def plan(self) -> ScanPlan:
        plan = super().plan()
        return ScanPlan(plan.snapshot, plan.partitions, plan.partitions_pruned, pa.schema([]))

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        for batch in super().to_batches():
            yield batch.select([])

    def to_arrow(self) -> pa.Table:
        return super().to_arrow().select([])


__all__ = ["Commit", "FilePlan", "MetastoreArg", "OffsetRange", "ScanPlan", "ScanStats",
           "ScanTask", "Table", "TableRef", "TableScan", "open_table"]
