"""`ingest stream` of several topics into a table each, or of one topic routed by a field
(docs/many-tables.md), run as `python -m ingest stream` against a real Apache Kafka broker into
SQLite-metastore tables: every record once in its table (named by the table name rules), the
second run after more records exactly once; options the stream does not run yet exit 2 before
anything."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kafka_server import ApacheKafka, apache_kafka  # noqa: F401 - the fixture
from support import job_env

from ingest.acid.read.reader import read_table
from ingest.records.routing import table_name_for
from ingest.table.write import default_table_name
from ingest.txn import Metastore, default_metastore_url

ROOT = Path(__file__).resolve().parent.parent.parent
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")


def _produce(kafka: ApacheKafka, topic: str, ids: range, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({**kafka.client_config(), "linger.ms": 0})
    for i in ids:
        producer.produce(topic, value=json.dumps({"id": i, "name": f"n{i}"}).encode(),
                         partition=i % partitions)
    assert producer.flush(30) == 0, f"records of {topic} not delivered"


def _ids(location: str) -> list[int]:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    table = read_table(location, snapshot)
    return sorted(table.column("id").to_pylist()) if table.num_rows else []


def _stream(kafka: ApacheKafka, topics: str, warehouse: Path, checkpoint: Path,
            *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers", kafka.plaintext,
         "--topic", topics, "--table-template", f"{warehouse}/{{topic}}",
         "--unrouted-table", str(warehouse / "_unrouted"), "--schema", "id BIGINT, name STRING",
         "--checkpoint", str(checkpoint), "--starting-offsets", "earliest", "--available-now",
         "--compact", "off", "--clean", "off", "--json", "--quiet", *extra],
        env=job_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_ingest_stream_writes_each_topic_into_its_table_exactly_once_over_two_runs(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    tag = uuid.uuid4().hex[:8]
    a, b = f"a{tag}.b-c", f"d{tag}"  # '.' and '-' become '_' in a's table name
    apache_kafka.create_topic(a, partitions=2)
    apache_kafka.create_topic(b, partitions=1)
    warehouse, checkpoint = tmp_path / "wh", tmp_path / "ck"
    table_a, table_b = (str(warehouse / table_name_for(t)) for t in (a, b))
    assert table_name_for(a) == f"a{tag}_b_c"
    _produce(apache_kafka, a, range(20), 2)
    _produce(apache_kafka, b, range(100, 105), 1)

    first = _stream(apache_kafka, f"{a},{b}", warehouse, checkpoint)
    assert first.returncode == 0, first.stderr[-4000:]
    summary = json.loads(first.stdout.strip().splitlines()[-1])
    assert summary["table"] == default_table_name(str(warehouse / "_unrouted"))
    assert summary["rows"] == 25 and summary["dead_letters"] == 0
    assert _ids(table_a) == list(range(20))
    assert _ids(table_b) == list(range(100, 105))

    _produce(apache_kafka, a, range(20, 30), 2)
    _produce(apache_kafka, b, range(105, 107), 1)
    second = _stream(apache_kafka, f"{a},{b}", warehouse, checkpoint)
    assert second.returncode == 0, second.stderr[-4000:]
    assert json.loads(second.stdout.strip().splitlines()[-1])["rows"] == 12
    assert _ids(table_a) == list(range(30))
    assert _ids(table_b) == list(range(100, 107))
    with Metastore.open(default_metastore_url(table_a)) as store:
        anchor = store.get_table(str(warehouse / "_unrouted"))
        committed = store.transactions(states=("committed",))
        anchor_txns = {i.txn_id for i in committed if i.table == anchor.name}
        for location in (table_a, table_b):  # each table's transactions are the anchor's
            name = store.get_table(location).name
            assert {i.txn_id for i in committed if i.table == name} <= anchor_txns
        assert store.transactions(states=("open",)) == []


def test_options_a_many_table_stream_does_not_run_yet_exit_2_writing_nothing(
        tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers", "127.0.0.1:9",
         "--topic", "a.b-c,d", "--table-template", f"{tmp_path}/wh/{{topic}}",
         "--unrouted-table", f"{tmp_path}/wh/_unrouted", "--schema", "id BIGINT",
         "--checkpoint", f"{tmp_path}/ck", "--txns-per-delta", "2"],
        env=job_env(), capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert "cannot use --txns-per-delta 2 yet" in done.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("flags", "error"), [
    (["--route", "a.b-c=wh/_unrouted/"], "the table is the stream's --unrouted-table"),
    (["--table-template", "wh/{topic}", "--topic", "x,x__dead_letter"],
     "topic 'x__dead_letter' routes to table"),
    (["--route", "a.b-c=nosuchfs://b/t"], "unknown URL scheme nosuchfs://"),
    (["--topic-pattern", r"\p{Alpha}+", "--table-template", "wh/{topic}"],
     "uses Java's \\p{...}"),
    (["--mode", "cdc", "--route-key", "a.b-c=id", "--table-template", "wh/{topic}"],
     "--mode cdc needs the key of every routed table, but --route d has none"),
    (["--table-template", "wh/{topic}", "--on-new-field", "evolve", "--evolve-type", "id=STRING"],
     "--evolve-type id=STRING: --schema already has column id BIGINT"),
])
def test_route_collisions_bad_urls_and_java_patterns_exit_2_before_anything_starts(
        tmp_path: Path, flags: list[str], error: str) -> None:
    """Refused up front (exit 2), never a micro-batch failing on every restart."""
    base = ["--topic", "a.b-c,d", "--route", "d=wh/d"]
    if "--topic" in flags or "--topic-pattern" in flags:
        base = []
    done = subprocess.run(
        [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers", "127.0.0.1:9",
         *base, *flags, "--unrouted-table", "wh/_unrouted", "--schema", "id BIGINT",
         "--checkpoint", "ck"],
        env=job_env(), capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert error in done.stderr
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.iterdir())


def test_help_lists_the_many_table_options() -> None:
    done = subprocess.run([sys.executable, "-m", "ingest", "stream", "--help"], env=job_env(),
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0
    for option in ("--topic-pattern", "--table-template", "--route", "--routes",
                   "--route-field", "--unrouted-table", "--max-new-tables-per-batch",
                   "--route-key"):
        assert option in done.stdout, option
    assert "applies per table" in " ".join(done.stdout.split())  # --on-new-field


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_ingest_stream_routes_by_field_with_the_unrouted_records_in_the_anchor(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    from confluent_kafka import Producer

    topic = f"db{uuid.uuid4().hex[:8]}.all"
    apache_kafka.create_topic(topic, partitions=1)
    producer = Producer({**apache_kafka.client_config(), "linger.ms": 0})
    for i in range(12):
        producer.produce(topic, value=json.dumps(
            {"id": i, "kind": "Customers" if i % 3 else "order-lines"}).encode())
    producer.produce(topic, value=json.dumps({"id": 99}).encode())  # no key: the anchor's
    assert producer.flush(30) == 0
    warehouse = tmp_path / "wh"
    done = subprocess.run(
        [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers", apache_kafka.plaintext,
         "--topic", topic, "--route-field", "kind", "--table-template", f"{warehouse}/{{field}}",
         "--unrouted-table", str(warehouse / "_unrouted"), "--schema", "id BIGINT, kind STRING",
         "--checkpoint", str(tmp_path / "ck"), "--starting-offsets", "earliest",
         "--available-now", "--compact", "off", "--clean", "off", "--json", "--quiet"],
        env=job_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    assert _ids(str(warehouse / table_name_for("Customers"))) == [i for i in range(12) if i % 3]
    assert _ids(str(warehouse / table_name_for("order-lines"))) == [0, 3, 6, 9]
    anchor = str(warehouse / "_unrouted")
    with Metastore.open(default_metastore_url(anchor)) as store:
        unrouted = read_table(anchor, store.snapshot(anchor))
    assert unrouted.num_rows == 1


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_the_spark_submit_job_runs_a_topic_pattern_stream(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    """jobs/kafka_to_acid.py takes the same options: --topic-pattern reads every matching
    topic (and no other) into its table."""
    tag = uuid.uuid4().hex[:8]
    a, b, other = f"p{tag}.orders", f"p{tag}.payments", f"q{tag}.orders"
    for topic in (a, b, other):
        apache_kafka.create_topic(topic, partitions=1)
    _produce(apache_kafka, a, range(6), 1)
    _produce(apache_kafka, b, range(10, 13), 1)
    _produce(apache_kafka, other, range(20, 22), 1)
    warehouse = tmp_path / "wh"
    done = subprocess.run(
        [sys.executable, str(ROOT / "jobs" / "kafka_to_acid.py"), "--master", "local[2]",
         "--bootstrap-servers", apache_kafka.plaintext, "--topic-pattern", rf"p{tag}\..*",
         "--table-template", f"{warehouse}/{{topic}}", "--unrouted-table",
         str(warehouse / "_unrouted"), "--schema", "id BIGINT, name STRING", "--checkpoint",
         str(tmp_path / "ck"), "--starting-offsets", "earliest", "--available-now",
         "--compact", "off", "--clean", "off"],
        env=job_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    assert _ids(str(warehouse / table_name_for(a))) == list(range(6))
    assert _ids(str(warehouse / table_name_for(b))) == list(range(10, 13))
    assert not (warehouse / table_name_for(other)).exists()
