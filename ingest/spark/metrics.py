"""Prometheus metrics of the streaming job (`--metrics-port`), served by the driver.

Counted from each micro-batch's `BatchReport` (the sum of the executors' typed results), so
nothing runs on the executors; Kafka lag is asked of the broker when Prometheus scrapes. A
stream of several tables (`observe_many`) counts each touched table under its own `table`
label; its micro-batches, seconds and records routed nowhere under the anchor's; a topic
partition's offsets and lag under the table holding the topic (the anchor's when routed by a
field, or before the topic's table is known).
Each job has its own registry (never prometheus_client's global one), so several jobs or
tests can share a process. Names follow Prometheus' conventions (`_total`, `_seconds`).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ingest.errors import ConfigError, IngestError
from ingest.kafka import PartitionLag
from ingest.spark._metrics_collectors import MaintenanceCollector, MetastoreCollector
from ingest.spark.sink import BatchReport, ManyBatchReport
from ingest.txn import TopicPartitionKey

if TYPE_CHECKING:
    from ingest.spark.maintenance import StreamMaintenance

log = logging.getLogger(__name__)

# A micro-batch takes from under a second to minutes (a large backlog, a slow store).
BATCH_SECONDS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
COMMIT_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

METRIC_NAMES = (
    "ingest_records_read_total", "ingest_rows_committed_total", "ingest_dead_letters_total",
    "ingest_tombstones_total", "ingest_bytes_written_total", "ingest_files_written_total",
    "ingest_batches_total", "ingest_batch_duration_seconds", "ingest_commit_latency_seconds",
    "ingest_last_commit_timestamp_seconds", "ingest_kafka_lag_records",
    "ingest_kafka_committed_offset", "ingest_kafka_group_commits_total",
    "ingest_kafka_lost_offsets_total",
    "ingest_compactions_total", "ingest_maintenance_failures_total", "ingest_cleaner_runs_total",
    "ingest_cleaner_removed_directories_total", "ingest_cleaner_removed_files_total",
    "ingest_cleaner_removed_bytes_total", "ingest_compaction_backlog_deltas",
    "ingest_compaction_backlog_delete_deltas", "ingest_compaction_backlog_bytes",
    "ingest_compaction_backlog_partitions", "ingest_open_transactions", "ingest_reader_leases",
)
"""Every metric family the job exports (histograms add `_bucket`, `_count`, `_sum`)."""


class LagSource(Protocol):
    """What the metrics ask for the lag at scrape time (`ingest.kafka.LagProbe`, or a stream
    of several tables' probe of the topics it committed)."""

    def lag(self, committed: Mapping[TopicPartitionKey, int]) -> list[PartitionLag]: ...

    def close(self) -> None: ...


def check_port(port: int, *, host: str = "0.0.0.0") -> None:
    """Check that `host:port` can be bound now, before the job creates anything (the
    server binds it again later, with the same SO_REUSEADDR its HTTP server sets).

    Raises:
        ConfigError: the port is in use or not allowed.
    """
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            raise _port_error(host, port, e) from e


def _port_error(host: str, port: int, error: OSError) -> ConfigError:
    return ConfigError(f"Cannot serve metrics on {host}:{port}: {error}",
                       hint="choose a free --metrics-port")


class _BatchCollector(Collector):
    """The counted metrics, `ingest_kafka_committed_offset` and `ingest_kafka_lag_records`.

    The counters and the committed offsets are read under the lock `observe` holds, so a
    scrape sees whole micro-batches (rows, batches and offsets of the same ones, never a
    batch half counted); the lag is then asked of the broker outside the lock, so a slow
    broker never holds up a commit.
    """

    def __init__(self, metrics: StreamMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> list[Metric]:
        """The families, without asking the broker (the registry checks names with it)."""
        with self._metrics._lock:
            return [*self._metrics._counted.collect(), *self._offset_families()]

    def collect(self) -> Iterator[Metric]:
        m = self._metrics
        with m._lock:  # one consistent view of the counters and the offsets
            counted = list(m._counted.collect())
            offsets = dict(m._committed)
        yield from counted
        lag, committed = self._offset_families()
        for (topic, partition), offset in offsets.items():
            committed.add_metric([m.table_of(topic), topic, str(partition)], offset)
        if m.lag_probe is not None:
            try:
                for p in m.lag_probe.lag(offsets):
                    lag.add_metric([m.table_of(p.topic), p.topic, str(p.partition)],
                                   p.lag_records)
            except IngestError as e:  # a scrape without lag beats a failed scrape
                log.warning("metrics: cannot read the Kafka lag of %s: %s", m.table, e)
        yield lag
        yield committed

    @staticmethod
    def _offset_families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        lag = GaugeMetricFamily(
            "ingest_kafka_lag_records", "Records on the broker the table has not committed "
            "(latest offset minus committed offset), per topic partition.",
            labels=["table", "topic", "partition"])
        committed = GaugeMetricFamily(
            "ingest_kafka_committed_offset", "The next offset to read that the table "
            "committed, per topic partition.", labels=["table", "topic", "partition"])
        return lag, committed


class StreamMetrics:
    """The metrics of one streaming job into one table, in a registry of their own.

    Usage::

        metrics = StreamMetrics("default.events", committed={("events", 0): 120},
                                lag_probe=LagProbe(KafkaConnection(servers), ["events"],
                                                   timeout_s=5))
        metrics.serve(9108)          # http://HOST:9108/metrics
        metrics.observe(report)      # after every micro-batch
        metrics.close()
    """

    def __init__(self, table: str, *, lag_probe: LagSource | None = None,
                 committed: Mapping[TopicPartitionKey, int] | None = None,
                 last_commit_at: float | None = None) -> None:
        """Args:
            table: the `table` label (the target table's name; a stream of several tables'
                anchor).
            lag_probe: asks the broker for its latest offsets at scrape time; None: no lag.
            committed: the table's committed offsets when the job starts (its sink progress).
            last_commit_at: the table's last commit before the job started (epoch seconds).
        """
        self.table = table
        self.lag_probe = lag_probe
        self._committed = dict(committed or {})
        self._holders: dict[str, str] = {}  # topic -> the table holding it (several tables)
        self._lock = threading.Lock()
        self._server: Any = None
        self.port: int | None = None
        self.registry = CollectorRegistry(auto_describe=True)
        # Counted in `observe` under the lock and served through `_BatchCollector`.
        r = self._counted = CollectorRegistry()
        labels = ["table"]
        self.records_read = Counter(
            "ingest_records_read", "Kafka records read by committed micro-batches.",
            labels, registry=r)
        self.rows_committed = Counter(
            "ingest_rows_committed", "Rows committed to the table.", labels, registry=r)
        self.dead_letters = Counter(
            "ingest_dead_letters", "Records committed to the dead-letter table, by reason "
            "(unparsable, tombstone; unrouted: a stream of several tables' records that route "
            "to no table, in its own table).", [*labels, "reason"], registry=r)
        self.tombstones = Counter(
            "ingest_tombstones", "Records without a value, by what happened to them "
            "(skipped, dead_lettered).", [*labels, "action"], registry=r)
        self.bytes_written = Counter(
            "ingest_bytes_written", "Bytes added to bucket files (table and dead-letter "
            "table) by committed micro-batches.", labels, registry=r)
        self.files_written = Counter(
            "ingest_files_written", "Bucket files written by committed micro-batches.",
            labels, registry=r)
        self.batches = Counter(
            "ingest_batches", "Micro-batches, by outcome (committed, or skipped: a replay "
            "already committed).", [*labels, "outcome"], registry=r)
        self.batch_seconds = Histogram(
            "ingest_batch_duration_seconds", "Wall time of a committed micro-batch in the sink.",
            labels, buckets=BATCH_SECONDS_BUCKETS, registry=r)
        self.commit_seconds = Histogram(
            "ingest_commit_latency_seconds", "Wall time of a micro-batch's metastore commit.",
            labels, buckets=COMMIT_SECONDS_BUCKETS, registry=r)
        self.last_commit = Gauge(
            "ingest_last_commit_timestamp_seconds", "When the table's last micro-batch "
            "committed (seconds since the epoch).", labels, registry=r)
        for counter in (self.records_read, self.rows_committed, self.bytes_written,
                        self.files_written):
            counter.labels(table)  # present from the first scrape, at 0
        for reason in ("unparsable", "tombstone"):
            self.dead_letters.labels(table, reason)
        self.lost_offsets = Counter(
            "ingest_kafka_lost_offsets", "Kafka offsets removed (by retention) before the table "
            "committed them, skipped under --fail-on-data-loss false.",
            [*labels, "topic", "partition"], registry=r)
        self.group_commits = Counter(
            "ingest_kafka_group_commits", "Commits of the table's offsets to the Kafka consumer "
            "group of --commit-offsets-to-group, by outcome (committed, failed).",
            [*labels, "group", "outcome"], registry=r)
        if last_commit_at is not None:
            self.last_commit.labels(table).set(last_commit_at)
        self.registry.register(_BatchCollector(self))
        self._maintenance = MaintenanceCollector()
        self._metastore = MetastoreCollector()
        self.registry.register(self._maintenance)
        self.registry.register(self._metastore)

    def watch_maintenance(self, maintenance: StreamMaintenance) -> None:
        """Export the maintenance thread's compactions, cleaner removals and backlogs."""
        self._maintenance.maintenance = maintenance

    def watch_metastore(self, metastore_url: str, tables: Sequence[str]) -> None:
        """Export the open transactions and reader leases of `tables` (names), asked of the
        metastore at scrape time."""
        self._metastore.watch(metastore_url, tables)

    def group_committed(self, group: str, ok: bool) -> None:
        """Count one commit of offsets to the consumer group `group`."""
        with self._lock:
            self.group_commits.labels(self.table, group, "committed" if ok else "failed").inc()

    def sample_names(self) -> set[str]:
        """The sample names this registry exports (a counter's `_total`, a histogram's
        `_bucket`, `_count` and `_sum`), whether or not they have samples yet: what a
        dashboard or an alert rule may query."""
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"),
                    "summary": ("_count", "_sum")}
        return {family.name + suffix for family in self.registry.collect()
                for suffix in suffixes.get(family.type, ("",))}

    def committed_offsets(self) -> dict[TopicPartitionKey, int]:
        """A copy of the table's committed offsets as the job knows them."""
        with self._lock:
            return dict(self._committed)

    def table_of(self, topic: str) -> str:
        """The `table` label of a topic's offsets and lag: the table holding it, else this
        job's table (the anchor of several tables)."""
        return self._holders.get(topic, self.table)

    def hold(self, holders: Mapping[str, str]) -> None:
        """Label these topics' offsets and lag with these tables (a stream of several tables
        routed by topic: each topic's table, as far as known)."""
        with self._lock:
            self._holders.update(holders)

    def observe(self, report: BatchReport) -> None:
        """Count one micro-batch (after its commit, or its skip as a replay), at once for
        a scrape: it sees the whole batch or none of it."""
        t = self.table
        with self._lock:
            if report.skipped:
                self.batches.labels(t, "skipped").inc()
                return
            self.batches.labels(t, "committed").inc()
            self._count(t, report)
            self.batch_seconds.labels(t).observe(report.seconds)
            self.commit_seconds.labels(t).observe(report.commit_seconds)
            self._advance(report.offsets)

    def observe_many(self, report: ManyBatchReport, *, on_tombstone: str = "skip",
                     by_topic: bool = True) -> None:
        """Count one micro-batch of a stream of several tables, as `observe` does: each
        touched table's rows, records, dead letters, files and bytes under its name; the
        micro-batch, its seconds and its records routed nowhere under the anchor's
        (`ingest_dead_letters_total{reason="unrouted"}`). `by_topic`: the stream routes by
        topic, so a table's offset ranges name the topics it holds (by field, a topic feeds
        several tables: its offsets and lag stay the anchor's)."""
        t = self.table
        with self._lock:
            if report.skipped:
                self.batches.labels(t, "skipped").inc()
                return
            self.batches.labels(t, "committed").inc()
            for name, one in sorted(report.tables.items()):
                if by_topic:
                    for r in one.offsets:
                        self._holders.setdefault(r.topic, name)
                self._count(name, replace(one, on_tombstone=on_tombstone))
            self.dead_letters.labels(t, "unrouted").inc(report.unrouted_records)
            self.records_read.labels(t).inc(report.unrouted_records)
            for r in report.lost:
                self.lost_offsets.labels(self.table_of(r.topic), r.topic,
                                         str(r.partition)).inc(r.until_offset - r.from_offset)
            self.batch_seconds.labels(t).observe(report.seconds)
            self.commit_seconds.labels(t).observe(report.commit_seconds)
            self.last_commit.labels(t).set(time.time())
            self._advance(report.offsets)

    def _count(self, t: str, report: BatchReport) -> None:
        """One table's part of a committed micro-batch (call with the lock held)."""
        for counter in (self.records_read, self.rows_committed, self.bytes_written,
                        self.files_written):
            counter.labels(t)  # present from the first batch, at 0
        tombstones_dead = report.tombstones if report.on_tombstone == "dead-letter" else 0
        self.records_read.labels(t).inc(report.records_read)
        self.rows_committed.labels(t).inc(report.rows)
        self.dead_letters.labels(t, "unparsable").inc(
            max(report.dead_letters - tombstones_dead, 0))
        self.dead_letters.labels(t, "tombstone").inc(tombstones_dead)
        if report.tombstones:
            self.tombstones.labels(t, "dead_lettered" if tombstones_dead else "skipped").inc(
                report.tombstones)
        self.bytes_written.labels(t).inc(report.bytes)
        self.files_written.labels(t).inc(report.files)
        for r in report.lost:
            self.lost_offsets.labels(t, r.topic, str(r.partition)).inc(
                r.until_offset - r.from_offset)
        self.last_commit.labels(t).set(time.time())

    def _advance(self, offsets: Sequence[Any]) -> None:
        """The committed offsets after a commit (call with the lock held)."""
        for r in offsets:
            key = (r.topic, r.partition)
            self._committed[key] = max(self._committed.get(key, r.until_offset),
                                       r.until_offset)

    def serve(self, port: int, *, host: str = "0.0.0.0") -> int:
        """Serve `/metrics` on `host:port` from a daemon thread; returns the bound port.

        Raises:
            ConfigError: the port cannot be bound (in use, or not allowed).
        """
        try:
            server, _ = start_http_server(port, addr=host, registry=self.registry)
        except OSError as e:
            raise _port_error(host, port, e) from e
        self._server = server
        self.port = int(server.server_address[1])
        log.info("Serving Prometheus metrics of %s on http://%s:%d/metrics", self.table, host,
                 self.port)
        return self.port

    def close(self) -> None:
        """Stop serving and close the broker connection."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self.lag_probe is not None:
            self.lag_probe.close()
        self._metastore.close()


__all__ = ["METRIC_NAMES", "LagSource", "StreamMetrics", "check_port"]
