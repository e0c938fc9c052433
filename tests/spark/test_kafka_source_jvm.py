"""`ingest stream --kafka-source python|jvm`: ingest's source and Spark's own JVM Kafka source
(spark-sql-kafka-0-10) through the CLI, a real broker (tansu) and a real Spark. Either way each
micro-batch commits its Kafka offset ranges with its rows, exactly once, across a replay of a
committed batch, a kill before a commit and the restarts (docs/invariants.md, 4).

Spark's jars come from `scripts/fetch-servers.sh sparkkafka` (a class path file under
$INGEST_SERVERS, default ~/.cache/ingest/servers), given to the CLI's Spark with
PYSPARK_SUBMIT_ARGS; without them the JVM case is skipped, and fails under INGEST_REQUIRE_ALL=1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from external import spark_kafka_jars

from ingest.acid.read.reader import read_table
from ingest.kafka import KafkaConnection
from ingest.kafka.produce import produce_events, sample_events
from ingest.spark import StreamOptions, option_specs
from ingest.txn import Metastore, default_metastore_url

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 2


def _fill(servers: str, topic: str, start: int, count: int) -> None:
    """Produce events start..start+count-1; each partition's last one alone in its batch.

    tansu 0.6 answers ListOffsets(latest) with the base offset of a partition's last record
    batch + 1; Spark's JVM source plans from that answer (ours confirms it with a fetch), so
    without this an availableNow query would stop short of a multi-record last batch.
    """
    from confluent_kafka import Producer

    produce_events(servers, topic, events=sample_events(count - PARTITIONS, start_id=start),
                   key_fn=lambda e: str(e["id"]), partitions=PARTITIONS)  # type: ignore[index]
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    last = sample_events(PARTITIONS, start_id=start + count - PARTITIONS)
    for partition, event in enumerate(last):
        producer.produce(topic, value=json.dumps(event).encode(), partition=partition)
        assert producer.flush(30) == 0, f"last record of {topic}-{partition} not delivered"


def _stream(servers: str, topic: str, warehouse: Path, source: str, *,
            crash_at: str | None = None, jars: list[str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("INGEST_CRASH_AT", "PYSPARK_SUBMIT_ARGS")}
    env["PYTHONPATH"] = str(ROOT)
    if crash_at:
        env["INGEST_CRASH_AT"] = crash_at
    if jars:
        env["PYSPARK_SUBMIT_ARGS"] = f"--jars {','.join(jars)} pyspark-shell"
    return subprocess.run(
        [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers", servers,
         "--topic", topic, "--table", str(warehouse / "events"),
         "--schema", "id BIGINT, value STRING, ts TIMESTAMP, dt STRING",
         "--checkpoint", str(warehouse / "checkpoint"), "--available-now",
         "--max-offsets-per-trigger", "60", "--compact", "off", "--clean", "off",
         "--kafka-source", source, "--json", "--quiet"],
        env=env, capture_output=True, text=True, timeout=300, check=False)


def _summary(run: subprocess.CompletedProcess[str]) -> dict[str, int]:
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_kafka_source_option_defaults_to_ours() -> None:
    spec = {s.flag: s for s in option_specs(StreamOptions)}["--kafka-source"]
    assert spec.default == "python" and spec.choices == ("python", "jvm")
    assert StreamOptions(bootstrap_servers="h:1", topic="t", table="/x", schema_ddl="id INT",
                         checkpoint="/c").kafka_source == "python"


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("source", ["python", "jvm"])
def test_micro_batches_commit_their_offset_ranges_once_across_a_replay_a_kill_and_a_restart(
        kafka_broker: str, topic: str, warehouse: Path, source: str) -> None:
    jars = spark_kafka_jars() if source == "jvm" else None
    location = str(warehouse / "events")
    _fill(kafka_broker, topic, 0, 150)
    first = _summary(_stream(kafka_broker, topic, warehouse, source, jars=jars))
    assert first["rows"] == 150 and first["batches"] >= 3 and first["skipped"] == 0, first

    # Spark loses its record of the last batch's commit (the metastore has it): the restart
    # plans that batch again from Spark's offset log, and the sink skips it.
    commits = warehouse / "checkpoint" / "commits"
    last = max((p for p in commits.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    last.unlink()
    (commits / f".{last.name}.crc").unlink(missing_ok=True)  # else Spark cannot write it again
    _fill(kafka_broker, topic, 150, 90)
    killed = _stream(kafka_broker, topic, warehouse, source, jars=jars,
                     crash_at="sink.before_commit")  # the first new batch, files written
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-4000:]

    # That batch's transaction is open: the restart aborts it and writes the batch again.
    final = _summary(_stream(kafka_broker, topic, warehouse, source, jars=jars))
    assert final["rows"] == 90 and final["skipped"] == 0, final

    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
        ranges = store.offset_ranges(location)
        states = store.write_id_states(location)
    assert sorted(read_table(location, snapshot).column("id").to_pylist()) == list(range(240))
    assert list(states.values()).count("aborted") == 1 and "open" not in states.values()
    # Per partition, the committed ranges tile [0, end) with neither gap nor overlap, one
    # write id each; together they hold every record once.
    by_partition: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for write_id, r in ranges:
        assert r.topic == topic and states[write_id] == "committed"
        by_partition[r.partition].append((r.from_offset, r.until_offset, write_id))
    assert sorted(by_partition) == list(range(PARTITIONS))
    for parts in by_partition.values():
        parts.sort()
        assert parts[0][0] == 0
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False)), parts
        assert len({w for _, _, w in parts}) == len(parts), parts
    assert sum(u - f for parts in by_partition.values() for f, u, _ in parts) == 240


@pytest.mark.kafka
@pytest.mark.spark
def test_jvm_source_missing_from_the_classpath_is_a_config_error_before_any_table(
        kafka_broker: str, topic: str, warehouse: Path) -> None:
    _fill(kafka_broker, topic, 0, 10)
    run = _stream(kafka_broker, topic, warehouse, "jvm")
    assert run.returncode == 2, run.stderr[-4000:]
    assert "--kafka-source jvm" in run.stderr and "not on the classpath" in run.stderr
    assert "spark-sql-kafka-0-10_2.13" in run.stderr  # the hint names the package
    assert not (warehouse / "events").exists()


@pytest.mark.kafka
def test_bench_topic_ends_exactly_where_list_offsets_says_and_the_bare_consumer_reads_it_all(
        kafka_broker: str, topic: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    from ingest.bench.stream import _drain, _events, _fill_topic, _key

    def list_offsets_latest(name: str) -> int:
        consumer = Consumer({"bootstrap.servers": kafka_broker, "group.id": "probe"})
        try:
            return sum(consumer.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1]
                       for p in range(PARTITIONS))
        finally:
            consumer.close()

    # Why the benchmark and the tests seal each partition: tansu answers ListOffsets(latest)
    # short of the end when a partition's last record batch holds several records.
    produce_events(kafka_broker, f"{topic}-plain", events=_events(1000), key_fn=_key,
                   partitions=PARTITIONS)
    assert list_offsets_latest(f"{topic}-plain") < 1000, "tansu now answers the true end"
    _fill_topic(KafkaConnection(kafka_broker), topic, 1000, PARTITIONS)
    assert list_offsets_latest(topic) == 1000
    assert _drain(KafkaConnection(kafka_broker), topic, 1000) > 0
