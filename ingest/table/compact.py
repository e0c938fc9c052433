"""Compact a table's partitions as of the compactor snapshot its metastore gives (Hive's Worker).

Takes the table's snapshot from the metastore, asks the initiator (`ingest.acid.initiator`,
kind "auto") or the caller which kind each partition needs, and runs `ingest.acid.compaction`
on each in a compactor transaction recorded in the compaction history; with the table's
visibility suffix the output is named after that transaction (`base_N_vT`). Obsolete inputs
stay on disk for a cleaner; every snapshot already ignores them.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import fsspec

from ingest.acid.compaction import (
    CompactionKind,
    CompactionResult,
    compact_partition,
    compactor_snapshot,
    plan_compaction,
)
from ingest.acid.file_options import Compression, WriterOptions
from ingest.acid.initiator import Backlog, CompactionThresholds, decide, measure_backlog
from ingest.acid.state import VisibleTxn
from ingest.acid.writeids import ValidWriteIdList
from ingest.errors import ConfigError, IngestError
from ingest.faults import crash_point
from ingest.table._committed import record_outputs
from ingest.table._definition import (
    compaction_thresholds,
    table_compression,
    uses_visibility_suffix,
)
from ingest.table._layout import partition_dirs
from ingest.table._open import MetastoreRef, _check_root, agent_name, open_table, table_fs
from ingest.table.verify import DEFAULT_TXN_TIMEOUT_S
from ingest.txn import (
    CompactionInfo,
    Metastore,
    TableDefinition,
    Transaction,
    find_metastore_for,
    normalize_location,
)

CompactMode = Literal["major", "minor", "auto"]
# How often a running compaction heartbeats its transaction; a compactor silent for
# DEFAULT_TXN_TIMEOUT_S is taken for dead and the next one takes the partition over.
HEARTBEAT_INTERVAL_S = 30.0


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
    location: str,
    *,
    kind: CompactMode = "major",
    partitions: Sequence[str] | None = None,
    metastore: MetastoreRef = None,
    dry_run: bool = False,
    tuning: WriterOptions | None = None,
    agent: str = "",
) -> CompactReport:
    """Compact the table at `location`, partition by partition.

    Each partition's compaction runs in a transaction of its own and is recorded in the
    metastore's compaction history ('working', then 'ready for cleaning' once its output is
    renamed into place, or 'failed'); one compaction per partition runs at a time.

    Args:
        location: the table root.
        kind: "major" (a new base per partition), "minor" (deltas folded together), or
            "auto" (the initiator decides per partition from the table's thresholds).
        partitions: partition specs such as ``dt=2026-01-01`` (``a=1/b=2`` for several
            levels); default every partition.
        metastore: as for `ingest.table.load`.
        dry_run: only plan: report inputs and outputs, write nothing (the metastore neither).
        tuning: stripe and encoder settings of the output files.
        agent: recorded with the compactor's transactions (default host:pid:ingest-compact).

    Returns:
        One entry per partition looked at.

    Raises:
        TableNotFoundError: no table at `location`.
        ConfigError: an unknown kind, or a partition spec that is malformed or names no
            partition of the table.
        CommitConflictError: another compaction is working on a partition, or wrote the same
            output meanwhile.
        CorruptFileError: an input file cannot be read (run `ingest recover`).
        MetastoreError: the metastore failed.
    """
    if kind not in ("major", "minor", "auto"):
        raise ConfigError(f"Cannot compact {location}: kind {kind!r} is not major, minor or "
                          "auto")
    with open_table(location, metastore) as (store, defn):
        snapshot = store.snapshot(defn)
        visible = store.compactor_visibility(defn)
        fs, root = table_fs(defn)
        dirs = partition_dirs(defn, fs, root, partitions, action="compact")
        worker = _Worker(store, defn, snapshot, fs, table_compression(defn), tuning,
                         agent or agent_name("compact"), dry_run, visible,
                         uses_visibility_suffix(defn, fs.protocol))
        thresholds = compaction_thresholds(defn)
        done = [worker.partition(directory, directory[len(root):].strip("/"), kind, thresholds)
                for directory in dirs]
    return CompactReport(defn.name, defn.location, kind,
                         compactor_snapshot(snapshot).to_hive_string(), tuple(done), dry_run)


@dataclass(frozen=True)
class _Worker:
    """Compacts one partition at a time with what every partition shares (Hive's Worker)."""

    store: Metastore
    defn: TableDefinition
    snapshot: ValidWriteIdList
    fs: fsspec.AbstractFileSystem
    codec: Compression
    tuning: WriterOptions | None
    agent: str
    dry_run: bool
    visible: VisibleTxn  # the metastore's compactor visibility
    suffix: bool  # name outputs `..._v<compactor txn>`

    def partition(self, directory: str, rel: str, mode: CompactMode,
                  thresholds: CompactionThresholds) -> PartitionCompaction:
        backlog = None
        if mode == "auto":
            backlog = measure_backlog(self.fs, directory, self.snapshot,
                                      visible_txn=self.visible)
            decision = decide(backlog, thresholds)
            if decision.kind is None:
                return PartitionCompaction(rel, None, None, decision.reason, None, backlog)
            kind, reason = decision.kind, decision.reason
        else:
            kind, reason = mode, "requested"

        def run(dry_run: bool, txn_id: int | None) -> CompactionResult | None:
            return compact_partition(directory, self.snapshot, row_schema=self.defn.row_schema,
                                     kind=kind, fs=self.fs, compression=self.codec,
                                     tuning=self.tuning, dry_run=dry_run,
                                     visibility_txn_id=txn_id if self.suffix else None,
                                     visible_txn=self.visible)

        if self.dry_run or plan_compaction(self.fs, directory, self.snapshot, kind=kind,
                                           visible_txn=self.visible) is None:
            result = run(True, None)  # no transaction yet: outputs shown without `_v`
            return PartitionCompaction(rel, result, kind, reason, None, backlog)
        cid, txn = self.store.begin_compaction(self.defn, rel, kind, agent=self.agent,
                                               stale_after_s=DEFAULT_TXN_TIMEOUT_S,
                                               is_alive=agent_alive)
        try:
            with heartbeating(self.store, txn):
                result = run(False, txn.txn_id)
        except BaseException as e:
            try:
                self.store.fail_compaction(cid, txn, f"{type(e).__name__}: {e}")
            except IngestError as record_error:
                e.add_note(f"Also failed to record compaction {cid} as failed: {record_error}")
            raise
        if result is None:  # it only finished a crashed compaction's second rename
            self.store.forget_compaction(cid, txn)
            return PartitionCompaction(rel, None, kind, reason, None, backlog)
        # The outputs' manifest entries (docs/format.md §20), then the record.
        record_outputs(self.store, self.defn, [result.plan])
        # Committed only now that the output is in place: a crash before leaves a 'working'
        # row whose transaction times out, and the next compaction takes over.
        self.store.finish_compaction(cid, txn, highest_write_id=result.plan.snapshot.high_watermark,
                                     rows=result.rows, inputs=result.plan.inputs,
                                     outputs=result.plan.outputs)
        crash_point("compact.after_record")
        return PartitionCompaction(rel, result, kind, reason, cid, backlog)


@contextmanager
def heartbeating(store: Metastore, txn: Transaction) -> Iterator[None]:
    """Heartbeat the compactor's transaction from a thread while the block runs."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_INTERVAL_S):
            try:
                store.heartbeat(txn)
            except IngestError:
                return  # the record at the end reports a lost transaction

    thread = threading.Thread(target=beat, name=f"compactor-heartbeat-{txn.txn_id}",
                              daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


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


def compaction_history(location: str, *, metastore: str | None = None) -> CompactionHistory:
    """Read a table's compaction history; opens the metastore read-only.

    Raises:
        TableNotFoundError: no table at `location`.
        ConfigError: `location` lies inside a table instead of being its root.
        MetastoreError: the metastore cannot be opened or read.
    """
    if metastore is None:
        store, defn = find_metastore_for(location, read_only=True)
    else:
        store = Metastore.open(metastore, read_only=True)
        defn = None
    try:
        if defn is None:
            defn = store.get_table(normalize_location(location))
        _check_root(defn, location)
        return CompactionHistory(defn.name, defn.location, tuple(store.compactions(defn)))
    finally:
        store.close()


def shown_state(info: CompactionInfo) -> str:
    """The state to show: as recorded, or "attempted" for a 'working' compaction whose
    compactor is gone (its transaction ended, or its process no longer runs)."""
    if info.abandoned or (info.state == "working" and not agent_alive(info.agent)):
        return "attempted"
    return info.state


def agent_alive(agent: str) -> bool:
    """False only when `agent` (host:pid:...) names a process of this host that is gone."""
    host, _, rest = agent.partition(":")
    pid = rest.split(":", 1)[0]
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["CompactMode", "CompactReport", "CompactionHistory", "PartitionCompaction",
           "agent_alive", "compact", "heartbeating", "compaction_history", "shown_state"]
