"""The streaming job's Prometheus endpoint (`--metrics-port`) scraped over HTTP and parsed
with prometheus_client's text parser, against a real broker (tansu) and real Spark, while
its micro-batches commit and after; every scrape is checked against the table and the
dead-letter table as they stood at the write id it counted up to. Then `ingest status
--bootstrap-servers` shows the lag the job left. The same scrape holds every metric docker/'s
dashboard and alert rules query (tests/test_monitoring.py checks them against the registry)."""

from __future__ import annotations

import dataclasses
import json
import threading
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

import ingest
from ingest.kafka import produce_events, sample_events
from ingest.spark.job import RunningStream, run_stream
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


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class Scraper(threading.Thread):
    """Scrapes the endpoint every 50 ms until `done`, keeping every parsed scrape in order."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.done = port, threading.Event()
        self.scrapes: list[Samples] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        while not self.done.is_set():
            try:
                self.scrapes.append(scrape(self.port))
            except BaseException as e:  # re-raised by finish() in the test's thread
                self.error = e
                return
            self.done.wait(0.05)

    def finish(self) -> list[Samples]:
        self.done.set()
        self.join(timeout=60)
        if self.error is not None:
            raise self.error
        return self.scrapes


@dataclasses.dataclass(frozen=True)
class Counted:
    """What one scrape says the job committed."""

    batches: int
    rows: int
    dead_letters: int
    records_read: int
    committed_offsets: int
    lag: int
    durations: int
    commits: int
    last_commit: float | None


def counted(samples: Samples, table: str) -> Counted:
    last = samples.get(("ingest_last_commit_timestamp_seconds",
                        frozenset({("table", table)})))
    return Counted(
        batches=int(samples.get(("ingest_batches_total", frozenset(  # none before the first
            {("table", table), ("outcome", "committed")})), 0)),
        rows=int(value(samples, "ingest_rows_committed_total", table=table)),
        dead_letters=int(total(samples, "ingest_dead_letters_total")),
        records_read=int(value(samples, "ingest_records_read_total", table=table)),
        committed_offsets=int(total(samples, "ingest_kafka_committed_offset")),
        lag=int(total(samples, "ingest_kafka_lag_records")),
        durations=int(total(samples, "ingest_batch_duration_seconds_count")),
        commits=int(total(samples, "ingest_commit_latency_seconds_count")),
        last_commit=last)


def rows_at(table: ingest.Table, write_id: int) -> int:
    """The table's rows in the committed snapshot up to `write_id` (0: none)."""
    if write_id == 0:
        return 0
    snapshot = dataclasses.replace(table.snapshot(), high_watermark=write_id)
    return table.to_arrow(columns=[], snapshot=snapshot).num_rows


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
    scraper = Scraper(port)
    scraper.start()  # scrapes while the micro-batches commit
    try:
        assert running.await_termination(timeout_s=300), "the stream did not finish in 300 s"
        during = scraper.finish()
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
    # No tombstone was read, no offset lost, --compact/--clean are off and no consumer group
    # is given: those families have no sample yet (tests/spark/test_ops_metrics.py gives the
    # tombstones and the group some).
    unsampled = {"ingest_tombstones_total", "ingest_kafka_group_commits_total",
                 "ingest_kafka_lost_offsets_total"} | {
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

    # The table and the dead-letter table, read by ingest's reader: what the scrapes counted.
    # Every micro-batch takes write id N of both tables (they are new), so a scrape that
    # counted N batches must match both tables as of write id N.
    events = ingest.open_table(location)
    dead_letter_table = ingest.open_table(f"{location}__dead_letter")
    assert events.to_arrow().num_rows == value(drained, "ingest_rows_committed_total",
                                               table=table) == RECORDS
    assert dead_letter_table.to_arrow().num_rows == total(
        drained, "ingest_dead_letters_total") == BAD
    history = {c.write_id: c for c in events.history()}
    assert sorted(history) == list(range(1, batches + 1))
    assert all(c.state == "committed" for c in history.values())

    final = counted(drained, table)
    seen: dict[int, Counted] = {}
    previous = counted(during[0], table) if during else final
    for samples in during:
        now = counted(samples, table)
        # Counters only grow, and never past what the run ends with.
        assert all(getattr(previous, f) <= getattr(now, f) <= getattr(final, f)
                   for f in ("batches", "rows", "dead_letters", "records_read",
                             "committed_offsets")), (previous, now, final)
        # One scrape sees whole micro-batches: its counts, histograms and offsets agree.
        n = now.batches
        assert now.durations == now.commits == n, now
        assert now.records_read == now.committed_offsets == now.rows + now.dead_letters, now
        assert now.lag == RECORDS + BAD - now.committed_offsets, now
        if n in seen:
            assert now == dataclasses.replace(seen[n], lag=now.lag), (seen[n], now)
        seen[n], previous = now, now
    mid_run = sorted(k for k in seen if 0 < k < batches)
    assert mid_run, f"no scrape caught the run between micro-batches: {sorted(seen)}"
    assert seen.setdefault(batches, final) == dataclasses.replace(final, lag=seen[batches].lag)
    for n, c in sorted(seen.items()):
        # ... and the tables as of write id n hold what the scrape counted.
        assert c.rows == rows_at(events, n), (n, c)
        assert c.dead_letters == rows_at(dead_letter_table, n), (n, c)
        if n:  # the timestamp is taken after write id n committed, before n + 1 opened
            assert c.last_commit is not None
            assert history[n].finished_at is not None
            assert history[n].finished_at <= c.last_commit
            if n + 1 in history:
                assert c.last_commit <= history[n + 1].opened_at
    # The last-commit timestamp moves: each later micro-batch's scrape is strictly later.
    stamps = [c.last_commit for n, c in sorted(seen.items()) if n and c.last_commit]
    assert len(stamps) >= 2 and stamps == sorted(set(stamps)), stamps  # strictly later

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


def test_metrics_host_chooses_the_address_the_endpoint_binds(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    # issue 32: the endpoint bound every interface with no way to choose.
    produce_events(kafka_broker, topic, events=sample_events(3), partitions=1)
    port = free_port()
    running = run_stream(
        spark, bootstrap_servers=kafka_broker, topic=topic, table=str(warehouse / "events"),
        schema_ddl="id BIGINT", checkpoint=str(warehouse / "ck"), available_now=True,
        kafka_timeout_s=10, compact="off", clean="off", metrics_port=port,
        metrics_host="127.0.0.1", wait=False, on_new_field="ignore")
    assert isinstance(running, RunningStream)
    try:
        assert running.metrics is not None and running.metrics._server is not None
        assert running.metrics._server.server_address[:2] == ("127.0.0.1", port)
        assert "ingest_" in scrape_text(port)  # connecting to it answers
        assert running.await_termination(timeout_s=300), "the stream did not finish in 300 s"
    finally:
        running.stop()
