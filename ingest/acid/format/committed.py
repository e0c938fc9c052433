"""What a commit promised about each bucket file it wrote, and the check of a file against it.

A `CommittedFile` is one entry of the metastore's committed-file manifest as plain data (the
ACID layer never sees the metastore): the committed length, an xxh3_64 of the ORC tail that
ends there and the events below it (docs/format.md §20). A file emptied, cut below that length
or whose tail changed is damaged committed data, whatever ORC makes of it (docs/invariants.md, 7).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

import fsspec
import xxhash

from ingest.errors import ConfigError, CorruptFileError, TailError
from ingest.orc import parse_tail, tail_bytes_needed

# The first read of a tail: enough for the tails our writer and Hive write; longer ones take
# a second read (the postscript says how long).
_FIRST_READ = 16 * 1024

DamageKind = Literal["missing-file", "empty-file", "short-file", "damaged-footer",
                     "row-count-mismatch"]


def tail_hash(tail: bytes | memoryview) -> str:
    """The manifest's hash of an ORC tail (metadata, footer, postscript and its length byte):
    xxh3_64 as 16 hex digits."""
    return xxhash.xxh3_64_hexdigest(tail)


@dataclass(frozen=True)
class CommittedFile:
    """One bucket file as the commit that last wrote it recorded it.

    Attributes:
        path: relative to the table root, '/'-separated
            (`dt=1/delta_0000005_0000005_0000/bucket_00000`).
        write_id: the write id of that commit (the highest that wrote the file).
        length: the committed length: the file's length, or for a file a transaction batch
            keeps open, its flush length at the commit.
        tail_hash: `tail_hash` of the ORC tail that ends at `length`.
        rows: ACID events in the file up to `length`.
    """

    path: str
    write_id: int
    length: int
    tail_hash: str
    rows: int

    def __post_init__(self) -> None:
        parts = self.path.split("/")
        if not self.path or self.path.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ConfigError(f"Cannot record committed file {self.path!r}: the path must be "
                              "relative to the table root, '/'-separated, without '.' or '..'")
        if self.length < 4 or self.rows < 0 or self.write_id < 0 or len(self.tail_hash) != 16:
            raise ConfigError(
                f"Cannot record committed file {self.path}: length {self.length}, rows "
                f"{self.rows}, write id {self.write_id} and tail hash {self.tail_hash!r} must "
                "be a length of at least 4 bytes, counts >= 0 and 16 hex digits")


@dataclass(frozen=True)
class CommittedFiles:
    """A table's manifest entries, for a read: the table root and entries by relative path.

    Attributes:
        root: the table root as its filesystem names paths (no trailing slash).
        entries: `CommittedFile` by its path relative to `root`.
    """

    root: str
    entries: Mapping[str, CommittedFile]
    _by_directory: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False,
                                                compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", self.root.rstrip("/"))
        for rel in self.entries:
            directory = self.absolute(rel).rsplit("/", 1)[0]
            self._by_directory.setdefault(directory, []).append(rel)

    def absolute(self, rel: str) -> str:
        """The path of an entry on the table's filesystem."""
        return f"{self.root}/{rel}"

    def entry(self, path: str) -> CommittedFile | None:
        """The entry of the file at `path` (as the filesystem names it), or None."""
        if not path.startswith(self.root + "/"):
            return None
        return self.entries.get(path[len(self.root) + 1:])

    def in_directory(self, directory: str) -> Iterator[tuple[str, CommittedFile]]:
        """(path, entry) of every entry whose file lies directly in `directory`."""
        for rel in self._by_directory.get(directory.rstrip("/"), ()):
            yield self.absolute(rel), self.entries[rel]

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class Damage:
    """How a file differs from what its commit recorded.

    Attributes:
        path: the file.
        kind: a stable kebab-case name.
        found: what differs, as a clause ("it is empty (0 bytes), but the commit ...").
        entry: the manifest entry.
    """

    path: str
    kind: DamageKind
    found: str
    entry: CommittedFile

    @property
    def message(self) -> str:
        return f"Bucket file {self.path} differs from its commit: {self.found}"


def _recorded(entry: CommittedFile) -> str:
    return (f"the commit of write id {entry.write_id} recorded {entry.length:,} bytes "
            f"({entry.rows:,} events)")


def size_damage(path: str, entry: CommittedFile, size: int | None) -> Damage | None:
    """A file missing (`size` None), empty or shorter than its committed length; no I/O."""
    if size is None:
        return Damage(path, "missing-file", f"it is missing, but {_recorded(entry)}", entry)
    if size == 0:
        return Damage(path, "empty-file", f"it is empty (0 bytes), but {_recorded(entry)}",
                      entry)
    if size < entry.length:
        return Damage(path, "short-file", f"it has {size:,} bytes, but {_recorded(entry)}: "
                      "bytes holding committed rows were cut", entry)
    return None


def tail_bytes_at(fs: fsspec.AbstractFileSystem, path: str, length: int) -> bytes:
    """The bytes of the ORC tail that ends at `length`, as its postscript sizes it; when the
    postscript is unreadable, the last bytes read (they then hash to no recorded value).

    Raises:
        OSError: the file cannot be read.
    """
    start = max(0, length - _FIRST_READ)
    data = fs.cat_file(path, start=start, end=length)
    needed = tail_bytes_needed(data)
    if needed is None or needed > length:
        return bytes(data)
    if needed > len(data):
        return bytes(fs.cat_file(path, start=length - needed, end=length))
    return bytes(data[len(data) - needed:])


def tail_damage(fs: fsspec.AbstractFileSystem, path: str, entry: CommittedFile, *,
                count_rows: bool = False) -> Damage | None:
    """The tail ending at the committed length hashes differently (a damaged footer), or,
    with `count_rows`, counts other events than were committed. The file must be at least
    `entry.length` bytes long (`size_damage` first).

    Raises:
        OSError: the file cannot be read.
    """
    return checked_tail(fs, path, entry, count_rows=count_rows)[0]


def checked_tail(fs: fsspec.AbstractFileSystem, path: str, entry: CommittedFile, *,
                 count_rows: bool = False) -> tuple[Damage | None, bytes]:
    """`tail_damage`, and the tail bytes it read (those of the committed tail when no damage
    is found), for a caller that parses them instead of reading them again.

    Raises:
        OSError: the file cannot be read.
    """
    tail = tail_bytes_at(fs, path, entry.length)
    return _tail_damage(path, entry, tail, count_rows=count_rows), tail


def _tail_damage(path: str, entry: CommittedFile, tail: bytes, *,
                 count_rows: bool) -> Damage | None:
    found = tail_hash(tail)
    if found != entry.tail_hash:
        return Damage(path, "damaged-footer", f"its ORC tail ending at the committed length "
                      f"{entry.length:,} hashes to {found}, but {_recorded(entry)} with tail "
                      f"hash {entry.tail_hash}: its footer changed after the commit", entry)
    if count_rows:
        try:
            rows = parse_tail(tail, entry.length).number_of_rows
        except TailError as e:
            return Damage(path, "damaged-footer", f"its ORC tail ending at the committed "
                          f"length {entry.length:,} does not parse ({e}), though it hashes as "
                          "committed", entry)
        if rows != entry.rows:
            return Damage(path, "row-count-mismatch", f"its footer at the committed length "
                          f"{entry.length:,} counts {rows:,} events, but {_recorded(entry)}",
                          entry)
    return None


def committed_file_at(fs: fsspec.AbstractFileSystem, path: str, rel: str, *, write_id: int,
                      length: int | None = None) -> CommittedFile:
    """The entry for a file as it is on disk now (for files whose writer is gone, such as
    compaction outputs): its tail at `length` (default: the file's length).

    Raises:
        CorruptFileError: no complete ORC tail ends at `length`.
        ConfigError: `rel` is not a relative path.
    """
    if length is None:
        length = int(fs.size(path))
    tail = tail_bytes_at(fs, path, length)
    try:
        rows = parse_tail(tail, length).number_of_rows
    except TailError as e:
        raise CorruptFileError(f"Cannot record bucket file {path} as committed: no complete ORC "
                               f"tail ends at {length:,} bytes ({e})", path=path,
                               offset=e.offset) from e
    return CommittedFile(rel, write_id, length, tail_hash(tail), rows)


def damage_error(damage: Damage, *, table: str) -> CorruptFileError:
    """The readers' error for a damaged committed file."""
    return CorruptFileError(
        f"Cannot read bucket file {damage.path}: {damage.found}", path=damage.path,
        offset=damage.entry.length,
        hint=f"run `ingest verify {table}` to list every damaged file; `ingest recover` "
        f"never cuts committed bytes, so restore {damage.path} from a backup")


__all__ = ["CommittedFile", "CommittedFiles", "Damage", "DamageKind", "committed_file_at",
           "damage_error", "size_damage", "tail_bytes_at", "tail_damage", "tail_hash"]
