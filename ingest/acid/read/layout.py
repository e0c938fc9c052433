"""What is on disk under a table, judged by one snapshot: the layout `ingest status` shows.

Lists each partition's base/delta directories with what `acid_state` makes of them (chosen,
obsolete, aborted, not visible) and each bucket file's length, readable length, side-file
entries and rows. Reads file tails and side files, never row data. Takes the snapshot as a
plain `ValidWriteIdList` and the compactor's visibility as a plain predicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import fsspec

from ingest.acid.format import ValidWriteIdList, is_hidden, parse_directory, read_flush_lengths
from ingest.acid.read.bucket_file import readable_length
from ingest.acid.read.directories import VisibleTxn, acid_state
from ingest.acid.read.merge import FileKind
from ingest.acid.read.plan import bucket_files, list_partitions
from ingest.acid.read.reader import resolve_snapshot
from ingest.errors import CorruptFileError
from ingest.io import files as _files
from ingest.orc import read_tail

DirectoryStatusName = Literal["chosen", "obsolete", "aborted", "not_visible", "original"]


@dataclass(frozen=True)
class FileStatus:
    """One bucket (or original) file: its length, readable length, side file and rows.

    Attributes:
        rows: events below the readable length (0 when nothing is readable yet).
        flush_lengths: every complete side-file entry, or None when there is no side file.
        error: why the file could not be inspected (the rest of the layout is still given).
    """

    path: str
    bucket_id: int | None
    file_length: int
    readable_length: int
    flush_lengths: tuple[int, ...] | None
    rows: int
    error: str | None = None


@dataclass(frozen=True)
class DirectoryStatus:
    """A base/delta/delete-delta directory (or a partition's original files) and its files.

    `status`: chosen by the snapshot, obsolete (shadowed by a base or a wider delta), aborted
    (every write id aborted), not_visible (nothing in it is valid yet, or it is the `_vT`
    output of a compactor transaction T that has not committed), or original.
    """

    name: str
    kind: FileKind
    min_write_id: int | None
    max_write_id: int | None
    statement_id: int | None
    status: DirectoryStatusName
    files: tuple[FileStatus, ...]

    @property
    def total_bytes(self) -> int:
        return sum(f.file_length for f in self.files)

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)


@dataclass(frozen=True)
class PartitionStatus:
    path: str
    values: tuple[tuple[str, str | None], ...]
    directories: tuple[DirectoryStatus, ...]


@dataclass(frozen=True)
class TableLayout:
    """What is on disk under a table, judged by one snapshot."""

    path: str
    snapshot: ValidWriteIdList
    partitions: tuple[PartitionStatus, ...]

    @property
    def total_bytes(self) -> int:
        return sum(d.total_bytes for p in self.partitions for d in p.directories)

    @property
    def total_rows(self) -> int:
        """Events in every readable file (inserts and delete events, any directory)."""
        return sum(d.rows for p in self.partitions for d in p.directories)

    @property
    def chosen_rows(self) -> int:
        """Insert events in the directories the snapshot reads (before deletes, validity)."""
        return sum(d.rows for p in self.partitions for d in p.directories
                   if d.status in ("chosen", "original") and d.kind != "delete_delta")


def describe_table(
    path: str,
    snapshot: ValidWriteIdList | str | None = None,
    *,
    fs: fsspec.AbstractFileSystem | None = None,
    visible_txn: VisibleTxn | None = None,
) -> TableLayout:
    """Partitions, directories (chosen/obsolete/aborted) and bucket files of a table.

    Reads only file tails and side files, never row data.

    Args:
        path: a table root, one partition directory, or an unpartitioned table root.
        snapshot: the valid write-id list to judge directories by, or Hive's string form;
            None takes every write id named on disk as committed and warns
            (`UnverifiedSnapshotWarning`).
        fs: the filesystem (default: from the path's URL).
        visible_txn: whether the compactor transaction T of a `_vT` directory is committed
            (the metastore's compactor visibility); None takes every `_vT` directory as
            committed. An uncommitted one is shown as not_visible and chooses nothing.

    Raises:
        FileNotFoundError: `path` does not exist.
        ConfigError: a bad snapshot string.
        NotEnoughHistoryError, UnsupportedFormatError: see `acid_state`.
    """
    fs, root = _files.resolve(path, fs)
    partitions = list_partitions(root, fs=fs)
    snap = resolve_snapshot(snapshot, partitions, table=root.rstrip("/").rsplit("/", 1)[-1],
                            stacklevel=2)
    out = []
    for p in partitions:
        state = acid_state(fs, p.path, snap, visible_txn=visible_txn)
        chosen = {d.name for d in state.deltas} | ({state.base.name} if state.base else set())
        dirs = []
        if state.original_files:
            files = tuple(_file_status(fs, state.path(rel), None) for rel in state.original_files)
            dirs.append(DirectoryStatus(".", "original", None, None, None, "original", files))
        for name in sorted(p.children):
            parsed = parse_directory(name)
            if parsed is None or is_hidden(name):
                continue
            status: DirectoryStatusName = (
                "chosen" if name in chosen else "obsolete" if name in state.obsolete
                else "aborted" if name in state.aborted else "not_visible")
            files = tuple(_file_status(fs, f, b) for f, b in bucket_files(fs, state.path(name)))
            dirs.append(DirectoryStatus(name, parsed.kind, parsed.min_write_id,
                                        parsed.max_write_id, parsed.statement_id, status, files))
        out.append(PartitionStatus(p.path, p.values, tuple(dirs)))
    return TableLayout(root, snap, tuple(out))


def _file_status(fs: fsspec.AbstractFileSystem, path: str, bucket_id: int | None) -> FileStatus:
    try:
        length, size, lengths = readable_length(fs, path)
        flushes = None if lengths is None else tuple(lengths)
    except CorruptFileError as e:
        return FileStatus(path, bucket_id, fs.size(path), 0,
                          tuple(read_flush_lengths(fs, path) or ()), 0, str(e))
    try:
        rows = read_tail(fs, path, length).number_of_rows if length else 0
    except CorruptFileError as e:
        return FileStatus(path, bucket_id, size, length, flushes, 0, str(e))
    return FileStatus(path, bucket_id, size, length, flushes, rows)


__all__ = [
    "DirectoryStatus",
    "DirectoryStatusName",
    "FileStatus",
    "PartitionStatus",
    "TableLayout",
    "describe_table",
]
