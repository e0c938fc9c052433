"""Operating the stream against a real broker (tansu) and real Spark: one JSON line per
micro-batch from the StreamingQueryListener (`--log-format json`), what Spark's own progress
really carries (the source's latest offsets, the observed Kafka records), and the table's
offsets copied to a consumer group (`--commit-offsets-to-group`) after every commit."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import free_port

from ingest.kafka import KafkaConnection, group_offsets, produce_events, sample_events
from ingest.spark import configure_stream_logging
from ingest.spark.job import RunningStream, run_stream
from ingest.spark.progress import OBSERVATION
from ingest.table.core import stream_progress
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")]

ROOT = Path(__file__).resolve().parents[2]
RECORDS, BAD, PER_BATCH = 70, 2, 30
SCHEMA = "id BIGINT, value STRING, ts TIMESTAMP, dt STRING"  # every field of the sample events


def table_offsets(location: str) -> dict[tuple[str, int], int]:
    with Metastore.open(default_metastore_url(location)) as store:
        progress = stream_progress(store, store.get_table(location).name)
    assert progress is not None
    return dict(progress.offsets)


def test_json_batch_lines_progress_and_group_offsets_match_the_table(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    produce_events(kafka_broker, topic, events=sample_events(RECORDS),
                   key_fn=lambda e: str(e["id"]), partitions=2)  # type: ignore[index]
    produce_events(kafka_broker, topic, events=[b"{broken"] * BAD, partitions=2)
    location, group, port = str(warehouse / "events"), f"ingest-{topic}", free_port()
    out = io.StringIO()
    handler = configure_stream_logging("json", stream=out)
    try:
        running = run_stream(
            spark, bootstrap_servers=kafka_broker, topic=topic, table=location,
            schema_ddl=SCHEMA, checkpoint=str(warehouse / "ck"), available_now=True,
            max_offsets_per_trigger=PER_BATCH, kafka_timeout_s=10, compact="off",
            clean="off", log_format="json", commit_offsets_to_group=group,
            metrics_port=port, wait=False)
        assert isinstance(running, RunningStream)
        try:
            assert running.await_termination(timeout_s=300), "the stream did not finish"
        finally:
            summary = running.stop()
            metrics = running.metrics
        assert running.operations is not None
        listened = running.operations.listener.records
    finally:
        for name in ("ingest.spark.progress", "ingest.spark.sink", "ingest.spark.job",
                     "ingest.spark.maintenance", "ingest.spark.metrics", "ingest.spark.kafka",
                     "ingest.kafka"):
            logging.getLogger(name).removeHandler(handler)

    batches = -(-(RECORDS + BAD) // PER_BATCH)
    assert summary.batches == batches and summary.rows == RECORDS
    lines = [json.loads(line) for line in out.getvalue().splitlines()]  # every line is JSON
    records = [r for r in lines if r["event"] == "batch"]
    assert [r["batch_id"] for r in records] == list(range(batches))
    reports = {r.batch_id: r for r in summary.reports}
    for r in records:
        report = reports[r["batch_id"]]
        assert r["table"] == "default.events" and r["write_id"] == report.write_id
        assert r["rows_committed"] == report.rows and r["records_read"] == report.records_read
        assert r["input_records"] == report.records_read
        assert r["commit_seconds"] >= 0 and r["duration_s"] > 0
        # What Spark's progress carries: the batch's offsets and the broker's latest ...
        ends = {(t, int(p)): o for t, parts in r["end_offsets"].items() for p, o in parts.items()}
        for o in report.offsets:
            assert ends[(o.topic, o.partition)] == o.until_offset
        assert r["latest_offsets"] and r["lag_records"] == sum(
            o for parts in r["latest_offsets"].values() for o in parts.values()) - sum(
            ends.values())
        # ... and the observed Kafka records of the batch (the sink's rows are ours to add).
        assert r["observed"]["records"] == r["input_records"]
        assert r["observed"]["tombstones"] == 0
        # Nothing was produced meanwhile: the sink's lag after the commit is the same.
        assert r["lag_after_commit"] == r["lag_records"]
    assert records[0]["lag_records"] == RECORDS + BAD - PER_BATCH  # latest at planning
    assert records[-1]["lag_records"] == 0
    assert sum(r["rows_committed"] for r in records) == RECORDS
    assert list(listened) == records
    assert isinstance(records[-1]["observed"]["max_timestamp"], str)  # Spark's JSON timestamp

    # The consumer group holds exactly the table's offsets.
    expected = table_offsets(location)
    assert sum(expected.values()) == RECORDS + BAD
    assert group_offsets(KafkaConnection(kafka_broker), group, [topic], timeout_s=10) == expected
    assert metrics is not None
    assert metrics.registry.get_sample_value("ingest_kafka_group_commits_total", {
        "table": "default.events", "group": group, "outcome": "failed"}) is None
    assert (metrics.registry.get_sample_value("ingest_kafka_group_commits_total", {
        "table": "default.events", "group": group, "outcome": "committed"}) or 0) >= 1


def test_progress_carries_latest_offsets_and_observed_records_not_sink_rows(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    """Spark's `lastProgress` as any Spark tool sees it: the source reports the broker's
    latest offsets and the observed metrics count the Kafka records; a foreachBatch sink has
    no output count (-1), which is why the batch line joins the sink's report."""
    produce_events(kafka_broker, topic, events=sample_events(12), partitions=1)
    produce_events(kafka_broker, topic, events=[None] * 3, partitions=1)  # tombstones
    running = run_stream(
        spark, bootstrap_servers=kafka_broker, topic=topic, table=str(warehouse / "events"),
        schema_ddl=SCHEMA, checkpoint=str(warehouse / "ck"), available_now=True,
        kafka_timeout_s=10, compact="off", clean="off", wait=False)
    assert isinstance(running, RunningStream)
    try:
        assert running.await_termination(timeout_s=300)
        progress = running.query.lastProgress
    finally:
        running.stop()
    assert progress is not None
    source = progress["sources"][0]
    latest = source["latestOffset"]
    latest = json.loads(latest) if isinstance(latest, str) else latest
    assert latest == {topic: {"0": 15}}
    observed = progress["observedMetrics"][OBSERVATION]
    assert (observed["records"], observed["tombstones"]) == (15, 3)
    assert progress["sink"]["numOutputRows"] == -1


def test_the_spark_submit_job_logs_json_lines_and_commits_to_the_group(
        kafka_broker: str, topic: str, warehouse: Path) -> None:
    """jobs/kafka_to_acid.py with --log-format json: stderr is JSON lines, batches included."""
    produce_events(kafka_broker, topic, events=sample_events(20), partitions=2)
    location, group = str(warehouse / "events"), f"ingest-job-{topic}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "jobs" / "kafka_to_acid.py"), "--bootstrap-servers",
         kafka_broker, "--topic", topic, "--table", location, "--schema", SCHEMA,
         "--checkpoint", str(warehouse / "ck"), "--available-now", "--compact", "off",
         "--clean", "off", "--log-format", "json", "--commit-offsets-to-group", group],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    ours = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    batch = [r for r in ours if r["event"] == "batch"]
    assert len(batch) == 1 and batch[0]["rows_committed"] == 20, done.stderr[-3000:]
    assert all(r["event"] in ("batch", "log") for r in ours)
    assert (group_offsets(KafkaConnection(kafka_broker), group, [topic], timeout_s=10)
            == table_offsets(location))


def test_ingest_stream_logs_a_text_line_per_batch_with_sparks_numbers(
        kafka_broker: str, topic: str, warehouse: Path) -> None:
    """`ingest stream` (default --log-format text): the sink's sentence, then Spark's."""
    produce_events(kafka_broker, topic, events=sample_events(20), partitions=1)
    done = subprocess.run(
        [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers", kafka_broker,
         "--topic", topic, "--table", str(warehouse / "events"), "--schema", SCHEMA,
         "--checkpoint", str(warehouse / "ck"), "--available-now", "--compact", "off",
         "--clean", "off", "--max-offsets-per-trigger", "15"],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("batch ")]
    assert len(lines) == 2, done.stderr[-3000:]
    assert lines[0].startswith("batch 0: write id 1, 15 rows, 0 dead letters")
    assert re.search(r"; spark: 15 input records in \d+\.\d\d s, 5 records behind the "
                     r"latest offset$", lines[0]), lines[0]
    assert lines[1].startswith("batch 1: write id 2, 5 rows")
    assert re.search(r"; spark: 5 input records in \d+\.\d\d s, 0 records behind", lines[1])
