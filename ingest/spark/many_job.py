"""The streaming job of a stream of several tables (docs/many-tables.md): Kafka topics (a
list or a pattern) -> `ManyTableSink` -> a table per route, with checks before it starts.

`ingest stream` and jobs/kafka_to_acid.py call `run_many_stream` when the options route to
several tables (`StreamOptions.many_tables`), `run_stream` (job.py) otherwise. The
anchor (--unrouted-table: records that route nowhere, and the stream's progress) is
created when missing. Each routed table keeps its own columns when it exists (checked as a
target: a dead-letter table of the usual layout, the stream's partitioning, and the columns of
its --route-schema when one is given); it is created on first use with its routing key's
--route-schema, else the stream's --schema; with neither, its keys route nowhere with the
reason (`create` raises `TableNotFoundError`, which the sink routes nowhere, logged once).

Around the sink, as for one table: a line per micro-batch naming each touched table's rows and
the lag per topic (`StreamOperations`' listener, `many_ops.ManyBatchViews`), the metrics
labelled by table (`StreamMetrics.observe_many`), the offsets of every topic to a consumer
group, and compaction and cleaning of every table the stream writes (`StreamMaintenance`,
signalled per table after each commit).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ingest.errors import ConfigError, IngestError, TableNotFoundError
from ingest.io import storage
from ingest.kafka import KafkaConnection, LagProbe, Watermarks
from ingest.records import Routed, RoutingRules
from ingest.spark.job import StreamLayout, StreamSummary
from ingest.spark.options import StreamOptions, check_evolve_types
from ingest.spark.sink import (
    DEAD_LETTER_DDL,
    ManyBatchReport,
    ManyTableSink,
    dead_letter_name,
    dead_letter_schema,
)
from ingest.table import open_table_root
from ingest.table.core import stream_progress
from ingest.table.write import create_table, default_table_name
from ingest.txn import (
    Metastore,
    TableDefinition,
    TopicPartitionKey,
    default_metastore_url,
    normalize_location,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# The Python Kafka source packs topic partitions of fewer records into one read task, up to
# this many records a task: a stream of many small topics would otherwise pay a task (a
# consumer, a fetch, a Python worker's turn) per topic partition and micro-batch. A larger
# micro-batch is packed into about as many tasks as Spark has cores (`packIntoTasks`).
PACK_RECORDS_PER_TASK = 10_000


@dataclass
class ManyTotals:
    """Sums over a run's micro-batches (the sink keeps only its recent reports)."""

    batches: int = 0
    skipped: int = 0
    rows: int = 0
    dead_letters: int = 0
    unrouted: int = 0
    tombstones: int = 0
    files: int = 0
    bytes: int = 0
    tables: dict[str, int] = field(default_factory=dict)  # rows per table

    def add(self, report: ManyBatchReport) -> None:
        self.batches += 1
        if report.skipped:
            self.skipped += 1
            return
        sums = report.sums()
        self.unrouted += report.unrouted_records
        self.rows += sums.rows
        self.dead_letters += sums.dead_letters
        self.tombstones += sums.tombstones
        self.files += sums.files
        self.bytes += sums.bytes
        for name, one in report.tables.items():
            self.tables[name] = self.tables.get(name, 0) + one.rows


@dataclass(frozen=True)
class ManyStreamSummary(StreamSummary):
    """A finished stream of several tables: `StreamSummary`'s totals (table: the anchor; rows
    and dead letters summed over the tables, records routed nowhere counted as dead letters),
    the rows per table and the lag per topic after the last commit (None: not known)."""

    tables: Mapping[str, int] = field(default_factory=dict)
    lag_by_topic: Mapping[str, int] | None = None

    def line(self) -> str:
        per_table = ", ".join(f"{name} {n:,}" for name, n in sorted(self.tables.items()))
        lag = "" if self.lag_by_topic is None else "; kafka lag per topic: " + (", ".join(
            f"{t} {n:,}" for t, n in sorted(self.lag_by_topic.items())) or "none")
        return f"{super().line()}; rows per table: {per_table or 'none'}{lag}"


def check_many_options(options: StreamOptions) -> None:
    """The checks of a many-table stream that need no Spark and no broker: the locations'
    schemes, the schema and partitioning, the routing rules, the metastore's backend.

    Raises:
        ConfigError: a bad location, schema, partitioning or routing rule, or an
            --evolve-type naming a column of --schema or a --route-schema with another
            type.
    """
    from ingest.spark.job import check_sink_progress, stream_partitioning, table_layout

    assert options.unrouted_table is not None
    stream_partitioning(options.partition_by)  # also without any columns given
    for location in (options.unrouted_table, options.checkpoint):
        storage.check_url(location)
    options.routing  # noqa: B018 (building the rules is the check)
    # An --evolve-type must fit every column list the stream creates tables with.
    given = [] if options.schema_ddl is None else [
        ("--schema", table_layout(options.schema_ddl, options.partition_by))]
    given += route_layouts(options).values()
    for flag, layout in given:
        check_evolve_types(options.sink.evolve_type_map, layout.row_schema,
                           (layout.partition_column,) if layout.partition_column else (),
                           table=flag)
    if options.metastore is not None:
        check_sink_progress(options.metastore)


def ensure_anchor(location: str, *, metastore_url: str,
                  storage_options: Mapping[str, Any]) -> TableDefinition:
    """Create the stream's anchor (a dead-letter table) when missing, else check its columns.

    Raises:
        SchemaMismatchError: an existing table at `location` is not a dead-letter table.
    """
    from ingest.spark.job import check_existing_table

    with Metastore.open(metastore_url) as store:
        anchor = store.find_table(location)
        if anchor is None:
            anchor = create_table(location, DEAD_LETTER_DDL, name=default_table_name(location),
                                  metastore=store, storage_options=storage_options)
            log.info("Created the stream's dead-letter table %s at %s", anchor.name,
                     anchor.location)
        else:
            check_existing_table(anchor, TableDefinition(anchor.name, location,
                                                         dead_letter_schema()))
    return anchor


def route_layouts(options: StreamOptions) -> dict[str, tuple[str, StreamLayout]]:
    """Each table location a `--route-schema` gives columns for: the flag naming it (for
    error messages) and its layout (with --partition-by). Keys of one table giving it
    different columns are refused by `StreamOptions.route_schema_map`.

    Raises:
        ConfigError: see `StreamOptions.route_schema_map`; or a route's columns clash with
            --partition-by (naming its --route-schema).
    """
    from ingest.spark.job import table_layout

    rules = options.routing
    out: dict[str, tuple[str, StreamLayout]] = {}
    if rules is None:
        return out
    for key, ddl in sorted(options.route_schema_map.items()):
        found = rules.table_of(key)
        assert isinstance(found, Routed)  # refused up front otherwise
        flag = f"--route-schema {key}"
        try:
            layout = table_layout(ddl, options.partition_by)
        except ConfigError as e:
            raise ConfigError(f"{flag}: {e.message}", hint=e.hint) from None
        out.setdefault(normalize_location(found.location), (flag, layout))
    return out


def name_beside(anchor: TableDefinition, location: str) -> str:
    """The name of a table the stream creates at `location`: its directory's name (as
    `default_table_name`) in the anchor's database. On a Hive Metastore 4 a managed table
    must lie inside its database's managed location, which holds the anchor (made for it,
    or the user's), while `default`'s is the server's warehouse. The routing rules compare
    tables by this name's table part (`location_table_name`), so keys that would meet on it
    are refused or route nowhere before a create fails."""
    database = anchor.name.split(".", 1)[0] if "." in anchor.name else "default"
    return f"{database}.{default_table_name(location).split('.', 1)[1]}"


def check_route_names(store: Metastore, anchor: TableDefinition, rules: RoutingRules) -> None:
    """Refuse explicit routes whose tables would have one name at different locations: each
    route's table is named as found in the metastore, else as `create` would name it
    (`name_beside`); two such names meeting would fail the second create on every micro-batch.
    (Routes naming one location share that table, as documented.)

    Raises:
        ConfigError: naming both keys, both locations and the name.
    """
    named: dict[str, tuple[str, str]] = {}  # table name -> (key, location)
    for key, location in sorted(rules.routes.items()):
        where = normalize_location(location)
        found = store.find_table(where)
        name = found.name if found is not None else name_beside(anchor, where)
        other = named.setdefault(name, (key, where))
        if other[1] != where:
            raise ConfigError(
                f"--route {other[0]}={other[1]} and --route {key}={where} name two tables of "
                f"one name, {name}: the second could never be created",
                hint="route both keys to one location, or give one table a directory of "
                     "another name")


def run_many_stream(spark: SparkSession, options: StreamOptions, *,
                    metastore_url: str | None = None) -> Any:
    """Run a stream of several tables until it ends (available-now) or fails; returns its
    `ManyStreamSummary` (table: the anchor's name; rows and dead letters summed over tables,
    rows per table, the lag per topic).

    Raises:
        ConfigError: bad options, a topic of --topic that does not exist, or a checkpoint
            that lost the progress the anchor holds.
        IngestError: the broker cannot be reached, or the stream failed.
    """
    from ingest.spark.job import (
        _checkpoint_is_new,
        check_ends_not_behind,
        check_existing_table,
        check_kafka,
        check_kerberos_kafka,
        check_partition_expression,
        ensure_tables,
        key_bucket_columns,
        repair_torn_files,
        stream_partitioning,
        table_layout,
    )
    from ingest.spark.kafka import check_jvm_kafka, kafka_dataframe
    from ingest.spark.maintenance import StreamMaintenance
    from ingest.spark.many_ops import ManyBatchViews, TableMaintenanceSignals, TopicsLag
    from ingest.spark.metrics import StreamMetrics, check_port
    from ingest.spark.operations import StreamOperations
    from ingest.spark.progress import OBSERVATION, source_observations
    from ingest.spark.sink import error_in_traceback

    check_many_options(options)
    rules = options.routing
    assert rules is not None and options.unrouted_table is not None
    interval_s, available_now = options.schedule
    # The stream's --schema (None: tables are created only from a --route-schema) and each
    # route's, by table location.
    layout = (None if options.schema_ddl is None
              else table_layout(options.schema_ddl, options.partition_by))
    layouts = route_layouts(options)
    partition_column, partition_expression = stream_partitioning(options.partition_by)
    storage_options = dict(options.storage)
    registry_columns = None if options.sink.schema_registry is None else _RegistryColumns(
        options, rules)
    for given in [layout, *(one for _, one in layouts.values())]:
        if given is not None:
            check_partition_expression(spark, given)
    anchor_at = options.unrouted_table
    url = metastore_url or options.metastore or default_metastore_url(anchor_at)
    connection = options.connection
    kerberos = check_kerberos_kafka(connection)
    marks: Watermarks = {}
    # the listed topics, together (a pattern may match none yet)
    marks.update(check_kafka(connection, *rules.selection.topics,
                             timeout_s=options.kafka_timeout_s))
    if options.kafka_source == "jvm":
        check_jvm_kafka(spark)
    if options.metrics_port is not None:
        check_port(options.metrics_port, host=options.metrics_bind_host)
    anchor = ensure_anchor(anchor_at, metastore_url=url, storage_options=storage_options)

    # --on-new-field evolve: a table may have columns after its --route-schema's, which it
    # added; an --evolve-type must fit each table the stream creates or finds (as
    # run_stream's one).
    evolve = options.sink.on_new_field == "evolve"

    def check_table(table: TableDefinition) -> None:
        # A routed table found in the metastore keeps its own columns (the tasks parse its
        # records by them), but must take the stream's partitioning (its --partition-by
        # expression analysed over its columns) and its --route-schema's columns if given.
        flag, wanted = layouts.get(normalize_location(table.location), ("--schema", None))
        check_existing_table(table, TableDefinition(
            table.name, table.location, table.row_schema if wanted is None else wanted.row_schema,
            partition_columns=(partition_column,) if partition_column else ()), given_by=flag,
            allow_added_columns=evolve)
        check_partition_expression(spark, StreamLayout(table.row_schema, partition_column,
                                                       partition_expression))
        check_evolve_types(options.sink.evolve_type_map, table.row_schema,
                           table.partition_columns, table=table.name)

    checkpoint = options.checkpoint
    sink_id = f"{anchor.name}@{normalize_location(checkpoint)}"
    with Metastore.open(url) as store:
        last = store.last_committed_batch(sink_id, table=anchor.name)
        progress = stream_progress(store, anchor.name)
        committed_ends = progress.offsets if progress else {}
        # Every topic the anchor's progress names (a pattern's too), as run_stream its one.
        marks.update(_ends_of(connection, {t for t, _ in committed_ends} - {t for t, _ in marks},
                              listed=rules.selection.topics, timeout_s=options.kafka_timeout_s))
        check_ends_not_behind(marks, committed_ends, servers=connection.bootstrap_servers,
                              known_as=f"stream {sink_id} already committed")
        holders = _holders(store, committed_ends, rules)
        check_route_names(store, anchor, rules)
        # A --route-schema's table found now is checked now, before the stream starts.
        for location in layouts:
            found = store.find_table(location)
            if found is not None:
                check_table(found)
        # Torn files are repaired in the anchor and in the tables the stream has written,
        # before the sink adds to them (as run_stream its table); the sink's own repair
        # aborts what its killed transactions left open.
        opened_anchor = open_table_root(anchor.location, store, storage_options)
        repair_torn_files(opened_anchor)
        for location in _written_tables(store, holders, rules):
            repair_torn_files(open_table_root(location, store, storage_options))
        anchor_ref = opened_anchor.ref
    if last is not None and _checkpoint_is_new(checkpoint, storage_options):
        raise ConfigError(
            f"Cannot start: checkpoint {checkpoint} holds no progress, but this stream already "
            f"committed micro-batches up to {last} (progress in {anchor.name}); starting over "
            "would read the topics again under batch ids the tables have seen",
            hint="restore the checkpoint, or use a new --checkpoint path (and new tables if "
                 "the topics must be read again)")

    def create(location: str, key: tuple[str, ...] = ()
               ) -> tuple[TableDefinition, TableDefinition]:
        # The table's --route-schema, else --schema; a table found without its dead-letter
        # table keeps its own columns (only the dead-letter table is made; `check` follows).
        # A keyed table (--mode upsert|cdc) is bucketed by its key's row columns, as one
        # table's stream makes it (--buckets).
        wanted = layouts.get(location, ("--schema", layout))[1]
        with Metastore.open(url) as store:
            found = store.find_table(location)
        if found is not None:
            wanted = StreamLayout(found.row_schema, (found.partition_columns or [None])[0],
                                  partition_expression)
        if wanted is None and registry_columns is not None:
            wanted = registry_columns(location)
        if wanted is None:
            raise TableNotFoundError(
                f"table {location!r} does not exist, and neither --schema nor a "
                "--route-schema of its routing key gives the columns to create it",
                table=location, hint="create the table first (`ingest create`), or give "
                                     "--route-schema KEY=DDL or --schema")
        by = key_bucket_columns(wanted, key)
        return ensure_tables(location, wanted, metastore_url=url,
                             storage_options=storage_options,
                             name=name_beside(anchor, location),
                             buckets=options.buckets if by else 0, bucketed_by=by,
                             allow_added_columns=evolve)

    def check(table: TableDefinition, dead: TableDefinition) -> None:
        # Refused at a table's first use, before that micro-batch's transaction opens.
        check_table(table)
        check_existing_table(dead, TableDefinition(dead.name, dead.location,
                                                   dead_letter_schema()))

    # Each partition's earliest offset, for the sink's data-loss check (asked once a
    # micro-batch was planned from the broker: a restart then is waited out).
    earliest = None if kerberos else LagProbe(connection, timeout_s=options.kafka_timeout_s,
                                                learns_topics=True, reached=True)
    sink = ManyTableSink(rules, anchor_ref, sink_id=sink_id, options=options.sink,
                         create=create, check=check,
                         partition_expression=partition_expression,
                         earliest_fn=None if earliest is None else earliest.earliest,
                         fail_on_data_loss=options.fail_on_data_loss == "true",
                         max_new_tables=options.max_new_tables_per_batch)
    selection = rules.selection
    frame = kafka_dataframe(spark, connection=connection, topic=list(selection.topics),
                            topic_pattern=selection.pattern,
                            starting_offsets=options.starting_offsets,
                            max_offsets_per_trigger=options.max_offsets_per_trigger,
                            fail_on_data_loss=False,  # the sink judges loss (as run_stream)
                            timeout_s=options.kafka_timeout_s, source=options.kafka_source,
                            pack_records_per_task=PACK_RECORDS_PER_TASK,
                            pack_into_tasks=spark.sparkContext.defaultParallelism)
    totals = ManyTotals()
    committed = dict(progress.offsets) if progress else {}
    views = ManyBatchViews(None if kerberos else TopicsLag(connection, timeout_s=5.0),
                           committed)
    maintenance = signals = metrics = operations = None
    try:
        if options.compact != "off" or options.clean != "off":
            maintenance = StreamMaintenance(compact=options.compact, clean=options.clean,
                                            interval_s=options.maintenance_interval_s)
            signals = TableMaintenanceSignals(maintenance, anchor_ref)
        watched = [anchor.name]
        if options.metrics_port is not None:
            metrics = StreamMetrics(
                anchor.name, committed=committed,
                last_commit_at=progress.last_commit_at if progress else None,
                lag_probe=None if kerberos else TopicsLag(connection,
                                                          timeout_s=options.kafka_timeout_s))
            metrics.hold(holders)
            if maintenance is not None:
                metrics.watch_maintenance(maintenance)
            metrics.watch_metastore(url, watched)
            metrics.serve(options.metrics_port, host=options.metrics_bind_host)
        by_topic = rules.field_path is None
        on_tombstone = options.sink.on_tombstone

        def write_batch(batch_df: Any, batch_id: int) -> None:
            if registry_columns is not None:
                registry_columns.seen(batch_df)
            sink(batch_df, batch_id)
            report = sink.reports[-1]
            totals.add(report)
            views.add(report)
            if signals is not None:
                try:  # off the data path: the micro-batch is committed (8.10)
                    signals.committed(report)
                except IngestError as e:
                    log.warning("Maintenance: cannot signal the tables of micro-batch %d "
                                "(the stream goes on): %s", batch_id, e)
            if metrics is not None:
                metrics.observe_many(report, on_tombstone=on_tombstone, by_topic=by_topic)
                new = [n for name in sorted(report.tables) if name not in watched
                       for n in (name, dead_letter_name(name))]
                if new:  # the open transactions and leases of every table written so far
                    watched.extend(new)
                    metrics.watch_metastore(url, watched)

        query_name = f"ingest-{anchor.name}"
        operations = StreamOperations.start(
            spark, sink, table=anchor.name, query_name=query_name,
            log_format=options.log_format, connection=connection,
            group=options.commit_offsets_to_group, committed=committed,
            timeout_s=options.kafka_timeout_s, metrics=metrics, reports=views)
        # Spark's progress then carries the batch's records and tombstones (observedMetrics).
        frame = frame.observe(OBSERVATION, *source_observations())
        writer = (frame.writeStream.foreachBatch(operations.wrap(write_batch))
                  .option("checkpointLocation", checkpoint).queryName(query_name))
        writer = (writer.trigger(availableNow=True) if available_now
                  else writer.trigger(processingTime=f"{interval_s:g} seconds"))
        started = time.monotonic()
        from pyspark.errors import StreamingQueryException

        if maintenance is not None:
            maintenance.start()
        try:
            query = writer.start()
        except BaseException:
            operations.close(wait=False)
            operations = None
            raise
        try:
            query.awaitTermination()
        except StreamingQueryException as e:
            if sink.failure is not None:
                raise sink.failure from e
            ours = error_in_traceback(str(e), context=f"The stream into {anchor.name} failed")
            if ours is not None:
                raise ours from e
            raise IngestError(f"The stream into {anchor.name} failed: {e}") from e
        finally:
            query.stop()
    finally:
        try:
            if operations is not None:  # the last batch lines, the group's last commit
                operations.close()
            if maintenance is not None:
                maintenance.stop()
        finally:
            sink.close()
            views.close()
            if earliest is not None:
                earliest.close()
            if metrics is not None:
                metrics.close()
    return ManyStreamSummary(anchor.name, totals.batches, totals.skipped, totals.rows,
                             totals.dead_letters + totals.unrouted, totals.files, totals.bytes,
                             time.monotonic() - started, (), tombstones=totals.tombstones,
                             tables=dict(totals.tables),
                             lag_by_topic=views.last_lag)


class _RegistryColumns:
    """The columns of a table created on first use from a `--schema-registry`: the Hive
    mapping (`avro_to_ddl`, as `ingest create --schema-from-avro`) of the latest schema of
    subject `<topic>-value` of the topic routed to it (routed by topic; of several, the first
    with such a subject, the micro-batch's own topics before others, then by name). The
    topic is one of the explicit routes, the listed topics, or the topics of the micro-batch
    being written (`seen`: a pattern's)."""

    def __init__(self, options: StreamOptions, rules: RoutingRules) -> None:
        from ingest.records import registry, registry_settings

        assert options.sink.schema_registry is not None
        self.partition_by = options.partition_by
        self.rules = rules
        self.client = registry(options.sink.schema_registry,
                               registry_settings(options.sink.schema_registry_options))
        self.topics: set[str] = set(rules.routes) | set(rules.selection.topics)
        self.batch_topics: set[str] = set()

    def seen(self, batch_df: Any) -> None:
        """Note the topics of a micro-batch (from its planned ranges; none known with a
        source that does not say)."""
        from ingest.spark.sink import planned_ranges

        ranges = planned_ranges(batch_df) or ()
        self.topics |= {r.topic for r in ranges}
        self.batch_topics = {r.topic for r in ranges if r.until_offset > r.from_offset}

    def __call__(self, location: str) -> StreamLayout:
        """Raises:
            TableNotFoundError: no topic known routes to `location`, the registry has no
                subject for it, or its schema has a field without a Hive type (the sink
                routes the table's keys nowhere with this reason).
            IngestError: the registry cannot be reached (the micro-batch fails).
        """
        from ingest.records import avro_to_ddl
        from ingest.spark.job import table_layout

        topics = sorted((t for t in self.topics
                         if isinstance(found := self.rules.table_of(t), Routed)
                         and normalize_location(found.location) == location),
                        key=lambda t: (t not in self.batch_topics, t))
        if not topics:
            raise TableNotFoundError(
                f"table {location!r} does not exist, and no topic known to route to it names "
                "a `<topic>-value` subject to create it from", table=location)
        missing: list[str] = []
        for topic in topics:
            subject = f"{topic}-value"
            try:
                schema_id, text = self.client.latest(subject)
            except ConfigError as e:  # no such subject: the next topic's, if any
                missing.append(e.message)
                continue
            try:
                ddl = avro_to_ddl(text, what=f"subject {subject!r} (schema id {schema_id})")
                return table_layout(ddl, self.partition_by)
            except ConfigError as e:
                raise TableNotFoundError(f"table {location!r} does not exist, and its columns "
                                         f"cannot come from the registry: {e.message}",
                                         table=location, hint=e.hint) from None
        raise TableNotFoundError(f"table {location!r} does not exist, and its columns cannot "
                                 f"come from the registry: {'; '.join(missing)}",
                                 table=location)


def _ends_of(connection: KafkaConnection, topics: set[str], *, listed: Sequence[str],
             timeout_s: float) -> Watermarks:
    """The (earliest, end) offsets of `topics` on the broker, asked together. A topic of a
    pattern that is gone has nothing left to read and is left out (then each is asked on its
    own, to tell which); a listed one was checked already."""
    from ingest.spark.job import check_kafka

    try:
        return check_kafka(connection, *sorted(topics), timeout_s=timeout_s)
    except ConfigError:
        pass
    out: Watermarks = {}
    for topic in sorted(topics):
        try:
            out.update(check_kafka(connection, topic, timeout_s=timeout_s))
        except ConfigError:
            if topic in listed:
                raise
            log.info("Topic %s, which the stream committed offsets of, is gone", topic)
    return out


def _written_tables(store: Metastore, holders: Mapping[str, str], rules: Any) -> list[str]:
    """The locations of the routed tables the stream has written, to repair at start: routed
    by topic, the tables holding the topics the anchor's progress names (`_holders`); the
    explicit routes' tables that exist. This grows with the tables the stream has touched,
    not with the metastore's tables, and costs no listing of transactions. (Routed by field,
    a template's tables keep no offsets, so they are not known here: docs/many-tables.md.)"""
    names = set(holders.values())
    out = {store.get_table(name).location for name in names}
    for location in rules.routes.values():
        table = store.find_table(location)
        if table is not None:
            out.add(table.location)
    return sorted(out)


def _holders(store: Metastore, offsets: Mapping[TopicPartitionKey, int], rules: Any
             ) -> dict[str, str]:
    """Which table holds each topic the stream committed, for the metrics' labels: routed by
    topic, the table whose own offset ranges name it (a routed table keeps its topics')."""
    if rules.field_path is not None:
        return {}
    out: dict[str, str] = {}
    for topic in sorted({t for t, _ in offsets}):
        found = rules.table_of(topic)
        location = getattr(found, "location", None)
        table = store.find_table(location) if location is not None else None
        if table is not None and any(r.topic == topic
                                     for _, r in store.offset_ranges(table.location)):
            out[topic] = table.name
    return out


__all__ = ["ManyStreamSummary", "ManyTotals", "check_many_options", "check_route_names",
           "ensure_anchor", "name_beside", "route_layouts", "run_many_stream"]
