"""The streaming job: Kafka topic -> AcidSink -> Hive ACID table, with checks before it starts.

`run_stream` checks the broker and topic, creates the table and its dead-letter table when
missing (or checks an existing table's schema), then runs a Structured Streaming query whose
foreachBatch is an `AcidSink` (followed, unless --compact and --clean are off, by a signal to
the maintenance thread, maintenance.py). `jobs/kafka_to_acid.py` and `ingest stream` call it
with a `StreamOptions` (options.py).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ingest.acid.format import parse_schema, to_ddl
from ingest.errors import ConfigError, IngestError, SchemaMismatchError
from ingest.io import storage
from ingest.kafka import KafkaConnection, LagProbe, Watermarks, check_not_behind
from ingest.spark.avro_columns import with_avro_columns
from ingest.spark.kafka import check_jvm_kafka, check_topics, kafka_dataframe
from ingest.spark.maintenance import StreamMaintenance
from ingest.spark.metrics import StreamMetrics, check_port
from ingest.spark.operations import StreamOperations
from ingest.spark.options import StreamOptions, check_evolve_types
from ingest.spark.progress import OBSERVATION, source_observations
from ingest.spark.sink import (
    DEAD_LETTER_DDL,
    AcidSink,
    BatchReport,
    check_keyed_stream,
    check_transaction_batches,
    dead_letter_location,
    dead_letter_name,
    dead_letter_schema,
    error_in_traceback,
    extends,
    same_columns,
)
from ingest.table import Table, open_table_root
from ingest.table.core import stream_progress
from ingest.table.write import create_table, default_table_name
from ingest.txn import (
    Metastore,
    MetastoreError,
    TableDefinition,
    TopicPartitionKey,
    backend_for,
    default_metastore_url,
    normalize_location,
    redact_url,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

_IDENT = re.compile(r"`?([A-Za-z_][A-Za-z0-9_]*)`?")
DEFAULT_PARTITION_COLUMN = "dt"


@dataclass(frozen=True)
class StreamLayout:
    """How `--schema` and `--partition-by` map onto the table.

    Attributes:
        row_schema: columns stored in the ORC files.
        partition_column: the partition column, or None.
        partition_expression: Spark SQL computing it, or None when it is a JSON field.
    """

    row_schema: pa.Schema
    partition_column: str | None
    partition_expression: str | None


def table_layout(schema_ddl: str, partition_by: str | None) -> StreamLayout:
    """Split `--schema` and `--partition-by` into row columns and the partition column.

    "dt" (a bare name) partitions by that JSON field, taken out of the row columns as Hive
    keeps partition values in directory names only; anything else is a Spark SQL expression
    over the row columns whose value goes to a `dt` column (e.g. "date_format(ts, 'yyyy-MM-dd')").

    Raises:
        ConfigError: the schema does not parse, or the expression's column clashes.
    """
    schema = parse_schema(schema_ddl)
    column, expression = stream_partitioning(partition_by)
    if column is None:
        return StreamLayout(schema, None, None)
    if expression is None:
        kept = [f for f in schema if f.name.lower() != column.lower()]
        return StreamLayout(pa.schema(kept, metadata=schema.metadata), column, None)
    if DEFAULT_PARTITION_COLUMN in [n.lower() for n in schema.names]:
        raise ConfigError(
            f"Cannot partition by {expression!r}: its value goes to column "
            f"'{DEFAULT_PARTITION_COLUMN}', which is also in --schema",
            hint=f"use --partition-by {DEFAULT_PARTITION_COLUMN} to partition by that column")
    return StreamLayout(schema, DEFAULT_PARTITION_COLUMN, expression)


def stream_partitioning(partition_by: str | None) -> tuple[str | None, str | None]:
    """The partition column and Spark SQL expression `--partition-by` gives any table (the
    split `table_layout` makes): (None, None) without one, (name, None) for a bare field
    name, ("dt", the expression) otherwise.

    Raises:
        ConfigError: the expression's brackets or quotes do not pair up.
    """
    if partition_by is None or not partition_by.strip():
        return None, None
    text = partition_by.strip()
    _check_expression_shape(text)
    bare = _IDENT.fullmatch(text)
    return (bare.group(1), None) if bare else (DEFAULT_PARTITION_COLUMN, text)


def _check_expression_shape(text: str) -> None:
    """Refuse unbalanced brackets or quotes at once (Spark's parser, later, gives the rest).

    Raises:
        ConfigError: naming the first character that does not pair up.
    """
    closing = {")": "(", "]": "[", "}": "{"}
    stack: list[tuple[str, int]] = []
    quote: tuple[str, int] | None = None
    for i, ch in enumerate(text):
        if quote is not None:
            if ch == quote[0]:
                quote = None
        elif ch in "'\"`":
            quote = (ch, i)
        elif ch in "([{":
            stack.append((ch, i))
        elif ch in closing:
            if not stack or stack[-1][0] != closing[ch]:
                raise _bad_expression(text, f"{ch!r} at position {i + 1} closes nothing")
            stack.pop()
    if quote is not None:
        raise _bad_expression(text, f"the quote {quote[0]} at position {quote[1] + 1} is not "
                                    "closed")
    if stack:
        raise _bad_expression(text, f"{stack[-1][0]!r} at position {stack[-1][1] + 1} is not "
                                    "closed")


def _bad_expression(text: str, why: str) -> ConfigError:
    return ConfigError(
        f"Cannot use --partition-by {text!r}: it is not a Spark SQL expression: {why}",
        hint="give a JSON field name (e.g. dt) or an expression over the --schema columns, "
             "e.g. \"date_format(ts, 'yyyy-MM-dd')\"")


def check_partition_expression(spark: SparkSession, layout: StreamLayout) -> None:
    """Parse and analyse the --partition-by expression against the schema, writing nothing.

    Raises:
        ConfigError: Spark cannot parse it, or it names a column that is not in --schema.
    """
    text = layout.partition_expression
    if text is None:
        return
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    empty = spark.createDataFrame([], from_arrow_schema(layout.row_schema))
    try:
        empty.select(F.expr(text).cast("string")).schema  # noqa: B018 (analysis is the check)
    except AnalysisException as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _bad_expression(text, first) from None


def check_sink_progress(metastore_url: str) -> None:
    """Refuse a metastore that cannot commit a micro-batch's offsets with its data, before
    any table or checkpoint is created.

    Raises:
        ConfigError: the metastore's backend keeps no sink progress
            (`Metastore.keeps_sink_progress`; every built-in one does), or the URL is not a
            metastore URL.
    """
    if not backend_for(metastore_url).keeps_sink_progress:
        raise ConfigError(
            f"Cannot stream with metastore {redact_url(metastore_url)}: its backend cannot "
            "commit a micro-batch's Kafka offsets with its data, which exactly once needs",
            hint="stream with the default metastore, a postgresql:// or a thrift:// (Hive "
            "Metastore) one")


def check_kafka(connection: KafkaConnection, *topics: str, timeout_s: float = 30.0
                ) -> Watermarks:
    """Check the broker answers this connection and the topics exist and may be read (all
    of them through one client); returns each partition's (earliest, end) offsets. A
    refused connection (authentication, TLS, an ACL) or an unreachable broker fails within
    seconds, naming the cause. A Kerberized Kafka is not checked (no offsets returned): only
    Spark's source can reach it (`check_kerberos_kafka`).

    Raises:
        ConfigError: a topic does not exist.
        KafkaConnectError: the broker refuses this client or does not answer.
        IngestError: the broker cannot be reached within timeout_s.
    """
    if connection.kerberos:
        return {}
    return check_topics(connection, topics, timeout_s=timeout_s)


def check_kerberos_kafka(connection: KafkaConnection) -> bool:
    """Whether the stream reads a Kerberized Kafka (GSSAPI), which only Spark's source can:
    the driver's Python clients (the topic check, the lag, the data-loss check's earliest
    offsets, the metrics' lag) are then left out, said once in the log.

    Kerberos with the Python source or --commit-offsets-to-group is refused when the options
    are checked (`StreamOptions.validate`).
    """
    if not connection.kerberos:
        return False
    log.warning("Kafka uses Kerberos (GSSAPI): only Spark's Kafka source talks to it, so this "
                "stream does not check the topic before starting, does not log or export the "
                "lag, and does not compare the committed offsets with the topic's earliest "
                "(the Python Kafka client has no Kerberos)")
    return True


def keyed_table(location: str, layout: StreamLayout, options: StreamOptions
                ) -> TableDefinition:
    """The table a keyed stream creates when missing: bucketed by the key's row columns."""
    by = key_bucket_columns(layout, options.sink.key_columns)
    partitions = (layout.partition_column,) if layout.partition_column else ()
    return TableDefinition(default_table_name(location), normalize_location(location),
                           layout.row_schema, partition_columns=partitions,
                           bucket_count=options.buckets if by else 0, bucket_columns=by)


def key_bucket_columns(layout: StreamLayout, key: Sequence[str]) -> tuple[str, ...]:
    """The row columns of `key` (a partition column is not one): what a keyed stream's new
    table is bucketed by."""
    names = {c.lower() for c in key}
    return tuple(f.name for f in layout.row_schema if f.name.lower() in names)


def check_stream_key(options: StreamOptions, layout: StreamLayout,
                     metastore_url: str) -> None:
    """Refuse a keyed stream (--mode upsert|cdc) whose keys could not be found, before Kafka
    or Spark starts and before anything is written: the existing table, or the one the
    stream would create, must be bucketed by the key with its partition columns in it.

    Raises:
        ConfigError: see `ingest.spark.sink.check_keyed_stream`.
    """
    if not options.sink.keyed:
        return
    table = None
    try:
        with Metastore.open(metastore_url, read_only=True) as store:
            table = store.find_table(options.table_root)
    except MetastoreError:  # no metastore yet: the stream creates it and the table
        table = None
    if table is None:
        table = keyed_table(options.table_root, layout, options)
    check_keyed_stream(table, options.sink, layout.partition_expression)


def ensure_tables(location: str, layout: StreamLayout, *,
                  metastore_url: str | None = None,
                  storage_options: Mapping[str, Any] | None = None,
                  buckets: int = 0, bucketed_by: tuple[str, ...] = (),
                  allow_added_columns: bool = False, name: str | None = None,
                  ) -> tuple[TableDefinition, TableDefinition]:
    """Create the table and its dead-letter table when missing (with `storage_options`, the
    tables' fsspec options; `buckets` buckets by `bucketed_by`, for a keyed stream; `name`,
    `db.table`, else `default_table_name(location)`); check them when present
    (`allow_added_columns`: the table may have more columns after the given ones, which
    --on-new-field evolve added).

    Raises:
        SchemaMismatchError: an existing table's columns or partitioning differ.
        TableExistsError: another table already uses the name.
        MetastoreError: the metastore failed.
    """
    url = metastore_url or default_metastore_url(location)
    partitions = (layout.partition_column,) if layout.partition_column else ()
    with Metastore.open(url) as store:
        wanted = TableDefinition(name or default_table_name(location), location,
                                 layout.row_schema,
                                 partition_columns=partitions)
        table = store.find_table(location)
        if table is None:
            table = create_table(location, to_ddl(layout.row_schema), name=wanted.name,
                                 partitioned_by=partitions, buckets=buckets,
                                 bucketed_by=bucketed_by, metastore=store,
                                 storage_options=storage_options)
            log.info("Created table %s at %s (%s)%s", table.name, table.location,
                     to_ddl(table.row_schema),
                     f" partitioned by {partitions[0]}" if partitions else "")
        else:
            check_existing_table(table, wanted, allow_added_columns=allow_added_columns)
        dl_location = dead_letter_location(table.location)
        dead = store.find_table(dl_location)
        if dead is None:
            dead = create_table(dl_location, DEAD_LETTER_DDL, name=dead_letter_name(table.name),
                                metastore=store, storage_options=storage_options)
        else:
            check_existing_table(dead, TableDefinition(dead.name, dl_location,
                                                       dead_letter_schema()))
    return table, dead


def check_existing_table(table: TableDefinition, wanted: TableDefinition, *,
                         allow_added_columns: bool = False, given_by: str = "--schema") -> None:
    """Refuse an existing table whose columns or partitioning are not `wanted`'s (the
    stream's --schema, or the flag `given_by` names, and --partition-by).

    Raises:
        SchemaMismatchError: naming the table and both sides of the difference.
    """
    expected = wanted.row_schema
    if not (same_columns(table.row_schema, expected)
            or (allow_added_columns and extends(table.row_schema, expected))):
        raise SchemaMismatchError(
            f"Cannot stream into table {table.name} at {table.location}: it has columns "
            f"({to_ddl(table.row_schema)}) but {given_by} gives ({to_ddl(expected)})",
            hint="pass the table's own schema, or write to a new --table location")
    if tuple(table.partition_columns) != tuple(wanted.partition_columns):
        raise SchemaMismatchError(
            f"Cannot stream into table {table.name} at {table.location}: it is partitioned by "
            f"{list(table.partition_columns)} but --partition-by gives "
            f"{list(wanted.partition_columns)}",
            hint="use the table's partitioning, or write to a new --table location")


def check_ends_not_behind(marks: Watermarks, committed: Mapping[TopicPartitionKey, int], *,
                          servers: str, known_as: str) -> None:
    """Refuse to start when a partition's end on the broker is below the offset the stream
    committed: its topic was deleted and created again while the stream was down. Checked
    before Spark plans from its checkpoint: Spark's own source, told failOnDataLoss false,
    would skip a re-created topic's records below the old end without a word.

    Raises:
        IngestError: naming the partition, both offsets and the re-created topic.
    """
    check_not_behind({tp: end for tp, (_, end) in marks.items()}, committed, servers=servers,
                     what="now ends at", known_as=known_as)


def repair_torn_files(table: Table) -> None:
    """Repair what dead writers left in a table (torn stripes, stale side files: bucket files
    cut back to their last complete footer, `Table.recover`) before a stream adds to it;
    files of transactions still open belong to live writers and are left alone.

    Raises:
        MetastoreError: the metastore failed.
    """
    recovery = table.recover()
    for repaired in recovery.report.changed:
        log.warning("recovered %s: %s (%s -> %s bytes)", repaired.path, repaired.action,
                    repaired.old_length, repaired.new_length)


def _checkpoint_is_new(checkpoint: str, storage_options: Mapping[str, Any]) -> bool:
    fs, path = storage.url_to_fs(checkpoint, storage_options)
    offsets = f"{path.rstrip('/')}/offsets"
    return not fs.exists(offsets) or not [p for p in fs.ls(offsets, detail=False)
                                          if not p.rsplit("/", 1)[-1].startswith(".")]


class _KafkaLag:
    """Records between a batch's end offsets and each partition's readable end (for the log
    line), and each partition's earliest offset (for the sink's data-loss check), asked
    through `LagProbe`s: one with a short timeout for the informational lag, one with the
    stream's Kafka timeout for the check."""

    def __init__(self, connection: KafkaConnection, *, timeout_s: float = 5.0,
                 ends_timeout_s: float = 30.0) -> None:
        # The stream's topic, learnt from the first micro-batch's offsets.
        self._probe = LagProbe(connection, timeout_s=timeout_s, learns_topics=True)
        # Asked only once a micro-batch was planned from the broker: a restart then is
        # waited out, as the source's own look-ups do.
        self._ends = LagProbe(connection, timeout_s=ends_timeout_s, learns_topics=True,
                              reached=True)

    def __call__(self, until: Mapping[tuple[str, int], int]) -> int | None:
        try:
            return sum(p.lag_records for p in self._probe.lag(until)
                       if (p.topic, p.partition) in until)
        except IngestError:  # the lag is informational; the batch is already committed
            return None

    def earliest(self, tps: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Each partition's earliest offset on the broker, for the sink's data-loss check
        (unlike the lag, a failure here fails the micro-batch: loss must not go unseen).

        Raises:
            IngestError: the broker cannot be reached in time.
        """
        return self._ends.earliest(tps)

    def close(self) -> None:
        self._probe.close()
        self._ends.close()


@dataclass(frozen=True)
class StreamSummary:
    """What a finished (availableNow or stopped) run did: totals over every micro-batch,
    and `reports`, the reports of the last ones (the sink keeps RECENT_REPORTS of them)."""

    table: str
    batches: int
    skipped: int
    rows: int
    dead_letters: int
    files: int
    bytes: int
    seconds: float
    reports: tuple[BatchReport, ...]
    tombstones: int = 0

    def line(self) -> str:
        return (f"Stream into {self.table} finished: {self.batches} micro-batches "
                f"({self.skipped} replays skipped), {self.rows:,} rows, {self.dead_letters:,} "
                f"dead letters, {self.tombstones:,} tombstones, {self.files} files, "
                f"{self.bytes:,} bytes in {self.seconds:.1f} s")


class RunningStream:
    """A started query and its sink; `stop()` stops both (unused write ids are aborted)."""

    def __init__(self, query: StreamingQuery, sink: AcidSink, lag: _KafkaLag, table: str,
                 started: float, maintenance: StreamMaintenance | None = None,
                 metrics: StreamMetrics | None = None,
                 operations: StreamOperations | None = None) -> None:
        self.query, self.sink, self._lag, self.table, self._started = query, sink, lag, table, \
            started
        self.maintenance = maintenance
        self.metrics = metrics
        self.operations = operations

    def await_termination(self, timeout_s: float | None = None) -> bool:
        """Wait for the query to end; re-raises the sink's own error (e.g. BadRecordError)."""
        from pyspark.errors import StreamingQueryException

        try:
            if timeout_s is None:
                self.query.awaitTermination()
                return True
            return bool(self.query.awaitTermination(int(max(1, round(timeout_s)))))
        except StreamingQueryException as e:
            if self.sink.failure is not None:
                raise self.sink.failure from e
            # An error of ours in the ingest-kafka source (a re-created topic, a refused
            # connection) comes back inside Spark's trace: raised as itself.
            ours = error_in_traceback(str(e), context=f"The stream into {self.table} failed")
            if ours is not None:
                raise ours from e
            raise IngestError(f"The stream into {self.table} failed: {e}") from e

    def stop(self) -> StreamSummary:
        try:
            self.query.stop()
        finally:
            try:
                if self.operations is not None:  # the last batch lines, the group's commit
                    self.operations.close()
                if self.maintenance is not None:
                    self.maintenance.stop()
            finally:
                self.sink.close()
                self._lag.close()
                if self.metrics is not None:
                    self.metrics.close()
        return self.summary()

    def summary(self) -> StreamSummary:
        t = self.sink.totals
        return StreamSummary(self.table, t.batches, t.skipped, t.rows, t.dead_letters, t.files,
                             t.bytes, time.monotonic() - self._started, tuple(self.sink.reports),
                             t.tombstones)


def _then_observe(batch_fn: Any, sink: AcidSink, metrics: StreamMetrics) -> Any:
    """The foreachBatch function counting each micro-batch's report into the metrics."""

    def write_batch(batch_df: Any, batch_id: int) -> None:
        batch_fn(batch_df, batch_id)
        metrics.observe(sink.reports[-1])

    return write_batch


def _then_signal(sink: AcidSink, maintenance: StreamMaintenance) -> Any:
    """The foreachBatch function: the sink's commit, then a signal to the maintenance thread
    (only the signal runs on the commit path; docs/invariants.md, 8.10). The dead-letter
    table, written in the same transaction, is maintained alike: its partition is compacted
    when the batch held dead letters, and it is cleaned on every run."""

    def write_batch(batch_df: Any, batch_id: int) -> None:
        sink(batch_df, batch_id)
        report = sink.reports[-1]
        if not report.skipped:
            maintenance.committed(sink.table_ref, report.partition_dirs)
            maintenance.committed(sink.dead_letter_ref, report.dead_letter_dirs)

    return write_batch


def run_stream(
    spark: SparkSession,
    options: StreamOptions | None = None,
    *,
    metastore_url: str | None = None,
    wait: bool = True,
    **flags: Any,
) -> StreamSummary | RunningStream:
    """Stream a Kafka topic into an ACID table, one transaction per micro-batch.

    Args:
        spark: the session (its Python workers must run this interpreter).
        options: what to read, where to write and how (see StreamOptions); the broker and
            topic are checked before anything is written, and the table is created with
            `options.schema_ddl` when missing (with Avro values and no `schema_ddl`: the
            writers' schema as Hive columns, `with_avro_columns`).
        metastore_url: overrides `options.metastore`; default: beside the table.
        wait: block until the query ends and return a StreamSummary (an interval trigger
            runs until stopped); False returns the RunningStream at once.
        **flags: instead of `options`: its fields by name, the sink's included
            (`StreamOptions.from_flags`), e.g. `topic="events", flush_rows=1000`.

    Raises:
        ConfigError: bad options, or the topic does not exist.
        IngestError: the broker cannot be reached.
        SchemaMismatchError: an existing table's schema differs from `schema_ddl`.
        BadRecordError: on_bad_record="fail" and a record did not parse.
        TypeError: both `options` and `flags`, or a flag that is not an option.
    """
    if options is None:
        options = StreamOptions.from_flags(flags)
    elif flags:
        raise TypeError(f"run_stream takes options or flags, not both: {sorted(flags)}")
    if options.many_tables:  # a table per route: many_job.py (which builds on this module)
        raise ConfigError("run_stream runs a stream of one table; a stream of several tables "
                          "runs with run_many_stream (ingest.spark)")
    options = with_avro_columns(options)  # no --schema with Avro values: the writers' schema
    assert options.schema_ddl is not None
    interval_s, available_now = options.schedule
    table = options.table_root
    layout = table_layout(options.schema_ddl, options.partition_by)
    # The tables' (and the checkpoint's) storage options, passed as a value to everything
    # that touches a file: the sink ships them to its tasks (docs/architecture.md §4).
    storage_options = dict(options.storage)
    for location in (table, options.checkpoint):
        storage.check_url(location)
    # Every option is checked before anything is created (docs/invariants.md, 6).
    check_partition_expression(spark, layout)
    url = metastore_url or options.metastore or default_metastore_url(table)
    check_sink_progress(url)
    check_transaction_batches(table, url, options.sink.txns_per_delta)
    check_stream_key(options, layout, url)
    connection = options.connection
    kerberos = check_kerberos_kafka(connection)
    marks = check_kafka(connection, options.topic_name, timeout_s=options.kafka_timeout_s)
    if options.kafka_source == "jvm":
        check_jvm_kafka(spark)  # before any table is created
    if options.metrics_port is not None:
        check_port(options.metrics_port, host=options.metrics_bind_host)
    keyed = keyed_table(table, layout, options) if options.sink.keyed else None
    partitions = (layout.partition_column,) if layout.partition_column else ()
    check_evolve_types(options.sink.evolve_type_map, layout.row_schema, partitions,
                       table=table)
    target, dead_table = ensure_tables(table, layout, metastore_url=url,
                                       storage_options=storage_options,
                                       buckets=keyed.bucket_count if keyed else 0,
                                       bucketed_by=keyed.bucket_columns if keyed else (),
                                       allow_added_columns=(
                                           options.sink.on_new_field == "evolve"))
    # Again with the columns earlier runs added (`--on-new-field evolve`).
    check_evolve_types(options.sink.evolve_type_map, target.row_schema,
                       target.partition_columns, table=target.name)
    checkpoint = options.checkpoint
    sink_id = f"{target.name}@{normalize_location(checkpoint)}"
    with Metastore.open(url) as store:
        last = store.last_committed_batch(sink_id, table=target.name)
        progress = stream_progress(store, target.name)
        # Before Spark plans from its checkpoint: Spark's own source, told failOnDataLoss
        # false, would skip a re-created topic's records below the old end without a word.
        check_ends_not_behind(marks, progress.offsets if progress else {},
                              servers=connection.bootstrap_servers,
                              known_as=f"table {target.name} already committed")
        # The stream's table, resolved once here: the sink and the maintenance thread get
        # it as a `TableRef` (its metastore and storage options), never a search again.
        opened = open_table_root(target.location, store, storage_options)
        repair_torn_files(opened)
    if last is not None and _checkpoint_is_new(checkpoint, storage_options):
        raise ConfigError(
            f"Cannot start: checkpoint {checkpoint} holds no progress, but this stream already "
            f"committed micro-batches up to {last} into {target.name}; starting over would "
            "read the topic again under batch ids the table has seen",
            hint="restore the checkpoint, or use a new --checkpoint path (and a new table "
                 "if the topic must be read again)")
    lag = _KafkaLag(connection, ends_timeout_s=options.kafka_timeout_s)
    sink = AcidSink(opened.ref, sink_id=sink_id, options=options.sink,
                    row_schema=layout.row_schema, partition_columns=target.partition_columns,
                    partition_expression=layout.partition_expression,
                    lag_fn=None if kerberos else lag,
                    earliest_fn=None if kerberos else lag.earliest,
                    fail_on_data_loss=options.fail_on_data_loss == "true")
    frame = kafka_dataframe(spark, connection=connection,
                            topic=options.topic_name, starting_offsets=options.starting_offsets,
                            max_offsets_per_trigger=options.max_offsets_per_trigger,
                            # The sink judges loss, for both sources alike: every lost range
                            # named before anything is written, or counted and skipped.
                            fail_on_data_loss=False,
                            timeout_s=options.kafka_timeout_s, source=options.kafka_source)
    # Spark's progress then carries the batch's records and tombstones (observedMetrics).
    frame = frame.observe(OBSERVATION, *source_observations())
    maintenance = None
    batch_fn: Any = sink
    if options.compact != "off" or options.clean != "off":
        maintenance = StreamMaintenance(compact=options.compact, clean=options.clean,
                                        interval_s=options.maintenance_interval_s)
        batch_fn = _then_signal(sink, maintenance)
    metrics = None
    if options.metrics_port is not None:
        metrics = StreamMetrics(
            target.name, committed=progress.offsets if progress else None,
            last_commit_at=progress.last_commit_at if progress else None,
            lag_probe=None if kerberos else LagProbe(connection, [options.topic_name],
                                                     timeout_s=options.kafka_timeout_s))
        batch_fn = _then_observe(batch_fn, sink, metrics)
        if maintenance is not None:
            metrics.watch_maintenance(maintenance)
        metrics.watch_metastore(url, [target.name, dead_table.name])
        metrics.serve(options.metrics_port, host=options.metrics_bind_host)
    query_name = f"ingest-{target.name}"
    operations = StreamOperations.start(
        spark, sink, table=target.name, query_name=query_name, log_format=options.log_format,
        connection=connection, group=options.commit_offsets_to_group,
        committed=progress.offsets if progress else None, timeout_s=options.kafka_timeout_s,
        metrics=metrics)
    batch_fn = operations.wrap(batch_fn)
    if maintenance is not None:
        maintenance.start()
    writer = (frame.writeStream.foreachBatch(batch_fn).option("checkpointLocation", checkpoint)
              .queryName(query_name))
    writer = (writer.trigger(availableNow=True) if available_now
              else writer.trigger(processingTime=f"{interval_s:g} seconds"))
    started = time.monotonic()
    try:
        query = writer.start()
    except BaseException:
        operations.close(wait=False)
        if maintenance is not None:
            maintenance.stop()
        if metrics is not None:
            metrics.close()
        raise
    running = RunningStream(query, sink, lag, target.name, started, maintenance, metrics,
                            operations)
    if not wait:
        return running
    try:
        running.await_termination()
    finally:
        summary = running.stop()
    return summary


__all__ = [
    "RunningStream",
    "StreamSummary",
    "StreamLayout",
    "check_ends_not_behind",
    "check_existing_table",
    "check_kafka",
    "check_partition_expression",
    "check_sink_progress",
    "check_stream_key",
    "ensure_tables",
    "key_bucket_columns",
    "keyed_table",
    "repair_torn_files",
    "run_stream",
    "stream_partitioning",
    "table_layout",
]
