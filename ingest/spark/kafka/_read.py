"""The confluent-kafka side of the "ingest-kafka" source (kafka_source.py).

Consumers, the driver's metadata and watermark look-ups, the cap on offsets per micro-batch
(maxOffsetsPerTrigger) and the executors' read of one offset range into Arrow batches. It
knows Kafka and the source's options, not Spark's reader protocol, ORC or ACID.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

from ingest.errors import ConfigError, IngestError
from ingest.spark.kafka._options import KafkaSourceOptions, Offsets, TopicPartitionKey, describe
from ingest.txn import OffsetRange

if TYPE_CHECKING:
    from confluent_kafka import Consumer

# Logs under the source's name: the module split is not something log configuration sees.
LOGGER_NAME = "ingest.spark.kafka.source"
log = logging.getLogger(LOGGER_NAME)

ROWS_PER_ARROW_BATCH = 10_000
# What Spark's reader worker expects from read() (to_arrow_schema(SCHEMA, timezone="UTC")).
ARROW_SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
    ("headers", pa.list_(pa.field("element", pa.struct(
        [("key", pa.string()), ("value", pa.binary())])))),
])

Watermarks = dict[TopicPartitionKey, tuple[int, int]]


class KafkaClient:
    """Metadata and watermark look-ups for the driver, with bounded waits and our errors."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self.options = options
        self.consumer = make_consumer(options, probe=True)

    def close(self) -> None:
        self.consumer.close()

    def _fail(self, what: str, error: Exception) -> IngestError:
        o = self.options
        return IngestError(
            f"Cannot {what} on Kafka at {o.bootstrap_servers} within {o.timeout_s:g} s: {error}",
            hint="check that the broker is running and reachable, or raise 'kafka.timeout.ms'")

    def partitions(self) -> list[TopicPartitionKey]:
        """Every partition of the subscribed topics.

        Raises:
            ConfigError: a topic does not exist.
            IngestError: the broker cannot be reached in time.
        """
        from confluent_kafka import KafkaError, KafkaException

        out: list[TopicPartitionKey] = []
        for topic in self.options.topics:
            try:
                meta = self.consumer.list_topics(topic=topic, timeout=self.options.timeout_s)
            except KafkaException as e:
                raise self._fail(f"get metadata for topic '{topic}'", e) from e
            tmeta = meta.topics.get(topic)
            code = tmeta.error.code() if tmeta is not None and tmeta.error is not None else None
            if tmeta is None or code == KafkaError.UNKNOWN_TOPIC_OR_PART or not tmeta.partitions:
                raise ConfigError(
                    f"Kafka topic '{topic}' does not exist on {self.options.bootstrap_servers}.",
                    hint=f"create it (ingest produce --topic {topic} ...) or fix 'subscribe'")
            if code is not None:
                raise IngestError(f"Cannot get metadata for Kafka topic '{topic}' on "
                                  f"{self.options.bootstrap_servers}: {tmeta.error}")
            out.extend((topic, p) for p in sorted(tmeta.partitions))
        return out

    def watermarks(self, tps: Sequence[TopicPartitionKey]) -> Watermarks:
        """(earliest, next offset to be written) for each partition.

        The high watermark from ListOffsets is confirmed with one fetch at that offset: the
        fetch response carries the true high watermark. tansu 0.6 answers ListOffsets(latest)
        with the base offset of the last record batch + 1, which would hide the rest of the batch.
        """
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        marks: Watermarks = {}
        try:
            for tp in tps:
                low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(tp[0], tp[1]), timeout=self.options.timeout_s)
                marks[tp] = (low, high)
        except KafkaException as e:
            raise self._fail("list offsets", e) from e
        if not marks:
            return marks
        self.consumer.assign([TopicPartition(t, p, max(marks[(t, p)])) for t, p in marks])
        pending = set(marks)
        deadline = time.monotonic() + self.options.timeout_s
        try:
            while pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._fail(f"fetch the end offsets of {sorted(map(describe, pending))}",
                                     TimeoutError("no fetch response"))
                msg = self.consumer.poll(min(remaining, 0.5))
                if msg is not None:
                    err = msg.error()
                    if err is not None and err.code() != KafkaError._PARTITION_EOF:
                        raise self._fail("fetch the end offsets", KafkaException(err))
                    topic, partition = msg.topic(), msg.partition()
                    if topic is None or partition is None:  # never in pending
                        continue
                    tp = (topic, partition)
                    if tp in pending:
                        pending.discard(tp)
                        _, fetched_high = self.consumer.get_watermark_offsets(
                            TopicPartition(tp[0], tp[1]), cached=True)
                        marks[tp] = (marks[tp][0], max(marks[tp][1], fetched_high))
        finally:
            self.consumer.unassign()
        return marks


def make_consumer(options: KafkaSourceOptions, *, probe: bool = False,
                  fail_on_out_of_range: bool = True) -> Consumer:
    """A consumer in a throw-away group; `probe` keeps fetches tiny (watermark checks).

    Raises:
        ConfigError: librdkafka refuses the configuration.
    """
    from confluent_kafka import Consumer, KafkaException

    config: dict[str, Any] = {
        "bootstrap.servers": options.bootstrap_servers,
        # A throw-away group: offsets live in Spark's checkpoint, nothing is committed.
        "group.id": f"ingest-kafka-source-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error" if fail_on_out_of_range else "earliest",
        "socket.connection.setup.timeout.ms": int(options.timeout_s * 1000),
        "logger": logging.getLogger(f"{LOGGER_NAME}.librdkafka"),
    }
    if probe:
        config.update({"fetch.wait.max.ms": 10, "max.partition.fetch.bytes": 1024})
    config.update(dict(options.client_config))
    try:
        return Consumer(config)
    except KafkaException as e:
        raise ConfigError(f"Cannot create a Kafka consumer for {options.bootstrap_servers}: {e}",
                          hint="check the kafka.* options") from e


def rate_limit(start: Offsets, end: Offsets, max_rows: int) -> Offsets:
    """Cap end so that at most max_rows offsets are planned, shared in proportion to backlog."""
    backlog = {tp: end[tp] - start[tp] for tp in sorted(end) if end[tp] > start[tp]}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(end)
    share = {tp: max_rows * n // total for tp, n in backlog.items()}
    left = max_rows - sum(share.values())
    for tp in sorted(backlog, key=lambda tp: (share[tp] - backlog[tp], tp)):
        if left == 0:
            break
        if share[tp] < backlog[tp]:
            share[tp] += 1
            left -= 1
    return {tp: start[tp] + share.get(tp, 0) for tp in end}


def read_range(options: KafkaSourceOptions, part: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of [from_offset, until_offset) as Arrow batches of ARROW_SCHEMA.

    Raises:
        IngestError: no progress within the timeout, a read error, or lost records with
            failOnDataLoss=true.
    """
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    where = (f"Kafka partition {part.topic}-{part.partition} on {options.bootstrap_servers} "
             f"(planned [{part.from_offset}, {part.until_offset}))")
    consumer = make_consumer(options, fail_on_out_of_range=options.fail_on_data_loss)
    tp = TopicPartition(part.topic, part.partition, part.from_offset)
    columns: dict[str, list[Any]] = {name: [] for name in ARROW_SCHEMA.names}
    next_offset = part.from_offset
    deadline = time.monotonic() + options.timeout_s
    try:
        consumer.assign([tp])
        while next_offset < part.until_offset:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise IngestError(
                    f"Timed out after {options.timeout_s:g} s without records reading {where} "
                    f"at offset {next_offset}.",
                    hint="check the broker, or raise option 'kafka.timeout.ms'")
            want = min(ROWS_PER_ARROW_BATCH, part.until_offset - next_offset)
            for msg in consumer.consume(num_messages=want, timeout=min(remaining, 1.0)):
                # librdkafka sets the offset on records and on partition-EOF events.
                offset = cast(int, msg.offset())
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and offset < part.until_offset:
                        _data_loss(options, f"{where} ends at offset {offset}")
                        next_offset = part.until_offset
                        break
                    if err.code() in (KafkaError._AUTO_OFFSET_RESET,
                                      KafkaError.OFFSET_OUT_OF_RANGE):
                        _data_loss(options, f"offset {next_offset} of {where} is out of range")
                        continue
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise IngestError(f"Cannot read {where}: {err.str()}") from KafkaException(err)
                if offset >= part.until_offset:
                    next_offset = part.until_offset
                    break
                # Gaps (compaction, transaction markers) are normal; offsets only go forward.
                next_offset = offset + 1
                deadline = time.monotonic() + options.timeout_s
                _append(columns, msg)
            else:
                # Nothing at the end of the range but transaction markers: the position says so.
                position = consumer.position([TopicPartition(part.topic, part.partition)])[0].offset
                if position >= part.until_offset:
                    next_offset = part.until_offset
            if len(columns["offset"]) >= ROWS_PER_ARROW_BATCH:
                yield _to_batch(columns)
                columns = {name: [] for name in ARROW_SCHEMA.names}
        if columns["offset"]:
            yield _to_batch(columns)
    finally:
        consumer.close()


def _data_loss(options: KafkaSourceOptions, what: str) -> None:
    if options.fail_on_data_loss:
        raise IngestError(
            f"Kafka data loss: {what}.",
            hint="set option failOnDataLoss=false to skip lost records with a warning")
    log.warning("Kafka data loss, skipping: %s (failOnDataLoss=false)", what)


def _append(columns: dict[str, list[Any]], msg: Any) -> None:
    ts_type, ts_ms = msg.timestamp()
    headers = msg.headers()
    columns["key"].append(msg.key())
    columns["value"].append(msg.value())
    columns["topic"].append(msg.topic())
    columns["partition"].append(msg.partition())
    columns["offset"].append(msg.offset())
    columns["timestamp"].append(ts_ms * 1000)
    # Kafka's TimestampType ids as Spark reports them: -1 none, 0 CreateTime, 1 LogAppendTime;
    # confluent-kafka counts from 0 = not available.
    columns["timestampType"].append(ts_type - 1)
    # Spark gives null, not an empty array, for a record without headers.
    columns["headers"].append(None if not headers else
                              [{"key": k, "value": v} for k, v in headers])


def _to_batch(columns: dict[str, list[Any]]) -> pa.RecordBatch:
    arrays = [pa.array(columns[f.name], type=f.type) for f in ARROW_SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
