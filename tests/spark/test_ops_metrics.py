"""The job's metrics beyond the micro-batch counters, without Spark: the maintenance thread's
compactions, cleaner removals and backlogs; the metastore's open transactions and reader
leases; the consumer-group commits, a failed one counted and logged."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pytest

from ingest.kafka import GroupCommitter, KafkaConnection
from ingest.spark.maintenance import StreamMaintenance
from ingest.spark.metrics import METRIC_NAMES, StreamMetrics
from ingest.table import open_table
from ingest.table.write import create_table, load
from ingest.txn import Metastore, default_metastore_url

PARTITION = "dt=2026-11-21"
PROPERTIES = {"compactorthreshold.hive.compactor.delta.num.threshold": "2",
              "ingest.cleaner.retention.seconds": "0"}


def make_table(tmp_path: Path) -> str:
    location = str(tmp_path / "events")
    create_table(location, "id BIGINT, value STRING", partitioned_by=("dt",),
                 properties=PROPERTIES)
    return location


def add_loads(location: str, count: int, start: int) -> None:
    for i in range(start, start + count):
        ids = range(i * 10, (i + 1) * 10)
        load(open_table(location), pa.table({"id": list(ids), "value": [f"v{x}" for x in ids],
                                             "dt": ["2026-11-21"] * 10}))


def sample(metrics: StreamMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"table": "default.events", **labels})


def test_backlog_compactions_and_cleaner_removals_follow_the_maintenance_thread(
        tmp_path: Path) -> None:
    location = make_table(tmp_path)
    maintenance = StreamMaintenance(interval_s=0)
    metrics = StreamMetrics("default.events")
    assert sample(metrics, "ingest_compaction_backlog_deltas") is None  # nothing measured yet
    metrics.watch_maintenance(maintenance)

    add_loads(location, 2, 0)  # two deltas: under the threshold (more than 2)
    maintenance.run_once(open_table(location).ref, [f"{location}/{PARTITION}"])
    assert sample(metrics, "ingest_compaction_backlog_deltas") == 2
    assert sample(metrics, "ingest_compaction_backlog_delete_deltas") == 0
    assert sample(metrics, "ingest_compaction_backlog_partitions") == 1
    backlog_bytes = sample(metrics, "ingest_compaction_backlog_bytes")
    assert backlog_bytes is not None and backlog_bytes > 0
    assert sample(metrics, "ingest_compactions_total", kind="major") is None
    assert sample(metrics, "ingest_cleaner_runs_total") == 1
    assert sample(metrics, "ingest_cleaner_removed_directories_total") == 0

    add_loads(location, 2, 2)  # four deltas: the initiator compacts
    maintenance.run_once(open_table(location).ref, [f"{location}/{PARTITION}"])
    compacted = {k: sample(metrics, "ingest_compactions_total", kind=k)
                 for k in ("major", "minor")}
    assert sum(v or 0 for v in compacted.values()) == 1, compacted
    assert sample(metrics, "ingest_compaction_backlog_deltas") == 0  # compacted: re-measured later
    assert sample(metrics, "ingest_cleaner_runs_total") == 2
    removed = sample(metrics, "ingest_cleaner_removed_directories_total")
    assert removed == 4  # the four deltas the compaction folded (retention 0, no reader)
    assert (sample(metrics, "ingest_cleaner_removed_files_total") or 0) >= 4
    assert (sample(metrics, "ingest_cleaner_removed_bytes_total") or 0) > 0
    assert sample(metrics, "ingest_maintenance_failures_total") == 0


def test_a_failed_maintenance_run_is_counted_per_table(tmp_path: Path) -> None:
    location = make_table(tmp_path)
    add_loads(location, 3, 0)
    maintenance = StreamMaintenance(interval_s=0)
    metrics = StreamMetrics("default.events")
    metrics.watch_maintenance(maintenance)
    # A delta directory that is a file: listing the partition's deltas fails.
    (tmp_path / "events" / PARTITION / "delta_0000099_0000099_0000").write_text("not a dir")
    maintenance.run_once(open_table(location).ref, [f"{location}/{PARTITION}"])
    assert maintenance.stats.errors >= 1
    assert (sample(metrics, "ingest_maintenance_failures_total") or 0) >= 1


def test_open_transactions_and_reader_leases_are_asked_of_the_metastore(tmp_path: Path) -> None:
    location = make_table(tmp_path)
    url = default_metastore_url(location)
    metrics = StreamMetrics("default.events")
    assert sample(metrics, "ingest_open_transactions") is None  # not watching: no sample
    metrics.watch_metastore(url, ["default.events"])
    try:
        assert sample(metrics, "ingest_open_transactions") == 0
        assert sample(metrics, "ingest_reader_leases") == 0
        with Metastore.open(url) as store:
            txn = store.open_transaction("default.events", agent="test:writer")
            with store.reading("default.events", agent="test:reader"):
                assert sample(metrics, "ingest_open_transactions") == 1
                assert sample(metrics, "ingest_reader_leases") == 1
            store.abort(txn)
        assert sample(metrics, "ingest_open_transactions") == 0
        assert sample(metrics, "ingest_reader_leases") == 0
    finally:
        metrics.close()


def test_a_metastore_that_fails_loses_only_its_gauges(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    metrics = StreamMetrics("default.events")
    metrics.watch_metastore(f"sqlite:///{tmp_path}/missing.sqlite", ["default.events"])
    with caplog.at_level(logging.WARNING, logger="ingest.spark.metrics"):
        assert sample(metrics, "ingest_open_transactions") is None
        assert sample(metrics, "ingest_rows_committed_total") == 0  # the scrape still works
    assert "cannot read transactions and leases" in caplog.text
    metrics.close()


def test_a_failed_group_commit_is_counted_and_logged_never_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    metrics = StreamMetrics("default.events")
    committer = GroupCommitter(KafkaConnection("127.0.0.1:1"), "ingest-test", timeout_s=1,
                               on_result=lambda ok: metrics.group_committed("ingest-test", ok))
    with caplog.at_level(logging.WARNING, logger="ingest.kafka.group"):
        committer.submit({("events", 0): 5})
        assert committer.flush(60)
        committer.close(timeout_s=1)
    assert committer.failures == 1 and committer.commits == 0
    assert sample(metrics, "ingest_kafka_group_commits_total", group="ingest-test",
                  outcome="failed") == 1
    assert "Cannot commit offsets events-0=5 to Kafka consumer group ingest-test" in caplog.text


def test_metric_names_lists_every_family_of_the_registry() -> None:
    """METRIC_NAMES (documented in the README) is what the registry really holds."""
    metrics = StreamMetrics("default.events")
    names = metrics.sample_names()
    histograms = {n for n in METRIC_NAMES if n.endswith("_seconds")
                  and f"{n}_bucket" in names}
    assert {n for n in METRIC_NAMES if n not in histograms} | {
        f"{h}{s}" for h in histograms for s in ("_bucket", "_count", "_sum")} == names


def test_a_scrape_sees_whole_micro_batches() -> None:
    """Scrapes taken while micro-batches are counted never see one half counted: rows,
    batches, histograms and committed offsets always agree (a torn scrape would show a
    batch's rows without its offsets)."""
    import sys
    import threading

    from ingest.spark.sink import BatchReport
    from ingest.txn import OffsetRange

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        metrics = StreamMetrics("default.events")
        done, torn = threading.Event(), []

        def scrape() -> None:
            while not done.is_set():
                got = {s.name: s.value for family in metrics.registry.collect()
                       for s in family.samples if s.labels.get("outcome") != "skipped"}
                batches = got.get("ingest_batches_total", 0)
                seen = (got["ingest_rows_committed_total"] / 10,
                        got["ingest_records_read_total"] / 12,
                        got.get("ingest_kafka_committed_offset", 0) / 12,
                        got.get("ingest_commit_latency_seconds_count", 0), batches)
                if len(set(seen)) != 1:
                    torn.append(seen)

        scraper = threading.Thread(target=scrape)
        scraper.start()
        for n in range(3000):
            metrics.observe(BatchReport(
                n, n + 1, rows=10, dead_letters=2, records_read=12, seconds=0.1,
                commit_seconds=0.01, offsets=(OffsetRange("events", 0, n * 12, n * 12 + 12),)))
        done.set()
        scraper.join()
    finally:
        sys.setswitchinterval(interval)
    assert not torn, torn[:3]
