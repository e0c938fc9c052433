"""What `ingest status` shows of a table, as one plain value: the layout on disk judged by a
snapshot, each partition's compaction backlog and the initiator's decision, the
metastore's open and aborted transactions, and a streamed table's committed Kafka offsets.

Takes the snapshot and the compactor's visibility from the table's metastore when one lists
it (so a `_vT` output of an open or aborted compactor transaction counts as not visible, as
for every reader), else judges the files as on disk. Changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ingest.acid.compaction import Backlog, CompactionThresholds, Decision, decide, measure_backlog
from ingest.acid.format import ValidWriteIdList
from ingest.acid.read import TableLayout, VisibleTxn, describe_table
from ingest.table.core import (
    ResolvedTable,
    StreamProgress,
    check_snapshot_table,
    compaction_thresholds,
    stream_progress,
)
from ingest.txn import TransactionInfo

SnapshotSource = Literal["option", "metastore", "directories"]


@dataclass(frozen=True)
class PartitionBacklog:
    """A partition's compaction backlog and what the initiator would do with it."""

    backlog: Backlog
    decision: Decision


@dataclass(frozen=True)
class StatusTotals:
    """Counts over the whole layout.

    Attributes:
        rows: events in every readable file (inserts and delete events, any directory).
        chosen_rows: insert events in the directories the snapshot reads.
    """

    partitions: int
    directories: int
    files: int
    bytes: int
    rows: int
    chosen_rows: int


@dataclass(frozen=True)
class TableStatus:
    """A table's status.

    Attributes:
        layout: partitions, directories and files, judged by the snapshot.
        table: the table's name, or None when no metastore lists it.
        snapshot_source: "option" (given by the caller), "metastore" (its current
            snapshot) or "directories" (no metastore: every write id on disk committed).
        backlogs: by partition path, for each partition holding directories.
        transactions: the table's open and aborted transactions, by txn id.
        progress: a streamed table's committed Kafka offsets and last commit, else None.
    """

    layout: TableLayout
    table: str | None
    snapshot_source: SnapshotSource
    backlogs: Mapping[str, PartitionBacklog]
    transactions: tuple[TransactionInfo, ...]
    progress: StreamProgress | None = None

    @property
    def totals(self) -> StatusTotals:
        dirs = [d for p in self.layout.partitions for d in p.directories]
        return StatusTotals(len(self.layout.partitions), len(dirs),
                            sum(len(d.files) for d in dirs), self.layout.total_bytes,
                            self.layout.total_rows, self.layout.chosen_rows)


def table_status(table: ResolvedTable, *,
                 snapshot: ValidWriteIdList | str | None = None) -> TableStatus:
    """Describe `table` (or the partition it was opened at) as `ingest status` shows it.

    Args:
        table: the table as `ingest.open_table` resolved it; with its metastore, or its
            files alone (`metastore=False`).
        snapshot: judge directories by this valid write-id list (or Hive's string form);
            default the metastore's current snapshot, else every write id on disk as
            committed (which warns, `UnverifiedSnapshotWarning`).

    Raises:
        FileNotFoundError: the directory does not exist.
        ConfigError: a bad snapshot string, or another table's snapshot.
        MetastoreError: the metastore cannot be opened or read.
        NotEnoughHistoryError, UnsupportedFormatError: see `ingest.acid.acid_state`.
    """
    path, fs, defn = table.location, table.fs, table.definition
    with table.store_or_none() as store:
        source: SnapshotSource = "option"
        visible: VisibleTxn | None = None
        txns: tuple[TransactionInfo, ...] = ()
        progress = None
        thresholds = CompactionThresholds()
        if store is not None and defn is not None:
            if snapshot is None:
                snapshot, source = store.snapshot(defn.name), "metastore"
            else:
                check_snapshot_table(snapshot, defn.name, where=f"table {defn.name}")
            visible = store.compactor_visibility(defn.name)
            thresholds = compaction_thresholds(defn)
            txns = tuple(store.transactions(defn.name, states=("open", "aborted")))
            progress = stream_progress(store, defn.name)
        elif snapshot is None:
            source = "directories"
        layout = describe_table(path, snapshot, fs=fs, visible_txn=visible)
    backlogs = {}
    for p in layout.partitions:
        if p.directories:
            backlog = measure_backlog(fs, p.path, layout.snapshot, visible_txn=visible)
            backlogs[p.path] = PartitionBacklog(backlog, decide(backlog, thresholds))
    return TableStatus(layout, None if defn is None else defn.name, source, backlogs, txns,
                       progress)


__all__ = ["PartitionBacklog", "SnapshotSource", "StatusTotals", "TableStatus", "table_status"]
