"""The streaming job's Prometheus endpoint (`--metrics-port`) scraped over HTTP and parsed
with prometheus_client's text parser, against a real broker (tansu) and real Spark; then
`ingest status --bootstrap-servers` shows the lag the job left. The same scrape holds every
metric docker/'s dashboard and alert rules query (tests/test_monitoring.py checks them
against the registry)."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import free_port
from monitoring_queries import (
    BUILT_IN,
    dashboard_exprs,
    dashboard_names,
    metric_names,
    rules,
    served_names,
)
from prometheus_client.parser import text_string_to_metric_families
from support import run_cli

from ingest.spark.job import RunningStream, run_stream
from ingest.spark.kafka import produce_events, sample_events
from ingest.spark.metrics import METRIC_NAMES

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")]

RECORDS, BAD, PER_BATCH, MORE = 90, 2, 40, 25


def scrape_text(port: int) -> str:
    """The endpoint's reply, in Prometheus' text format."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        return response.read().decode()


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the endpoint, by (sample name, labels)."""
    return parse(scrape_text(port))


def parse(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a scrape, by (sample name, labels)."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float], name: str,
          **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def total(samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float], name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


def test_metrics_count_what_the_stream_committed_and_lag_follows_the_broker(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    produce_events(kafka_broker, topic, events=sample_events(RECORDS),
                   key_fn=lambda e: str(e["id"]), partitions=3)  # type: ignore[index]
    produce_events(kafka_broker, topic, events=[b"{broken"] * BAD, partitions=3)
    location, port = str(warehouse / "events"), free_port()
    started = time.time()
    running = run_stream(
        spark, bootstrap_servers=kafka_broker, topic=topic, table=location,
        schema_ddl="id BIGINT, value STRING, ts TIMESTAMP", checkpoint=str(warehouse / "ck"),
        available_now=True, max_offsets_per_trigger=PER_BATCH, kafka_timeout_s=10,
        compact="off", clean="off", metrics_port=port, wait=False,
        on_new_field="ignore")  # sample events' dt is dropped
    assert isinstance(running, RunningStream)
    try:
        assert running.await_termination(timeout_s=300), "the stream did not finish in 300 s"
        summary = running.summary()
        table = running.table
        drained_text = scrape_text(port)  # the query ended; the driver still serves
        drained = parse(drained_text)
        produce_events(kafka_broker, topic, events=sample_events(MORE, start_id=RECORDS),
                       key_fn=lambda e: str(e["id"]), partitions=3)  # type: ignore[index]
        behind = scrape(port)
    finally:
        running.stop()
    with pytest.raises(OSError):  # stop() closed the endpoint
        scrape(port)

    batches = -(-(RECORDS + BAD) // PER_BATCH)
    assert summary.batches == batches and summary.rows == RECORDS
    assert summary.dead_letters == BAD
    families = {n for n, _ in drained}
    # No tombstone was read, --compact/--clean are off and no consumer group is given: those
    # families have no sample yet (tests/spark/test_ops_metrics.py gives them some).
    unsampled = {"ingest_tombstones_total", "ingest_kafka_group_commits_total"} | {
        n for n in METRIC_NAMES if n.startswith(("ingest_compaction", "ingest_cleaner_",
                                                 "ingest_maintenance_"))}
    assert {n for n in METRIC_NAMES if not n.endswith("_seconds")} <= families | unsampled
    for name in (table, f"{table}__dead_letter"):  # asked of the metastore at the scrape
        assert value(drained, "ingest_open_transactions", table=name) == 0
        assert value(drained, "ingest_reader_leases", table=name) == 0
    assert value(drained, "ingest_rows_committed_total", table=table) == RECORDS
    assert value(drained, "ingest_records_read_total", table=table) == RECORDS + BAD
    assert value(drained, "ingest_dead_letters_total", table=table, reason="unparsable") == BAD
    assert value(drained, "ingest_dead_letters_total", table=table, reason="tombstone") == 0
    assert value(drained, "ingest_batches_total", table=table, outcome="committed") == batches
    assert value(drained, "ingest_files_written_total", table=table) == summary.files > 0
    assert value(drained, "ingest_bytes_written_total", table=table) == summary.bytes > 0
    for histogram in ("ingest_batch_duration_seconds", "ingest_commit_latency_seconds"):
        assert value(drained, f"{histogram}_count", table=table) == batches
        assert value(drained, f"{histogram}_bucket", table=table, le="+Inf") == batches
        assert value(drained, f"{histogram}_sum", table=table) > 0
    assert started <= value(drained, "ingest_last_commit_timestamp_seconds",
                            table=table) <= time.time()
    lag = {dict(labels)["partition"]: v for (n, labels), v in drained.items()
           if n == "ingest_kafka_lag_records"}
    assert lag == {"0": 0, "1": 0, "2": 0}  # the topic drained
    assert total(drained, "ingest_kafka_committed_offset") == RECORDS + BAD

    # Every name the dashboard and the alert rules query is one this running job served.
    sampled, announced = served_names(drained_text)
    for title, expr in dashboard_exprs():
        names = dashboard_names(title, expr)
        assert names and names <= announced | BUILT_IN, (title, sorted(names - announced))
    for rule in rules():
        names = metric_names(rule["expr"])
        assert names and names <= announced | BUILT_IN, (rule["alert"], sorted(names - announced))
    # What the dashboard shows first and the alerts watch has samples after a run.
    assert {"ingest_rows_committed_total", "ingest_kafka_lag_records",
            "ingest_commit_latency_seconds_bucket", "ingest_last_commit_timestamp_seconds",
            "ingest_dead_letters_total", "ingest_batches_total"} <= sampled

    # Records produced after the last micro-batch: lag at scrape time, nothing committed.
    assert total(behind, "ingest_kafka_lag_records") == MORE
    assert value(behind, "ingest_rows_committed_total", table=table) == RECORDS

    # Without the job: the same lag from the table's sink progress and the broker.
    code, out, err = run_cli(["status", location, "--bootstrap-servers", kafka_broker,
                              "--json"], capsys)
    assert code == 0, err
    stream = json.loads(out)["stream"]
    assert stream["lag_records"] == MORE and stream["last_write_id"] == batches
    assert 0 <= stream["last_commit_age_s"] < time.time() - started + 1


def test_a_metrics_port_in_use_is_refused(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    import socket

    from ingest.errors import ConfigError

    produce_events(kafka_broker, topic, events=sample_events(3), partitions=1)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"Cannot serve metrics on 0\.0\.0\.0:{port}"):
            run_stream(spark, bootstrap_servers=kafka_broker, topic=topic,
                       table=str(warehouse / "events"), schema_ddl="id BIGINT",
                       checkpoint=str(warehouse / "ck"), available_now=True,
                       kafka_timeout_s=10, metrics_port=port)
    assert not (warehouse / "events").exists()  # refused before anything was created
