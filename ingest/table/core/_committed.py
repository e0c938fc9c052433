"""A table's files checked against the committed-file manifest, for `verify` and `recover`.

Finds the files whose commits recorded more than they hold now: missing, emptied, cut below
their committed length, or whose tail at that length changed (docs/format.md §20). Recovery
leaves such files untouched and names them; it also never cuts a file below its committed
length (docs/invariants.md, 5 and 7). Also builds the entries of files as they are on disk
(`directory_entries`). Reads tails only.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from dataclasses import replace

import fsspec

from ingest.acid.format import (
    CommittedFile,
    CommittedFiles,
    Damage,
    ParsedDirectory,
    committed_file_at,
    parse_bucket_file,
    parse_directory,
    size_damage,
    tail_damage,
)
from ingest.acid.read import covers
from ingest.acid.recovery import FileRecovery, RecoveryReport
from ingest.io import storage
from ingest.table.core._written import relative_path
from ingest.txn import Metastore, TableDefinition


def table_manifest(store: Metastore, table: TableDefinition) -> CommittedFiles:
    """The table's committed-file manifest, with its root as its filesystem names paths
    (empty for a metastore that predates the manifest, opened read-only).

    Raises:
        MetastoreError: the metastore failed.
    """
    return CommittedFiles(storage.path_of(table.location), store.committed_files(table.name))


def find_damage(fs: fsspec.AbstractFileSystem, manifest: CommittedFiles, *,
                under: str) -> dict[str, Damage]:
    """Every file below `under` that differs from its manifest entry, by path.

    A missing file counts unless another directory on disk covers its write ids (compacted,
    then cleaned, or being cleaned: the cleaner removes a directory file by file).

    Raises:
        OSError: a file or directory cannot be read.
    """
    prefix = under.rstrip("/") + "/"
    listed: dict[str, list[ParsedDirectory]] = {}
    out: dict[str, Damage] = {}
    for rel, entry in sorted(manifest.entries.items()):
        path = manifest.absolute(rel)
        if not path.startswith(prefix):
            continue
        try:
            size: int | None = int(fs.size(path))
        except FileNotFoundError:
            size = None
        if size is None and _covered(fs, path, listed):
            continue
        damage = size_damage(path, entry, size)
        if damage is None:
            damage = tail_damage(fs, path, entry, count_rows=True)
        if damage is not None:
            out[path] = damage
    return out


def _covered(fs: fsspec.AbstractFileSystem, path: str,
             listed: dict[str, list[ParsedDirectory]]) -> bool:
    """Another directory beside the file's holds its write ids."""
    partition, directory = path.rsplit("/", 2)[:2]
    mine = parse_directory(directory)
    if mine is None:
        return False
    if partition not in listed:
        names = [str(p).rstrip("/").rsplit("/", 1)[-1]
                 for p in (fs.ls(partition, detail=False) if fs.isdir(partition) else [])]
        listed[partition] = [d for d in map(parse_directory, names) if d is not None]
    return any(other != mine and covers(other, mine) for other in listed[partition])


def guard_recovery(manifest: CommittedFiles, damage: Mapping[str, Damage],
                   planned: RecoveryReport | None) -> dict[str, str]:
    """Files recovery must leave alone, with the reason: damaged ones, and those a planned
    (dry) run would cut below, or remove at, their committed length."""
    keep = {path: f"{d.found}; left untouched" for path, d in damage.items()}
    for f in planned.files if planned is not None else ():
        entry = manifest.entry(f.path)
        if entry is None or f.path in keep or f.action not in ("truncated", "removed"):
            continue
        if f.new_length < entry.length:
            keep[f.path] = (f"recovery would cut it to {f.new_length:,} bytes ({f.reason}), "
                            f"below the {entry.length:,} bytes the commit of write id "
                            f"{entry.write_id} recorded; left untouched")
    return keep


def committed_length_of(manifest: CommittedFiles) -> Callable[[str], int | None]:
    """A file's committed length from the manifest (None when it lists no entry), the bound
    recovery may go back to (`recover_table`'s `committed_length`)."""

    def length(path: str) -> int | None:
        entry = manifest.entry(path)
        return None if entry is None else entry.length

    return length


def keeping(live: Callable[[str], bool], keep: Container[str]) -> Callable[[str], bool]:
    """A `live_files` predicate that also holds the kept files back from recovery."""
    return lambda path: path in keep or live(path)


def mark_unrecoverable(report: RecoveryReport, keep: Mapping[str, str],
                       damage: Mapping[str, Damage]) -> RecoveryReport:
    """The report with every kept file as `unrecoverable` (missing ones added)."""
    files = {f.path: f for f in report.files}
    for path, reason in keep.items():
        before = files.get(path)
        if before is None:
            size = 0 if path in damage and damage[path].kind == "missing-file" else -1
            files[path] = FileRecovery(path, size, 0, "unrecoverable", reason)
        else:
            files[path] = replace(before, new_length=before.old_length, action="unrecoverable",
                                  reason=reason, backup_path=None)
    return replace(report, files=tuple(files[p] for p in sorted(files)))


def directory_entries(fs: fsspec.AbstractFileSystem, root: str, directories: list[str], *,
                      write_id: int | None = None) -> list[CommittedFile]:
    """Entries of the bucket files in `directories` as they are now (outputs of a writer
    that commits nothing, such as the compactor); write id: the directory's highest.

    Raises:
        CorruptFileError: a file has no complete ORC tail at its end.
    """
    out = []
    for directory in directories:
        parsed = parse_directory(directory.rstrip("/").rsplit("/", 1)[-1])
        w = write_id if write_id is not None else (parsed.max_write_id if parsed else 0)
        for name in sorted(str(p).rstrip("/").rsplit("/", 1)[-1]
                           for p in fs.ls(directory, detail=False)):
            if parse_bucket_file(name) is None:
                continue
            path = f"{directory.rstrip('/')}/{name}"
            out.append(committed_file_at(fs, path, relative_path(root, path), write_id=w))
    return out


__all__ = ["committed_length_of", "directory_entries", "find_damage", "guard_recovery",
           "keeping", "mark_unrecoverable", "table_manifest"]
