"""A streaming query of two topics into two tables through `ManyTableSink` (docs/many-tables.md,
issue 34 step 3), each Kafka source in a process of its own against a real Apache Kafka
broker: every record once in its topic's table; the tables touched by a micro-batch are those
of its planned non-empty ranges (a micro-batch of one topic allocates no write id in the other
table); every table's committed write id shares its transaction with the anchor's."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from external import spark_kafka_jars
from kafka_server import ApacheKafka, apache_kafka  # noqa: F401 - the fixture
from support import job_env, wait_until

from ingest.acid.read.reader import read_table
from ingest.errors import IngestError
from ingest.records.routing import table_name_for
from ingest.spark.sink.deadletter import DEAD_LETTER_DDL
from ingest.table.write import create_table
from ingest.txn import Metastore, default_metastore_url

ROOT = Path(__file__).resolve().parent.parent.parent
JOB = Path(__file__).with_name("many_tables_job.py")
WAIT_S = 240
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")


def _produce(kafka: ApacheKafka, topic: str, ids: range, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({**kafka.client_config(), "linger.ms": 0})
    for i in ids:
        producer.produce(topic, value=json.dumps({"id": i, "name": f"n{i}"}).encode(),
                         partition=i % partitions)
    assert producer.flush(30) == 0, f"records of {topic} not delivered"


def _start(kafka: ApacheKafka, source: str, topics: str, warehouse: Path, out: Path,
           **env_extra: str) -> subprocess.Popen[bytes]:
    """many_tables_job.py in the background, its output in OUT/job.log."""
    env = job_env()
    env.update(env_extra)
    if source == "jvm":
        env["PYSPARK_SUBMIT_ARGS"] = f"--jars {','.join(spark_kafka_jars())} pyspark-shell"
    out.mkdir(exist_ok=True)
    with (out / "job.log").open("a") as log:
        return subprocess.Popen([sys.executable, str(JOB), kafka.plaintext, source, topics,
                                 str(warehouse), str(out)],
                                env=env, stdout=log, stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen[bytes], out: Path) -> None:
    (out / "stop").write_text("")
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _ids(location: str) -> list[int]:
    """The committed ids of a table ([] while it does not exist yet)."""
    try:
        with Metastore.open(default_metastore_url(location)) as store:
            snapshot = store.snapshot(location)
    except IngestError:
        return []
    table = read_table(location, snapshot)
    return sorted(table.column("id").to_pylist()) if table.num_rows else []


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("source", ["python", "jvm"])
def test_two_topics_stream_into_their_tables_in_one_transaction_per_micro_batch(
        apache_kafka: ApacheKafka, source: str, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    tag = uuid.uuid4().hex[:8]
    a, b = f"shop.{tag}.orders", f"shop.{tag}.payments"  # Debezium-like names
    apache_kafka.create_topic(a, partitions=2)
    apache_kafka.create_topic(b, partitions=1)
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    create_table(str(warehouse / "_unrouted"), DEAD_LETTER_DDL, name="default._unrouted")
    table_a, table_b = (str(warehouse / table_name_for(t)) for t in (a, b))
    _produce(apache_kafka, a, range(30), 2)
    _produce(apache_kafka, b, range(100, 110), 1)
    out = tmp_path / "out"
    proc = _start(apache_kafka, source, f"{a},{b}", warehouse, out)
    try:
        def holds(location: str, count: int) -> bool:
            if proc.poll() is not None:
                pytest.fail(f"the job ended ({proc.returncode}): "
                            f"{(out / 'job.log').read_text()[-3000:]}")
            return len(_ids(location)) >= count

        wait_until("both topics' records in their tables",
                   lambda: holds(table_a, 30) and holds(table_b, 10), timeout_s=WAIT_S)
        _produce(apache_kafka, a, range(30, 50), 2)  # micro-batches of topic a only
        wait_until("topic a's later records", lambda: holds(table_a, 50), timeout_s=WAIT_S)
    finally:
        _stop(proc, out)
    assert _ids(table_a) == list(range(50))
    assert _ids(table_b) == list(range(100, 110))
    with Metastore.open(default_metastore_url(table_a)) as store:
        committed = store.transactions(states=("committed",))
        anchor_txns = {i.txn_id for i in committed if i.table == "default._unrouted"}
        tables = {name: {i.txn_id for i in committed if i.table == name}
                  for name in (f"default.{table_name_for(t)}" for t in (a, b))}
        assert all(txns and txns <= anchor_txns for txns in tables.values()), tables
        # The micro-batches of a's later records touched a's table alone.
        assert len(tables[f"default.{table_name_for(b)}"]) < len(anchor_txns)
        ranges = {name: sorted((r.topic, r.partition, r.from_offset, r.until_offset)
                               for _, r in store.offset_ranges(name))
                  for name in ("default._unrouted", *tables)}
    for name, topic, partitions, count in ((f"default.{table_name_for(a)}", a, 2, 50),
                                           (f"default.{table_name_for(b)}", b, 1, 10)):
        assert {t for t, _, _, _ in ranges[name]} == {topic}
        for p in range(partitions):  # contiguous from 0 to the partition's end
            spans = [(lo, hi) for t, q, lo, hi in ranges[name] if q == p]
            assert spans[0][0] == 0 and all(x[1] == y[0] for x, y in zip(spans, spans[1:],
                                                                          strict=False))
            assert spans[-1][1] == count // partitions
    assert {t for t, _, _, _ in ranges["default._unrouted"]} == {a, b}
    # The sink read each micro-batch's ranges from Spark's plan (packed read tasks of the
    # Python source too): one Spark job a micro-batch, no look at its distinct topics first.
    actions = json.loads((out / "actions.json").read_text())
    assert actions and set(actions) == {1}, actions


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_a_job_killed_before_its_commit_leaves_no_table_committed_and_the_restart_writes_once(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    """SIGKILL at `sink.before_commit` of the first micro-batch, every table's files
    written: no table holds a record; the restarted job aborts the transaction in every
    table, removes its directories, and replays the micro-batch from its checkpoint once."""
    tag = uuid.uuid4().hex[:8]
    a, b = f"k{tag}.orders", f"k{tag}.payments"
    apache_kafka.create_topic(a, partitions=2)
    apache_kafka.create_topic(b, partitions=1)
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    create_table(str(warehouse / "_unrouted"), DEAD_LETTER_DDL, name="default._unrouted")
    table_a, table_b = (str(warehouse / table_name_for(t)) for t in (a, b))
    _produce(apache_kafka, a, range(20), 2)
    _produce(apache_kafka, b, range(100, 105), 1)
    out = tmp_path / "out"
    killed = _start(apache_kafka, "python", f"{a},{b}", warehouse, out,
                    INGEST_CRASH_AT="sink.before_commit")
    try:
        assert killed.wait(timeout=WAIT_S) == -signal.SIGKILL, (out / "job.log").read_text()
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait()
    assert _ids(table_a) == [] and _ids(table_b) == []
    assert list(Path(table_a).rglob("bucket_*")), "the killed micro-batch wrote table a"
    with Metastore.open(default_metastore_url(table_a)) as store:
        left = {i.table for i in store.transactions(states=("open",))}
    assert {"default._unrouted", f"default.{table_name_for(a)}",
            f"default.{table_name_for(b)}"} <= left
    proc = _start(apache_kafka, "python", f"{a},{b}", warehouse, out)
    try:
        def done() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"the job ended ({proc.returncode}): "
                            f"{(out / 'job.log').read_text()[-3000:]}")
            return len(_ids(table_a)) >= 20 and len(_ids(table_b)) >= 5

        wait_until("every record after the restart", done, timeout_s=WAIT_S)
    finally:
        _stop(proc, out)
    assert _ids(table_a) == list(range(20))
    assert _ids(table_b) == list(range(100, 105))
    with Metastore.open(default_metastore_url(table_a)) as store:
        assert store.transactions(states=("open",)) == []
        aborted = {i.table for i in store.transactions(states=("aborted",))}
        assert left <= aborted
        for location in (table_a, table_b):
            snapshot = store.snapshot(location)
            for delta in Path(location).rglob("delta_*"):  # only committed write ids' remain
                assert snapshot.is_valid(int(delta.name.split("_")[1])), delta
