"""A topic created while a many-table `ingest stream --topic-pattern` runs is streamed into its
table from its first record (issue 34, second acceptance item), through `python -m ingest
stream` against a real Apache Kafka broker; a topic outside the pattern gets no table."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kafka_server import ApacheKafka, apache_kafka  # noqa: F401 - the fixture
from support import job_env, wait_until

from ingest.acid.read.reader import read_table
from ingest.records.routing import table_name_for
from ingest.txn import METASTORE_FILENAME, Metastore, default_metastore_url

ROOT = Path(__file__).resolve().parent.parent.parent
pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.filterwarnings(
                  "ignore:PySpark does not yet fully support:FutureWarning")]
WAIT_S = 300


def _produce(kafka: ApacheKafka, topic: str, ids: range, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({**kafka.client_config(), "linger.ms": 0})
    for i in ids:
        producer.produce(topic, value=json.dumps({"id": i, "name": f"n{i}"}).encode(),
                         partition=i % partitions)
    assert producer.flush(30) == 0, f"records of {topic} not delivered"


def test_a_topic_created_while_the_stream_runs_is_streamed_from_its_first_record(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    tag = uuid.uuid4().hex[:8]
    first, later, outside = f"n{tag}.shop.orders", f"n{tag}.shop.refunds", f"x{tag}.refunds"
    apache_kafka.create_topic(first, partitions=2)
    _produce(apache_kafka, first, range(10), 2)
    warehouse = tmp_path / "wh"
    anchor = warehouse / "_unrouted"
    url = default_metastore_url(str(anchor))

    def ids(topic: str) -> list[int]:
        location = str(warehouse / table_name_for(topic))
        if not (warehouse / METASTORE_FILENAME).exists() or not anchor.exists():
            return []  # the stream has not made its metastore and anchor yet
        with Metastore.open(url) as store:
            if store.find_table(location) is None:
                return []
            snapshot = store.snapshot(location)
        table = read_table(location, snapshot)
        return sorted(table.column("id").to_pylist()) if table.num_rows else []

    env = job_env()
    log_path = tmp_path / "stream.log"
    with log_path.open("w") as log:
        job = subprocess.Popen(
            [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers",
             apache_kafka.plaintext, "--topic-pattern", rf"n{tag}\..*", "--table-template",
             f"{warehouse}/{{topic}}", "--unrouted-table", str(anchor),
             "--schema", "id BIGINT, name STRING", "--checkpoint", str(tmp_path / "ck"),
             "--starting-offsets", "earliest", "--trigger", "1", "--compact", "off",
             "--clean", "off"],
            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)

    def running(condition: object) -> object:
        if job.poll() is not None:
            pytest.fail(f"the stream ended ({job.returncode}): {log_path.read_text()[-4000:]}")
        return condition

    try:
        wait_until("the first topic's records in its table",
                   lambda: running(ids(first) == list(range(10))), timeout_s=WAIT_S,
                   interval_s=0.5)
        # Created while the stream runs, its records there before the stream lists it.
        apache_kafka.create_topic(later, partitions=3)
        apache_kafka.create_topic(outside, partitions=1)
        _produce(apache_kafka, later, range(100, 130), 3)
        _produce(apache_kafka, outside, range(200, 203), 1)
        wait_until("the new topic's records in its table",
                   lambda: running(ids(later) == list(range(100, 130))), timeout_s=WAIT_S,
                   interval_s=0.5)
        _produce(apache_kafka, first, range(10, 12), 2)  # the stream goes on after it
        wait_until("the first topic's next records",
                   lambda: running(ids(first) == list(range(12))), timeout_s=WAIT_S,
                   interval_s=0.5)
    finally:
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
            try:
                job.wait(timeout=60)
            except subprocess.TimeoutExpired:
                job.kill()
                job.wait()
    assert ids(later) == list(range(100, 130)), "exactly once"
    with Metastore.open(url) as store:
        ranges = sorted(r for _, r in store.offset_ranges(str(warehouse / table_name_for(later))))
    # From the first offset of each of its partitions, ten records each.
    starts = {r.partition: r.from_offset for r in reversed(ranges)}
    assert starts == {0: 0, 1: 0, 2: 0}, ranges
    assert sum(r.until_offset - r.from_offset for r in ranges) == 30
    assert not (warehouse / table_name_for(outside)).exists()
