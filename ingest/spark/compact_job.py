"""Compaction on Spark executors: one task per partition, the metastore only on the driver.

The driver plans with `ingest.table.compact(dry_run=True)` (which partitions have work, and
the compactor snapshot), or picks partitions and kinds by the stream's rule for "auto"; each
task gets the snapshot as Hive's string and runs `compact_partition`; the driver gathers what
the tasks did. A failed partition is reported and leaves the others' results in place.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import fsspec
import pyarrow as pa

from ingest.acid import ValidWriteIdList, compact_partition, parse_codec
from ingest.acid.compaction import CompactionKind, CompactionResult
from ingest.errors import IngestError
from ingest.spark.maintenance import choose_kind
from ingest.spark.options import DEFAULT_COMPACT_MIN_DELTAS
from ingest.table import CompactReport, PartitionCompaction, compact
from ingest.txn import Metastore, default_metastore_url

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
    snapshot: str
    row_schema: pa.Schema
    compression: str


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
    location: str,
    *,
    kind: JobKind = "major",
    partitions: list[str] | None = None,
    metastore_url: str | None = None,
    dry_run: bool = False,
    min_deltas: int = DEFAULT_COMPACT_MIN_DELTAS,
) -> CompactJobReport:
    """Compact a table's partitions in parallel, one Spark task per partition.

    Args:
        spark: the session; its executors must reach the table's storage.
        location: the table root.
        kind: "major", "minor", or "auto" (per partition, by the streaming job's rule: at
            least `min_deltas` deltas; major without a base or when the deltas hold a tenth
            of its bytes, else minor).
        partitions: specs such as ``dt=2026-01-01``; default every partition.
        metastore_url: default: beside the table.
        dry_run: plan only; nothing is written.
        min_deltas: the "auto" threshold.

    Raises:
        TableNotFoundError: no table at `location`.
        ConfigError: a partition spec that names no partition, or a bad orc.compress.
        MetastoreError: the metastore failed.
    """
    started = time.monotonic()
    url = metastore_url or default_metastore_url(location)
    with Metastore.open(url) as store:
        defn = store.get_table(location)
    plan = compact(location, kind="major" if kind == "auto" else kind, partitions=partitions,
                   metastore=url, dry_run=True)
    kinds = _kinds(plan, kind, min_deltas)
    if dry_run or not kinds:
        planned = {p.partition: p.result for p in plan.partitions if p.partition in kinds}
        return CompactJobReport(_report(plan, planned, dry_run=dry_run), kinds, (),
                                time.monotonic() - started)
    codec = parse_codec(defn.properties.get("orc.compress", "zlib"),
                        where=f"Cannot compact {defn.name}: table property orc.compress=",
                        hint="fix the table property orc.compress")
    tasks = [_PartitionTask(defn.location, partition, chosen, plan.snapshot, defn.row_schema,
                            codec) for partition, chosen in sorted(kinds.items())]
    log.info("compacting %d partitions of %s on executors", len(tasks), defn.name)
    outcomes = (spark.sparkContext.parallelize(tasks, len(tasks)).map(_run_task).collect())
    results = {partition: result for partition, result, _ in outcomes}
    failures = tuple((partition, error) for partition, _, error in outcomes if error)
    for partition, error in failures:
        log.warning("Cannot compact %s/%s: %s", defn.location, partition, error)
    return CompactJobReport(_report(plan, results, dry_run=False), kinds, failures,
                            time.monotonic() - started)


def _kinds(plan: CompactReport, kind: JobKind, min_deltas: int) -> dict[str, CompactionKind]:
    """Partition -> kind to run, for partitions that have work."""
    candidates = [p.partition for p in plan.partitions if p.result is not None]
    if kind != "auto":
        return {p: kind for p in candidates}
    snapshot = ValidWriteIdList.from_hive_string(plan.snapshot)
    fs, root = fsspec.core.url_to_fs(plan.location)
    out: dict[str, CompactionKind] = {}
    for partition in candidates:
        directory = "/".join(x for x in (str(root).rstrip("/"), partition) if x)
        chosen = choose_kind(fs, directory, snapshot, min_deltas=min_deltas)
        if chosen is not None:
            out[partition] = chosen
    return out


def _report(plan: CompactReport, results: dict[str, CompactionResult | None], *,
            dry_run: bool) -> CompactReport:
    """The plan's partitions in order, each with its result where one ran (or was planned)."""
    entries = tuple(PartitionCompaction(p.partition, results.get(p.partition))
                    for p in plan.partitions)
    return CompactReport(plan.table, plan.location, plan.kind, plan.snapshot, entries, dry_run)


def _run_task(task: _PartitionTask) -> tuple[str, CompactionResult | None, str | None]:
    """On an executor: compact one partition as of the driver's snapshot."""
    fs, root = fsspec.core.url_to_fs(task.location)
    directory = "/".join(x for x in (str(root).rstrip("/"), task.partition) if x)
    try:
        result = compact_partition(directory, ValidWriteIdList.from_hive_string(task.snapshot),
                                   row_schema=task.row_schema, kind=task.kind, fs=fs,
                                   compression=task.compression)  # type: ignore[arg-type]
    except (IngestError, OSError) as e:  # reported per partition; the others go on
        return task.partition, None, f"{type(e).__name__}: {e}"
    return task.partition, result, None


__all__ = ["CompactJobReport", "JobKind", "compact_on_executors"]
