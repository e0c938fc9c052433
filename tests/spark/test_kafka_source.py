"""The "ingest-kafka" streaming source against a real broker (tansu) and a real SparkSession."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from external import free_port

from ingest.errors import ConfigError
from ingest.kafka import KafkaConnection, rate_limit
from ingest.kafka.produce import ensure_topic, produce_events, sample_events
from ingest.spark.kafka.source import (
    ARROW_SCHEMA,
    SCHEMA,
    KafkaSourceOptions,
    jvm_kafka_available,
    kafka_dataframe,
    register_kafka_source,
)
from ingest.spark.sink._size import planned_records

QUERY_TIMEOUT_S = 120



def _produce(servers: str, topic: str, count: int, *, start_id: int = 0) -> None:
    produce_events(servers, topic, events=sample_events(count, start_id=start_id),
                   key_fn=lambda e: str(e["id"]), partitions=3)  # type: ignore[index]


def _run(spark: Any, servers: str, topic: str, checkpoint: Path, *,
         planned: list[int | None] | None = None,
         **options: str) -> list[list[dict[str, Any]]]:
    """Run one availableNow query into foreachBatch; return the rows of each batch (and put
    the records each batch's plan says it reads into `planned`)."""
    register_kafka_source(spark)
    reader = (spark.readStream.format("ingest-kafka")
              .option("kafka.bootstrap.servers", servers).option("subscribe", topic))
    for name, value in options.items():
        reader = reader.option(name, value)
    batches: list[list[dict[str, Any]]] = []

    def collect(df: Any, batch_id: int) -> None:
        if planned is not None:
            planned.append(planned_records(df))
        batches.append([row.asDict(recursive=True) for row in df.collect()])

    query = (reader.load().writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish"
    finally:
        query.stop()
    return batches


def _failure(spark: Any, servers: str, topic: str, checkpoint: Path, **options: str) -> str:
    from pyspark.errors import StreamingQueryException

    with pytest.raises(StreamingQueryException) as info:
        _run(spark, servers, topic, checkpoint, **options)
    return str(info.value)


def _ids(batches: list[list[dict[str, Any]]]) -> list[int]:
    return sorted(json.loads(row["value"])["id"] for batch in batches for row in batch)


# -- no Spark needed -------------------------------------------------------------------------

def test_arrow_schema_is_what_spark_expects() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    assert to_arrow_schema(SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)


def test_options_parse() -> None:
    opts = KafkaSourceOptions.parse({
        "kafka.bootstrap.servers": "h:1", "subscribe": "a, b", "maxOffsetsPerTrigger": "7",
        "failOnDataLoss": "false", "kafka.timeout.ms": "1500", "kafka.client.id": "x",
        "startingOffsets": '{"a": {"0": 5, "1": -2}}'})
    assert opts.topics == ("a", "b")
    assert opts.max_offsets_per_trigger == 7
    assert opts.fail_on_data_loss is False
    assert opts.timeout_s == 1.5
    assert opts.connection.settings == (("client.id", "x"),)
    assert opts.starting_offsets == {("a", 0): 5, ("a", 1): -2}


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "t"}, "needs option 'kafka.bootstrap.servers'"),
    ({"kafka.bootstrap.servers": "h:1"}, "needs option 'subscribe'"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "maxOffsetsPerTrigger": "0"},
     "'maxoffsetspertrigger' must be a positive integer, got '0'"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "failOnDataLoss": "maybe"},
     "must be true or false"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "startingOffsets": "{nope"},
     "Option 'startingOffsets' must be"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "startingOffsets": '{"u":{"0":1}}'},
     "names topics ['u'] that are not in 'subscribe'"),
])
def test_bad_options_raise_config_error(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        KafkaSourceOptions.parse(options)
    assert message in str(info.value)


def test_rate_limit_shares_in_proportion_and_exactly() -> None:
    start = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5}
    end = {("t", 0): 30, ("t", 1): 20, ("t", 2): 5}
    capped = rate_limit(start, end, 8)
    assert sum(capped[tp] - start[tp] for tp in start) == 8
    assert capped[("t", 0)] - 0 == 6 and capped[("t", 1)] - 10 == 2 and capped[("t", 2)] == 5
    assert rate_limit(start, end, 1000) == end
    assert sum(rate_limit(start, end, 1)[tp] - start[tp] for tp in start) == 1


# -- real broker and Spark -------------------------------------------------------------------

@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_reads_every_record_exactly_once_with_spark_kafka_columns(
        spark: Any, kafka_broker: str, topic: str, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    _produce(kafka_broker, topic, 30)
    producer = Producer({"bootstrap.servers": kafka_broker})
    producer.produce(topic, value=b'{"id": 100}', key=None, partition=1,
                     headers=[("h1", b"v1"), ("h2", None)])
    assert producer.flush(10) == 0

    batches = _run(spark, kafka_broker, topic, tmp_path / "ckpt")
    rows = [row for batch in batches for row in batch]
    assert _ids(batches) == [*range(30), 100]
    assert len({(r["partition"], r["offset"]) for r in rows}) == 31
    assert {r["partition"] for r in rows} == {0, 1, 2}
    assert {r["topic"] for r in rows} == {topic}
    assert all(r["timestampType"] == 0 and r["timestamp"] is not None for r in rows)
    for p in range(3):
        offsets = sorted(r["offset"] for r in rows if r["partition"] == p)
        assert offsets == list(range(len(offsets)))  # from 0, no gaps, no duplicates
    with_headers = [r for r in rows if r["key"] is None]
    assert len(with_headers) == 1
    assert with_headers[0]["headers"] == [{"key": "h1", "value": bytearray(b"v1")},
                                          {"key": "h2", "value": None}]
    keyed = [r for r in rows if r["key"] is not None]
    assert all(r["headers"] is None for r in keyed)
    assert all(bytes(r["key"]).decode() == str(json.loads(r["value"])["id"])
               for r in keyed)


@pytest.mark.kafka
@pytest.mark.spark
def test_schema_matches_spark_kafka_source(spark: Any, kafka_broker: str, topic: str) -> None:
    ensure_topic(kafka_broker, topic, partitions=1)
    df = kafka_dataframe(spark, connection=KafkaConnection(kafka_broker), topic=topic,
                         source="python")
    assert df.isStreaming
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,"
        "headers:array<struct<key:string,value:binary>>>")
    # pyspark's wheel has no spark-sql-kafka-0-10, so "auto" must choose ours.
    assert jvm_kafka_available(spark) is False
    with pytest.raises(ConfigError, match="not on the classpath"):
        kafka_dataframe(spark, connection=KafkaConnection(kafka_broker), topic=topic, source="jvm")


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_restart_from_checkpoint_reads_only_new_records(
        spark: Any, kafka_broker: str, topic: str, tmp_path: Path) -> None:
    _produce(kafka_broker, topic, 12)
    first = _run(spark, kafka_broker, topic, tmp_path / "ckpt")
    assert _ids(first) == list(range(12))

    assert _ids(_run(spark, kafka_broker, topic, tmp_path / "ckpt")) == []

    _produce(kafka_broker, topic, 9, start_id=12)
    second = _run(spark, kafka_broker, topic, tmp_path / "ckpt")
    assert _ids(second) == list(range(12, 21))


@pytest.mark.kafka
@pytest.mark.spark
def test_max_offsets_per_trigger_splits_batches_under_available_now(
        spark: Any, kafka_broker: str, topic: str, tmp_path: Path) -> None:
    _produce(kafka_broker, topic, 25)
    planned: list[int | None] = []
    batches = _run(spark, kafka_broker, topic, tmp_path / "ckpt", planned=planned,
                   maxOffsetsPerTrigger="10")
    sizes = [len(b) for b in batches if b]
    assert sizes == [10, 10, 5]
    # The sink's one-task choice reads the same sizes from each micro-batch's plan.
    assert [n for n, b in zip(planned, batches, strict=True) if b] == sizes
    assert _ids(batches) == list(range(25))


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_starting_offsets_json_and_latest(
        spark: Any, kafka_broker: str, topic: str, tmp_path: Path) -> None:
    ensure_topic(kafka_broker, topic, partitions=1)
    produce_events(kafka_broker, topic, events=sample_events(6), create_topic=False)
    batches = _run(spark, kafka_broker, topic, tmp_path / "a",
                   startingOffsets=f'{{"{topic}": {{"0": 4}}}}')
    assert _ids(batches) == [4, 5]
    assert _ids(_run(spark, kafka_broker, topic, tmp_path / "b", startingOffsets="latest")) == []


@pytest.mark.kafka
@pytest.mark.spark
def test_offsets_beyond_the_end_are_refused_as_another_topic(
        spark: Any, kafka_broker: str, topic: str, tmp_path: Path) -> None:
    """The end a committed reader sees never goes back: offsets past it mean the topic was
    deleted and created again, refused whatever failOnDataLoss says (its records would be
    read under the old offsets)."""
    ensure_topic(kafka_broker, topic, partitions=1)
    produce_events(kafka_broker, topic, events=sample_events(3), create_topic=False)
    starting = f'{{"{topic}": {{"0": 50}}}}'
    for n, fail in enumerate(("true", "false")):
        message = _failure(spark, kafka_broker, topic, tmp_path / str(n),
                           startingOffsets=starting, failOnDataLoss=fail)
        assert (f"Kafka partition {topic}-0 on {kafka_broker} now ends at offset 3, below "
                f"offset 50 this stream already read: topic '{topic}' was deleted and created "
                "again") in message


@pytest.mark.kafka
@pytest.mark.spark
def test_missing_topic_fails_the_query_with_a_clear_error(
        spark: Any, kafka_broker: str, tmp_path: Path) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    message = _failure(spark, kafka_broker, missing, tmp_path / "ckpt")
    assert f"Kafka topic '{missing}' does not exist on {kafka_broker}" in message
    assert time.monotonic() - started < 60


@pytest.mark.kafka
@pytest.mark.spark
def test_unreachable_broker_fails_within_the_timeout(spark: Any, tmp_path: Path) -> None:
    servers = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    message = _failure(spark, servers, "t", tmp_path / "ckpt", **{"kafka.timeout.ms": "2000"})
    assert f"on Kafka at {servers}: no broker answered within 2 s" in message
    assert time.monotonic() - started < 60
