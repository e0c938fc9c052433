"""Check a table's files against its metastore.

Reads files (`ingest.acid`) and the metastore (`ingest.txn`, opened read-only) alike.
`verify_table` writes nothing: a metastore lists the ACID data; committed write ids have
files, readable up to their flush lengths (open transactions' files too) and as their commits
recorded them (the committed-file manifest); no directory holds an unknown write id or is a
stray; Kafka ranges neither overlap nor leave gaps; open transactions heartbeat. Files that
need recovery are found by a dry run of `recover.py`'s recovery.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import fsspec

from ingest.acid import has_directories
from ingest.acid.format import ParsedDirectory, ValidWriteIdList, find_mismatches
from ingest.acid.read import inspect_bucket_file, read_events
from ingest.acid.recovery import (
    FileRecovery,
    RecoveryReport,
    committed_read_length,
    recover_table,
)
from ingest.errors import CorruptFileError
from ingest.orc import read_tail
from ingest.table.core import (
    AcidLayout,
    ResolvedTable,
    StorageOptions,
    adopted_max_write_id,
    committed_length_of,
    find_damage,
    scan_layout,
    table_manifest,
)
from ingest.table.maintain.recover import (
    DEFAULT_TXN_TIMEOUT_S,
    _resolve,
    _timed_out,
    check_txn_timeout,
    live_files_of,
)
from ingest.txn import (
    Metastore,
    MetastoreError,
    OffsetRange,
    TableDefinition,
    TransactionInfo,
)


@dataclass(frozen=True)
class Problem:
    """One inconsistency `verify_table` found.

    Attributes:
        kind: a stable kebab-case name (missing-directory, unknown-write-id, offset-gap,
            offset-overlap, dead-transaction, needs-recovery, unrecoverable-file,
            unreadable-file, checksum-mismatch, stray-directory, unregistered-data,
            unreadable-metastore, short-side-file; against the committed-file manifest:
            missing-file, empty-file, short-file, damaged-footer, row-count-mismatch).
        message: the full sentence, with a hint where one helps.
        path: the file or directory concerned, if any.
        write_id: the write id concerned, if any.
    """

    kind: str
    message: str
    path: str | None = None
    write_id: int | None = None


@dataclass(frozen=True)
class VerifyReport:
    """Outcome of `verify_table`; `ok` when `problems` is empty."""

    path: str
    table: str | None
    problems: tuple[Problem, ...]
    files_checked: int
    write_ids_checked: int
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_table(
    table: ResolvedTable,
    *,
    txn_timeout_s: float = DEFAULT_TXN_TIMEOUT_S,
    deep: bool = True,
    now: float | None = None,
    unreadable_metastore: MetastoreError | None = None,
    shown_as: str | None = None,
    on_progress: Callable[[int, int, str], None] | None = None,
) -> VerifyReport:
    """Read-only consistency check of a table's files against its metastore.

    Args:
        table: the table as `ingest.open_table` resolved it: its root (or a partition:
            files are checked below it only), with its metastore (opened read-only here),
            else its files alone.
        txn_timeout_s: an open transaction silent for longer than this is reported dead.
        deep: also decode every stripe up to the flush length (else only tails are read).
        now: the current time in seconds since the epoch (tests pass their clock's).
        unreadable_metastore: why the metastore that should list the files could not be
            read, when the caller opened the files alone instead (`ingest verify`):
            reported as a problem, never repaired.
        shown_as: how messages name the table (a command's PATH as given); default its
            location.
        on_progress: called before each bucket file is checked, and once at the end, with
            (files done, files in all, the file's path): for a progress bar.

    Returns:
        The report; `ok` when nothing is wrong.

    Raises:
        ConfigError: txn_timeout_s is NaN, infinite or negative.
        FileNotFoundError: the table's directory does not exist.
        MetastoreError: the metastore failed.
    """
    check_txn_timeout(txn_timeout_s)
    path = table.location if shown_as is None else shown_as
    fs, root = table.fs, table.path.rstrip("/")
    problems: list[Problem] = []
    notes: list[str] = []
    if unreadable_metastore is not None:
        # Reported, never repaired: a read-only command does not rebuild a metastore.
        problems.append(Problem("unreadable-metastore", str(unreadable_metastore),
                                unreadable_metastore.location))
    # An object store has no empty directories: a missing prefix is an empty table only
    # when a metastore lists one there.
    if not fs.exists(root) and (has_directories(fs) or table.definition is None):
        raise FileNotFoundError(2, "No such file or directory", root)
    with table.store_or_none() as store:
        return _verify(store, table.definition, fs, root, path, problems, notes,
                       txn_timeout_s=txn_timeout_s, deep=deep, now=now,
                       storage_options=table.storage_options, on_progress=on_progress)


def _verify(store: Metastore | None, table: TableDefinition | None,
            fs: fsspec.AbstractFileSystem, root: str, path: str, problems: list[Problem],
            notes: list[str], *, txn_timeout_s: float, deep: bool, now: float | None,
            storage_options: StorageOptions,
            on_progress: Callable[[int, int, str], None] | None) -> VerifyReport:
    """`verify_table` with its metastore open (None: the files alone)."""
    infos = [] if store is None or table is None else store.transactions(table.name)
    ranges = [] if store is None or table is None else store.offset_ranges(table.name)
    now = time.time() if now is None else now
    open_ids = {t.write_id for t in infos if t.state == "open"}
    # Files: exactly what recovery would change is a problem (dry run, open writers kept).
    # What recovery may not cut is judged as recovery judges it: committed write ids
    # (all of them without a metastore), so the two never disagree on a file.
    snapshot = (store.snapshot(table.name)
                if store is not None and table is not None else None)
    committed = snapshot.is_valid if snapshot is not None else (lambda _w: True)
    manifest = (table_manifest(store, table) if store is not None and table is not None
                else None)
    report = recover_table(root, fs=fs, dry_run=True, live_files=live_files_of(open_ids),
                           committed=committed,
                           committed_length=(None if manifest is None
                                             else committed_length_of(manifest)))
    damage = find_damage(fs, manifest, under=root) if manifest is not None else {}
    problems += [Problem(d.kind, f"{d.message}. Hint: restore it from a backup; `ingest "
                         "recover` leaves it untouched, as its bytes hold committed rows.",
                         path, d.entry.write_id) for path, d in damage.items()]
    found = _file_problems(report, fs, deep, on_progress)
    if snapshot is not None:
        found += _short_side_files(report, fs, snapshot)
    # One diagnosis per file: recovery leaves a damaged committed file alone, so no
    # problem may send the user to `ingest recover` for it.
    problems += [p for p in found
                 if p.path not in damage or p.kind not in ("needs-recovery",
                                                           "short-side-file")]
    layout = scan_layout(fs, root)
    problems += _stray_problems(layout)
    if table is None:
        problems += _unregistered_problems(layout, path, problems)
        if not layout.directories:
            notes.append(f"no metastore lists a table at or above {path}: files checked "
                         "only")
    else:
        table_fs, table_root = _resolve(table.location, None, storage_options)
        dirs = (layout if table_root.rstrip("/") == root
                else scan_layout(table_fs, table_root)).directories
        # The write ids that wrote files, where the metastore keeps the manifest.
        written = ({e.write_id for e in manifest.entries.values()}
                   if manifest is not None and store is not None
                   and store.capabilities.committed_files else None)
        problems += _write_id_problems(infos, dirs, ranges, adopted_max_write_id(table),
                                       written=written)
        problems += _offset_problems(ranges)
        for t in _timed_out(infos, now, txn_timeout_s):
            problems.append(Problem(
                "dead-transaction",
                f"Open transaction {t.txn_id} (write id {t.write_id} of {t.table}, agent "
                f"{t.agent or '?'}) has not heartbeated for {now - t.heartbeat_at:.1f} s "
                f"(timeout {txn_timeout_s:g} s). Hint: run `ingest recover {path}` to abort "
                "it and clean its files.", write_id=t.write_id))
    return VerifyReport(root, None if table is None else table.name, tuple(problems),
                        len(report.files), len({t.write_id for t in infos}), tuple(notes))


def _stray_problems(layout: AcidLayout) -> list[Problem]:
    # The readers refuse these names too (Hive would skip them): one diagnosis for both.
    return [Problem("stray-directory",
                    f"Directory {d} starts like an ACID directory but is not "
                    "base_<writeId>[_v<txn>] or [delete_]delta_<min>_<max>[_<stmt>][_v<txn>]; "
                    "readers refuse the partition holding it. Hint: move it out of the table "
                    "or rename it to start with '_'.", d) for d in layout.stray]


def _unregistered_problems(layout: AcidLayout, path: str,
                           problems: list[Problem]) -> list[Problem]:
    if not layout.directories:
        return []
    unreadable = any(p.kind == "unreadable-metastore" for p in problems)
    why = ("the metastore beside it cannot be read" if unreadable
           else "no metastore lists a table at or above it")
    first = layout.directories[0][0]
    return [Problem(
        "unregistered-data",
        f"{path} holds ACID data ({len(layout.directories)} directories with write ids up to "
        f"{layout.max_write_id}, e.g. {first}) but {why}, so nothing says which of its "
        "transactions committed. Hint: point INGEST_METASTORE at the metastore that lists the "
        "table, restore it from a backup, or register the data again with `ingest create "
        f"{path} --schema ... --adopt`.", first)]


def _file_problems(report: RecoveryReport, fs: fsspec.AbstractFileSystem, deep: bool,
                   on_progress: Callable[[int, int, str], None] | None = None
                   ) -> list[Problem]:
    out = []
    hint = f"Hint: run `ingest recover {report.path}`."
    for i, f in enumerate(report.files, 1):
        if on_progress is not None:  # before the file: a deep read is the slow part
            on_progress(i - 1, len(report.files), f.path)
        if f.action == "skipped":
            problem = _check_live_file(fs, f, deep)
            if problem is not None:
                out.append(problem)
        elif f.action == "unrecoverable":
            out.append(Problem("unrecoverable-file", f"Cannot read bucket file {f.path}: "
                               f"{f.reason}. Hint: restore it from a backup.", f.path))
        elif f.changed:
            out.append(Problem("needs-recovery", f"Bucket file {f.path} needs recovery "
                               f"({f.action}, {f.old_length:,} -> {f.new_length:,} bytes): "
                               f"{f.reason}. {hint}", f.path))
        elif deep and f.action == "ok":
            out += _read_fully(fs, f)
    if on_progress is not None and report.files:
        on_progress(len(report.files), len(report.files), "")
    return out


def _short_side_files(report: RecoveryReport, fs: fsspec.AbstractFileSystem,
                      snapshot: ValidWriteIdList) -> list[Problem]:
    """Side files of open batches that stop below flushes the file's own footers record:
    readers go on to those footers (with a warning); recovery rebuilds the side file once
    no writer owns the file (docs/recovery.md, 9)."""
    out = []
    for f in report.files:
        if f.action != "skipped" or f.flush_lengths is None:
            continue
        try:
            length, warning = committed_read_length(
                fs, f.path, snapshot.is_valid,
                lambda w: snapshot.is_valid(w) or snapshot.is_aborted(w))
        except (CorruptFileError, OSError):
            continue  # unreadable open-batch files are reported by their own check
        if warning is not None:
            out.append(Problem(
                "short-side-file",
                f"Side file of bucket file {f.path} stops below flushes its own footers record "
                f"(readers go on to {length:,} bytes). Hint: `ingest recover` rebuilds it once "
                "the open transaction ends or times out.", f.path))
    return out


def _read_fully(fs: fsspec.AbstractFileSystem, f: FileRecovery) -> list[Problem]:
    try:
        mismatches = _checksum_problems(fs, f.path, f.new_length)
        if mismatches:
            return mismatches
        for _ in read_events(f.path, fs=fs, length=f.new_length):
            pass
    except (CorruptFileError, OSError, ValueError) as e:
        return [Problem("unreadable-file", f"Cannot read the stripes of bucket file {f.path} "
                        f"up to {f.new_length:,} bytes: {e}", f.path)]
    return []


def _checksum_problems(fs: fsspec.AbstractFileSystem, path: str, length: int) -> list[Problem]:
    """One checksum-mismatch per stripe whose bytes differ from its recorded checksum
    (docs/format.md §16), or one for checksums that fail their own check; none for files
    without checksums.

    Raises:
        CorruptFileError: no complete tail ends at `length`.
    """
    if not length:
        return []
    tail = read_tail(fs, path, length)
    try:
        mismatches = find_mismatches(fs, path, tail)
    except CorruptFileError as e:
        return [Problem("checksum-mismatch", f"{e}. Hint: restore the file from a backup.",
                        path)]
    out = []
    for m in mismatches:
        write_id = None if m.write_ids is None else m.write_ids[0]
        out.append(Problem("checksum-mismatch", f"{m.message}. Hint: restore the file from a "
                           "backup; `ingest recover` cannot repair stripe data.", path,
                           write_id))
    return out


def _check_live_file(fs: fsspec.AbstractFileSystem, f: FileRecovery,
                     deep: bool) -> Problem | None:
    """An open transaction's file must hold all it flushed: its side file may not point past
    its end, and it must read up to its last flush length (docs/invariants.md, 1)."""
    try:
        info = inspect_bucket_file(f.path, fs=fs)
        if deep and info.readable_length:
            mismatches = _checksum_problems(fs, f.path, info.readable_length)
            if mismatches:
                return mismatches[0]
            for _ in read_events(f.path, fs=fs, length=info.readable_length):
                pass
    except (CorruptFileError, OSError, ValueError) as e:
        return Problem("unreadable-file", f"Cannot read bucket file {f.path} of an open "
                       f"transaction up to its flushed data: {e}", f.path)
    return None


def _write_id_problems(infos: list[TransactionInfo],
                       parsed: tuple[tuple[str, ParsedDirectory], ...],
                       ranges: list[tuple[int, OffsetRange]],
                       adopted: int = 0, written: set[int] | None = None) -> list[Problem]:
    out = []
    states = {t.write_id: t.state for t in infos}

    def known(w: int) -> bool:
        # Write ids up to `adopted` were on disk when the table adopted them: committed.
        return w in states or w <= adopted

    for d, p in parsed:
        if p.is_base:
            # A base holds every write id up to its own; only its own must be known.
            unknown = [] if known(p.max_write_id) else [p.max_write_id]
        else:
            unknown = [w for w in range(p.min_write_id, p.max_write_id + 1) if not known(w)]
        if unknown:
            out.append(Problem(
                "unknown-write-id",
                f"Directory {d} holds write ids {unknown[:10]} the metastore never allocated. "
                "Hint: it was written against another metastore, or the table was re-created;"
                " move it away.", d, unknown[0]))
    recorded = {w for w, _ in ranges}
    changes = {t.write_id for t in infos if t.is_schema_change}
    for w, state in sorted(states.items()):
        if state != "committed" or w in changes:  # a column change writes no file (§25)
            continue
        covered = any((p.is_base and w <= p.max_write_id)
                      or (not p.is_base and p.min_write_id <= w <= p.max_write_id)
                      for _, p in parsed)
        # A committed write id may rightly have no directory: a stream's micro-batch of only
        # commit markers, aborted records or a compacted topic's gaps; and on a Hive
        # Metastore an aborted transaction that wrote nothing, which Hive's housekeeping
        # purges, after which its write id reads as committed. So where the metastore keeps
        # the committed-file manifest, a missing directory is a problem when the manifest
        # lists files of it; without one, when it is no stream's micro-batch.
        missing = w in written if written is not None else w not in recorded
        if not covered and missing:
            out.append(Problem(
                "missing-directory",
                f"Committed write id {w} has no base or delta directory under the table. "
                "Hint: its files were deleted or never written; restore them or re-ingest "
                "its Kafka ranges.", None, w))
    return out


def _offset_problems(ranges: list[tuple[int, OffsetRange]]) -> list[Problem]:
    out = []
    by_partition: dict[tuple[str, int], list[tuple[int, OffsetRange]]] = defaultdict(list)
    for w, r in ranges:
        by_partition[(r.topic, r.partition)].append((w, r))
    for (topic, partition), items in sorted(by_partition.items()):
        items.sort(key=lambda x: (x[1].from_offset, x[1].until_offset, x[0]))
        prev_w, prev = items[0]
        for w, r in items[1:]:
            if r.from_offset == r.until_offset:
                continue
            if r.from_offset < prev.until_offset:
                out.append(Problem(
                    "offset-overlap",
                    f"Kafka {topic}[{partition}] offsets {r.from_offset}..{r.until_offset} of "
                    f"write id {w} overlap {prev.from_offset}..{prev.until_offset} of write id "
                    f"{prev_w}: records were ingested twice.", None, w))
            elif r.from_offset > prev.until_offset:
                out.append(Problem(
                    "offset-gap",
                    f"Kafka {topic}[{partition}] offsets {prev.until_offset}..{r.from_offset} "
                    f"are in no committed write id (write id {prev_w} ends at "
                    f"{prev.until_offset}, write id {w} starts at {r.from_offset}): records "
                    "were skipped.", None, w))
            if r.until_offset >= prev.until_offset:
                prev_w, prev = w, r
    return out


__all__ = ["Problem", "VerifyReport", "verify_table"]
