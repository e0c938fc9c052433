"""Compact a table's partitions as of the compactor snapshot its metastore gives (Hive's Worker).

Takes the table's current snapshot from the metastore, derives the compactor's (nothing at or
above the lowest open write id) and runs `ingest.acid.compaction` on each partition, one after
another. Obsolete inputs stay on disk for a cleaner; every snapshot already ignores them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ingest.acid.compaction import (
    CompactionKind,
    CompactionResult,
    compact_partition,
    compactor_snapshot,
)
from ingest.acid.file_options import WriterOptions
from ingest.acid.names import parse_partition
from ingest.acid.snapshot import list_partitions
from ingest.errors import ConfigError
from ingest.table._committed import record_outputs
from ingest.table._definition import table_compression
from ingest.table._open import MetastoreRef, open_table, table_fs
from ingest.txn import TableDefinition


@dataclass(frozen=True)
class PartitionCompaction:
    """One partition's compaction: result is None when it had nothing to compact.

    Attributes:
        partition: its path relative to the table root ("" for an unpartitioned table).
        result: inputs, outputs, rows, bytes and time (`CompactionResult`).
    """

    partition: str
    result: CompactionResult | None


@dataclass(frozen=True)
class CompactReport:
    """What `compact` did to a table.

    Attributes:
        table: the table's name.
        location: its root.
        kind: "major" or "minor".
        snapshot: the compactor snapshot's Hive string (before per-partition lowering).
        partitions: one entry per partition looked at, in path order.
        dry_run: nothing was written.
    """

    table: str
    location: str
    kind: CompactionKind
    snapshot: str
    partitions: tuple[PartitionCompaction, ...]
    dry_run: bool


def compact(
    location: str,
    *,
    kind: CompactionKind = "major",
    partitions: Sequence[str] | None = None,
    metastore: MetastoreRef = None,
    dry_run: bool = False,
    tuning: WriterOptions | None = None,
) -> CompactReport:
    """Compact the table at `location`, partition by partition.

    Args:
        location: the table root.
        kind: "major" (a new base per partition) or "minor" (deltas folded together).
        partitions: partition specs such as ``dt=2026-01-01`` (``a=1/b=2`` for several
            levels); default every partition.
        metastore: as for `ingest.table.load`.
        dry_run: only plan: report inputs and outputs, write nothing.
        tuning: stripe and encoder settings of the output files.

    Returns:
        One entry per partition looked at.

    Raises:
        TableNotFoundError: no table at `location`.
        ConfigError: a partition spec that is malformed or names no partition of the table.
        CommitConflictError: another compaction wrote the same output meanwhile.
        CorruptFileError: an input file cannot be read (run `ingest recover`).
        MetastoreError: the metastore failed.
    """
    with open_table(location, metastore) as (store, defn):
        snapshot = store.snapshot(defn)
    fs, root = table_fs(defn)
    dirs = _partition_dirs(defn, root, partitions)
    codec = table_compression(defn)
    done = []
    for directory in dirs:
        result = compact_partition(directory, snapshot, row_schema=defn.row_schema, kind=kind,
                                   fs=fs, compression=codec, tuning=tuning, dry_run=dry_run)
        done.append(PartitionCompaction(directory[len(root):].strip("/"), result))
    if not dry_run:  # the outputs' manifest entries (docs/format.md §18)
        with open_table(location, metastore) as (store, _):
            record_outputs(store, defn, [p.result.plan for p in done if p.result is not None])
    return CompactReport(defn.name, defn.location, kind,
                         compactor_snapshot(snapshot).to_hive_string(), tuple(done), dry_run)


def _partition_dirs(defn: TableDefinition, root: str, specs: Sequence[str] | None) -> list[str]:
    """Partition directories to compact.

    Raises:
        ConfigError: a spec is malformed or names no existing partition.
    """
    fs = table_fs(defn)[0]
    if not fs.exists(root):
        return []
    # Only directories at the table's partition depth (an empty partitioned table's root is not
    # one).
    depth = tuple(defn.partition_columns)
    existing = [p.path.rstrip("/") for p in list_partitions(root, fs=fs)
                if tuple(k for k, _ in p.values) == depth]
    if not specs:
        return existing
    chosen = []
    for spec in specs:
        parts = [p for p in spec.replace(",", "/").split("/") if p]
        if not parts or any(parse_partition(p) is None for p in parts):
            raise ConfigError(f"Cannot compact {defn.name}: partition {spec!r} is not of the "
                              "form col=value (a=1/b=2 for several levels)")
        directory = "/".join([root, *parts])
        if directory not in existing:
            shown = ", ".join(p[len(root):].strip("/") or "(root)" for p in existing[:5])
            raise ConfigError(f"Cannot compact {defn.name}: it has no partition {spec!r}",
                              hint=f"its partitions: {shown or 'none'}"
                                   + (", ..." if len(existing) > 5 else ""))
        chosen.append(directory)
    return chosen


__all__ = ["CompactReport", "PartitionCompaction", "compact"]
