"""The confluent-kafka side of the "ingest-kafka" source (ingest/spark/kafka/source.py).

Consumers, the driver's metadata and watermark look-ups, the cap on offsets per micro-batch
(maxOffsetsPerTrigger) and the executors' read of one offset range into Arrow batches. It
knows Kafka and the source's options, not Spark's reader protocol, ORC or ACID.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, cast

import pyarrow as pa

from ingest.errors import ConfigError, IngestError
from ingest.kafka import clients
from ingest.kafka.connection import KafkaConnection
from ingest.kafka.options import KafkaSourceOptions, Offsets, describe
from ingest.txn import OffsetRange, TopicPartitionKey

# Logs under the source's name: the module split is not something log configuration sees.
LOGGER_NAME = "ingest.kafka.source"
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
_T = TypeVar("_T")


class KafkaClient:
    """Metadata and offset look-ups for the driver, with bounded waits and our errors."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self.options = options
        # Small fetches: the driver only confirms where each partition ends.
        small: dict[str, Any] = {"fetch.wait.max.ms": 10, "max.partition.fetch.bytes": 1024,
                                 "enable.partition.eof": True}
        self.client = clients.consumer(options.connection,
                                       logger_name=f"{LOGGER_NAME}.librdkafka", **small)
        self._admin: clients.Client | None = None

    @property
    def consumer(self) -> Any:
        """The consumer's librdkafka handle (a new one after `Client.renew`)."""
        return self.client.handle

    def close(self) -> None:
        self.client.close()
        self._admin = None  # an AdminClient has no close; dropping it stops its threads

    @property
    def read_committed(self) -> bool:
        level = dict(self.options.connection.settings).get("isolation.level", "read_committed")
        return level.strip().lower() == "read_committed"

    def partitions(self) -> list[TopicPartitionKey]:
        """Every partition of the subscribed topics; with a pattern, of the topics it selects
        now (a topic whose metadata is not ready yet, one just created, waits for the next call).

        Raises:
            ConfigError: a topic does not exist.
            KafkaConnectError: the broker refuses this client (authentication, TLS, ACL) or
                does not answer.
            IngestError: the broker cannot be reached in time.
        """

        def metadata(topic: str | None) -> Any:
            return self.client.wait(
                f"get metadata for topic '{topic}'" if topic is not None
                else "list topics",
                lambda t: self.consumer.list_topics(topic=topic, timeout=t),
                timeout_s=self.options.timeout_s)

        out: list[TopicPartitionKey] = []
        if self.options.pattern is not None:
            listed = metadata(None).topics
            for topic in sorted(t for t in listed if self.options.selects(t)):
                tmeta = listed[topic]
                if tmeta.error is None and tmeta.partitions:
                    out.extend((topic, p) for p in sorted(tmeta.partitions))
            return out
        for topic in self.options.topics:
            meta = metadata(topic)
            out.extend((topic, p) for p in topic_partitions(self.options.connection, topic,
                                                            meta.topics.get(topic)))
        return out

    def broker_watermarks(self, tps: Sequence[TopicPartitionKey]) -> Watermarks:
        """Each partition's (log start, high watermark) as the broker reports them, asking
        again for the metadata of a partition added since this consumer last did.

        Raises:
            IngestError: the broker cannot be reached in time.
        """
        from confluent_kafka import TopicPartition

        def low_high(tp: TopicPartitionKey) -> tuple[int, int]:
            low, high = self.client.wait("list offsets", refreshing_metadata(
                self.client, [tp], lambda t: self.consumer.get_watermark_offsets(
                    TopicPartition(tp[0], tp[1]), timeout=t)), timeout_s=self.options.timeout_s)
            return low, high

        return {tp: low_high(tp) for tp in tps}

    def watermarks(self, tps: Sequence[TopicPartitionKey]) -> Watermarks:
        """(earliest, end) of each partition: end is the offset a reader of the connection's
        isolation level can read up to, for `read_committed` the last stable offset (an open
        transaction's first record; ListOffsets at that isolation level).

        The end is confirmed with one fetch there: the fetch ends at what this consumer can
        read (tansu 0.6 answers ListOffsets(latest) with the base offset of the last record
        batch + 1, which would hide the rest of the batch).
        """
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        if not tps:
            return {}
        listed = self.broker_watermarks(tps)
        marks = listed
        if self.read_committed:
            stable = self._stable_offsets(tps)
            marks = {tp: (low, min(high, stable[tp])) for tp, (low, high) in listed.items()}
        # A partition whose listed end is its high watermark may have more (tansu); one whose
        # end is an open transaction's start stops there.
        confirm = {tp for tp in tps if not self.read_committed or marks[tp][1] == listed[tp][1]}
        if not confirm:
            return marks
        self.consumer.assign([TopicPartition(t, p, max(marks[(t, p)])) for t, p in confirm])
        pending = set(confirm)
        deadline = time.monotonic() + self.options.timeout_s
        renew_at = time.monotonic() + clients.UNREACHABLE_S
        try:
            while pending:
                if time.monotonic() >= renew_at:
                    # No end in sight: this consumer may never reach a broker again after a
                    # restart (Client.renew); a new one fetches the partitions left.
                    self.consumer.unassign()
                    self.client.renew()
                    self.consumer.assign([TopicPartition(t, p, max(marks[(t, p)]))
                                          for t, p in sorted(pending)])
                    renew_at = time.monotonic() + clients.UNREACHABLE_S
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise IngestError(
                        f"Cannot fetch the end offsets of {sorted(map(describe, pending))} "
                        f"from Kafka at {self.options.bootstrap_servers} within "
                        f"{self.options.timeout_s:g} s",
                        hint="check that the broker is running, or raise --kafka-timeout-s")
                msg = self.consumer.poll(min(remaining, 0.5))
                self.client.check()
                if msg is None:
                    continue
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    if clients.is_retriable(err):
                        continue
                    raise IngestError(f"Cannot fetch the end offsets from Kafka at "
                                      f"{self.options.bootstrap_servers}: "
                                      f"{err.str()}") from KafkaException(err)
                topic, partition = msg.topic(), msg.partition()
                if topic is None or partition is None:  # never in pending
                    continue
                tp = (topic, partition)
                if tp in pending and err is not None:  # the end this consumer can read
                    pending.discard(tp)
                    eof = cast(int, msg.offset())
                    marks[tp] = (marks[tp][0], max(marks[tp][1], eof))
        finally:
            self.consumer.unassign()
        return marks

    def _stable_offsets(self, tps: Sequence[TopicPartitionKey]) -> Offsets:
        """Each partition's last stable offset (ListOffsets, isolation level read_committed)."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        if self._admin is None:
            self._admin = clients.admin(self.options.connection,
                                        logger_name=f"{LOGGER_NAME}.librdkafka")
        admin = self._admin
        request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in tps}

        def ask(timeout: float) -> Offsets:
            futures = admin.handle.list_offsets(
                request, isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=max(timeout, 1.0))
            return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

        return admin.wait("list the last stable offsets", refreshing_metadata(admin, tps, ask),
                          timeout_s=self.options.timeout_s)


def refreshing_metadata(client: clients.Client, tps: Sequence[TopicPartitionKey],
                        call: Callable[[float], _T]) -> Callable[[float], _T]:
    """`call` (a slice of `Client.wait`, a look-up sent to the partitions' leaders) that,
    when the client's metadata of `tps` is stale, asks the broker for their topics' metadata
    and hands `wait` the error as retriable, so the next slice asks again with leaders and
    partitions up to date.

    librdkafka refreshes a client's metadata only every topic.metadata.refresh.interval.ms
    (5 min): until then a partition added to a topic is unknown to it (_UNKNOWN_PARTITION),
    and after a broker restart an AdminClient's ListOffsets keeps failing with
    FENCED_LEADER_EPOCH (its leader epochs are the old ones) or finds no leader (_NOENT).
    """
    from confluent_kafka import KafkaError, KafkaException

    stale = {KafkaError._UNKNOWN_PARTITION, KafkaError._NOENT, KafkaError.FENCED_LEADER_EPOCH,
             KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.NOT_LEADER_FOR_PARTITION,
             KafkaError.LEADER_NOT_AVAILABLE}

    def attempt(timeout: float) -> _T:
        try:
            return call(timeout)
        except KafkaException as e:
            error = e.args[0] if e.args else None
            if not isinstance(error, KafkaError) or error.code() not in stale:
                raise
            for topic in sorted({t for t, _ in tps}):
                client.handle.list_topics(topic=topic, timeout=max(timeout, 1.0))
            raise KafkaException(KafkaError(error.code(), error.str(), retriable=True)) from e

    return attempt


def topic_partitions(connection: KafkaConnection, topic: str, tmeta: Any) -> list[int]:
    """The partitions of a topic's metadata, or the reason there are none.

    Raises:
        ConfigError: the topic does not exist.
        KafkaConnectError: the principal may not see the topic (ACL).
        IngestError: another metadata error.
    """
    from confluent_kafka import KafkaError

    code = tmeta.error.code() if tmeta is not None and tmeta.error is not None else None
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        raise clients.KafkaConnectError(
            f"Kafka at {connection.bootstrap_servers} does not let this client's principal "
            f"see topic '{topic}' (TOPIC_AUTHORIZATION_FAILED)",
            hint="grant the principal DESCRIBE and READ on the topic (kafka-acls.sh), or "
                 "check sasl.username")
    if tmeta is None or code == KafkaError.UNKNOWN_TOPIC_OR_PART or not tmeta.partitions:
        raise ConfigError(
            f"Kafka topic '{topic}' does not exist on {connection.bootstrap_servers}.",
            hint=f"create it (ingest produce --topic {topic} ...) or fix the topic name")
    if code is not None:
        raise IngestError(f"Cannot get metadata for Kafka topic '{topic}' on "
                          f"{connection.bootstrap_servers}: {tmeta.error}")
    return sorted(tmeta.partitions)


def make_consumer(options: KafkaSourceOptions, *,
                  fail_on_out_of_range: bool = True) -> clients.Client:
    """A consumer of the source's connection in a throw-away group.

    Raises:
        ConfigError: librdkafka refuses the configuration.
    """
    settings: dict[str, Any] = {
        "enable.auto.offset.store": False, "enable.partition.eof": True,
        "auto.offset.reset": "error" if fail_on_out_of_range else "earliest",
        "socket.connection.setup.timeout.ms": int(options.timeout_s * 1000)}
    return clients.consumer(options.connection, logger_name=f"{LOGGER_NAME}.librdkafka",
                            **settings)


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
    client = make_consumer(options, fail_on_out_of_range=options.fail_on_data_loss)
    consumer = client.handle
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
                    f"at offset {next_offset} (an open producer transaction there would hold "
                    f"a read_committed reader back).",
                    hint="check the broker, or raise --kafka-timeout-s")
            want = min(ROWS_PER_ARROW_BATCH, part.until_offset - next_offset)
            for msg in consumer.consume(num_messages=want, timeout=min(remaining, 1.0)):
                # librdkafka sets the offset on records and on partition-EOF events.
                offset = cast(int, msg.offset())
                err = msg.error()
                if err is not None:
                    if err.code() in (KafkaError._AUTO_OFFSET_RESET,
                                      KafkaError.OFFSET_OUT_OF_RANGE):
                        _data_loss(options, f"offset {next_offset} of {where} is out of range "
                                            "(below the log start offset: removed by retention?)")
                        continue
                    if err.code() == KafkaError._PARTITION_EOF:
                        # The end this consumer can read now; the range was planned within
                        # it, so what is left are markers or aborted records (the position
                        # says so below), or records not yet readable: keep waiting.
                        continue
                    client.check()
                    if clients.is_retriable(err):
                        continue  # a broker restart or a leader change: librdkafka retries
                    raise IngestError(f"Cannot read {where}: {err.str()}") from KafkaException(err)
                if offset >= part.until_offset:
                    next_offset = part.until_offset
                    break
                # Gaps (compaction, transaction markers, aborted records) are normal; offsets
                # only go forward.
                next_offset = offset + 1
                deadline = time.monotonic() + options.timeout_s
                _append(columns, msg)
            else:
                # Nothing at the end of the range but transaction markers or aborted records:
                # the position says so.
                client.check()
                position = consumer.position([TopicPartition(part.topic, part.partition)])[0].offset
                if position >= part.until_offset:
                    next_offset = part.until_offset
                elif position > next_offset:
                    next_offset = position
                    deadline = time.monotonic() + options.timeout_s
            if len(columns["offset"]) >= ROWS_PER_ARROW_BATCH:
                yield _to_batch(columns)
                columns = {name: [] for name in ARROW_SCHEMA.names}
        if columns["offset"]:
            yield _to_batch(columns)
    finally:
        client.close()


def _data_loss(options: KafkaSourceOptions, what: str) -> None:
    if options.fail_on_data_loss:
        raise IngestError(
            f"Kafka data loss: {what}.",
            hint="records the table had not committed were removed from Kafka; to go on "
                 "without them, restart with --fail-on-data-loss false (option "
                 "failOnDataLoss=false)")
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
