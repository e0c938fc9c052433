"""What a cleaner may remove from one partition, and removing it file by file (Hive's Cleaner).

Candidates are the directories `getAcidState` lists as obsolete (each with the chosen base or
delta that hides it) or aborted (also `_vT` output of an aborted compactor transaction), and
leftover hidden compaction output; never a directory a
snapshot chooses, nor one holding a side file. An obsolete directory is removed only after
the base or delta that hides it has been checked (`check_cover`): the last readable copy of
its rows must not go while that output is damaged. Takes the snapshot and the manifest as
values; which candidates may go now (readers, retention) is the caller's decision.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import fsspec

from ingest.acid.compaction.compact import TEMP_PREFIX, aborted_outputs
from ingest.acid.format import (
    ACID_VERSION_FILE,
    METADATA_FILE,
    CommittedFiles,
    Damage,
    ParsedDirectory,
    ValidWriteIdList,
    check_stripes,
    format_delta,
    is_side_file,
    parse_directory,
    size_damage,
    tail_damage,
)
from ingest.acid.read import AcidState, VisibleTxn, acid_state, bucket_files, readable_length
from ingest.errors import CorruptFileError
from ingest.faults import crash_point
from ingest.orc import read_tail

CleanKind = Literal["obsolete", "aborted", "temporary"]


@dataclass(frozen=True)
class Candidate:
    """A directory (or an original file) of one partition that no current snapshot reads.

    Attributes:
        name: relative to the partition directory.
        kind: "obsolete" (hidden by `covered_by`), "aborted" (every write id in it aborted)
            or "temporary" (leftover hidden compaction output).
        covered_by: for "obsolete", the chosen base or delta that hides it.
        files: (full path, size in bytes) of every file in it, or of the file itself.
        changed_at: the latest modification time of it and its files (seconds since the
            epoch); None when the storage does not say.
    """

    name: str
    kind: CleanKind
    covered_by: str | None
    files: tuple[tuple[str, int], ...]
    changed_at: float | None

    @property
    def size_bytes(self) -> int:
        return sum(size for _, size in self.files)


@dataclass(frozen=True)
class Kept:
    """Something the cleaner looked at and must leave, with the reason."""

    name: str
    reason: str


@dataclass(frozen=True)
class CleaningPlan:
    """One partition's candidates.

    Attributes:
        partition: the partition directory.
        candidates: what no current snapshot reads, in name order.
        kept: obsolete or aborted names that must stay anyway, with the reason.
        cover_times: for each directory named in a candidate's `covered_by`, when it was
            last modified or renamed into place.
    """

    partition: str
    candidates: tuple[Candidate, ...]
    kept: tuple[Kept, ...]
    cover_times: Mapping[str, float | None]


def plan_cleaning(
    fs: fsspec.AbstractFileSystem, partition_dir: str, snapshot: ValidWriteIdList, *,
    visible_txn: VisibleTxn | None = None, aborted_txn: Callable[[int], bool] | None = None,
) -> CleaningPlan:
    """What `snapshot` (the table's current one) no longer reads in one partition.

    Obsolete and aborted names come from `acid_state`. A snapshot taken later never reads
    them either: write ids only move from open to committed or aborted, so a chosen base or
    delta stays chosen. Older snapshots may still read obsolete ones; the caller decides.
    An obsolete insert delta must be hidden by the base or by a chosen insert delta covering
    its range (a delete delta likewise by a delete delta): the other kind hides it only
    between a minor compaction's two renames, and removing it then would lose its events.

    `visible_txn` (which compactor transactions are committed, None: all) keeps a `_vT`
    output from hiding anything before T commits; `_vT` directories whose T `aborted_txn`
    says aborted never become visible and are "aborted" candidates.

    Raises:
        FileNotFoundError: the partition directory does not exist.
        NotEnoughHistoryError, UnsupportedFormatError, CorruptFileError: see `acid_state`.
    """
    root = partition_dir.rstrip("/")
    state = acid_state(fs, root, snapshot, visible_txn=visible_txn)
    candidates: list[Candidate] = []
    kept: list[Kept] = []
    covers: dict[str, float | None] = {}
    for name in state.obsolete:
        cover = _cover(state, name)
        if cover is None:
            kept.append(Kept(name, "hidden only by a delta of the other kind (a minor "
                                   "compaction interrupted between its renames); "
                                   "`ingest compact` finishes it"))
            continue
        found = _candidate(fs, root, name, "obsolete", cover)
        if found is None:
            continue
        if isinstance(found, Kept):
            kept.append(found)
            continue
        candidates.append(found)
        if cover not in covers:
            covers[cover] = _changed_at(fs, f"{root}/{cover}", renamed=True)
    others: list[tuple[str, CleanKind]] = [(n, "aborted") for n in state.aborted]
    if aborted_txn is not None:
        others += [(n, "aborted") for n in aborted_outputs(fs, root, aborted_txn)]
    for name in _temporaries(fs, root):
        if _pending_rename(fs, root, name):
            kept.append(Kept(name, "the second half of a minor compaction interrupted "
                                   "between its renames; `ingest compact` finishes it"))
        else:
            others.append((name, "temporary"))
    for name, kind in others:
        found = _candidate(fs, root, name, kind, None)
        if found is None:
            continue
        if isinstance(found, Kept):
            kept.append(found)
        else:
            candidates.append(found)
    return CleaningPlan(root, tuple(sorted(candidates, key=lambda c: c.name)),
                        tuple(sorted(kept, key=lambda k: k.name)), covers)


def check_cover(fs: fsspec.AbstractFileSystem, partition_dir: str, cover: str,
                manifest: CommittedFiles, *, hides: Sequence[str]) -> None:
    """Check the base or delta that hides obsolete directories, before any of them goes.

    Every file the manifest lists in it must be there, no shorter than its committed
    length, end there in the tail its commit hashed, and every stripe up to there must hash
    to its recorded checksum; a bucket file the manifest does not list (output older than
    the manifest) must end in a complete tail whose stripes match. Reads each file whole.

    Args:
        fs: the filesystem.
        partition_dir: the partition directory.
        cover: the name of the base or delta.
        manifest: the table's committed-file manifest.
        hides: the names of the obsolete directories it hides (for the message).

    Raises:
        CorruptFileError: naming the damaged file, the cover and what it hides.
    """
    directory = f"{partition_dir.rstrip('/')}/{cover}"
    expected = dict(manifest.in_directory(directory))
    on_disk = [path for path, _ in bucket_files(fs, directory)]
    for path in sorted(set(expected) - set(on_disk)):
        damage = size_damage(path, expected[path], None)
        assert damage is not None
        raise _cover_error(damage.message, path, partition_dir, cover, hides, manifest.root)
    for path in on_disk:
        entry = expected.get(path)
        if entry is not None:
            found: Damage | None = size_damage(path, entry, int(fs.size(path)))
            if found is None:
                found = tail_damage(fs, path, entry)
            if found is not None:
                raise _cover_error(found.message, path, partition_dir, cover, hides,
                                   manifest.root)
            length = entry.length
        else:
            length = readable_length(fs, path)[0]
        try:
            check_stripes(fs, path, read_tail(fs, path, length), damaged_value="raise")
        except CorruptFileError as e:
            raise _cover_error(e.message, path, partition_dir, cover, hides,
                               manifest.root) from e


def _cover_error(found: str, path: str, partition_dir: str, cover: str, hides: Sequence[str],
                 table: str) -> CorruptFileError:
    shown = ", ".join(hides[:3]) + (", ..." if len(hides) > 3 else "")
    return CorruptFileError(
        f"Cannot clean {partition_dir}: {cover}, which hides {shown}, is damaged, so nothing it "
        f"hides was removed: {found}", path=path,
        hint=f"the directories it hides still hold their rows; run `ingest verify {table}` to "
        f"list the damage, and restore {path} from a backup")


def remove_candidate(
    fs: fsspec.AbstractFileSystem, partition_dir: str, candidate: Candidate, *,
    on_file: Callable[[str, int], None] | None = None,
) -> int:
    """Delete a candidate file by file, then its directory; returns the files removed.

    Data files go first and the marker files (`_orc_acid_version`, `_metadata_acid`) last,
    so a directory cut short by a crash keeps its name and markers: it is still obsolete,
    aborted or hidden, every reader still skips it, and the next cleaning finishes it.
    Files already gone are skipped, so two cleaners may race.

    Raises:
        OSError: the storage layer failed.
    """
    removed = 0
    markers = (ACID_VERSION_FILE, METADATA_FILE)
    ordered = sorted(candidate.files, key=lambda f: (f[0].rsplit("/", 1)[-1] in markers, f[0]))
    for path, size in ordered:
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            continue  # removed by an earlier, interrupted run or another cleaner
        removed += 1
        if on_file is not None:
            on_file(path, size)
        if removed == 1 and len(ordered) > 1:
            crash_point("clean.midway_directory")  # a partly removed directory stays skipped
    target = f"{partition_dir.rstrip('/')}/{candidate.name}"
    if fs.exists(target) and fs.isdir(target):
        try:
            fs.rm(target, recursive=True)
        except FileNotFoundError:
            pass  # another cleaner removed it meanwhile
    return removed


def _cover(state: AcidState, name: str) -> str | None:
    """The chosen base or same-kind delta hiding obsolete `name`, if any."""
    parsed = parse_directory(name)
    base = state.base
    if parsed is None or parsed.is_base:
        # Original files, and older bases, are hidden by the chosen base alone.
        return base.name if base is not None and base.name != name else None
    if base is not None and base.write_id >= parsed.max_write_id:
        return base.name
    for d in state.deltas:
        if _covers(d, parsed):
            return d.name
    return None


def _covers(d: ParsedDirectory, other: ParsedDirectory) -> bool:
    return (d.name != other.name and d.is_delete_delta == other.is_delete_delta
            and d.min_write_id <= other.min_write_id and d.max_write_id >= other.max_write_id)


def _temporaries(fs: fsspec.AbstractFileSystem, root: str) -> list[str]:
    names = (str(p).rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False))
    return sorted(n for n in names if n.startswith(TEMP_PREFIX))


def _pending_rename(fs: fsspec.AbstractFileSystem, root: str, name: str) -> bool:
    """Whether `name` is the hidden delete delta of a minor compaction whose insert delta is
    already in place (what `compaction.finish_interrupted` renames)."""
    final = name[len(TEMP_PREFIX):]
    parsed = parse_directory(final)
    if parsed is None or not parsed.is_delete_delta or parsed.statement_id is not None:
        return False
    partner = format_delta(parsed.min_write_id, parsed.max_write_id, None)
    return bool(fs.exists(f"{root}/{partner}")) and not fs.exists(f"{root}/{final}")


def _candidate(fs: fsspec.AbstractFileSystem, root: str, name: str, kind: CleanKind,
               cover: str | None) -> Candidate | Kept | None:
    """The candidate, why it must stay, or None when it vanished since the listing (another
    cleaner removed it)."""
    path = f"{root}/{name}"
    try:
        infos = _files_with_info(fs, path)
    except FileNotFoundError:
        return None
    if any(is_side_file(p.rsplit("/", 1)[-1]) for p in infos):
        return Kept(name, "holds a side file: an open transaction batch (or its writer "
                          "crashed: run `ingest recover`)")
    files = tuple(sorted((p, int(i.get("size") or 0)) for p, i in infos.items()))
    return Candidate(name, kind, cover, files, _changed_at(fs, path, infos))


def _files_with_info(fs: fsspec.AbstractFileSystem, path: str) -> dict[str, dict[str, Any]]:
    info = fs.info(path)
    if info.get("type") != "directory":
        return {str(info["name"]): info}
    found = fs.find(path, detail=True, withdirs=False)
    return {str(p): i for p, i in found.items()}


def _changed_at(fs: fsspec.AbstractFileSystem, path: str,
                infos: Mapping[str, Mapping[str, Any]] | None = None, *,
                renamed: bool = False) -> float | None:
    """The newest modification time of `path` and the files in it.

    With `renamed`, change times count too: renaming a directory into place changes its
    ctime, not its mtime, and a compaction's output is only as old as its rename.
    """
    if infos is None:
        infos = _files_with_info(fs, path)
    times = [t for info in (fs.info(path), *infos.values()) for t in _times(info, renamed)]
    return max(times) if times else None


def _times(info: Mapping[str, Any], renamed: bool) -> Iterable[float]:
    keys = ("mtime", "LastModified", "last_modified")
    found = [info.get(k) for k in keys if info.get(k) is not None]
    if renamed or not found:
        found.append(info.get("created"))  # local ctime; memory:// has only this
    for value in found:
        if isinstance(value, dt.datetime):
            yield value.timestamp()
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield float(value)


__all__ = ["Candidate", "CleanKind", "CleaningPlan", "Kept", "check_cover", "plan_cleaning",
           "remove_candidate"]
