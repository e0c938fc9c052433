"""The streaming job's metrics computed at scrape time from what the driver already holds:
the maintenance thread's counts and last measured backlogs (`StreamMaintenance.table_stats`),
and, from the metastore, each table's open transactions and live reader leases.

Every family is yielded even without samples, so the names a dashboard uses exist from the
first scrape. A failing metastore loses those two gauges for one scrape, never the scrape.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ingest.errors import IngestError
from ingest.table.maintain import DEFAULT_TXN_TIMEOUT_S
from ingest.txn import Metastore

if TYPE_CHECKING:
    from ingest.spark.maintenance import StreamMaintenance

log = logging.getLogger("ingest.spark.metrics")


class MaintenanceCollector(Collector):
    """Compactions, cleaner removals and compaction backlogs, per table."""

    def __init__(self) -> None:
        self.maintenance: StreamMaintenance | None = None

    def collect(self) -> Iterator[Metric]:
        t = ["table"]
        compactions = CounterMetricFamily(
            "ingest_compactions", "Partitions the job's maintenance thread compacted, by kind.",
            labels=[*t, "kind"])
        failures = CounterMetricFamily(
            "ingest_maintenance_failures", "Compactions and cleaner runs that failed (logged; "
            "the stream goes on).", labels=t)
        cleans = CounterMetricFamily(
            "ingest_cleaner_runs", "Cleaner runs that finished.", labels=t)
        removed_dirs = CounterMetricFamily(
            "ingest_cleaner_removed_directories", "Obsolete or aborted directories the cleaner "
            "removed.", labels=t)
        removed_files = CounterMetricFamily(
            "ingest_cleaner_removed_files", "Files the cleaner removed.", labels=t)
        removed_bytes = CounterMetricFamily(
            "ingest_cleaner_removed_bytes", "Bytes the cleaner removed.", labels=t)
        deltas = GaugeMetricFamily(
            "ingest_compaction_backlog_deltas", "Current insert deltas of the partitions the "
            "stream writes, as the last maintenance run measured them.", labels=t)
        delete_deltas = GaugeMetricFamily(
            "ingest_compaction_backlog_delete_deltas", "Current delete deltas, likewise.",
            labels=t)
        delta_bytes = GaugeMetricFamily(
            "ingest_compaction_backlog_bytes", "Bytes of the current deltas of both kinds, "
            "likewise.", labels=t)
        partitions = GaugeMetricFamily(
            "ingest_compaction_backlog_partitions", "Partitions holding at least one current "
            "delta, likewise.", labels=t)
        if self.maintenance is not None:
            for name, s in sorted(self.maintenance.table_stats().items()):
                for kind, n in sorted(s.compactions.items()):
                    compactions.add_metric([name, kind], n)
                failures.add_metric([name], s.failures)
                cleans.add_metric([name], s.cleaner_runs)
                removed_dirs.add_metric([name], s.removed_directories)
                removed_files.add_metric([name], s.removed_files)
                removed_bytes.add_metric([name], s.removed_bytes)
                backlog = s.backlog.values()
                deltas.add_metric([name], sum(b.deltas for b in backlog))
                delete_deltas.add_metric([name], sum(b.delete_deltas for b in backlog))
                delta_bytes.add_metric([name], sum(b.delta_bytes for b in backlog))
                partitions.add_metric([name], sum(1 for b in backlog if b.current_deltas))
        yield from (compactions, failures, cleans, removed_dirs, removed_files, removed_bytes,
                    deltas, delete_deltas, delta_bytes, partitions)


class MetastoreCollector(Collector):
    """`ingest_open_transactions` and `ingest_reader_leases` of the job's tables, asked of the
    metastore at scrape time (one connection of its own, opened on the first scrape)."""

    def __init__(self) -> None:
        self.metastore_url: str | None = None
        self.tables: Sequence[str] = ()
        self._store: Metastore | None = None
        self._lock = threading.Lock()

    def watch(self, metastore_url: str, tables: Sequence[str]) -> None:
        """Report these tables (by name) of this metastore from now on."""
        self.metastore_url, self.tables = metastore_url, tuple(tables)

    def collect(self) -> Iterator[Metric]:
        txns = GaugeMetricFamily(
            "ingest_open_transactions", "The table's open transactions (the stream's own "
            "micro-batch, compactors, other writers).", labels=["table"])
        leases = GaugeMetricFamily(
            "ingest_reader_leases", "Readers holding a live lease on the table (the cleaner "
            "keeps what they read).", labels=["table"])
        if self.metastore_url is not None and self.tables:
            with self._lock:
                try:
                    if self._store is None:
                        self._store = Metastore.open(self.metastore_url, create=False)
                    for name in self.tables:
                        txns.add_metric([name], len(self._store.transactions(
                            name, states=("open",))))
                        leases.add_metric([name], len(self._store.live_readers(
                            name, timeout_s=DEFAULT_TXN_TIMEOUT_S)))
                except IngestError as e:  # a scrape without these beats a failed scrape
                    log.warning("metrics: cannot read transactions and leases from %s: %s",
                                Metastore.redact_url(self.metastore_url), e)
                    self._close()
        yield txns
        yield leases

    def _close(self) -> None:
        if self._store is not None:
            try:
                self._store.close()
            finally:
                self._store = None

    def close(self) -> None:
        """Close the metastore connection (a later scrape opens a new one)."""
        with self._lock:
            self._close()
