"""The executors' side of the "ingest-kafka" source: reading planned offset ranges into Arrow.

One consumer reads all the ranges of a read task together (`read_ranges`): a task packing many
small topic partitions pays for one consumer, its connections and a few fetches, not for one
of each a range. It knows Kafka and the source's options, not Spark's reader protocol, ORC or
ACID.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ingest.errors import IngestError
from ingest.kafka import clients
from ingest.kafka.options import KafkaSourceOptions
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


def read_range(options: KafkaSourceOptions, part: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of [from_offset, until_offset) as Arrow batches of ARROW_SCHEMA.

    Raises:
        IngestError: no progress within the timeout, a read error, or lost records with
            failOnDataLoss=true.
    """
    yield from read_ranges(options, [part])


def read_ranges(options: KafkaSourceOptions,
                ranges: Sequence[OffsetRange]) -> Iterator[pa.RecordBatch]:
    """Yield the records of each range [from_offset, until_offset) as Arrow batches of
    ARROW_SCHEMA, read by one consumer with all the ranges' partitions assigned at once. A
    batch holds the records of one range, in offset order, at most ROWS_PER_ARROW_BATCH;
    the batches of different ranges come in the order their records arrive. A partition
    named twice is read range by range, each in a later round of the same consumer.

    Raises:
        IngestError: no progress on a range within the timeout, a read error, or lost
            records with failOnDataLoss=true; the message names the range.
    """
    rounds = _rounds([r for r in ranges if r.from_offset < r.until_offset])
    if not rounds:
        return
    client = make_consumer(options, fail_on_out_of_range=options.fail_on_data_loss)
    try:
        for i, parts in enumerate(rounds):
            if i:
                client.handle.unassign()  # the last round's partitions (close does it at last)
            yield from _read_together(options, client, parts)
    finally:
        client.close()


@dataclass
class _Range:
    """One range being read: how far it got and the records not yet handed on."""

    part: OffsetRange
    where: str
    next_offset: int
    deadline: float
    columns: dict[str, list[Any]] = field(default_factory=lambda: _columns())

    @property
    def left(self) -> int:
        return self.part.until_offset - self.next_offset


def _rounds(ranges: Sequence[OffsetRange]) -> list[list[OffsetRange]]:
    """`ranges` in rounds that assign each partition at most once, in their order."""
    rounds: list[list[OffsetRange]] = []
    for r in ranges:
        key = (r.topic, r.partition)
        for parts in rounds:
            if all((p.topic, p.partition) != key for p in parts):
                parts.append(r)
                break
        else:
            rounds.append([r])
    return rounds


def _read_together(options: KafkaSourceOptions, client: clients.Client,
                   parts: Sequence[OffsetRange]) -> Iterator[pa.RecordBatch]:
    """Read ranges of distinct partitions with `client`'s consumer, each to its end."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    consumer = client.handle
    started = time.monotonic()
    ranges = {(p.topic, p.partition): _Range(p, _where(options, p), p.from_offset,
                                             started + options.timeout_s) for p in parts}
    pending = dict(ranges)  # the ranges not read to their end
    finished: list[TopicPartition] = []  # since the last pause

    def finish(state: _Range) -> Iterator[pa.RecordBatch]:
        state.next_offset = state.part.until_offset
        del pending[(state.part.topic, state.part.partition)]
        finished.append(TopicPartition(state.part.topic, state.part.partition))
        if state.columns["offset"]:
            yield _to_batch(state.columns)
            state.columns = _columns()

    consumer.assign([TopicPartition(p.topic, p.partition, p.from_offset) for p in parts])
    while pending:
        late = min(pending.values(), key=lambda s: s.deadline)
        remaining = late.deadline - time.monotonic()
        if remaining <= 0:
            raise IngestError(
                f"Timed out after {options.timeout_s:g} s without records reading "
                f"{late.where} at offset {late.next_offset} (an open producer transaction "
                f"there would hold a read_committed reader back).",
                hint="check the broker, or raise --kafka-timeout-s")
        want = min(ROWS_PER_ARROW_BATCH, sum(s.left for s in pending.values()))
        messages = consumer.consume(num_messages=want, timeout=min(remaining, 1.0))
        now = time.monotonic()
        for msg in messages:
            key: TopicPartitionKey = (msg.topic(), msg.partition())
            state = pending.get(key)
            # librdkafka sets the offset on records and on partition-EOF events.
            offset: int = msg.offset()
            err = msg.error()
            if err is not None:
                if key in ranges and state is None:
                    continue  # about a range read to its end
                which = ([state] if state is not None
                         else list(pending.values()) or list(ranges.values()))
                where = ", ".join(s.where for s in which)
                if err.code() in (KafkaError._AUTO_OFFSET_RESET,
                                  KafkaError.OFFSET_OUT_OF_RANGE):
                    at = (f"offset {state.next_offset} of {where}" if state is not None
                          else f"an offset of {where}")
                    _data_loss(options, f"{at} is out of range "
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
            if state is None:
                continue  # a record past a range's end, fetched before its pause
            if offset >= state.part.until_offset:
                yield from finish(state)
                continue
            # Gaps (compaction, transaction markers, aborted records) are normal; offsets
            # only go forward.
            state.next_offset = offset + 1
            state.deadline = now + options.timeout_s
            _append(state.columns, msg)
            if state.next_offset >= state.part.until_offset:
                yield from finish(state)
            elif len(state.columns["offset"]) >= ROWS_PER_ARROW_BATCH:
                yield _to_batch(state.columns)
                state.columns = _columns()
        if pending:
            # Nothing at the end of a range but transaction markers or aborted records:
            # the position says so.
            client.check()
            waiting = list(pending.values())
            positions = consumer.position(
                [TopicPartition(s.part.topic, s.part.partition) for s in waiting])
            for state, position in zip(waiting, positions, strict=True):
                if position.offset >= state.part.until_offset:
                    yield from finish(state)
                elif position.offset > state.next_offset:
                    state.next_offset = position.offset
                    state.deadline = time.monotonic() + options.timeout_s
        if finished and pending:
            # The finished partitions' later records are not this task's: stop fetching
            # them (one call a round: each waits for librdkafka's main thread).
            consumer.pause(finished)
            finished.clear()


def _where(options: KafkaSourceOptions, part: OffsetRange) -> str:
    return (f"Kafka partition {part.topic}-{part.partition} on {options.bootstrap_servers} "
            f"(planned [{part.from_offset}, {part.until_offset}))")


def _data_loss(options: KafkaSourceOptions, what: str) -> None:
    if options.fail_on_data_loss:
        raise IngestError(
            f"Kafka data loss: {what}.",
            hint="records the table had not committed were removed from Kafka; to go on "
                 "without them, restart with --fail-on-data-loss false (option "
                 "failOnDataLoss=false)")
    log.warning("Kafka data loss, skipping: %s (failOnDataLoss=false)", what)


def _columns() -> dict[str, list[Any]]:
    return {name: [] for name in ARROW_SCHEMA.names}


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
