"""Which base and deltas of one partition a snapshot reads: Hive's `AcidUtils.getAcidState`.

`choose_directories` is the pure algorithm (processBaseDir, processDeltaDir, isDirUsable,
findBestWorkingDeltas, the ACID_NOT_ENOUGH_HISTORY check); `acid_state` lists a partition
through fsspec and calls it. Knows names and write-id lists, not ORC bytes or the metastore.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import fsspec

from ingest.acid.format import (
    ParsedDirectory,
    ValidWriteIdList,
    half_renamed_minor,
    is_acid_directory_prefix,
    is_compacted_base,
    is_hidden,
    parse_directory,
)
from ingest.errors import NotEnoughHistoryError, UnsupportedFormatError

VisibleTxn = Callable[[int], bool]


@dataclass(frozen=True)
class DirectoryEntry:
    """One child of a partition directory, as listed.

    Attributes:
        name: the last path component (``delta_0000001_0000001_0000``, ``000000_0``).
        is_dir: whether it is a directory.
        is_compacted_base: for a ``base_*`` directory, whether `_metadata_acid` marks it as
            compactor output (a ``_vN`` suffix with N > 0 counts as compacted regardless).
    """

    name: str
    is_dir: bool
    is_compacted_base: bool = False


@dataclass(frozen=True)
class AcidState:
    """What a snapshot reads in one partition (Hive's `AcidDirectory`).

    Attributes:
        base: the chosen base, or None.
        deltas: deltas and delete deltas to read, in Hive's order (min asc, max desc,
            statement id asc with "none" first, then name).
        obsolete: names covered by the base or by wider deltas (safe for the cleaner once no
            older snapshot needs them).
        aborted: names of directories whose write ids are all aborted, and aborted
            insert-overwrite bases.
        original_files: pre-ACID data files (relative paths, sorted), only when there is no base.
        original_directories: non-ACID sub-directories whose files are in `original_files`.
        uncompacted_aborts: some kept delta covers an aborted write id.
        directory: the partition directory the names are relative to ("" for the pure core).
    """

    base: ParsedDirectory | None
    deltas: tuple[ParsedDirectory, ...]
    obsolete: tuple[str, ...] = ()
    aborted: tuple[str, ...] = ()
    original_files: tuple[str, ...] = ()
    original_directories: tuple[str, ...] = ()
    uncompacted_aborts: bool = False
    directory: str = ""

    def path(self, name: str) -> str:
        """The full path of a name in this state (joined to `directory`)."""
        if not self.directory:
            return name
        return f"{self.directory.rstrip('/')}/{name}"

    @property
    def delete_deltas(self) -> tuple[ParsedDirectory, ...]:
        return tuple(d for d in self.deltas if d.is_delete_delta)

    @property
    def insert_deltas(self) -> tuple[ParsedDirectory, ...]:
        return tuple(d for d in self.deltas if not d.is_delete_delta)


def delta_sort_key(d: ParsedDirectory) -> tuple[int, int, int, str]:
    """`ParsedDeltaLight.compareTo`: min asc, max desc (wider first), stmt asc (none = -1), name."""
    stmt = -1 if d.statement_id is None else d.statement_id
    return (d.min_write_id, -d.max_write_id, stmt, d.name)


@dataclass
class _Work:
    base: ParsedDirectory | None = None
    base_compacted: bool = False
    oldest_base: ParsedDirectory | None = None
    oldest_compacted: bool = False
    candidates: list[ParsedDirectory] = field(default_factory=list)
    obsolete: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    originals: list[str] = field(default_factory=list)
    original_dirs: list[str] = field(default_factory=list)
    uncompacted_aborts: bool = False


def choose_directories(
    entries: Sequence[DirectoryEntry],
    snapshot: ValidWriteIdList,
    *,
    visible_txn: VisibleTxn | None = None,
    directory: str = "",
) -> AcidState:
    """Hive's getAcidState over an already-listed partition directory.

    Args:
        entries: the partition directory's children (hidden ``_``/``.`` names are skipped here,
            and so is a ``delta_A_B`` whose ``delete_delta_A_B`` twin is still hidden under
            the compaction prefix: `names.half_renamed_minor`).
        snapshot: the reader's valid write-id list.
        visible_txn: whether a compactor txn (the N of a ``_vN`` suffix, N > 0) is committed in
            the reader's snapshot; None treats every such directory as visible.
        directory: recorded in the result so `AcidState.path` can build full paths.

    Returns:
        The chosen base, deltas, obsolete and aborted names, and original files.

    Raises:
        NotEnoughHistoryError: bases exist but none is valid and the oldest is compactor output.
        UnsupportedFormatError: a directory starts like an ACID name but does not parse
            (Hive fails on these too).
    """
    work = _Work()
    # A minor compaction between its two renames: read its inputs until both are in place.
    pending = half_renamed_minor(e.name.rstrip("/") for e in entries)
    for entry in sorted(entries, key=lambda e: e.name):
        name = entry.name.rstrip("/")
        if is_hidden(name) or name in pending:
            continue
        if not entry.is_dir:
            work.originals.append(name)
            continue
        if not is_acid_directory_prefix(name):
            work.original_dirs.append(name)
            continue
        parsed = parse_directory(name)
        if parsed is None:
            raise UnsupportedFormatError(
                f"Cannot read partition {directory or '.'}: directory {name!r} starts like an "
                "ACID directory but is not base_<writeId>[_v<txn>] or "
                "[delete_]delta_<min>_<max>[_<stmt>][_v<txn>]",
                hint="move it out of the partition directory or rename it to start with '_'",
            )
        if not _usable(parsed, visible_txn):
            continue
        if parsed.is_base:
            compacted = parsed.visibility > 0 or entry.is_compacted_base
            _process_base(work, parsed, compacted, snapshot, visible_txn)
        else:
            _process_delta(work, parsed, snapshot)

    originals: tuple[str, ...] = ()
    original_dirs: tuple[str, ...] = ()
    if work.base is not None:
        work.obsolete.extend(work.originals)
        work.obsolete.extend(work.original_dirs)
    else:
        originals = tuple(sorted(work.originals))
        original_dirs = tuple(sorted(work.original_dirs))

    deltas = _best_working_deltas(work, snapshot)

    if work.oldest_base is not None and work.base is None and work.oldest_compacted:
        raise NotEnoughHistoryError(
            f"Cannot read partition {directory or '.'} with snapshot {snapshot}: the oldest base "
            f"{work.oldest_base.name} is compactor output and write ids at or below it are not "
            f"all committed in this snapshot (high watermark {snapshot.high_watermark}, "
            f"lowest open write id {_first_invalid(snapshot)})",
            oldest_base=work.oldest_base.name,
            high_watermark=snapshot.high_watermark,
            hint="take a new snapshot once the open transactions have finished",
        )

    return AcidState(
        base=work.base,
        deltas=tuple(deltas),
        obsolete=tuple(work.obsolete),
        aborted=tuple(work.aborted),
        original_files=originals,
        original_directories=original_dirs,
        uncompacted_aborts=work.uncompacted_aborts,
        directory=directory,
    )


def _first_invalid(snapshot: ValidWriteIdList) -> str:
    invalid = sorted(set(snapshot.open_write_ids) | set(snapshot.aborted_write_ids))
    return str(invalid[0]) if invalid else "x"


def _usable(parsed: ParsedDirectory, visible_txn: VisibleTxn | None) -> bool:
    """`isDirUsable`: a ``_vN`` directory is used only once compactor txn N is committed."""
    if parsed.visibility <= 0 or visible_txn is None:
        return True
    return bool(visible_txn(parsed.visibility))


def _is_valid_base(parsed: ParsedDirectory, compacted: bool, snapshot: ValidWriteIdList) -> bool:
    """`AcidUtils.isValidBase`, branch for branch."""
    wid = parsed.write_id
    low = snapshot.min_open_write_id
    if low is not None and wid <= low:
        return True
    if compacted:
        return snapshot.is_valid_base(wid)
    # An insert-overwrite base is just a write: visible iff its write id is.
    return snapshot.is_valid(wid)


def _process_base(
    work: _Work,
    parsed: ParsedDirectory,
    compacted: bool,
    snapshot: ValidWriteIdList,
    visible_txn: VisibleTxn | None,
) -> None:
    """`processBaseDir`."""
    wid = parsed.write_id
    if work.oldest_base is None or work.oldest_base.write_id > wid:
        work.oldest_base = parsed
        work.oldest_compacted = compacted
    if snapshot.is_aborted(wid) and not compacted:
        work.aborted.append(parsed.name)
        return
    current = work.base
    better = (
        current is None
        or current.write_id < wid
        # Two bases for one write id (compactor vs insert overwrite): the compactor's wins.
        or (current.write_id == wid and compacted and _usable(parsed, visible_txn))
    )
    if better:
        if _is_valid_base(parsed, compacted, snapshot):
            if current is not None:
                work.obsolete.append(current.name)
            work.base = parsed
            work.base_compacted = compacted
    else:
        work.obsolete.append(parsed.name)


def _process_delta(work: _Work, parsed: ParsedDirectory, snapshot: ValidWriteIdList) -> None:
    """`processDeltaDir`."""
    lo, hi = parsed.min_write_id, parsed.max_write_id
    aborted = snapshot.range_aborted(lo, hi)
    if aborted == "ALL":
        work.aborted.append(parsed.name)
        return
    if aborted == "SOME":
        work.uncompacted_aborts = True
    if snapshot.range_validity(lo, hi) != "NONE":
        work.candidates.append(parsed)


def _best_working_deltas(work: _Work, snapshot: ValidWriteIdList) -> list[ParsedDirectory]:
    """`findBestWorkingDeltas`: drop deltas shadowed by the base or by wider deltas."""
    chosen: list[ParsedDirectory] = []
    current = work.base.write_id if work.base is not None else 0
    last_stmt = -1
    prev: ParsedDirectory | None = None
    for nxt in sorted(work.candidates, key=delta_sort_key):
        stmt = -1 if nxt.statement_id is None else nxt.statement_id
        if nxt.max_write_id > current:
            # Skipped (neither chosen nor obsolete) when nothing new in it is valid.
            if snapshot.range_validity(current + 1, nxt.max_write_id) != "NONE":
                chosen.append(nxt)
                current = nxt.max_write_id
                last_stmt = stmt
                prev = nxt
        elif nxt.max_write_id == current and last_stmt >= 0:
            # The other statements of one multi-statement transaction.
            chosen.append(nxt)
            prev = nxt
        elif (
            prev is not None
            and nxt.min_write_id == prev.min_write_id
            and nxt.max_write_id == prev.max_write_id
            and nxt.statement_id == prev.statement_id
        ):
            # delta_x_y and delete_delta_x_y of the same range.
            chosen.append(nxt)
            prev = nxt
        else:
            work.obsolete.append(nxt.name)
    return chosen


def acid_state(
    fs: fsspec.AbstractFileSystem,
    partition_dir: str,
    snapshot: ValidWriteIdList,
    *,
    visible_txn: VisibleTxn | None = None,
) -> AcidState:
    """List a partition directory and choose what `snapshot` reads (Hive's getAcidState).

    Base directories are checked for a `_metadata_acid` compactor marker. When no base is
    chosen, non-ACID sub-directories are walked for original files (hidden names skipped).

    Args:
        fs: the filesystem holding the table.
        partition_dir: the partition (or unpartitioned table) directory.
        snapshot: the reader's valid write-id list.
        visible_txn: whether a compactor txn id is committed; None treats all as committed.

    Returns:
        The partition's AcidState; names are relative to `partition_dir`.

    Raises:
        FileNotFoundError: `partition_dir` does not exist.
        NotEnoughHistoryError: see `choose_directories`.
        UnsupportedFormatError: an unparsable ACID-looking directory or compactor marker.
        CorruptFileError: an unreadable `_metadata_acid` file.
    """
    root = partition_dir.rstrip("/")
    entries: list[DirectoryEntry] = []
    for info in fs.ls(root, detail=True):
        full = str(info["name"]).rstrip("/")
        name = full.rsplit("/", 1)[-1]
        is_dir = info.get("type") == "directory"
        compacted = False
        if is_dir and not is_hidden(name):
            parsed = parse_directory(name)
            if parsed is not None and parsed.is_base and parsed.visibility <= 0:
                compacted = is_compacted_base(fs, full)
        entries.append(DirectoryEntry(name, is_dir, compacted))
    state = choose_directories(entries, snapshot, visible_txn=visible_txn, directory=root)
    if state.base is not None or not state.original_directories:
        return state
    files = list(state.original_files)
    for sub in state.original_directories:
        files.extend(_original_files_under(fs, root, sub))
    return AcidState(
        base=state.base,
        deltas=state.deltas,
        obsolete=state.obsolete,
        aborted=state.aborted,
        original_files=tuple(sorted(files)),
        original_directories=state.original_directories,
        uncompacted_aborts=state.uncompacted_aborts,
        directory=state.directory,
    )


def _original_files_under(fs: fsspec.AbstractFileSystem, root: str, sub: str) -> list[str]:
    """Files below root/sub as paths relative to root, hidden components skipped."""
    base = str(fs._strip_protocol(root)).rstrip("/")
    found: list[str] = []
    for full in fs.find(f"{root}/{sub}"):
        full = str(full).rstrip("/")
        rel = full[len(base) + 1 :] if full.startswith(base + "/") else full
        if any(is_hidden(part) for part in rel.split("/")):
            continue
        found.append(rel)
    return found


__all__ = [
    "AcidState",
    "DirectoryEntry",
    "VisibleTxn",
    "acid_state",
    "choose_directories",
    "delta_sort_key",
]
