"""Compact a table's partitions as of the compactor snapshot its metastore gives (Hive's Worker).

Takes the table's read view from the metastore (snapshot, manifest, `_vT` visibility and a
lease, so a concurrent cleaner keeps the inputs until the run ends), asks the initiator
(`ingest.acid.compaction.initiator`, kind "auto") or the caller which kind each partition needs,
plans every partition first (each plan checks its inputs against the manifest: a damaged table
fails before anything is written), then runs `ingest.acid.compaction` on each under the
compactor's commit protocol (`_compactor.CompactorRun`); with the table's visibility suffix the
output is named after that transaction (`base_N_vT`). Obsolete inputs stay on disk for a
cleaner; every snapshot already ignores them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import fsspec

from ingest.acid.compaction import (
    Backlog,
    CompactionKind,
    CompactionResult,
    CompactionThresholds,
    compact_partition,
    compactor_snapshot,
    decide,
    measure_backlog,
    plan_compaction,
)
from ingest.acid.keys import index_data_file, read_key_columns
from ingest.acid.read import ReadView, plan_files
from ingest.acid.write import Compression, WriterOptions
from ingest.errors import ConfigError, CorruptFileError
from ingest.table.core import (
    ResolvedTable,
    agent_name,
    compaction_thresholds,
    partition_dirs,
    pinned_definition,
    table_compression,
    uses_visibility_suffix,
)
from ingest.table.maintain._compactor import HEARTBEAT_INTERVAL_S, CompactorRun, agent_alive
from ingest.txn import (
    CompactionInfo,
    Metastore,
    TableDefinition,
)

CompactMode = Literal["major", "minor", "auto"]


@dataclass(frozen=True)
class PartitionCompaction:
    """One partition's compaction: result is None when it had nothing to compact.

    Attributes:
        partition: its path relative to the table root ("" for an unpartitioned table).
        result: inputs, outputs, rows, bytes and time (`CompactionResult`).
        kind: the kind run or planned ("auto" resolves to the initiator's choice); None when
            the initiator asked for nothing.
        reason: why this kind ("requested", or the initiator's reason with its numbers), or
            why nothing; result None under a reason for a kind means the plan found nothing.
        compaction_id: the row of the compaction history, when one ran.
        backlog: what the initiator measured (kind "auto" only).
    """

    partition: str
    result: CompactionResult | None
    kind: CompactionKind | None = None
    reason: str = ""
    compaction_id: int | None = None
    backlog: Backlog | None = None


@dataclass(frozen=True)
class CompactReport:
    """What `compact` did to a table.

    Attributes:
        table: the table's name.
        location: its root.
        kind: "major", "minor" or "auto".
        snapshot: the compactor snapshot's Hive string (before per-partition lowering).
        partitions: one entry per partition looked at, in path order.
        dry_run: nothing was written.
    """

    table: str
    location: str
    kind: CompactMode
    snapshot: str
    partitions: tuple[PartitionCompaction, ...]
    dry_run: bool


def compact(
    table: ResolvedTable,
    *,
    kind: CompactMode = "major",
    partitions: Sequence[str] | None = None,
    dry_run: bool = False,
    tuning: WriterOptions | None = None,
    agent: str = "",
    on_progress: Callable[[int, int, str], None] | None = None,
) -> CompactReport:
    """Compact `table`, partition by partition.

    Each partition's compaction runs in a transaction of its own and is recorded in the
    metastore's compaction history ('working', then 'ready for cleaning' once its output is
    renamed into place, or 'failed'); one compaction per partition runs at a time. Every
    partition is planned, and its inputs checked against the committed-file manifest, before
    the first is compacted; the run holds a reader lease until it ends.

    Args:
        table: the table, opened at its root (`ingest.open_table`).
        kind: "major" (a new base per partition), "minor" (deltas folded together), or
            "auto" (the initiator decides per partition from the table's thresholds).
        partitions: partition specs such as ``dt=2026-01-01`` (``a=1/b=2`` for several
            levels); default every partition.
        dry_run: only plan (and check the inputs): report inputs and outputs, write nothing
            (the metastore neither: no lease is taken).
        tuning: stripe and encoder settings of the output files.
        agent: recorded with the compactor's transactions (default host:pid:ingest-compact).
        on_progress: called after each partition with (partitions done, partitions in
            all, the partition's path): for a progress bar.

    Returns:
        One entry per partition looked at.

    Raises:
        TableNotFoundError: the metastore no longer lists the table.
        ConfigError: an unknown kind, or a partition spec that is malformed or names no
            partition of the table.
        CommitConflictError: another compaction is working on a partition, or wrote the same
            output meanwhile.
        CorruptFileError: a committed file the compaction would read is missing (with its
            directory or partition too), emptied, cut or changed, or an output failed its
            check; nothing of that partition was written (run `ingest verify`).
        MetastoreError: the metastore failed.
    """
    if kind not in ("major", "minor", "auto"):
        raise ConfigError(f"Cannot compact {table.location}: kind {kind!r} is not major, minor or "
                          "auto")
    agent = agent or agent_name("compact")
    with table.to_write("compact") as (store, defn):
        fs, root = table.fs, table.path
        dirs = partition_dirs(defn, fs, root, partitions, action="compact")
        # A dry run reads tails only and leaves the metastore as it was: no lease.
        given = store.snapshot(defn) if dry_run else None
        with store.read_view(defn.name, agent=agent, snapshot=given) as view:
            # The columns of the view's snapshot: it may hold files of a change made since
            # the table was opened, which the output must keep (docs/format.md §25).
            defn = pinned_definition(defn, view)
            if partitions is None:
                _refuse_missing_partitions(fs, root, view, dirs)
            worker = _Worker(store, defn, view, fs, root, table_compression(defn), tuning,
                             agent, dry_run,
                             uses_visibility_suffix(defn, fs.protocol,
                                                    store.capabilities.visibility_suffix))
            thresholds = compaction_thresholds(defn)
            planned = [worker.plan(directory, kind, thresholds) for directory in dirs]
            done = []
            for p in planned:
                done.append(worker.run(p))
                if on_progress is not None:
                    on_progress(len(done), len(planned), done[-1].partition)
    return CompactReport(defn.name, defn.location, kind,
                         compactor_snapshot(view.snapshot).to_hive_string(), tuple(done),
                         dry_run)


def _refuse_missing_partitions(fs: fsspec.AbstractFileSystem, root: str, view: ReadView,
                               listed: Collection[str]) -> None:
    """Refuse a partition the manifest holds committed files in but no listing found: it
    was removed, not emptied (docs/invariants.md, 7). The listed partitions are left to
    their own plans (pruned here, so nothing is read twice).

    Raises:
        CorruptFileError: naming a committed file of the missing partition.
    """
    present = set(listed)
    compactor = replace(view, snapshot=compactor_snapshot(view.snapshot))
    try:
        plan_files(fs, root, compactor, root=root, keep=lambda p: p.path not in present)
    except CorruptFileError as e:
        raise CorruptFileError(f"Cannot compact {root}, nothing was written: "
                               f"{e.message[:1].lower()}{e.message[1:]}", path=e.path,
                               offset=e.offset, hint=e.hint) from e


@dataclass(frozen=True)
class _Planned:
    """One partition after planning: the kind to run, or why nothing."""

    directory: str
    rel: str
    kind: CompactionKind | None
    reason: str
    backlog: Backlog | None
    has_work: bool


@dataclass(frozen=True)
class _Worker:
    """Compacts one partition at a time with what every partition shares (Hive's Worker)."""

    store: Metastore
    defn: TableDefinition
    view: ReadView
    fs: fsspec.AbstractFileSystem
    root: str
    codec: Compression
    tuning: WriterOptions | None
    agent: str
    dry_run: bool
    suffix: bool  # name outputs `..._v<compactor txn>`

    def plan(self, directory: str, mode: CompactMode,
             thresholds: CompactionThresholds) -> _Planned:
        """Decide the kind and check the partition's inputs (`plan_compaction`).

        Raises:
            CorruptFileError: an input differs from its manifest entry.
        """
        rel = directory[len(self.root):].strip("/")
        backlog = None
        if mode == "auto":
            backlog = measure_backlog(self.fs, directory, self.view.snapshot,
                                      visible_txn=self.view.visible_txn)
            decision = decide(backlog, thresholds)
            if decision.kind is None:
                return _Planned(directory, rel, None, decision.reason, backlog, False)
            kind, reason = decision.kind, decision.reason
        else:
            kind, reason = mode, "requested"
        plan = plan_compaction(self.fs, directory, self.view, root=self.root, kind=kind)
        return _Planned(directory, rel, kind, reason, backlog, plan is not None)

    def _index(self, result: CompactionResult) -> None:
        """Rebuild the key index of the committed outputs (docs/format.md §24) when the table
        has one. After the commit and best effort: an output without its index is scanned."""
        key = read_key_columns(self.fs, self.root)
        if key is None or any(c not in self.defn.row_schema.names for c in key):
            return
        for data in result.output_files:
            try:
                index_data_file(self.fs, self.root, data, row_schema=self.defn.row_schema,
                                key_columns=key)
            except (OSError, CorruptFileError) as e:
                warnings.warn(f"Cannot index compaction output {data.path}: {e}; upserts "
                              "scan its bucket until the next compaction", stacklevel=2)

    def run(self, p: _Planned) -> PartitionCompaction:
        """Compact one planned partition under the compactor's commit protocol."""
        if p.kind is None:
            return PartitionCompaction(p.rel, None, None, p.reason, None, p.backlog)
        kind = p.kind

        def run(dry_run: bool, txn_id: int | None) -> CompactionResult | None:
            # Asked after `begin`, which aborted a dead compactor's transaction: its `_vT`
            # outputs go before ours are written (`finish_interrupted`).
            aborted = (None if dry_run
                       else self.store.compactor_visibility(self.defn.name).aborted)
            return compact_partition(p.directory, self.view, root=self.root,
                                     row_schema=self.defn.row_schema, kind=kind, fs=self.fs,
                                     compression=self.codec, tuning=self.tuning,
                                     dry_run=dry_run,
                                     visibility_txn_id=txn_id if self.suffix else None,
                                     aborted_txn=None if aborted is None
                                     else aborted.__contains__)

        if not p.has_work:
            return PartitionCompaction(p.rel, None, kind, p.reason, None, p.backlog)
        if self.dry_run:
            result = run(True, None)  # no transaction yet: outputs shown without `_v`
            return PartitionCompaction(p.rel, result, kind, p.reason, None, p.backlog)
        compactor = CompactorRun.begin(self.store, self.defn, p.rel, kind, agent=self.agent)
        with compactor:
            result = run(False, compactor.txn.txn_id)
        compactor.finish(result)
        if result is None:  # it only finished a crashed compaction's second rename
            return PartitionCompaction(p.rel, None, kind, p.reason, None, p.backlog)
        self._index(result)
        return PartitionCompaction(p.rel, result, kind, p.reason, compactor.compaction_id,
                                   p.backlog)


@dataclass(frozen=True)
class CompactionHistory:
    """A table's compaction history (`compaction_history`).

    Attributes:
        table: the table's name.
        location: its root.
        compactions: oldest first.
    """

    table: str
    location: str
    compactions: tuple[CompactionInfo, ...]


def compaction_history(table: ResolvedTable) -> CompactionHistory:
    """Read a table's compaction history; opens its metastore read-only (the open
    `Metastore` it was resolved with is used as it is, and left open). Reads no file.

    Raises:
        ConfigError: `table` was opened without a metastore, or at a partition.
        TableNotFoundError: the metastore no longer lists the table.
        MetastoreError: the metastore cannot be opened or read.
    """
    defn = table.require_root("show the compactions")
    with table.store() as store:
        return CompactionHistory(defn.name, defn.location, tuple(store.compactions(defn)))


def shown_state(info: CompactionInfo) -> str:
    """The state to show: as recorded, or "attempted" for a 'working' compaction whose
    compactor is gone (its transaction ended, or its process no longer runs)."""
    if info.abandoned or (info.state == "working" and not agent_alive(info.agent)):
        return "attempted"
    return info.state


__all__ = ["HEARTBEAT_INTERVAL_S", "CompactMode", "CompactReport", "CompactionHistory",
           "CompactorRun", "PartitionCompaction", "agent_alive", "compact", "compaction_history",
           "shown_state"]
