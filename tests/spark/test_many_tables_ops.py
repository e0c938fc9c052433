"""`ingest stream` of several topics into a table each, with what a stream of one table has
around its sink (docs/many-tables.md): per-batch lines naming every touched table's rows and
the lag per topic, Prometheus metrics labelled by table (and topic), the offsets of every topic
in a consumer group, and compaction and cleaning of every table the stream writes. Run as
`python -m ingest stream` against a real Apache Kafka broker into SQLite-metastore tables; the
endpoint of the running stream is scraped over HTTP; a second run after more records writes
every record exactly once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from external import free_port
from kafka_server import ApacheKafka, apache_kafka  # noqa: F401 - the fixture
from prometheus_client.parser import text_string_to_metric_families
from support import job_env, wait_until

from ingest.acid.read.reader import read_table
from ingest.kafka import KafkaConnection
from ingest.kafka.group import group_offsets
from ingest.records.routing import table_name_for
from ingest.spark.metrics import StreamMetrics
from ingest.spark.progress import ManyBatchView, batch_record, batch_text
from ingest.spark.sink import BatchReport, ManyBatchReport
from ingest.table.write import create_table, default_table_name
from ingest.txn import Metastore, OffsetRange, default_metastore_url

ROOT = Path(__file__).resolve().parent.parent.parent
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")

# Micro-batches touching both tables in the first run: past the tables' compactor delta count
# threshold (2, a table property; Hive's default is 10), so each table gets compacted.
WAVES = 4
THRESHOLD = {"compactorthreshold.hive.compactor.delta.num.threshold": "2"}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


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


def _scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float], name: str,
           **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _batches(stderr: str) -> list[dict[str, Any]]:
    """The JSON batch lines (--log-format json) of a run's stderr."""
    out = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("event") == "batch":
                out.append(record)
    return out


def _command(kafka: ApacheKafka, topics: str, warehouse: Path, checkpoint: Path,
             *extra: str) -> list[str]:
    return [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers", kafka.plaintext,
            "--topic", topics, "--table-template", f"{warehouse}/{{topic}}",
            "--unrouted-table", str(warehouse / "_unrouted"),
            "--schema", "id BIGINT, name STRING", "--checkpoint", str(checkpoint),
            "--starting-offsets", "earliest", "--log-format", "json", *extra]


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_a_stream_of_two_tables_has_lines_metrics_group_offsets_and_maintenance_per_table(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    tag = uuid.uuid4().hex[:8]
    a, b = f"ops{tag}.a-b", f"ops{tag}_c"
    apache_kafka.create_topic(a, partitions=2)
    apache_kafka.create_topic(b, partitions=1)
    warehouse, checkpoint = tmp_path / "wh", tmp_path / "ck"
    loc_a, loc_b = (str(warehouse / table_name_for(t)) for t in (a, b))
    name_a, name_b = default_table_name(loc_a), default_table_name(loc_b)
    anchor = default_table_name(str(warehouse / "_unrouted"))
    group, port = f"g{tag}", free_port()
    log = tmp_path / "run1.log"
    for location in (loc_a, loc_b):  # the stream checks and keeps tables that exist
        create_table(location, "id BIGINT, name STRING", properties=THRESHOLD)

    # Run 1: a running stream (a micro-batch a second), records in waves so that every
    # micro-batch touches both tables; scraped while it runs, then stopped as by Ctrl-C.
    with open(log, "w") as err:
        job = subprocess.Popen(
            _command(apache_kafka, f"{a},{b}", warehouse, checkpoint, "--trigger", "1",
                     "--maintenance-interval-s", "0", "--metrics-port", str(port),
                     "--metrics-host", "127.0.0.1", "--commit-offsets-to-group", group),
            env=job_env(), stdout=subprocess.DEVNULL, stderr=err, text=True, cwd=ROOT)
        try:
            def alive() -> None:
                if job.poll() is not None:
                    raise AssertionError(f"the stream ended: {log.read_text()[-4000:]}")

            def rows(samples: Samples) -> tuple[float, float]:
                return (_value(samples, "ingest_rows_committed_total", table=name_a),
                        _value(samples, "ingest_rows_committed_total", table=name_b))

            def scraped_rows() -> tuple[float, float] | None:
                alive()
                try:
                    return rows(_scrape(port))
                except OSError:  # not serving yet
                    return None

            for wave in range(WAVES):  # 2 records of a (one per partition), 1 of b
                _produce(apache_kafka, a, range(2 * wave, 2 * wave + 2), 2)
                _produce(apache_kafka, b, range(100 + wave, 101 + wave), 1)
                want = (2.0 * (wave + 1), float(wave + 1))
                wait_until(f"wave {wave} committed", lambda w=want: scraped_rows() == w,
                           timeout_s=240)

            def compacted(samples: Samples, table: str) -> float:
                return sum(v for (n, labels), v in samples.items()
                           if n == "ingest_compactions_total" and ("table", table) in labels)

            def both_compacted() -> bool:
                alive()
                samples = _scrape(port)
                return compacted(samples, name_a) >= 1 and compacted(samples, name_b) >= 1

            wait_until("both tables compacted by the stream", both_compacted, timeout_s=240)
            connection = KafkaConnection(apache_kafka.plaintext)
            ends = {(a, 0): WAVES, (a, 1): WAVES, (b, 0): WAVES}
            wait_until("every topic's offsets in the consumer group",
                       lambda: group_offsets(connection, group, [a, b], timeout_s=10) == ends,
                       timeout_s=120)
            samples = _scrape(port)
        finally:
            if job.poll() is None:
                job.send_signal(signal.SIGINT)
                try:
                    job.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    job.kill()
                    job.wait()
    stderr = log.read_text()

    # Metrics: counted per table, the micro-batches and offsets by the anchor and the topics'
    # tables; lag per topic partition (0: everything committed).
    assert rows(samples) == (2.0 * WAVES, float(WAVES))
    assert _value(samples, "ingest_records_read_total", table=name_a) == 2 * WAVES
    assert _value(samples, "ingest_records_read_total", table=name_b) == WAVES
    assert _value(samples, "ingest_batches_total", table=anchor, outcome="committed") >= WAVES
    assert _value(samples, "ingest_dead_letters_total", table=anchor, reason="unrouted") == 0
    for topic, table, partition in ((a, name_a, "0"), (a, name_a, "1"), (b, name_b, "0")):
        labels = {"table": table, "topic": topic, "partition": partition}
        assert _value(samples, "ingest_kafka_committed_offset", **labels) == WAVES, labels
        assert ("ingest_kafka_lag_records", frozenset(labels.items())) in samples, labels
        assert _value(samples, "ingest_kafka_lag_records", **labels) == 0, labels
    assert _value(samples, "ingest_kafka_group_commits_total", table=anchor, group=group,
                  outcome="committed") >= 1
    for table in (anchor, name_a, f"{name_a}__dead_letter", name_b):
        assert ("ingest_open_transactions", frozenset({("table", table)})) in samples, table
    assert _value(samples, "ingest_commit_latency_seconds_count", table=anchor) >= WAVES

    # Compaction per table on disk: a base, or a delta spanning several write ids.
    for location in (loc_a, loc_b):
        names = sorted(d.name for d in Path(location).iterdir())
        assert [n for n in names if n.startswith("base_") or (
            n.startswith("delta_") and n.split("_")[1] != n.split("_")[2])], names

    # Lines: each micro-batch names the tables it wrote with their rows, and the lag per
    # topic after its commit.
    lines = _batches(stderr)
    assert lines, stderr[-4000:]
    both = [r for r in lines if set(r.get("tables") or ()) == {name_a, name_b}]
    assert both, lines[:3]
    for record in both:
        assert record["table"] == anchor
        assert record["rows_committed"] == sum(t["rows"] for t in record["tables"].values())
        assert record["tables"][name_a]["topics"] == [a]
        assert set(record["lag_after_commit_by_topic"]) == {a, b}
    assert sum(r["tables"].get(name_a, {}).get("rows", 0) for r in lines if r.get("tables")) \
        == 2 * WAVES
    assert "does not compact or clean" not in stderr

    # Run 2, available-now after more records: the summary's rows per table and lag per
    # topic; every record exactly once over both runs.
    _produce(apache_kafka, a, range(2 * WAVES, 2 * WAVES + 6), 2)
    _produce(apache_kafka, b, range(100 + WAVES, 104 + WAVES), 1)
    second = subprocess.run(
        _command(apache_kafka, f"{a},{b}", warehouse, checkpoint, "--available-now", "--json",
                 "--commit-offsets-to-group", group),
        env=job_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert second.returncode == 0, second.stderr[-4000:]
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    assert summary["table"] == anchor and summary["rows"] == 10
    assert summary["tables"] == {name_a: 6, name_b: 4}
    assert summary["lag_by_topic"] == {a: 0, b: 0}
    assert _ids(loc_a) == list(range(2 * WAVES + 6))
    assert _ids(loc_b) == list(range(100, 104 + WAVES))
    assert group_offsets(connection, group, [a, b], timeout_s=10) == {
        (a, 0): WAVES + 3, (a, 1): WAVES + 3, (b, 0): WAVES + 4}
    with Metastore.open(default_metastore_url(loc_a)) as store:
        assert store.transactions(states=("open",)) == []


def _report() -> ManyBatchReport:
    return ManyBatchReport(
        7, 41, tables={
            "default.orders": BatchReport(7, 3, rows=5, dead_letters=1, records_read=6,
                                          files=1, bytes=900,
                                          offsets=(OffsetRange("db.orders", 0, 10, 16),)),
            "default.payments": BatchReport(7, 9, rows=2, records_read=2, files=1, bytes=300,
                                            offsets=(OffsetRange("payments", 0, 0, 2),))},
        offsets=(OffsetRange("db.orders", 0, 10, 16), OffsetRange("payments", 0, 0, 2),
                 OffsetRange("stray", 0, 4, 7)),
        unrouted={"stray": "no route"}, unrouted_records=3, seconds=1.5, commit_seconds=0.02)


def test_a_many_table_batch_line_names_each_tables_rows_and_the_lag_per_topic() -> None:
    view = ManyBatchView(_report(), {"db.orders": 4, "payments": 0, "stray": 1})
    progress = {"batchId": 7, "name": "ingest-default._unrouted", "numInputRows": 11,
                "batchDuration": 2000, "sources": [{
                    "endOffset": {"db.orders": {"0": 16}, "payments": {"0": 2}},
                    "latestOffset": {"db.orders": {"0": 20}, "payments": {"0": 2}}}]}
    record = batch_record(progress, view, table="default._unrouted")
    assert record["write_id"] == 41 and record["rows_committed"] == 7
    assert record["records_read"] == 11 and record["unrouted_records"] == 3
    assert record["tables"]["default.orders"] == {
        "write_id": 3, "rows": 5, "dead_letters": 1, "records_read": 6, "files": 1,
        "bytes": 900, "topics": ["db.orders"], "added_columns": []}
    assert record["lag_records_by_topic"] == {"db.orders": 4, "payments": 0}
    assert record["lag_after_commit_by_topic"] == {"db.orders": 4, "payments": 0, "stray": 1}
    assert record["lag_after_commit"] == 5 and record["commit_seconds"] == 0.02
    text = batch_text(record, view)
    assert "default.orders: 5 rows, 1 dead letters" in text
    assert "default.payments: 2 rows" in text and "3 records routed nowhere" in text
    assert "kafka lag per topic: db.orders 4, payments 0, stray 1" in text
    skipped = ManyBatchView(ManyBatchReport(8, 42, skipped=True))
    replay = batch_record({**progress, "batchId": 8}, skipped, table="t")
    assert replay["skipped"] is True and "tables" not in replay
    assert "kafka lag per topic" not in batch_text(replay, skipped)


def test_metrics_of_several_tables_are_labelled_by_table_and_topic() -> None:
    metrics = StreamMetrics("default._unrouted", committed={("payments", 0): 0})
    metrics.hold({"payments": "default.payments"})
    metrics.observe_many(_report())
    metrics.observe_many(ManyBatchReport(8, 41, skipped=True))
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in metrics.registry.collect() for s in family.samples}

    def value(name: str, **labels: str) -> float:
        return samples[(name, frozenset(labels.items()))]

    assert value("ingest_rows_committed_total", table="default.orders") == 5
    assert value("ingest_rows_committed_total", table="default.payments") == 2
    assert value("ingest_records_read_total", table="default._unrouted") == 3
    assert value("ingest_dead_letters_total", table="default.orders", reason="unparsable") == 1
    assert value("ingest_dead_letters_total", table="default._unrouted", reason="unrouted") == 3
    assert value("ingest_batches_total", table="default._unrouted", outcome="committed") == 1
    assert value("ingest_batches_total", table="default._unrouted", outcome="skipped") == 1
    assert value("ingest_commit_latency_seconds_count", table="default._unrouted") == 1
    offset = "ingest_kafka_committed_offset"
    assert value(offset, table="default.orders", topic="db.orders", partition="0") == 16
    assert value(offset, table="default.payments", topic="payments", partition="0") == 2
    assert value(offset, table="default._unrouted", topic="stray", partition="0") == 7
    metrics.close()


def test_routed_by_field_a_topics_offsets_stay_the_anchors() -> None:
    """By field a topic feeds several tables: its offsets are labelled by the anchor."""
    metrics = StreamMetrics("default._unrouted")
    metrics.observe_many(_report(), by_topic=False)
    families = {f.name: f for f in metrics.registry.collect()}
    tables = {s.labels["table"] for s in families["ingest_kafka_committed_offset"].samples}
    assert tables == {"default._unrouted"}
    rows = {s.labels["table"]: s.value for s in families["ingest_rows_committed"].samples
            if s.name.endswith("_total")}
    assert rows == {"default.orders": 5, "default.payments": 2, "default._unrouted": 0}
    metrics.close()


@pytest.mark.kafka
def test_the_lag_per_topic_follows_a_topic_that_shows_up_later(
        apache_kafka: ApacheKafka,  # noqa: F811 - the fixture
        ) -> None:
    """A pattern's new topic: the probe is made again for it, its lag counted at once."""
    from ingest.spark.many_ops import ManyBatchViews, TopicsLag

    tag = uuid.uuid4().hex[:8]
    a, b = f"lag{tag}.a", f"lag{tag}.b"
    apache_kafka.create_topic(a, partitions=2)
    _produce(apache_kafka, a, range(6), 2)
    views = ManyBatchViews(TopicsLag(KafkaConnection(apache_kafka.plaintext), timeout_s=10))
    try:
        first = views.add(ManyBatchReport(0, 1, offsets=(OffsetRange(a, 0, 0, 2),)))
        assert first.lag_by_topic == {a: 4}  # partition 0: 1 left; 1: never read, 3
        apache_kafka.create_topic(b, partitions=1)
        _produce(apache_kafka, b, range(5), 1)
        second = views.add(ManyBatchReport(1, 2, offsets=(OffsetRange(b, 0, 0, 1),)))
        assert second.lag_by_topic == {a: 4, b: 4}
        assert views(1) is second and views(0) is first and views(7) is None
        assert views.last_lag == {a: 4, b: 4}
    finally:
        views.close()


def test_the_summary_line_gives_rows_per_table_and_the_lag_per_topic() -> None:
    from ingest.spark.many_job import ManyStreamSummary

    summary = ManyStreamSummary("default._unrouted", 3, 1, 7, 4, 2, 1200, 9.5, (),
                                tables={"default.payments": 2, "default.orders": 5},
                                lag_by_topic={"payments": 0, "db.orders": 12})
    line = summary.line()
    assert line.startswith("Stream into default._unrouted finished: 3 micro-batches")
    assert "rows per table: default.orders 5, default.payments 2" in line
    assert line.endswith("kafka lag per topic: db.orders 12, payments 0")
    assert "kafka lag" not in ManyStreamSummary("t", 0, 0, 0, 0, 0, 0, 0.0, ()).line()
