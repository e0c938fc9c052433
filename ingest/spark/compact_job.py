"""Compaction on Spark executors: one task per partition, the metastore only on the driver.

The driver is given the table resolved (a `Table`, or its `TableRef` opened again with the
metastore it names: no search) and plans with `Table.compact(dry_run=True)` (which partitions
have work, the kind the initiator picks for "auto"; every input checked against the manifest,
so a damaged table fails before anything is written), takes the table's read view (held, with
its lease, until the tasks end, so a concurrent cleaner keeps their inputs) and begins a
compaction per partition under the compactor's commit protocol
(`ingest.table.maintain.CompactorRun`, as `ingest compact` does); each task gets the view as a
value, with its partition's manifest entries and the table's location and storage options
(never the metastore's URL: tasks do not talk to it), and runs `compact_partition`, which
checks its inputs and outputs; the driver records what the tasks did. A failed partition is
recorded as failed and leaves the others' results in place.
"""

from __future__ import annotations

import logging
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from ingest.acid import ReadView, compact_partition, parse_codec
from ingest.acid.compaction import CompactionKind, CompactionResult
from ingest.errors import CommitConflictError, IngestError
from ingest.io import storage
from ingest.table import Table, TableRef
from ingest.table.core import agent_name, uses_visibility_suffix
from ingest.table.maintain import CompactorRun, CompactReport, PartitionCompaction
from ingest.txn import Metastore, TableDefinition

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

JobKind = Literal["major", "minor", "auto"]


@dataclass(frozen=True)
class _PartitionTask:
    """What one executor task gets: plain values only (no metastore)."""

    location: str
    partition: str
    kind: CompactionKind
    # The driver's read view: snapshot, `_vT` visibility and this partition's manifest
    # entries (the lease stays with the driver).
    view: ReadView
    row_schema: pa.Schema
    compression: str
    # `_vT` output names (a Hive 4 metastore, object stores by default): the compactor's
    # transaction id, else None.
    visibility_txn_id: int | None = None
    # Compactor transactions aborted once the driver took the partitions over: their `_vT`
    # outputs (a dead compactor's) are removed before the task writes.
    aborted_txns: frozenset[int] = frozenset()
    # The table's own storage options (credentials among them: never in a repr).
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class CompactJobReport:
    """What `compact_on_executors` did.

    Attributes:
        report: the compactions done (a partition without work has result None).
        kinds: partition -> kind compacted (for "auto", the kind chosen per partition).
        failures: (partition, error text) of partitions whose task failed.
        seconds: wall time, planning included.
    """

    report: CompactReport
    kinds: dict[str, CompactionKind]
    failures: tuple[tuple[str, str], ...]
    seconds: float

    def line(self) -> str:
        done = [p.result for p in self.report.partitions if p.result is not None]
        verb = "would compact" if self.report.dry_run else "compacted"
        return (f"{self.report.table}: {verb} {len(done)} of {len(self.report.partitions)} "
                f"partitions ({sum(r.rows for r in done):,} rows, "
                f"{sum(r.input_bytes for r in done):,} -> {sum(r.output_bytes for r in done):,} "
                f"bytes), {len(self.failures)} failed, in {self.seconds:.1f} s")


def compact_on_executors(
    spark: SparkSession,
    table: Table | TableRef,
    *,
    kind: JobKind = "major",
    partitions: list[str] | None = None,
    dry_run: bool = False,
) -> CompactJobReport:
    """Compact a table's partitions in parallel, one Spark task per partition.

    Args:
        spark: the session; its executors must reach the table's storage.
        table: the table (its root), resolved: a `Table` (`ingest.table.open_table_root`)
            or its `TableRef`; each task receives exactly its storage options.
        kind: "major", "minor", or "auto" (per partition, the initiator's choice from the
            table's compactor thresholds, as `ingest compact --auto`).
        partitions: specs such as ``dt=2026-01-01``; default every partition.
        dry_run: plan only; nothing is written.

    Raises:
        TableNotFoundError: the metastore no longer lists the table.
        ConfigError: the table was opened without a metastore or at a partition, a partition
            spec that names no partition, or a bad orc.compress.
        MetastoreError: the metastore failed.
    """
    started = time.monotonic()
    if isinstance(table, TableRef):
        table = table.open()
    url, options = table.metastore_url, table.storage_options
    plan = table.compact(kind, partitions=partitions, dry_run=True)
    kinds: dict[str, CompactionKind] = {
        p.partition: p.kind for p in plan.partitions
        if p.result is not None and p.kind in ("major", "minor")}
    if dry_run or not kinds:
        planned = {p.partition: p.result for p in plan.partitions if p.partition in kinds}
        return CompactJobReport(_report(plan, planned, dry_run=dry_run), kinds, (),
                                time.monotonic() - started)
    agent = agent_name("compact-job")
    assert url is not None and table.definition is not None  # compact() needs a metastore
    with Metastore.open(url, create=False) as store, \
            store.read_view(table.definition.name, agent=agent) as view, \
            ExitStack() as beating:
        defn = store.get_table(table.definition.name)
        codec = parse_codec(defn.properties.get("orc.compress", "zlib"),
                            where=f"Cannot compact {defn.name}: table property orc.compress=",
                            hint="fix the table property orc.compress")
        # As `ingest compact`: the metastore's readers decide first (Hive 4 needs `_vT`
        # names, Hive 3 cannot parse them), then the table and its storage.
        suffix = uses_visibility_suffix(defn, storage.url_to_fs(defn.location,
                                                                options)[0].protocol,
                                        store.capabilities.visibility_suffix)
        begun, failures = _begin(store, defn, kinds, agent=agent)
        for run in begun.values():
            beating.enter_context(run)  # heartbeats; a failed job records each as failed
        aborted = store.compactor_visibility(defn.name).aborted if begun else frozenset()
        tasks = [_PartitionTask(defn.location, partition, kinds[partition],
                                _partition_view(view, partition),
                                view.row_schema or defn.row_schema, codec,
                                begun[partition].txn.txn_id if suffix else None,
                                frozenset(aborted), options)
                 for partition in sorted(begun)]
        log.info("compacting %d partitions of %s on executors", len(tasks), defn.name)
        outcomes = (spark.sparkContext.parallelize(tasks, len(tasks)).map(_run_task).collect()
                    if tasks else [])
        beating.close()  # stop heartbeating before the records end the transactions
        results = {partition: result for partition, result, _ in outcomes}
        for partition, result, error in outcomes:
            if error is not None:
                failures.append((partition, error))
                begun[partition].fail(error)
            else:
                begun[partition].finish(result)
    for partition, error in failures:
        log.warning("Cannot compact %s/%s: %s", defn.location, partition, error)
    return CompactJobReport(_report(plan, results, dry_run=False), kinds, tuple(failures),
                            time.monotonic() - started)


def _begin(store: Metastore, defn: TableDefinition, kinds: dict[str, CompactionKind], *,
           agent: str) -> tuple[dict[str, CompactorRun], list[tuple[str, str]]]:
    """A compaction begun per partition; a partition another compactor holds is a failure
    of this job, not an error."""
    begun: dict[str, CompactorRun] = {}
    busy: list[tuple[str, str]] = []
    for partition, chosen in sorted(kinds.items()):
        try:
            begun[partition] = CompactorRun.begin(store, defn, partition, chosen, agent=agent)
        except CommitConflictError as e:
            busy.append((partition, str(e)))
    return begun, busy


def _partition_view(view: ReadView, partition: str) -> ReadView:
    """The view a task needs: its partition's manifest entries only, no lease."""
    prefix = f"{partition}/" if partition else ""
    return replace(view, committed={rel: entry for rel, entry in view.committed.items()
                                    if rel.startswith(prefix)}, lease_id=None)


def _report(plan: CompactReport, results: dict[str, CompactionResult | None], *,
            dry_run: bool) -> CompactReport:
    """The plan's partitions in order, each with its result where one ran (or was planned)."""
    entries = tuple(PartitionCompaction(p.partition, results.get(p.partition))
                    for p in plan.partitions)
    return CompactReport(plan.table, plan.location, plan.kind, plan.snapshot, entries, dry_run)


def _run_task(task: _PartitionTask) -> tuple[str, CompactionResult | None, str | None]:
    """On an executor: compact one partition as of the driver's snapshot."""
    fs, root = storage.url_to_fs(task.location, task.storage_options)
    root = str(root).rstrip("/")
    directory = "/".join(x for x in (root, task.partition) if x)
    try:
        result = compact_partition(directory, task.view, root=root,
                                   row_schema=task.row_schema, kind=task.kind, fs=fs,
                                   compression=task.compression,  # type: ignore[arg-type]
                                   visibility_txn_id=task.visibility_txn_id,
                                   aborted_txn=task.aborted_txns.__contains__)
    except (IngestError, OSError) as e:  # reported per partition; the others go on
        return task.partition, None, f"{type(e).__name__}: {e}"
    return task.partition, result, None


__all__ = ["CompactJobReport", "JobKind", "compact_on_executors"]
