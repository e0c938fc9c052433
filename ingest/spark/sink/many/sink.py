"""The foreachBatch sink of a stream of several tables (docs/many-tables.md, issue 34 step 3).

Each micro-batch is one metastore transaction across every table it touches: the stream's
anchor table (its dead-letter table for records that route nowhere, which carries the
progress row) and, per touched table, the table and its own dead-letter table.
- Routing by topic: the tables touched are the routes of the topics the micro-batch holds
  (its planned non-empty offset ranges when Spark's plan says them, else the distinct topics
  of its rows).
- Routing by field (`--route-field`): a key stage (`_route_keys`) gives each record its key;
  its rows are persisted once, the keys' tables claimed on the driver.
The driver plans each touched table (a `TaskPlan`) and runs them all as one Spark job, one
pass over the micro-batch writing every table's files where its rows are read
(`_tasks`, run by `_job`); only tables whose rows must be shuffled (bucketed, or partitioned by a
Spark SQL expression) are written apart, each by the single-table tasks (`_batch.run_tasks`)
on a filter of the micro-batch. So are keyed tables (--mode upsert|cdc, each table's key
its routing key's --route-key or --key): each on a read view taken inside the micro-batch's
transaction, its write set declared at the one commit. Records that route nowhere go to the
anchor with the reason (`_unrouted`), in the same pass. One commit holds
every table's manifest entries, the micro-batch's offsets (all topics, the anchor's) and,
routed by topic, each table's own topics' ranges (`table_offsets`).

--on-new-field applies per table (`_evolve`, shared with `AcidSink`): under evolve, every
touched table whose tasks saw new top-level fields gets their columns (each table only the
fields its own records held), the one transaction is aborted (every table's files removed)
and the micro-batch written again with the evolved tables. The anchor never evolves.

Not built yet (refused up front): --txns-per-delta > 1, Avro values without a schema
registry (registry-framed ones are resolved per table, as one table's).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import fsspec

from ingest.acid.format import CommittedFile, format_delta
from ingest.errors import (
    CommitConflictError,
    ConfigError,
    IngestError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
)
from ingest.faults import crash_point
from ingest.io import storage
from ingest.kafka import check_not_behind
from ingest.records import Routed, RoutingRules, avro_format, claim_tables
from ingest.spark.options import SinkOptions
from ingest.spark.sink._batch import (
    KAFKA_COLUMNS,
    BatchReport,
    publish_results,
    remove_staging_leftovers,
    run_tasks,
)
from ingest.spark.sink._evolve import Evolved, add_columns, columns_to_add, write_evolving
from ingest.spark.sink._heartbeat import Heartbeat
from ingest.spark.sink._loss import EarliestFn, lost_ranges
from ingest.spark.sink._plans import (
    committed_files,
    keyed_write_set,
    run_keyed_tasks,
    table_codec,
    table_plan,
)
from ingest.spark.sink._results import FileWritten, TaskResult, WriteTarget
from ingest.spark.sink._size import after_loss, cover, planned_ranges
from ingest.spark.sink._task_errors import task_error
from ingest.spark.sink._tasks import DEAD_LETTER_SCHEMA, DeltaTarget, TaskPlan
from ingest.spark.sink._undo import abort_left_open, remove_table_written, remove_written
from ingest.spark.sink.deadletter import dead_letter_location
from ingest.spark.sink.driver import check_keyed_stream
from ingest.spark.sink.many._job import run_many_tasks
from ingest.spark.sink.many._route_keys import ROUTE_DDL, ROUTE_KEY, route_keys_task
from ingest.spark.sink.many._tasks import ManyPlan, one_pass
from ingest.table import TableRef
from ingest.table.core import (
    check_owner,
    check_written_tables,
    stream_progress,
)
from ingest.table.write import KeySpec
from ingest.txn import (
    Metastore,
    MetastoreError,
    OffsetRange,
    SinkProgress,
    TableDefinition,
    Transaction,
    TransactionInfo,
    normalize_location,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

RECENT_REPORTS = 1000

# Creates a table (and its dead-letter table) at a location on first use: (table, dead).
# Called with the location; in a keyed mode also with the table's key columns (which it is
# bucketed by).
CreateTables = Callable[..., tuple[TableDefinition, TableDefinition]]
# Checks a routed table and its dead-letter table at their first use (raises to refuse them).
CheckTables = Callable[[TableDefinition, TableDefinition], None]

HOLDER_PROPERTY = "ingest.routing_key"
"""The table property naming the routing key that holds a template table (written when the
key claims it, before its first write): which key may write it survives a restart."""
DEFAULT_MAX_NEW_TABLES = 100


class _Held(IngestError):
    """A template table another key holds."""


class _Keyless(IngestError):
    """A routed table its key does not fit (--mode upsert|cdc)."""


@dataclass(frozen=True)
class ManyBatchReport:
    """What one micro-batch of a many-table stream did.

    Attributes:
        batch_id: Spark's micro-batch id.
        anchor_write_id: the anchor table's write id (the committed one when skipped).
        tables: per touched table (by name), its report (rows, dead letters, offsets).
        offsets: every topic-partition range of the micro-batch (the stream's position).
        unrouted: topics whose records routed nowhere, with the reason.
        unrouted_records: their records, written to the anchor.
        lost: with fail_on_data_loss False, the ranges Kafka removed before the stream
            committed them (skipped).
        skipped: the batch was already committed (a replay).
        seconds: wall time of the micro-batch in the sink.
        tasks_seconds: of which the Spark jobs writing the tables' files (the rest is the
            driver's planning, publishing and commit).
        commit_seconds: of which the metastore commit alone.
        spark_actions: the Spark actions (each one job, its shuffle stages included) the
            sink ran for the micro-batch, the key stage's included.
    """

    batch_id: int
    anchor_write_id: int
    tables: Mapping[str, BatchReport] = field(default_factory=dict)
    offsets: tuple[OffsetRange, ...] = ()
    unrouted: Mapping[str, str] = field(default_factory=dict)
    unrouted_records: int = 0
    lost: tuple[OffsetRange, ...] = ()
    skipped: bool = False
    seconds: float = 0.0
    tasks_seconds: float = 0.0
    commit_seconds: float = 0.0
    spark_actions: int = 0

    def sums(self) -> BatchReport:
        """The touched tables' counts summed, under the anchor's write id. The records routed
        nowhere are not dead letters here (they are `unrouted_records`) but count in
        `records_read`, every record the tasks read."""
        parts = self.tables.values()
        return BatchReport(self.batch_id, self.anchor_write_id,
                           rows=sum(r.rows for r in parts),
                           dead_letters=sum(r.dead_letters for r in parts),
                           files=sum(r.files for r in parts), bytes=sum(r.bytes for r in parts),
                           skipped=self.skipped, tombstones=sum(r.tombstones for r in parts),
                           records_read=sum(r.records_read for r in parts)
                           + self.unrouted_records)

    def line(self) -> str:
        if self.skipped:
            return (f"batch {self.batch_id}: already committed as anchor write id "
                    f"{self.anchor_write_id}, skipped (replay)")
        parts = ", ".join(f"{name}: {r.rows:,} rows, {r.dead_letters:,} dead letters"
                          + (f", added columns {', '.join(r.added_columns)}"
                             if r.added_columns else "")
                          for name, r in sorted(self.tables.items()))
        return (f"batch {self.batch_id}: {len(self.tables)} tables ({parts or 'none'}), "
                f"{self.unrouted_records:,} records routed nowhere")


@dataclass
class _Clock:
    """Where one micro-batch's time went (its report's figures)."""

    tasks_s: float = 0.0
    commit_s: float = 0.0
    actions: int = 0

    def spark(self, action: Callable[[], Any]) -> Any:
        """Run one Spark action, timed."""
        started = time.monotonic()
        try:
            return action()
        finally:
            self.tasks_s += time.monotonic() - started
            self.actions += 1


@dataclass
class _Touched:
    """One table a micro-batch writes: its definitions, topics and filesystems."""

    table: TableDefinition
    dead: TableDefinition
    topics: tuple[str, ...]
    fs: fsspec.AbstractFileSystem
    dl_fs: fsspec.AbstractFileSystem
    key: KeySpec | None = None  # a keyed table's (--mode upsert|cdc)


@dataclass
class _Routing:
    """A micro-batch's rows and how they are routed: by `column` ("topic", or the routing
    key the key stage added), whose values in the micro-batch are `keys`."""

    df: DataFrame
    column: str
    keys: Sequence[str]

    def rows(self, keys: Sequence[str]) -> DataFrame:
        """The Kafka rows of these keys."""
        from pyspark.sql import functions as F

        return self.df.where(F.col(self.column).isin(list(keys))).select(*KAFKA_COLUMNS)

    def without(self, keys: Sequence[str]) -> DataFrame:
        """The micro-batch without the rows of these keys (rows with no key kept)."""
        if not keys:
            return self.df
        from pyspark.sql import functions as F

        key = F.col(self.column)
        return self.df.where(key.isNull() | ~key.isin(list(keys)))


class ManyTableSink:
    """A `foreachBatch` function writing each micro-batch into several tables in one
    transaction, routing each record by its topic or by a field of its value.

    Usage::

        sink = ManyTableSink(rules, ingest.open_table("wh/_unrouted").ref,
                             sink_id="default._unrouted@/ckpt", create=make_tables)
        query = df.writeStream.foreachBatch(sink).start()
    """

    def __init__(self, rules: RoutingRules, anchor: TableRef, *, sink_id: str,
                 options: SinkOptions | None = None, create: CreateTables | None = None,
                 check: CheckTables | None = None,
                 partition_expression: str | None = None,
                 earliest_fn: EarliestFn | None = None,
                 fail_on_data_loss: bool = True,
                 max_new_tables: int = DEFAULT_MAX_NEW_TABLES) -> None:
        """Check the options; nothing is opened until the first micro-batch.

        Args:
            rules: the stream's routing rules (by topic or by a field).
            anchor: the stream's dead-letter table, with its metastore and storage options
                (every routed table is in the same metastore, reached with the same options).
            sink_id: names the stream in the anchor's progress.
            options: the sink options every table is written with.
            create: makes a routed table that does not exist yet (and its dead-letter
                table); None: routed tables must exist. Its `TableExistsError`,
                `SchemaMismatchError` or `TableNotFoundError` (no columns to make it with)
                routes that table's keys nowhere with the reason.
            check: refuses a routed table (and its dead-letter table) at its first use in
                this run, before its micro-batch opens a transaction (a table keeps its own
                columns; the job checks its partitioning and any --route-schema).
            partition_expression: as `AcidSink`'s, for every table.
            earliest_fn: each topic partition's earliest offset on the broker: offsets the
                stream has not committed below it are lost. None: not looked for.
            fail_on_data_loss: lost offsets stop the stream before anything of the
                micro-batch is written; False skips them (the committed ranges start after
                them, the report's `lost` names them).
            max_new_tables: tables created on first use in one micro-batch at most; the
                keys of further new tables route nowhere in it (--max-new-tables-per-batch).

        Raises:
            ConfigError: the anchor has no metastore; an option not built for several
                tables yet (txns_per_delta > 1, plain Avro values); a keyed
                mode with an explicit route that has no key (`SinkOptions.key_of`).
        """
        self.options = options if options is not None else SinkOptions()
        if anchor.metastore is None:
            raise ConfigError(f"Cannot stream into {anchor.location}: it was opened without a "
                              "metastore, and the sink commits to one")
        unsupported = [what for what, on in (
            (f"--txns-per-delta {self.options.txns_per_delta}", self.options.txns_per_delta > 1),
            ("--value-format avro without --schema-registry",
             self.options.value_format != "json" and self.options.schema_registry is None)
        ) if on]
        if unsupported:
            raise ConfigError(f"A stream of several tables cannot use {', '.join(unsupported)} "
                              "yet (docs/many-tables.md, Status)")
        keyless = sorted(k for k in rules.routes if not self.options.key_of(k))
        if self.options.keyed and keyless:
            raise ConfigError(f"--mode {self.options.mode} needs the key of every routed table; "
                              f"routes {keyless} have none", hint="give --route-key KEY=COLS")
        if rules.anchor is None:  # the rules check routes against the anchor (reserved tables)
            rules = replace(rules, anchor=normalize_location(anchor.location))
        self.rules = rules
        # Registry-framed Avro: each record names its writer schema, resolved in the tasks
        # against its own table's columns (as one table's).
        self._avro = avro_format(self.options)
        self.max_new_tables = max_new_tables
        self._logged: set[tuple[str, str]] = set()  # (key, reason) routed nowhere, logged
        self.anchor_ref = anchor
        self.sink_id = sink_id
        self.create = create
        self.check = check
        self._checked: set[str] = set()  # locations `check` passed
        self.partition_expression = partition_expression
        self.earliest_fn = earliest_fn
        self.fail_on_data_loss = fail_on_data_loss
        self.agent = f"{socket.gethostname()}:{os.getpid()}:ingest-stream:{sink_id}"
        self._agent_tag = f":ingest-stream:{sink_id}"
        self._store: Metastore | None = None
        self._anchor: TableDefinition | None = None
        self._tables: dict[str, tuple[TableDefinition, TableDefinition]] = {}
        self._committed_until: dict[tuple[str, int], int] | None = None
        self._held: dict[str, str] = {}  # template table location -> the key holding it
        self._looked_up: set[str] = set()  # template locations whose holder was looked for
        self._filesystems: dict[str, fsspec.AbstractFileSystem] = {}  # by table location
        self._heartbeat: Heartbeat | None = None
        self.reports: deque[ManyBatchReport] = deque(maxlen=RECENT_REPORTS)
        self._clock = _Clock()
        self.failure: BaseException | None = None
        self._speculation: bool | None = None  # spark.speculation, read at the first batch

    @property
    def metastore_url(self) -> str:
        assert self.anchor_ref.metastore is not None  # refused in __init__
        return self.anchor_ref.metastore

    @property
    def storage_options(self) -> Mapping[str, Any]:
        return self.anchor_ref.storage_options

    # ------------------------------------------------------------------ set-up
    def _open(self) -> Metastore:
        if self._store is not None:
            return self._store
        store = Metastore.open(self.metastore_url, create=False)
        try:
            self._anchor = store.get_table(self.anchor_ref.location)
            check_owner(self._anchor, store.url, self.storage_options)
            self._recover(store)
        except BaseException:
            store.close()
            raise
        self._store = store
        # Every transaction of the stream holds a write id on the anchor: its rows find them.
        self._heartbeat = Heartbeat(self.metastore_url, [self._anchor.name], self._agent_tag)
        self._heartbeat.start()
        return store

    def _recover(self, store: Metastore) -> None:
        """Abort every open transaction an earlier run of this stream left (whatever tables
        it wrote) and remove its files in each of them (docs/invariants.md 8.1)."""
        assert self._anchor is not None
        left: dict[int, list[TransactionInfo]] = {}
        for info in store.transactions(self._anchor, states=("open",)):
            if info.agent.endswith(self._agent_tag):
                left[info.txn_id] = []
        if not left:
            return
        # The other tables of those transactions: their rows, listed before any abort.
        for info in store.transactions(states=("open",)):
            if info.txn_id in left:
                left[info.txn_id].append(info)
        abort_left_open(store, left, sink_id=self.sink_id, table_of=store.get_table,
                        storage_options=self.storage_options)

    def _table_at(self, store: Metastore, location: str, key: tuple[str, ...] = (),
                  read: Mapping[str, TableDefinition | None] | None = None
                  ) -> tuple[TableDefinition, TableDefinition]:
        """A routed table and its dead-letter table: read once (or taken from `read`, this
        micro-batch's `_read_tables`), created on first use (a keyed table with its `key`
        columns)."""
        known = self._tables.get(location)
        if known is not None:
            return known
        read = read or {}
        table, dead = read.get(location), read.get(dead_letter_location(location))
        try:
            # Either missing when read: read again now, as it is about to be created.
            pair = ((table, dead) if table is not None and dead is not None else
                    (store.get_table(location), store.get_table(dead_letter_location(location))))
        except TableNotFoundError:
            if self.create is None:
                raise ConfigError(
                    f"Cannot route to {location}: no such table (or its dead-letter table) in "
                    "the metastore, and this stream does not create tables",
                    hint="create it, or give the stream --schema to create it") from None
            pair = self.create(location, key) if key else self.create(location)
        for defn in pair:
            check_owner(defn, store.url, self.storage_options)
        if len(pair[0].partition_columns) > 1:
            raise ConfigError(f"Cannot stream into {pair[0].location}: tables with more than "
                              "one partition column are not supported yet")
        self._tables[location] = pair
        return pair

    # ------------------------------------------------------------------ the micro-batch
    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        """Write micro-batch `batch_id` (the foreachBatch function)."""
        started = time.monotonic()
        self._clock = _Clock()
        if self._speculation is None:
            # Speculative attempts may leave staging files behind a reported first one.
            conf = batch_df.sparkSession.conf.get("spark.speculation", "false")
            self._speculation = str(conf).lower() == "true"
        try:
            report = self._process(batch_df, int(batch_id))
        except BaseException as e:
            # A task's own error (a bad record under --on-bad-record fail, ...) is raised
            # again as its class, not as Spark's wrapper (as AcidSink does).
            ours = task_error(e, batch_id=int(batch_id), table=self.anchor_ref.location
                              if self._anchor is None else self._anchor.name)
            self.failure = e if ours is None else ours
            if ours is not None:
                raise ours from e
            raise
        report = replace(report, seconds=time.monotonic() - started,
                         tasks_seconds=self._clock.tasks_s, commit_seconds=self._clock.commit_s,
                         spark_actions=self._clock.actions)
        self.reports.append(report)
        log.debug("%s", report.line())

    def _topics(self, batch_df: DataFrame, planned: Sequence[OffsetRange] | None
                ) -> list[str]:
        """The topics the micro-batch holds records of: those with a non-empty planned
        range, or (the plan unknown) the distinct topics of its rows."""
        if planned is not None:
            return sorted({r.topic for r in planned if r.until_offset > r.from_offset})
        return sorted(row[0] for row in self._clock.spark(
            batch_df.select("topic").distinct().collect))

    def _process(self, batch_df: DataFrame, batch_id: int) -> ManyBatchReport:
        store = self._open()
        assert self._anchor is not None
        done = store.committed_write_id(self.sink_id, batch_id, table=self._anchor.name)
        if done is not None:
            return ManyBatchReport(batch_id, done, skipped=True)
        planned = planned_ranges(batch_df)
        if planned:
            # A re-created topic's new offsets start below the stream's committed end: the
            # anchor's progress holds every topic's (docs/many-tables.md, restarts).
            check_not_behind({(r.topic, r.partition): r.from_offset for r in planned},
                             self._committed_ends(store), what=f"micro-batch {batch_id} reads from",
                             known_as=f"stream {self.sink_id} already committed")
        lost = lost_ranges(planned, self._committed_ends(store) if planned else {},
                           self.earliest_fn, fail=self.fail_on_data_loss, batch_id=batch_id,
                           of=f"stream {self.sink_id}", by="the stream")
        if self.rules.field_path is None:
            return self._write_evolving(store, _Routing(
                batch_df.select(*KAFKA_COLUMNS), "topic", self._topics(batch_df, planned)),
                batch_id, planned, lost)
        # By field: the keys are in the values; the rows with their keys are read once.
        from pyspark.sql import functions as F

        keyed = batch_df.select(*KAFKA_COLUMNS).mapInArrow(
            partial(route_keys_task, self.rules), ROUTE_DDL).persist()
        try:
            keys = sorted(row[0] for row in self._clock.spark(
                keyed.where(F.col(ROUTE_KEY).isNotNull()).select(ROUTE_KEY).distinct().collect))
            return self._write_evolving(store, _Routing(keyed, ROUTE_KEY, keys), batch_id,
                                        planned, lost)
        finally:
            keyed.unpersist()

    def _write_evolving(self, store: Metastore, routing: _Routing, batch_id: int,
                        planned: Sequence[OffsetRange] | None,
                        lost: Sequence[OffsetRange]) -> ManyBatchReport:
        """`_write`, again after a round that added columns (--on-new-field evolve); each
        table's report says the columns added to it."""
        assert self._anchor is not None
        report, added = write_evolving(
            lambda: self._write(store, routing, batch_id, planned, lost), batch_id=batch_id,
            into=f"the tables of stream {self.sink_id}")
        if not added or report.skipped:
            return report
        tables = {name: replace(one, added_columns=added[name]) if added.get(name) else one
                  for name, one in report.tables.items()}
        return replace(report, tables=tables)

    def _committed_ends(self, store: Metastore) -> dict[tuple[str, int], int]:
        """Each topic partition's committed end, from the anchor: read once, then kept up to
        date by this sink's commits."""
        assert self._anchor is not None
        if self._committed_until is None:
            progress = stream_progress(store, self._anchor)
            self._committed_until = dict(progress.offsets) if progress else {}
        return self._committed_until

    def _touched(self, table: TableDefinition, dead: TableDefinition,
                 keys: Sequence[str]) -> _Touched:
        return _Touched(table, dead, tuple(sorted(keys)), self._fs(table.location),
                        self._fs(dead.location))

    def _fs(self, location: str) -> fsspec.AbstractFileSystem:
        """The filesystem of a table's location, kept for the run: it depends only on the
        location and the stream's storage options, which do not change."""
        fs = self._filesystems.get(location)
        if fs is None:
            fs, _ = storage.url_to_fs(location, self.storage_options)
            self._filesystems[location] = fs
        return fs

    def _read_tables(self, store: Metastore, locations: Sequence[str],
                     read: dict[str, TableDefinition | None]) -> None:
        """Add to `read` the definitions (None: no such table) of the tables at `locations`
        and of their dead-letter tables not in it yet, in one metastore call: a micro-batch
        that first meets many tables (the first after a start) reads them together, not
        a few look-ups each."""
        wanted = list(dict.fromkeys(
            at for location in locations
            for at in (location, dead_letter_location(location)) if at not in read))
        if wanted:
            read.update(zip(wanted, store.find_tables(wanted), strict=True))

    def _load_holders(self, store: Metastore, keys: Sequence[str],
                      read: dict[str, TableDefinition | None]) -> None:
        """Which key holds each template table of these keys that an earlier run created:
        the key recorded in the table's `HOLDER_PROPERTY` (by topic or by field), else,
        routed by topic, the topic of the table's own offset ranges (a template table has
        one topic's). Looked up once per location; without it, after a restart two keys
        meeting on a table ("a_b", "A.b") could share it, or both route nowhere. The tables
        are read together into `read` (`_read_tables`), which the claim then uses."""
        if self.rules.template is None:
            return
        locations: list[str] = []
        for key in keys:
            found = self.rules.table_of(key)
            if key in self.rules.routes or not isinstance(found, Routed):
                continue
            location = found.location
            if location in self._held or location in self._looked_up:
                continue
            self._looked_up.add(location)
            locations.append(location)
        # Keyed by the normalised location, as the claim looks the tables up.
        self._read_tables(store, [normalize_location(at) for at in locations], read)
        for location in locations:
            table = read[normalize_location(location)]
            if table is None:
                continue
            holder = table.properties.get(HOLDER_PROPERTY)
            if holder is not None:
                self._held[location] = holder
            elif self.rules.field_path is None:
                topics = {r.topic for _, r in store.offset_ranges(location)}
                if len(topics) == 1:
                    self._held[location] = topics.pop()

    def _claim(self, store: Metastore, batch_id: int, keys: Sequence[str]
               ) -> tuple[list[_Touched], dict[str, str]]:
        """The tables of the micro-batch's routing keys (created on first use, at most
        `max_new_tables` of them), and the keys that route nowhere with the reason. A table
        problem of one key (its name taken by another table, no columns to create it with)
        makes that key's records route nowhere, never the micro-batch fail on every restart."""
        assert self._anchor is not None
        # The definitions of tables this run has not met yet, read together; tables met
        # before are kept (`_tables`, `_held`): nothing is read again for them.
        read: dict[str, TableDefinition | None] = {}
        self._load_holders(store, keys, read)
        routed, refused = claim_tables(self.rules, keys, self._held)
        unrouted = {key: u.reason for key, u in refused.items()}
        by_location: dict[str, list[str]] = {}
        for key, location in routed.items():  # two spellings of one location are one table
            by_location.setdefault(normalize_location(location), []).append(key)
        self._read_tables(store, [at for at in by_location if at not in self._tables], read)
        touched, new = [], 0
        for location, its_keys in sorted(by_location.items()):
            templated = self.rules.template is not None and its_keys[0] not in self.rules.routes
            key_columns = {self.options.key_of(k) for k in its_keys}
            if self.options.keyed and (len(key_columns) != 1 or not min(key_columns)):
                # A template table of a key without --route-key and no --key (explicit routes
                # are refused up front), or keys sharing a table with different columns.
                for key in its_keys:
                    unrouted[key] = (
                        f"--mode {self.options.mode} needs the key of table {location!r}: "
                        + ("give --route-key KEY=COLS or --key COLS" if len(key_columns) == 1
                           else f"its routing keys {sorted(its_keys)} give different ones "
                           f"{sorted(key_columns)}"))
                continue
            columns = min(key_columns) if self.options.keyed else ()
            creating = False
            try:
                if location not in self._tables and read[location] is None:
                    if new >= self.max_new_tables:
                        for key in its_keys:
                            unrouted[key] = (
                                f"{_key_name(self.rules, key)} would create table {location!r}, "
                                f"but this micro-batch created {self.max_new_tables} tables "
                                "already (--max-new-tables-per-batch); a later micro-batch "
                                "creates it")
                        continue
                    creating = True
                table, dead = self._table_at(store, location, columns, read)
                new += creating  # a table that could not be made takes no place in the cap
                key_spec = self._key_of(table, columns)
                if templated:
                    table = self._hold(store, location, table, its_keys[0])
            except (TableExistsError, TableNotFoundError, SchemaMismatchError, _Held,
                    _Keyless) as e:
                for key in its_keys:
                    unrouted[key] = (f"{_key_name(self.rules, key)} cannot use table "
                                     f"{location!r}: {e}")
                continue
            touched.append(replace(self._touched(table, dead, its_keys), key=key_spec))
        for key, reason in sorted(unrouted.items()):
            if (key, reason) not in self._logged:  # once per key and reason, not per batch
                self._logged.add((key, reason))
                log.warning("micro-batch %d: the records of routing key %r go to %s: %s",
                            batch_id, key, self._anchor.name, reason)
        return touched, unrouted

    def _key_of(self, table: TableDefinition, columns: tuple[str, ...]) -> KeySpec | None:
        """A keyed table's key (None in append mode), as the single-table sink checks it.

        Raises:
            _Keyless: the key does not fit the table (not bucketed by it, a partition
                column outside it, an unknown column, a --partition-by expression).
        """
        if not columns:
            return None
        try:
            return check_keyed_stream(table, replace(self.options, key=",".join(columns),
                                                     route_keys=()), self.partition_expression)
        except ConfigError as e:
            raise _Keyless(str(e)) from None

    def _hold(self, store: Metastore, location: str, table: TableDefinition, key: str
              ) -> TableDefinition:
        """Make `key` the holder of the template table at `location`, recorded in the table
        (`HOLDER_PROPERTY`) before anything is written to it, so a restarted stream knows
        it.

        Raises:
            _Held: another key is recorded as its holder.
        """
        holder = table.properties.get(HOLDER_PROPERTY)
        if holder is None:
            table = store.set_properties(table.name, {HOLDER_PROPERTY: key})
            self._tables[location] = (table, self._tables[location][1])
        elif holder != key:
            self._held[location] = holder
            raise _Held(f"{_key_name(self.rules, holder)} holds it (table property "
                        f"{HOLDER_PROPERTY} of {table.name})")
        self._held[location] = key
        return table

    def _write(self, store: Metastore, routing: _Routing, batch_id: int,
               planned: Sequence[OffsetRange] | None,
               lost: Sequence[OffsetRange] = ()) -> ManyBatchReport | Evolved:
        """One transaction for the micro-batch across its tables: its report once committed
        (or skipped as committed by another writer), or the columns it added to its tables
        (then it was aborted and must run again)."""
        assert self._anchor is not None
        touched, unrouted = self._claim(store, batch_id, routing.keys)
        self._check_first_use(touched)
        by_topic = routing.column == "topic"
        also = [t for one in touched for t in (one.table, one.dead)]
        txn = store.open_transaction(self._anchor, agent=self.agent, also=also)
        done: list[tuple[_Touched, TaskPlan, list[TaskResult]]] = []
        try:
            reports: dict[str, BatchReport] = {}
            files: dict[str, list[CommittedFile]] = {}
            table_offsets: dict[str, tuple[OffsetRange, ...]] = {}
            seen: list[OffsetRange] = []
            for one in touched:
                done.append((one, self._plan(txn, one), []))
            if unrouted or not by_topic:
                # Their records go to the anchor, under its write id in this transaction.
                done.append((self._touched(self._anchor, self._anchor, list(unrouted)),
                             self._anchor_plan(txn), []))
            self._run(store, routing, done, len(touched), unrouted)
            # --on-new-field per table, before anything is published; the anchor never evolves.
            evolving = {i: columns for i, (one, plan, results) in enumerate(done[:len(touched)])
                        if (columns := columns_to_add(store, one.table, plan.row_schema,
                                                      results, self.options, batch_id))
                        is not None}
            if evolving:
                # Aborted before the columns change: no transaction of ours holds the tables
                # (if the abort fails, the columns stay as they are and the micro-batch fails).
                stop = IngestError(
                    f"micro-batch {batch_id} held new fields; it is written again after adding "
                    "columns to " + ", ".join(
                        f"{done[i][0].table.name} {[f'{n} {t}' for n, t in columns]}"
                        for i, columns in evolving.items()))
                if not self._abort(store, txn, done, stop):
                    raise stop
                return self._evolve(store, [(done[i][0], c) for i, c in evolving.items()],
                                    batch_id)
            for one, plan, results in done[:len(touched)]:
                report = publish_results(results, plan=plan, batch_id=batch_id, fs=one.fs,
                                         dl_fs=one.dl_fs)
                # The ranges planned, not only the records seen, without what was lost.
                ranges = after_loss(cover(report.offsets, [
                    r for r in planned or () if by_topic and r.topic in one.topics]), lost)
                # One table's part: its own topics' ranges (and the directories it wrote, which
                # the stream's maintenance compacts).
                reports[one.table.name] = replace(report, offsets=ranges)
                files.update(committed_files(_targets(one, plan), results))
                seen += ranges
                if by_topic:
                    # By field a topic feeds several tables: their ranges stay the anchor's.
                    table_offsets[one.table.name] = ranges
            dead_letters = 0
            for anchor, plan, results in done[len(touched):]:
                report = publish_results(results, plan=plan, batch_id=batch_id, fs=anchor.fs,
                                         dl_fs=anchor.dl_fs)
                dead_letters = report.dead_letters
                seen += report.offsets
                files.update(committed_files(_targets(anchor, plan), results))
            offsets = after_loss(cover(seen, planned), lost)
            crash_point("sink.before_commit")
            committing = time.monotonic()
            # Each table's files hold the columns read at its first use: refused (the whole
            # transaction aborted) if one no longer reads as its columns now (an `ingest
            # alter` meanwhile), as AcidSink's commit.
            # Every table's columns re-read in one metastore call.
            check_written_tables(store, [(one.table.name, [plan.row_schema], one.table)
                                         for one, plan, _ in done[:len(touched)]],
                                 what=f"micro-batch {batch_id}")
            # Each keyed table declares its write set (docs/format.md §24).
            updated = {one.table.name: keyed_write_set(files.get(one.table.name, ()))
                       for one in touched if one.key is not None}
            store.commit(txn, sink=SinkProgress(self.sink_id, batch_id), offsets=offsets,
                         files=files, table_offsets=table_offsets, table_updated=updated)
            self._clock.commit_s = time.monotonic() - committing
        except CommitConflictError as e:
            self._abort(store, txn, done, e)
            committed = store.committed_write_id(self.sink_id, batch_id,
                                                 table=self._anchor.name)
            if committed is None:
                raise
            return ManyBatchReport(batch_id, committed, skipped=True)
        except BaseException as e:
            self._abort(store, txn, done, e)
            raise
        for one, _, results in done:
            remove_staging_leftovers(results, fs=one.fs, dl_fs=one.dl_fs,
                                     speculation=bool(self._speculation))
        if self._committed_until is not None:
            for r in offsets:
                key = (r.topic, r.partition)
                self._committed_until[key] = max(self._committed_until.get(key, 0),
                                                 r.until_offset)
        return ManyBatchReport(batch_id, txn.write_id, reports, offsets, dict(unrouted),
                               unrouted_records=dead_letters, lost=tuple(lost))

    def _check_first_use(self, touched: Sequence[_Touched]) -> None:
        """`check` each table this run has not checked yet, before the transaction opens."""
        for one in touched:
            if self.check is not None and one.table.location not in self._checked:
                self.check(one.table, one.dead)
                self._checked.add(one.table.location)

    def _run(self, store: Metastore, routing: _Routing,
             done: Sequence[tuple[_Touched, TaskPlan, list[TaskResult]]], tables: int,
             unrouted: Mapping[str, str]) -> None:
        """Run the micro-batch's tasks: the first `tables` entries of `done` are the touched
        tables, a last one the anchor (records routed nowhere); each entry's results are
        filled in. One Spark job writes every table whose rows need no shuffle, and the
        records routed nowhere (`_tasks`); a table that does (bucketed, or partitioned by a
        Spark SQL expression) or is keyed is written as one table's, from a filter of the
        micro-batch; a keyed one on a read view taken now, inside the open transaction."""
        if not done:
            return  # nothing planned: no records
        anchor = done[tables][1] if len(done) > tables else None
        fast = [i for i in range(tables) if done[i][0].key is None and one_pass([done[i][1]])]
        slow = [i for i in range(tables) if i not in set(fast)]
        if fast or anchor is not None:
            slow_keys = [key for i in slow for key in done[i][0].topics]
            many = ManyPlan(tuple(done[i][1] for i in fast),
                            {key: j for j, i in enumerate(fast) for key in done[i][0].topics},
                            routing.column, dict(unrouted), anchor)
            found = self._clock.spark(partial(
                run_many_tasks, routing.without(slow_keys), many))
            for j, i in enumerate(fast):
                done[i][2].extend(found.get(j, ()))
            if anchor is not None:
                done[tables][2].extend(found.get(many.anchor_index, ()))
        for i in slow:
            one, plan, results = done[i]
            if one.key is not None:
                results.extend(self._clock.spark(partial(
                    run_keyed_tasks, store, routing.rows(one.topics), plan, agent=self.agent)))
                continue
            results.extend(self._clock.spark(partial(
                run_tasks, routing.rows(one.topics), plan,
                partition_expression=self.partition_expression)))

    def _anchor_plan(self, txn: Transaction) -> TaskPlan:
        """The plan of the records routed nowhere: dead letters of the anchor."""
        assert self._anchor is not None
        anchor = DeltaTarget(self._anchor.location, txn.write_id,
                             format_delta(txn.write_id, txn.write_id, 0), table_codec(self._anchor))
        return TaskPlan(target=anchor, dead_letter=anchor, row_schema=DEAD_LETTER_SCHEMA,
                        parse_schema=DEAD_LETTER_SCHEMA, partition_column=None,
                        partition_from="none", bucket_columns=(), bucket_count=0, append=False,
                        close_files=False, options=self.options,
                        storage_options=dict(self.storage_options))

    def _plan(self, txn: Transaction, one: _Touched) -> TaskPlan:
        """The tasks' plan of one touched table (as the single-table sink's, append mode)."""
        table, dead = one.table, one.dead
        write_id, dead_id = txn.write_id_for(table), txn.write_id_for(dead)
        plan = table_plan(table, dead, target=(write_id, format_delta(write_id, write_id, 0)),
                          dead_letter=(dead_id, format_delta(dead_id, dead_id, 0)),
                          codecs=(table_codec(table), table_codec(dead)), options=self.options,
                          storage_options=self.storage_options,
                          partition_expression=self.partition_expression)
        if self._avro is not None:
            plan = replace(plan, avro=self._avro)
        if one.key is None:
            return plan
        return replace(plan, mode=self.options.mode, key=one.key, table=table)

    def _evolve(self, store: Metastore, tables: Sequence[tuple[_Touched, list[tuple[str, str]]]],
                batch_id: int) -> Evolved:
        """Add each table's columns (`_evolve.add_columns`) and keep its definition as
        stored afterwards, which the next round plans with.

        Raises:
            ConfigError: the metastore refuses to change a table's columns.
        """
        added: dict[str, tuple[str, ...]] = {}
        for one, columns in tables:
            fresh, added[one.table.name] = add_columns(store, one.table, columns, batch_id)
            for location, (table, dead) in self._tables.items():  # by the routes' spelling
                if table.name == fresh.name:
                    self._tables[location] = (fresh, dead)
        crash_point("sink.after_evolve")
        return Evolved(added)

    def _abort(self, store: Metastore, txn: Transaction,
               done: Sequence[tuple[_Touched, TaskPlan, list[TaskResult]]],
               error: BaseException) -> bool:
        """Abort the micro-batch's transaction and remove what its tasks reported writing
        in every table; False when the abort failed (a note on `error` says why)."""
        try:
            store.abort(txn, reason=f"micro-batch failed: {type(error).__name__}: {error}"[:500])
        except (CommitConflictError, MetastoreError) as e:
            # Committed, or the metastore unreachable: no file goes (the restart's repair and
            # replay check decide).
            error.add_note(f"Could not abort transaction {txn.txn_id}, its files stay: {e}")
            return False
        for one, plan, results in done:
            written = [r for r in results if isinstance(r, FileWritten)]
            _, root = storage.url_to_fs(one.table.location, self.storage_options)
            _, dl_root = storage.url_to_fs(one.dead.location, self.storage_options)
            remove_written(one.dl_fs, dl_root, 0, plan.dead_letter.delta_dir,
                            [r for r in written if r.target == "dead_letter"])
            remove_table_written(one.fs, root, len(one.table.partition_columns),
                                 delta_dir=plan.target.delta_dir, write_id=plan.target.write_id,
                                 files=[r for r in written if r.target == "table"],
                                 keyed=one.key is not None)
        return True

    def close(self) -> None:
        """Stop the heartbeat and close the metastore."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> ManyTableSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _key_name(rules: RoutingRules, key: str) -> str:
    return f"topic {key!r}" if rules.field_path is None else f"--route-field value {key!r}"


def _targets(one: _Touched, plan: TaskPlan) -> dict[WriteTarget, tuple[TableDefinition, int]]:
    return {"table": (one.table, plan.target.write_id),
            "dead_letter": (one.dead, plan.dead_letter.write_id)}


__all__ = ["HOLDER_PROPERTY", "CheckTables", "CreateTables", "ManyBatchReport", "ManyTableSink"]
