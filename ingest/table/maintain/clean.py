"""Clean a table: remove what compaction made obsolete, aborted writes and compaction leftovers.

Hive's Cleaner with our metastore: `ingest.acid.compaction.cleaning` says what no current
snapshot reads; this module keeps what a registered reader may still use (its snapshot predates
the compaction) and what is younger than the retention time (readers outside the metastore),
then removes the rest and records the compactions whose inputs are all gone. Before it removes
anything it checks what it relies on: every committed file the current snapshot reads, against
the manifest (`plan_files`: a removed directory or partition too), and, whole, each base or
delta whose hiding makes a directory removable (`check_cover`). Damage stops the run with
nothing removed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import fsspec

from ingest.acid.compaction import (
    Candidate,
    CleaningPlan,
    CleanKind,
    Kept,
    check_cover,
    plan_cleaning,
    remove_candidate,
)
from ingest.acid.format import CommittedFiles, parse_directory
from ingest.acid.keys import read_key_columns, remove_index_files
from ingest.acid.read import ReadView, plan_files
from ingest.errors import ConfigError, CorruptFileError
from ingest.faults import crash_point
from ingest.table.core import (
    ResolvedTable,
    agent_name,
    cleaner_retention_s,
    partition_dirs,
    relative_path,
)
from ingest.table.maintain.recover import DEFAULT_TXN_TIMEOUT_S
from ingest.txn import CompactionInfo, Metastore, ReaderInfo, TableDefinition


@dataclass(frozen=True)
class Removed:
    """One directory (or original file) removed, or that a dry run would remove.

    Attributes:
        name: relative to its partition.
        kind: "obsolete", "aborted" or "temporary" (see
            `ingest.acid.compaction.cleaning.Candidate`).
        covered_by: for "obsolete", the base or delta that hides it.
        files: files removed.
        size_bytes: their bytes.
    """

    name: str
    kind: CleanKind
    covered_by: str | None
    files: int
    size_bytes: int


@dataclass(frozen=True)
class PartitionClean:
    """What cleaning did in one partition.

    Attributes:
        partition: relative to the table root ("" for an unpartitioned table).
        removed: what was removed (or would be, in a dry run), in name order.
        kept: what could go later, with the reason it stays now.
    """

    partition: str
    removed: tuple[Removed, ...]
    kept: tuple[Kept, ...]

    @property
    def files(self) -> int:
        return sum(r.files for r in self.removed)

    @property
    def size_bytes(self) -> int:
        return sum(r.size_bytes for r in self.removed)


@dataclass(frozen=True)
class CleanReport:
    """What `clean` did to a table.

    Attributes:
        table: its name.
        location: its root.
        retention_s: the retention time used.
        snapshot: the table's snapshot the cleaning was decided with (Hive's string).
        live_readers: registered readers alive at the start.
        partitions: one entry per partition looked at, in path order.
        compactions_cleaned: history rows marked cleaned.
        dry_run: nothing was removed.
    """

    table: str
    location: str
    retention_s: float
    snapshot: str
    live_readers: int
    partitions: tuple[PartitionClean, ...]
    compactions_cleaned: tuple[int, ...]
    dry_run: bool

    @property
    def directories(self) -> int:
        return sum(len(p.removed) for p in self.partitions)

    @property
    def files(self) -> int:
        return sum(p.files for p in self.partitions)

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.partitions)


def clean(
    table: ResolvedTable,
    *,
    retention_s: float | None = None,
    dry_run: bool = False,
    partitions: Sequence[str] | None = None,
    txn_timeout_s: float = DEFAULT_TXN_TIMEOUT_S,
    on_partition: Callable[[PartitionClean], None] | None = None,
    on_progress: Callable[[int, int, str], None] | None = None,
) -> CleanReport:
    """Remove what no reader can use any more from `table`.

    A directory compaction made obsolete goes once every live registered reader's snapshot
    was taken after that compaction committed (after its output was in place, when the
    history has no record of it) and it has been obsolete for `retention_s`. Directories of
    aborted write ids and leftover hidden compaction output go after `retention_s`. A
    directory holding a side file (an open transaction batch) always stays.

    Nothing is removed unless every committed file the table's snapshot reads in the
    partitions cleaned matches its manifest entry, and each base or delta that hides a
    directory about to go is whole (present, committed length, tail hash, stripe checksums):
    the directories it hides may be the last readable copy of its rows. A dry run checks
    the same.

    Args:
        table: the table, opened at its root (`ingest.open_table`).
        retention_s: how long obsolete directories stay for readers outside the metastore;
            default the table's `ingest.cleaner.retention.seconds` (300 s).
        dry_run: decide and report, remove nothing.
        partitions: partition specs such as ``dt=2026-01-01``; default every partition.
        txn_timeout_s: a registered reader silent for longer counts as dead.
        on_partition: called with each partition's result as soon as it is done.
        on_progress: called after each partition with (partitions done, partitions in
            all, the partition's path): for a progress bar.

    Returns:
        What was removed and what stays, per partition.

    Raises:
        TableNotFoundError: the metastore no longer lists the table.
        ConfigError: a partition spec that is malformed or names no partition of the table,
            or a negative retention; the table was opened without a metastore or at a
            partition.
        CorruptFileError: a committed file is missing (with its directory or partition),
            emptied, cut or changed, or the output hiding a directory is damaged; nothing was
            removed (run `ingest verify`).
        UnsupportedFormatError: a partition cannot be listed as a snapshot would.
        MetastoreError: the metastore failed or cannot be opened.
        OSError: the storage layer failed while removing; run `ingest clean` again.
    """
    if retention_s is not None and not retention_s >= 0:
        raise ConfigError(f"Cannot clean {table.location}: retention {retention_s} s must be at "
                          "least 0", hint="for example --retention 300")
    with table.to_write("clean") as (store, defn):
        retention = cleaner_retention_s(defn) if retention_s is None else retention_s
        snapshot = store.snapshot(defn)
        readers = store.live_readers(defn, timeout_s=txn_timeout_s)
        records = store.compactions_to_clean(defn)
        visible = store.compactor_visibility(defn)
        aborted_at = {t.write_id: t.finished_at or 0.0
                      for t in store.transactions(defn, states=("aborted",))}
        fs, root = table.fs, table.path
        decide = _Decision(retention, readers, records, aborted_at, time.time())
        dirs = partition_dirs(defn, fs, root, partitions, action="clean")
        with store.read_view(defn.name, agent=agent_name("clean"), snapshot=snapshot) as view:
            _check_reads(fs, root, view, None if partitions is None else dirs,
                         table=defn.name)
        manifest = CommittedFiles(root, view.committed)
        chosen: list[tuple[CleaningPlan, str, list[Candidate], list[Kept]]] = []
        for directory in dirs:
            plan = plan_cleaning(fs, directory, snapshot, visible_txn=visible,
                                 aborted_txn=visible.aborted.__contains__)
            rel = directory[len(root):].strip("/")
            go, kept = _choose(plan, rel, decide)
            _check_covers(fs, plan, go, manifest)
            chosen.append((plan, rel, go, kept))
        done: list[PartitionClean] = []
        forget = None if dry_run else _forgetter(store, defn, root)
        unindex = None if dry_run else _unindexer(fs, root)
        for plan, rel, go, kept in chosen:
            result = _clean_partition(fs, plan, rel, go, kept, forget, unindex)
            done.append(result)
            if on_partition is not None:
                on_partition(result)
            if on_progress is not None:
                on_progress(len(done), len(chosen), rel)
        cleaned: list[int] = []
        if not dry_run:
            # A record that names its inputs is cleaned once they are gone; one that does
            # not (Hive's queue) once its partition has nothing left to remove or keep, since
            # Hive's mark_cleaned also forgets the aborted write ids below its high-water
            # mark, which then read as committed.
            spotless = {p.partition for p in done if not p.kept}
            cleaned = [r.compaction_id for r in records
                       if (not any(fs.exists(f"{_join(root, r.partition)}/{name}")
                                   for name in r.inputs) if r.inputs
                           else r.partition in spotless)]
            crash_point("clean.before_record")  # removed, history not updated: harmless
            store.mark_compactions_cleaned(cleaned)
            crash_point("clean.after_record")
            store.forget_dead_readers(timeout_s=txn_timeout_s)
    return CleanReport(defn.name, defn.location, retention, snapshot.to_hive_string(),
                       len(readers), tuple(done), tuple(cleaned), dry_run)


@dataclass(frozen=True)
class _Decision:
    """Whether a candidate may go now: readers and retention."""

    retention_s: float
    readers: Sequence[ReaderInfo]
    records: Sequence[CompactionInfo]
    aborted_at: dict[int, float]
    now: float

    def record_of(self, partition: str, cover: str | None) -> CompactionInfo | None:
        """The compaction that wrote `cover`: by its recorded outputs, or by the `_vT`
        suffix naming its transaction (a history that keeps no outputs: Hive's queue)."""
        parsed = parse_directory(cover) if cover else None
        suffix = None if parsed is None else parsed.visibility_txn_id
        return next((r for r in self.records if r.partition == partition
                     and (cover in r.outputs
                          or (suffix is not None and suffix == r.txn_id))), None)

    def why_kept(self, plan: CleaningPlan, partition: str, c: Candidate) -> str | None:
        since = c.changed_at
        if c.kind == "obsolete":
            record = self.record_of(partition, c.covered_by)
            # The later of the record's finish and the cover's rename into place (a crashed
            # minor compaction's second half is renamed by the next one).
            times = [plan.cover_times.get(c.covered_by or ""),
                     None if record is None else record.finished_at]
            since = max((t for t in times if t is not None), default=None)
            if record is not None and record.next_txn_id is not None:
                # Hive's rule: a transaction opened before the compactor's committed (at or
                # below the highest id then) may have listed the partition without the
                # output, or with a `_vT` output it may not use yet.
                blockers = [r for r in self.readers if r.min_open_txn <= record.next_txn_id
                            and r.min_open_txn != record.txn_id]
            elif record is not None and record.txn_id is not None:
                # Readers registered after the compactor committed listed the partition
                # with its output in place (a compactor commits only after its renames), so
                # they skip this directory.
                blockers = [r for r in self.readers if r.min_open_txn <= record.txn_id]
            else:
                # No committed compactor transaction orders the output against the readers:
                # any live reader may have listed the partition before it appeared.
                blockers = list(self.readers)
            if blockers:
                shown = ", ".join(f"{r.reader_id} ({r.agent})" for r in blockers[:3])
                return (f"registered readers may still use it: {shown}"
                        + (", ..." if len(blockers) > 3 else ""))
        elif c.kind == "aborted":
            parsed = parse_directory(c.name)
            if parsed is not None:
                ended = [t for w, t in self.aborted_at.items()
                         if parsed.min_write_id <= w <= parsed.max_write_id]
                since = max([*ended, *([] if since is None else [since])], default=None)
        if self.retention_s <= 0:
            return None
        if since is None:
            return "the storage gives no modification time; only --retention 0 removes it"
        left = self.retention_s - (self.now - since)
        if left > 0:
            return f"within the retention time: {left:.0f} s left of {self.retention_s:g} s"
        return None


def _forgetter(store: Metastore, defn: TableDefinition,
               root: str) -> Callable[[Candidate], None]:
    """Drops a candidate's committed-file manifest entries (docs/format.md §20)."""
    def forget(c: Candidate) -> None:
        if store.capabilities.committed_files:
            store.forget_committed_files(defn, [relative_path(root, p) for p, _ in c.files])
    return forget


def _unindexer(fs: fsspec.AbstractFileSystem,
               root: str) -> Callable[[Candidate], None] | None:
    """Removes a removed candidate's key index files (docs/format.md §24); None when the
    table has no key index."""
    if read_key_columns(fs, root) is None:
        return None

    def unindex(c: Candidate) -> None:
        remove_index_files(fs, root, [relative_path(root, p) for p, _ in c.files])
    return unindex


def _check_reads(fs: fsspec.AbstractFileSystem, root: str, view: ReadView,
                 partitions: Collection[str] | None, *, table: str) -> None:
    """Refuse to clean a table whose committed files, as the snapshot reads them, differ
    from the manifest (`plan_files`; `partitions` None: every one, a removed one too).

    Raises:
        CorruptFileError: naming the first damaged file; nothing was removed.
    """
    keep = None if partitions is None else set(partitions).__contains__
    try:
        plan_files(fs, root, view, root=root,
                   keep=None if keep is None else (lambda p: keep(p.path)))
    except CorruptFileError as e:
        raise CorruptFileError(f"Cannot clean {table}, nothing was removed: "
                               f"{e.message[:1].lower()}{e.message[1:]}", path=e.path,
                               offset=e.offset, hint=e.hint) from e


def _choose(plan: CleaningPlan, partition: str, decide: _Decision
            ) -> tuple[list[Candidate], list[Kept]]:
    """The candidates that may go now, and what stays with the reason."""
    go: list[Candidate] = []
    kept = list(plan.kept)
    for c in plan.candidates:
        why = decide.why_kept(plan, partition, c)
        if why is None:
            go.append(c)
        else:
            kept.append(Kept(c.name, why))
    return go, kept


def _check_covers(fs: fsspec.AbstractFileSystem, plan: CleaningPlan,
                  go: Sequence[Candidate], manifest: CommittedFiles) -> None:
    """Check, whole, each base or delta whose hiding lets an obsolete candidate go.

    Raises:
        CorruptFileError: a cover is damaged; nothing of the table was removed yet.
    """
    hidden: dict[str, list[str]] = {}
    for c in go:
        if c.kind == "obsolete" and c.covered_by is not None:
            hidden.setdefault(c.covered_by, []).append(c.name)
    for cover, names in sorted(hidden.items()):
        check_cover(fs, plan.partition, cover, manifest, hides=names)


def _clean_partition(fs: fsspec.AbstractFileSystem, plan: CleaningPlan, partition: str,
                     go: Sequence[Candidate], kept: Sequence[Kept],
                     forget: Callable[[Candidate], None] | None,
                     unindex: Callable[[Candidate], None] | None = None) -> PartitionClean:
    """Removes what may go (nothing when `forget` is None: a dry run)."""
    removed: list[Removed] = []
    for c in go:
        if forget is None:
            files = len(c.files)
        else:
            # Entries first: a crash between leaves unlisted files no snapshot reads, never
            # listed files missing (which verify would report as lost committed data).
            forget(c)
            files = remove_candidate(fs, plan.partition, c)
            if unindex is not None:  # never trusted without its data file: only space
                unindex(c)
        removed.append(Removed(c.name, c.kind, c.covered_by, files, c.size_bytes))
    return PartitionClean(partition, tuple(removed), tuple(sorted(kept, key=lambda k: k.name)))


def _join(root: str, partition: str) -> str:
    return f"{root}/{partition}" if partition else root


__all__ = ["CleanReport", "PartitionClean", "Removed", "clean"]
