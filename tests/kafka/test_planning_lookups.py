"""The `ingest-kafka` source's driver look-ups in few round trips, on the real Apache Kafka 4.1.1
broker of tests/kafka_server.py: the partitions of many subscribed topics from one metadata
request (with the per-topic request's errors for a topic it lacks), every partition's offsets
in one round of ListOffsets (the end held at an open transaction's start for read_committed),
and a micro-batch's read tasks planned from the log starts latestOffset just fetched.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka_server import ApacheKafka
from pyspark.sql.streaming.datasource import ReadAllAvailable

from ingest.errors import ConfigError
from ingest.kafka import KafkaClient, KafkaSourceOptions, read
from ingest.spark.kafka.source import KafkaInputPartition, KafkaStreamReader

pytestmark = [pytest.mark.kafka]

KAFKA_WAIT_S = 60


def _options(kafka: ApacheKafka, topics: list[str]) -> KafkaSourceOptions:
    return KafkaSourceOptions.parse({"kafka.bootstrap.servers": kafka.plaintext,
                                     "subscribe": ",".join(topics)})


def _waits(client: KafkaClient, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the client's consumer waits for (`Client.wait`'s `what`), in order."""
    seen: list[str] = []
    wait = client.client.wait

    def recording(what: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(what)
        return wait(what, *args, **kwargs)

    monkeypatch.setattr(client.client, "wait", recording)
    return seen


def _produce(kafka: ApacheKafka, topic: str, counts: dict[int, int]) -> None:
    from confluent_kafka import Producer

    producer = Producer({**kafka.client_config("PLAINTEXT"), "linger.ms": 0})
    for partition, n in counts.items():
        for i in range(n):
            producer.produce(topic, value=b"%d" % i, partition=partition)
    assert producer.flush(KAFKA_WAIT_S) == 0


def test_many_topics_partitions_come_from_one_metadata_request(
        apache_kafka: ApacheKafka, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = {"pl-a": 1, "pl-b": 3, "pl-c": 2, "pl-d": 1, "pl-e": 2}
    for topic, n in counts.items():
        apache_kafka.create_topic(topic, partitions=n)
    topics = list(counts)
    assert len(topics) > read.TOPICS_LISTED_ONE_BY_ONE
    many = KafkaClient(_options(apache_kafka, topics))
    few = KafkaClient(_options(apache_kafka, topics[:2]))
    try:
        asked = _waits(many, monkeypatch)
        assert many.partitions() == [(t, p) for t in topics for p in range(counts[t])]
        assert asked == ["list topics"]
        asked_few = _waits(few, monkeypatch)
        assert few.partitions() == [("pl-a", 0), ("pl-b", 0), ("pl-b", 1), ("pl-b", 2)]
        assert asked_few == ["get metadata for topic 'pl-a'", "get metadata for topic 'pl-b'"]
    finally:
        many.close()
        few.close()

    # A topic the listing lacks is asked for on its own: the same error as with few topics.
    missing = KafkaClient(_options(apache_kafka, [*topics, "pl-missing"]))
    try:
        asked = _waits(missing, monkeypatch)
        with pytest.raises(ConfigError, match=f"Kafka topic 'pl-missing' does not exist on "
                                              f"{apache_kafka.plaintext}"):
            missing.partitions()
        assert asked == ["list topics", "get metadata for topic 'pl-missing'"]
    finally:
        missing.close()


def test_watermarks_end_at_an_open_transactions_start_in_one_round_of_list_offsets(
        apache_kafka: ApacheKafka) -> None:
    from confluent_kafka import Producer

    apache_kafka.create_topic("pl-txn", partitions=2)
    _produce(apache_kafka, "pl-txn", {0: 3, 1: 4})
    txn: Any = Producer({**apache_kafka.client_config("PLAINTEXT"), "linger.ms": 0,
                         "transactional.id": "pl-txn-t"})
    txn.init_transactions(KAFKA_WAIT_S)
    txn.begin_transaction()
    txn.produce("pl-txn", value=b"open", partition=0)
    txn.produce("pl-txn", value=b"open", partition=0)
    assert txn.flush(KAFKA_WAIT_S) == 0
    client = KafkaClient(_options(apache_kafka, ["pl-txn"]))
    try:
        tps = [("pl-txn", 0), ("pl-txn", 1)]
        assert client.broker_watermarks(tps) == {("pl-txn", 0): (0, 5), ("pl-txn", 1): (0, 4)}
        assert client.log_starts(tps) == {("pl-txn", 0): 0, ("pl-txn", 1): 0}
        assert client.watermarks(tps) == {("pl-txn", 0): (0, 3), ("pl-txn", 1): (0, 4)}
        txn.commit_transaction(KAFKA_WAIT_S)
        deadline = time.monotonic() + KAFKA_WAIT_S  # the marker is written after the commit
        while (marks := client.watermarks(tps))[("pl-txn", 0)] != (0, 6):
            assert time.monotonic() < deadline, marks
            time.sleep(0.1)
        assert marks[("pl-txn", 1)] == (0, 4)
    finally:
        client.close()


def test_read_tasks_are_planned_from_the_log_starts_latest_offset_fetched(
        apache_kafka: ApacheKafka, monkeypatch: pytest.MonkeyPatch) -> None:
    apache_kafka.create_topic("pl-plan", partitions=2)
    _produce(apache_kafka, "pl-plan", {0: 5, 1: 3})
    reader = KafkaStreamReader(_options(apache_kafka, ["pl-plan"]))
    try:
        asked: list[Any] = []
        log_starts = reader.client.log_starts
        monkeypatch.setattr(reader.client, "log_starts",
                            lambda tps: asked.append(list(tps)) or log_starts(tps))
        # Partition 1 is new to the micro-batch: read from its log start.
        start = {"pl-plan": {"0": 2}}
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {"pl-plan": {"0": 5, "1": 3}}

        def planned() -> list[tuple[str, int, int, int]]:
            tasks = reader.partitions(start, end)
            assert all(isinstance(t, KafkaInputPartition) for t in tasks)
            return [(t.topic, t.partition, t.from_offset, t.until_offset)
                    for t in tasks if isinstance(t, KafkaInputPartition)]

        assert planned() == [("pl-plan", 0, 2, 5), ("pl-plan", 1, 0, 3)]
        assert asked == []  # latestOffset's look-up served
        # Planned again without latestOffset (a replay after a restart): the broker is asked.
        assert planned() == [("pl-plan", 0, 2, 5), ("pl-plan", 1, 0, 3)]
        assert asked == [[("pl-plan", 0), ("pl-plan", 1)]]
    finally:
        reader.stop()


def test_a_running_streams_probe_waits_a_broker_out_where_a_first_look_up_gives_up() -> None:
    """The sink's loss check first asks the broker after a micro-batch was planned from it: a
    restart then must be waited out until the stream's Kafka timeout (as the source's own
    look-ups, answered before, do), not be taken for a wrong address after UNREACHABLE_S."""
    from external import free_port

    from ingest.errors import IngestError, KafkaConnectError
    from ingest.kafka import KafkaConnection, LagProbe

    nobody = KafkaConnection(f"127.0.0.1:{free_port()}")  # nothing listens there
    with pytest.raises(KafkaConnectError, match="no broker answered within 2 s"):
        LagProbe(nobody, ["t"], timeout_s=2).earliest([("t", 0)])
    started = time.monotonic()
    with pytest.raises(IngestError) as waited:
        LagProbe(nobody, ["t"], timeout_s=2, reached=True).earliest([("t", 0)])
    assert not isinstance(waited.value, KafkaConnectError), waited.value
    assert "within 2 s" in str(waited.value) and time.monotonic() - started >= 2


def test_the_stream_checks_all_its_topics_through_one_client(
        apache_kafka: ApacheKafka, monkeypatch: pytest.MonkeyPatch) -> None:
    """`check_kafka` of a stream of several topics (the CLI before Spark starts, the job at
    its start) opens one client for all of them, not one a topic; a missing one is named."""
    from ingest.kafka import KafkaConnection
    from ingest.spark import check_kafka
    from ingest.spark.kafka import source

    counts = {"ck-a": 2, "ck-b": 1, "ck-c": 3}
    for topic, n in counts.items():
        apache_kafka.create_topic(topic, partitions=n)
        _produce(apache_kafka, topic, {p: p + 1 for p in range(n)})
    made: list[tuple[str, ...]] = []
    real = source.KafkaClient

    def counting(options: KafkaSourceOptions) -> KafkaClient:
        made.append(tuple(options.topics))
        return real(options)

    monkeypatch.setattr(source, "KafkaClient", counting)
    connection = KafkaConnection(apache_kafka.plaintext)
    marks = check_kafka(connection, *counts, timeout_s=KAFKA_WAIT_S)
    assert marks == {(t, p): (0, p + 1) for t, n in counts.items() for p in range(n)}
    assert made == [tuple(counts)]
    with pytest.raises(ConfigError, match="Kafka topic 'ck-missing' does not exist"):
        check_kafka(connection, "ck-a", "ck-missing", timeout_s=KAFKA_WAIT_S)
    assert check_kafka(connection, timeout_s=KAFKA_WAIT_S) == {}  # a pattern's: none yet
    assert len(made) == 2


def test_a_committed_pattern_topic_that_is_gone_is_left_out_and_a_listed_one_fails(
        apache_kafka: ApacheKafka) -> None:
    from ingest.kafka import KafkaConnection
    from ingest.spark.many_job import _ends_of

    apache_kafka.create_topic("ck-kept", partitions=2)
    _produce(apache_kafka, "ck-kept", {0: 2, 1: 1})
    connection = KafkaConnection(apache_kafka.plaintext)
    topics = {"ck-kept", "ck-gone"}
    assert _ends_of(connection, topics, listed=(), timeout_s=KAFKA_WAIT_S) == {
        ("ck-kept", 0): (0, 2), ("ck-kept", 1): (0, 1)}
    with pytest.raises(ConfigError, match="Kafka topic 'ck-gone' does not exist"):
        _ends_of(connection, topics, listed=("ck-gone",), timeout_s=KAFKA_WAIT_S)
