"""A Kafka source for Structured Streaming, written with Spark's Python Data Source API.

Short name "ingest-kafka"; the columns and the main options are those of Spark's own JVM "kafka"
source (KafkaSourceProvider), read with confluent-kafka. Offsets are a JSON dict
topic -> partition -> next offset and live in Spark's checkpoint; nothing is committed to Kafka.
It knows Spark's reader protocol, not ORC or ACID; the confluent-kafka calls are in
`ingest.kafka.read` (metadata, end offsets) and `ingest.kafka.ranges` (reading a task's
ranges), the options and offsets in `ingest.kafka.options`.

Records of aborted transactions are never read and an open transaction's records only once it
commits: the source reads `read_committed` unless `kafka.isolation.level` says otherwise, and
plans each micro-batch up to what such a reader can see (the last stable offset).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ingest.errors import ConfigError, IngestError
from ingest.kafka import (
    ARROW_SCHEMA,
    DEFAULT_STARTING_OFFSETS,
    DEFAULT_TIMEOUT_MS,
    KafkaClient,
    KafkaConnection,
    KafkaSourceOptions,
    Offsets,
    Watermarks,
    check_not_behind,
    describe,
    jvm_pattern,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    read_range,
    read_ranges,
)
from ingest.txn import OffsetRange

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

SOURCE_NAME = "ingest-kafka"
JVM_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"

SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
    StructField("headers", ArrayType(StructType([
        StructField("key", StringType()), StructField("value", BinaryType()),
    ]))),
])


class KafkaInputPartition(InputPartition):
    """Read offsets [from_offset, until_offset) of one Kafka partition."""

    def __init__(self, topic: str, partition: int, from_offset: int, until_offset: int) -> None:
        super().__init__((topic, partition, from_offset, until_offset))
        self.topic, self.partition = topic, partition
        self.from_offset, self.until_offset = from_offset, until_offset

    @property
    def offsets(self) -> OffsetRange:
        return OffsetRange(self.topic, self.partition, self.from_offset, self.until_offset)


class PackedInputPartition(InputPartition):
    """Read several small offset ranges in one task, by one consumer (`read_ranges`)."""

    def __init__(self, ranges: Sequence[OffsetRange]) -> None:
        super().__init__(tuple(ranges))
        self.ranges = tuple(ranges)


def pack_ranges(ranges: Sequence[OffsetRange], records: int) -> list[list[OffsetRange]]:
    """`ranges` in tasks: each range of `records` or more alone, the smaller ones packed in
    order into tasks of at most `records` records (0: every range alone)."""
    tasks: list[list[OffsetRange]] = []
    small: list[OffsetRange] = []
    held = 0
    for r in ranges:
        size = r.until_offset - r.from_offset
        if size >= records:
            tasks.append([r])
            continue
        if small and held + size > records:
            tasks.append(small)
            small, held = [], 0
        small.append(r)
        held += size
    if small:
        tasks.append(small)
    return tasks


def pack_limit(ranges: Sequence[OffsetRange], records: int, tasks: int) -> int:
    """The most records a packed task of this micro-batch holds: `records`, or more when
    the micro-batch's ranges would then fill more than `tasks` tasks (0: no such bound), so
    a large micro-batch of small topics is read by about as many tasks as there are cores."""
    if tasks <= 0:
        return records
    total = sum(r.until_offset - r.from_offset for r in ranges)
    return max(records, -(-total // tasks))


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from Kafka offsets (driver) and reads offset ranges (executors)."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self.options = options
        self._client: KafkaClient | None = None
        self._target: Offsets | None = None  # Trigger.AvailableNow: never plan past this
        self._latest: Offsets | None = None
        # The end latestOffset last returned and the log start offsets it fetched, for
        # partitions() to plan that micro-batch from without asking the broker again.
        self._planned: tuple[Offsets, Offsets] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None  # a librdkafka handle cannot travel to the executors
        state["_planned"] = None  # the driver's alone
        return state

    @property
    def client(self) -> KafkaClient:
        if self._client is None:
            self._client = KafkaClient(self.options)
        return self._client

    def _fetch_latest(self) -> tuple[Offsets, Offsets]:
        tps = self.client.partitions()
        marks = self.client.watermarks(tps)
        return {tp: m[0] for tp, m in marks.items()}, {tp: m[1] for tp, m in marks.items()}

    def initialOffset(self) -> dict[str, Any]:
        earliest, latest = self._fetch_latest()
        starting = self.options.starting_offsets
        if starting == "earliest":
            return offsets_to_json(earliest)
        if starting == "latest":
            return offsets_to_json(latest)
        assert isinstance(starting, dict)
        missing = sorted(set(latest) - set(starting))
        if missing:
            raise ConfigError(
                f"Option 'startingOffsets' must give every partition of the subscribed topics; "
                f"missing {[describe(tp) for tp in missing]}.",
                hint="use -2 for earliest and -1 for latest")
        return offsets_to_json({tp: earliest[tp] if o == -2 else latest[tp] if o == -1 else o
                                for tp, o in starting.items() if tp in latest})

    def prepareForTriggerAvailableNow(self) -> None:
        _, self._target = self._fetch_latest()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_offsets_per_trigger)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start)
        earliest, latest = self._fetch_latest()
        self._latest = dict(latest)
        if self._target is not None:
            latest = {tp: min(o, self._target[tp]) for tp, o in latest.items()
                      if tp in self._target}
        # A partition added since the last batch is read from its earliest offset, as Spark does.
        begin_all = {tp: begin.get(tp, earliest.get(tp, 0)) for tp in latest}
        check_not_behind(latest, begin_all, servers=self.options.bootstrap_servers,
                         what="now ends at", known_as="this stream already read")
        end: Offsets = dict(latest)
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin_all, end, limit.max_rows)
        elif not isinstance(limit, ReadAllAvailable):
            raise IngestError(f"The ingest-kafka source does not support read limit {limit!r}.")
        for tp, offset in begin.items():
            end.setdefault(tp, offset)  # keep partitions of deleted topics in the checkpoint
        self._planned = (dict(end), earliest)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        begin, until = offsets_from_json(start), offsets_from_json(end)
        ranges = {tp: (begin.get(tp), u) for tp, u in until.items() if begin.get(tp) != u}
        if not ranges:
            return []
        lows = self._log_starts(until, sorted(ranges))
        planned: list[OffsetRange] = []
        for (topic, partition), (from_offset, until_offset) in sorted(ranges.items()):
            low = lows[(topic, partition)]
            if from_offset is None:
                from_offset = low
            elif from_offset < low:
                self._data_loss(f"partition {topic}-{partition}: offsets [{from_offset}, "
                                f"{min(low, until_offset)}) were planned but the earliest "
                                f"available offset is {low} (removed by retention?)")
                from_offset = low
            if from_offset < until_offset:
                planned.append(OffsetRange(topic, partition, from_offset, until_offset))
        if self.options.pack_records <= 0:
            return [KafkaInputPartition(r.topic, r.partition, r.from_offset, r.until_offset)
                    for r in planned]
        tasks = pack_ranges(planned, pack_limit(planned, self.options.pack_records,
                                                self.options.pack_tasks))
        return [PackedInputPartition(t) if len(t) > 1 else KafkaInputPartition(
            t[0].topic, t[0].partition, t[0].from_offset, t[0].until_offset) for t in tasks]

    def _log_starts(self, end: Offsets, tps: Sequence[tuple[str, int]]) -> Offsets:
        """The partitions' log start offsets: those latestOffset fetched when it planned this
        end (milliseconds ago: retention that moves a log start since is met by the read,
        out of range, and judged by failOnDataLoss), else the broker's now (a micro-batch
        planned before a restart, replayed from the checkpoint)."""
        planned, self._planned = self._planned, None
        if planned is not None and planned[0] == end and all(tp in planned[1] for tp in tps):
            return planned[1]
        return self.client.log_starts(tps)

    def _data_loss(self, what: str) -> None:
        if self.options.fail_on_data_loss:
            raise IngestError(
                f"Kafka data loss on {self.options.bootstrap_servers}: {what}.",
                hint="to go on without the lost records, restart with --fail-on-data-loss "
                     "false (option failOnDataLoss=false)")
        log.warning("Kafka data loss on %s, skipping: %s (failOnDataLoss=false)",
                    self.options.bootstrap_servers, what)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, PackedInputPartition):
            return read_ranges(self.options, partition.ranges)
        assert isinstance(partition, KafkaInputPartition)
        return read_range(self.options, partition.offsets)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in a Kafka consumer group."""

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class KafkaDataSource(DataSource):
    """The "ingest-kafka" streaming source: `spark.readStream.format("ingest-kafka")`."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return SCHEMA

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        return KafkaStreamReader(KafkaSourceOptions.parse(self.options))


def check_topics(connection: KafkaConnection, topics: Sequence[str], *, timeout_s: float
                 ) -> Watermarks:
    """Check the broker answers this connection and the topics exist and may be read;
    returns each partition's (earliest, end) offsets, the end as a read_committed reader
    sees it. One client asks for all the topics together (a stream of fifty topics starts
    with one connection, not fifty). Fails within seconds on what no retry mends
    (authentication, TLS, an ACL) and on an unreachable broker (ingest.kafka.clients).

    Raises:
        ConfigError: a topic does not exist, or timeout_s is not a positive number of ms.
        KafkaConnectError: the broker refuses this client or does not answer.
        IngestError: the broker cannot be reached within timeout_s.
    """
    if not topics:
        return {}
    options = KafkaSourceOptions.for_lookups(connection, topics, timeout_s=timeout_s)
    client = KafkaClient(options)
    try:
        return client.watermarks(client.partitions())  # a fetch: READ, as the stream needs
    finally:
        client.close()


def register_kafka_source(spark: SparkSession) -> None:
    """Register the "ingest-kafka" source with this session (idempotent)."""
    spark.dataSource.register(KafkaDataSource)


def jvm_kafka_available(spark: SparkSession) -> bool:
    """Whether Spark's own "kafka" source (spark-sql-kafka-0-10) is on the driver's classpath."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: no py4j gateway to ask
        return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(JVM_PROVIDER, False, loader)
    except Exception:  # py4j raises Py4JJavaError(ClassNotFoundException); nothing else to learn
        return False
    return True


def check_jvm_kafka(spark: SparkSession) -> None:
    """Check that Spark's own Kafka source can be used by this session.

    Raises:
        ConfigError: spark-sql-kafka-0-10 is not on the driver's classpath.
    """
    if jvm_kafka_available(spark):
        return
    import pyspark

    package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    raise ConfigError(
        f"--kafka-source jvm: Spark's kafka source ({JVM_PROVIDER}) is not on the classpath "
        "of this Spark driver",
        hint=f"spark-submit --packages {package} (or --jars with it, kafka-clients and "
             f"commons-pool2); for `ingest stream` set PYSPARK_SUBMIT_ARGS='--packages "
             f"{package} pyspark-shell'; or use --kafka-source python")


def kafka_dataframe(
    spark: SparkSession,
    *,
    connection: KafkaConnection,
    topic: str | Sequence[str] = (),
    topic_pattern: str | None = None,
    starting_offsets: str | Mapping[str, Mapping[str, int]] = DEFAULT_STARTING_OFFSETS,
    max_offsets_per_trigger: int | None = None,
    fail_on_data_loss: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_MS / 1000,
    source: Literal["auto", "jvm", "python"] = "python",
    pack_records_per_task: int = 0,
    pack_into_tasks: int = 0,
) -> DataFrame:
    """A streaming DataFrame of Kafka records with the columns of Spark's "kafka" source.

    source="python" (the default) reads with "ingest-kafka"; "jvm" with Spark's own source
    (spark-sql-kafka-0-10, which must be on the classpath); "auto" with Spark's when its classes
    are there, else ours. Both read `read_committed` unless the connection sets
    `isolation.level`, and both get every setting of the connection (the JVM source in the
    Java client's names). `timeout_s` and `pack_records_per_task` (ranges of fewer records
    share a read task, up to that many records a task; 0: a task per topic partition) and
    `pack_into_tasks` (with packing, a micro-batch's small ranges in about that many tasks
    when they hold more than `pack_records_per_task` each) apply to "ingest-kafka" only.

    The topics: `topic` (a name, names comma-separated, or a sequence of names) or
    `topic_pattern` (a regular expression matched against whole names, Kafka's internal
    `__` topics never; both sources list the topics again at each micro-batch and read a new
    one from its first record).

    Raises:
        ConfigError: source="jvm" but spark-sql-kafka-0-10 is not on the classpath, an
            unknown source, a setting the chosen source cannot take, or not exactly one of
            `topic` and `topic_pattern`.
    """
    names = topic if isinstance(topic, str) else ",".join(topic)
    if (not names.strip()) == (topic_pattern is None):
        raise ConfigError("Give one of topic (names) and topic_pattern (a regular expression) "
                          "to read Kafka")
    if source not in ("auto", "jvm", "python"):
        raise ConfigError(f"Unknown Kafka source {source!r}.", hint="python, jvm or auto")
    use_jvm = source == "jvm" or (source == "auto" and jvm_kafka_available(spark))
    if source == "jvm":
        check_jvm_kafka(spark)
    starting = starting_offsets if isinstance(starting_offsets, str) else json.dumps(
        {t: {str(p): int(o) for p, o in parts.items()} for t, parts in starting_offsets.items()})
    settings = {"isolation.level": "read_committed"}
    if use_jvm:
        reader = spark.readStream.format("kafka").option("includeHeaders", "true")
        settings.update(connection.jvm_properties())
    else:
        register_kafka_source(spark)
        reader = spark.readStream.format(SOURCE_NAME).option(
            "kafka.timeout.ms", str(int(timeout_s * 1000))).option(
            "packRecordsPerTask", str(pack_records_per_task)).option(
            "packIntoTasks", str(pack_into_tasks))
        settings.update(connection.client_config())
    for name, value in settings.items():
        reader = reader.option(f"kafka.{name}", value)
    if topic_pattern is not None:
        # Spark's source leaves only Kafka's flagged internal topics out: say it for `__*`.
        reader = reader.option("subscribePattern",
                               jvm_pattern(topic_pattern) if use_jvm else topic_pattern)
    else:
        reader = reader.option("subscribe", names)
    reader = (reader.option("startingOffsets", starting)
              .option("failOnDataLoss", str(fail_on_data_loss).lower()))
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return reader.load()


__all__ = [
    "ARROW_SCHEMA",
    "SCHEMA",
    "SOURCE_NAME",
    "KafkaDataSource",
    "KafkaInputPartition",
    "KafkaSourceOptions",
    "KafkaStreamReader",
    "PackedInputPartition",
    "check_jvm_kafka",
    "check_topics",
    "jvm_kafka_available",
    "kafka_dataframe",
    "offsets_from_json",
    "offsets_to_json",
    "pack_ranges",
    "register_kafka_source",
]
