"""Compaction and cleaning inside the streaming job: one driver thread, signalled after commits.

The commit path only records which partitions of which table (a `TableRef`: the stream's
resolved table, or its dead-letter table beside it) a micro-batch touched and wakes the
thread; the thread opens each touched table once per run (`TableRef.open`: the metastore it
names, with its storage options, no search), compacts what the initiator picks
(`Table.compact("auto")`, the table's compactor thresholds) and cleans (`Table.clean`) at most
once per interval, one run at a time; then the same for the metastore's hidden side tables of
the table (`Table.side_tables`: a Hive Metastore's progress and manifest tables), unpartitioned,
cleaned with the table's own retention. A failed run
is logged and counted and never fails the stream (docs/invariants.md, 8.10). The job signals
the target and its dead-letter table alike (`job._then_signal`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ingest.acid.compaction import Backlog
from ingest.errors import CommitConflictError
from ingest.io import storage
from ingest.spark.options import Maintenance
from ingest.table import Table, TableRef
from ingest.table.core import cleaner_retention_s

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MaintenanceStats:
    """What the maintenance thread did so far.

    Attributes:
        runs: maintenance runs finished (with or without errors).
        compactions: partitions compacted.
        cleans: cleaner runs that finished.
        errors: runs or steps that failed (logged, never raised).
        last_error: the last failure's text, or None.
    """

    runs: int
    compactions: int
    cleans: int
    errors: int
    last_error: str | None


@dataclass
class TableMaintenance:
    """What the maintenance thread did to one table and last measured of it (the metrics'
    `ingest_compactions_total`, `ingest_cleaner_removed_*`, `ingest_compaction_backlog_*`).

    Attributes:
        compactions: partitions compacted, by kind ("major", "minor").
        failures: compactions or cleaner runs of the table that failed.
        cleaner_runs: cleaner runs that finished.
        removed_directories, removed_files, removed_bytes: what the cleaner removed.
        backlog: by partition, the backlog the initiator measured at the last run that
            looked at it without compacting it (a partition compacted then is left out until
            measured again).
    """

    compactions: dict[str, int] = field(default_factory=dict)
    failures: int = 0
    cleaner_runs: int = 0
    removed_directories: int = 0
    removed_files: int = 0
    removed_bytes: int = 0
    backlog: dict[str, Backlog] = field(default_factory=dict)


@dataclass(frozen=True)
class _Target:
    """A table the thread looks after, opened for this run, and its root path on its
    filesystem (partition directories are named below it)."""

    table: Table
    root: str


class StreamMaintenance:
    """Compacts and cleans the tables a stream writes, on a thread of its own.

    Usage::

        maintenance = StreamMaintenance(compact="auto", clean="auto")
        maintenance.start()
        ...  # after each commit:
        maintenance.committed(table.ref, partition_dirs)
        ...
        maintenance.stop()
    """

    def __init__(self, *, compact: Maintenance = "auto", clean: Maintenance = "auto",
                 interval_s: float = 60.0) -> None:
        """Nothing runs until `start()`; the tables come with each commit (`committed`),
        each with its metastore and storage options (the thread opens its own connection).

        Args:
            compact: "auto" compacts the touched partitions the initiator picks; "off" never.
            clean: "auto" runs the cleaner after compacting; "off" never.
            interval_s: least seconds from the end of one run to the start of the next.
        """
        self.compact_mode, self.clean_mode = compact, clean
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._pending: dict[TableRef, set[str]] = {}
        self._thread: threading.Thread | None = None
        self._last_run_end = float("-inf")
        self._runs = self._compactions = self._cleans = self._errors = 0
        self._last_error: str | None = None
        self._tables: dict[str, TableMaintenance] = {}

    # ------------------------------------------------------------------ the commit path
    def committed(self, table: TableRef, partition_dirs: Iterable[str]) -> None:
        """Note a commit into `table` (its root) touching `partition_dirs` (filesystem paths)
        and wake the thread. Never waits for a maintenance run: the lock it takes guards only
        the pending set."""
        with self._lock:
            self._pending.setdefault(table, set()).update(partition_dirs)
        self._wake.set()

    # ------------------------------------------------------------------ the thread
    def start(self) -> None:
        """Start the thread (a daemon: an interrupted compaction leaves only hidden output)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="ingest-maintenance",
                                        daemon=True)
        self._thread.start()

    def stop(self, *, timeout_s: float = 120.0) -> MaintenanceStats:
        """Stop after the run in progress, if any (no new one starts); returns the counts.

        A run still going after `timeout_s` is left to finish on its daemon thread: whatever
        it had not renamed into place stays hidden from readers (docs/invariants.md, 3).
        """
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("Maintenance still running after %.0f s at stop; leaving it to "
                            "finish in the background", timeout_s)
            self._thread = None
        stats = self.stats
        log.info("Maintenance stopped: %d runs, %d partitions compacted, %d cleans, %d errors",
                 stats.runs, stats.compactions, stats.cleans, stats.errors)
        return stats

    @property
    def stats(self) -> MaintenanceStats:
        with self._lock:
            return MaintenanceStats(self._runs, self._compactions, self._cleans, self._errors,
                                    self._last_error)

    def table_stats(self) -> dict[str, TableMaintenance]:
        """A copy of what the thread did to each table it looked after, by table name."""
        with self._lock:
            return {name: replace(t, compactions=dict(t.compactions), backlog=dict(t.backlog))
                    for name, t in self._tables.items()}

    def _table(self, name: str) -> TableMaintenance:
        """The table's entry (call with the lock held)."""
        return self._tables.setdefault(name, TableMaintenance())

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait()
            wait_s = self._last_run_end + self.interval_s - time.monotonic()
            if wait_s > 0 and self._stopping.wait(wait_s):
                return
            if self._stopping.is_set():
                return
            with self._lock:
                self._wake.clear()
                pending, self._pending = self._pending, {}
            for table, partitions in pending.items():
                if self._stopping.is_set():
                    return
                self.run_once(table, partitions)
            self._last_run_end = time.monotonic()

    # ------------------------------------------------------------------ one run
    def run_once(self, ref: TableRef, partition_dirs: Iterable[str]) -> None:
        """Compact the given partitions of one table (`ref`, its root) that need it, then
        clean it; then its side tables (`Table.side_tables`) the same way.

        Runs on the maintenance thread (or in a test, directly); raises nothing: a failure
        is logged and counted in `stats`, since maintenance must never stop a stream.
        """
        try:
            table = ref.open()
            root = storage.url_to_fs(table.location, table.storage_options)[1]
            target = _Target(table, root.rstrip("/"))
            compacted = 0
            if self.compact_mode == "auto":
                compacted = self._compact(target, sorted(set(partition_dirs)))
            if self.clean_mode == "auto":
                self._clean(target, compacted)
            if self.compact_mode == "auto" or self.clean_mode == "auto":
                self._side_tables(target)
        except Exception as e:  # noqa: BLE001 (off the data path: counted, the stream goes on)
            self._failed(f"Cannot maintain {ref.location}", e)
        finally:
            with self._lock:
                self._runs += 1

    def _compact(self, target: _Target, partition_dirs: list[str]) -> int:
        done = 0
        for directory in partition_dirs:
            if self._stopping.is_set():
                break
            partition = directory[len(target.root):].strip("/")
            try:
                report = target.table.compact(
                    "auto", partitions=[partition] if partition else None)
            except CommitConflictError as e:  # another compactor holds it: its turn
                log.info("not compacting %s now: %s", directory, e)
                continue
            except Exception as e:  # noqa: BLE001 (off the data path: counted, stream goes on)
                self._failed(f"Cannot compact {directory}", e, table=target.table.name)
                continue
            self._measured(target.table.name, report.partitions)
            for entry in report.partitions:
                if entry.result is None:
                    continue
                done += 1
                result = entry.result
                log.info("compacted %s (%s, %s): %s -> %s, %d rows in %.2f s", directory,
                         entry.kind, entry.reason, ", ".join(result.plan.inputs),
                         ", ".join(result.plan.outputs), result.rows, result.seconds)
        with self._lock:
            self._compactions += done
        return done

    def _side_tables(self, target: _Target) -> None:
        """Compact and clean the table's side tables, one after the other, after the table:
        this thread then holds at most one lease at a time, so a commit waiting for its
        EXCLUSIVE lock on a side table waits only for that side table's compaction
        (docs/invariants.md, 8.11). They are cleaned with the table's retention."""
        assert target.table.definition is not None  # opened with a metastore
        retention_s = cleaner_retention_s(target.table.definition)
        for side in target.table.side_tables():
            if self._stopping.is_set():
                return
            root = storage.url_to_fs(side.location, side.storage_options)[1]
            sided = _Target(side, root.rstrip("/"))
            compacted = 0
            if self.compact_mode == "auto":
                compacted = self._compact(sided, [sided.root])
            if self.clean_mode == "auto":
                self._clean(sided, compacted, retention_s=retention_s)

    def _clean(self, target: _Target, compacted: int, *,
               retention_s: float | None = None) -> None:
        """Run the cleaner on the table (the table's retention time applies).

        Runs even when nothing was compacted now: an earlier compaction's inputs may only
        now have no reader left.
        """
        location = target.table.location
        try:
            report = target.table.clean(retention_s=retention_s)
        except Exception as e:  # noqa: BLE001 (off the data path: counted, the stream goes on)
            self._failed(f"Cannot clean {location}", e, table=target.table.name)
            return
        with self._lock:
            self._cleans += 1
            stats = self._table(target.table.name)
            stats.cleaner_runs += 1
            stats.removed_directories += report.directories
            stats.removed_files += report.files
            stats.removed_bytes += report.size_bytes
        log.debug("cleaned %s after %d compactions", location, compacted)

    def _measured(self, table: str, partitions: Iterable[Any]) -> None:
        """Keep the backlog the initiator measured of each partition it did not compact, and
        the count of those it did, by kind."""
        with self._lock:
            stats = self._table(table)
            for entry in partitions:
                if entry.result is not None:
                    stats.backlog.pop(entry.partition, None)
                    kind = str(entry.kind or "auto")
                    stats.compactions[kind] = stats.compactions.get(kind, 0) + 1
                elif entry.backlog is not None:
                    stats.backlog[entry.partition] = entry.backlog

    def _failed(self, what: str, error: Exception, *, table: str | None = None) -> None:
        text = f"{what}: {type(error).__name__}: {error}"
        log.warning("Maintenance: %s (the stream goes on; the next run retries)", text)
        with self._lock:
            self._errors += 1
            self._last_error = text
            if table is not None:
                self._table(table).failures += 1


__all__ = ["MaintenanceStats", "StreamMaintenance", "TableMaintenance"]
