"""The one read planner: the files a read of a `ReadView` opens, as scan tasks.

Lists partitions, chooses each one's directories (`acid_state`, Hive's `getAcidState`) and
checks the choice against the committed-file manifest before any row is read: every file a
commit recorded and the snapshot still needs must be there, whole, and end in the tail the
commit hashed. The manifest, not the listing, says what must exist: a committed directory or
partition that a listing does not find is missing, never empty (docs/invariants.md, 7).
Every reader consumes the tasks: the Table API and `ingest cat`, delete, compaction and the
Spark source's executors. Knows no metastore: the view arrives as a value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ingest.acid.format import (
    SIDE_FILE_SUFFIX,
    CommittedFile,
    CommittedFiles,
    ParsedDirectory,
    ValidWriteIdList,
    checked_tail,
    damage_error,
    is_hidden,
    is_side_file,
    parse_bucket_file,
    parse_directory,
    parse_partition,
    size_damage,
)
from ingest.acid.read.bucket_file import readable_length
from ingest.acid.read.directories import AcidState, VisibleTxn, acid_state
from ingest.acid.read.merge import DataFile, FileKind, read_length
from ingest.acid.read.view import ReadView
from ingest.errors import SchemaMismatchError
from ingest.io import files as _files
from ingest.orc import read_tail


@dataclass(frozen=True)
class Partition:
    """One partition directory (or an unpartitioned table's root).

    Attributes:
        path: the directory, as the filesystem names it.
        values: (column, value) pairs from the `col=value` path components, outermost first;
            Hive's `__HIVE_DEFAULT_PARTITION__` becomes None.
    """

    path: str
    values: tuple[tuple[str, str | None], ...] = ()
    children: tuple[str, ...] = field(default=(), compare=False, repr=False)


def list_partitions(
    path: str, *, fs: fsspec.AbstractFileSystem | None = None
) -> list[Partition]:
    """Partition directories at or below `path`, sorted by path.

    A directory holding anything but `col=value` sub-directories (base/delta dirs, original
    files) is a partition; `col=value` components of `path` itself count as partition values.

    Raises:
        FileNotFoundError: `path` does not exist (on an object store, where directories do
            not exist apart from their files, a missing `path` has no partitions instead).
    """
    fs, root = _files.resolve(path, fs)
    root = root.rstrip("/") or "/"
    if not fs.isdir(root):
        if not _files.has_directories(fs):
            # An object store keeps no empty directory: a table or partition without files
            # has no prefix at all and reads as empty (docs/format.md §23).
            return []
        raise FileNotFoundError(f"Cannot read table, directory does not exist: {root}")
    values: list[tuple[str, str | None]] = []
    for part in reversed(root.split("/")):
        kv = parse_partition(part)
        if kv is None:
            break
        values.insert(0, kv)
    found: list[Partition] = []
    _walk(fs, root, tuple(values), found)
    return sorted(found, key=lambda p: p.path)


def _walk(fs: fsspec.AbstractFileSystem, directory: str,
          values: tuple[tuple[str, str | None], ...], found: list[Partition]) -> None:
    infos = fs.ls(directory, detail=True)
    names = [str(i["name"]).rstrip("/").rsplit("/", 1)[-1] for i in infos]
    subdirs = [(n, str(i["name"]).rstrip("/")) for n, i in zip(names, infos, strict=True)
               if i.get("type") == "directory" and parse_partition(n) is not None]
    visible = [n for n in names if not is_hidden(n)]
    if subdirs and len(subdirs) == len(visible):
        for name, full in sorted(subdirs):
            kv = parse_partition(name)
            assert kv is not None
            _walk(fs, full, (*values, kv), found)
        return
    found.append(Partition(directory, values, tuple(names)))


def plan_partition(
    fs: fsspec.AbstractFileSystem, partition: Partition, snapshot: ValidWriteIdList, *,
    visible_txn: VisibleTxn | None = None,
) -> tuple[AcidState, list[DataFile]]:
    """The chosen directories of a partition and the files to read, in read order.

    `visible_txn` says which compactor transactions (the T of a `_vT` directory) are
    committed; None takes all as committed (see `acid_state`).

    Raises:
        FileNotFoundError: the partition vanished.
        NotEnoughHistoryError, UnsupportedFormatError, CorruptFileError: see `acid_state`.
    """
    state = acid_state(fs, partition.path, snapshot, visible_txn=visible_txn)
    files: list[DataFile] = []
    offsets: dict[int, int] = {}
    for rel in state.original_files:
        bucket = _original_bucket_id(rel)
        full = state.path(rel)
        files.append(DataFile(full, bucket, "original", None, offsets.get(bucket, 0)))
        tail_rows = _rows_at_readable_length(fs, full)
        offsets[bucket] = offsets.get(bucket, 0) + tail_rows
    dirs = ([state.base] if state.base is not None else []) + list(state.deltas)
    for d in dirs:
        kind: FileKind = d.kind
        for path, bucket, size, side_file in listed_bucket_files(fs, state.path(d.name)):
            files.append(DataFile(path, bucket, kind, d, size=size, side_file=side_file))
    return state, files


def bucket_files(fs: fsspec.AbstractFileSystem, directory: str) -> list[tuple[str, int]]:
    """(path, bucket id) of the bucket files in a base/delta directory, sorted by name."""
    return [(path, bucket) for path, bucket, _, _ in listed_bucket_files(fs, directory)]


def listed_bucket_files(fs: fsspec.AbstractFileSystem, directory: str
                        ) -> list[tuple[str, int, int | None, bool]]:
    """(path, bucket id, size, whether a side file is listed beside it) of the bucket files
    in a base/delta directory, sorted by name, from one listing: the read then asks the
    filesystem neither a file's size nor for a side file the listing did not show."""
    sizes: dict[str, int | None] = {}
    sides: set[str] = set()
    for info in fs.ls(directory, detail=True):
        name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
        if is_side_file(name):
            sides.add(name[:-len(SIDE_FILE_SUFFIX)])
        elif not is_hidden(name):
            size = info.get("size")
            sizes[name] = int(size) if size is not None else None
    found = []
    for name in sorted(sizes):
        bucket = parse_bucket_file(name)
        if bucket is not None:
            found.append((f"{directory}/{name}", bucket, sizes[name], name in sides))
    return found


def _original_bucket_id(rel: str) -> int:
    """`AcidUtils.parseBucketId` for original files: `000001_0` -> 1, `bucket_00001` -> 1."""
    name = rel.rsplit("/", 1)[-1]
    bucket = parse_bucket_file(name)
    if bucket is not None:
        return bucket
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() and "_" in name else 0


def _rows_at_readable_length(fs: fsspec.AbstractFileSystem, path: str) -> int:
    length = readable_length(fs, path)[0]
    return read_tail(fs, path, length).number_of_rows if length else 0


@dataclass(frozen=True)
class ScanTask:
    """The files of one bucket of one partition, read together so every delete applies.

    Attributes:
        partition: the partition directory and its values.
        bucket_id: the bucket.
        files: insert-event (and original) files in Hive's read order, then the bucket's
            delete-delta files.
        read_lengths: (path, bytes to read) of the files the manifest lists, checked against
            it; the other files are read up to their side file or last footer.
        tails: (path, tail bytes) of the files read up to their committed length: the bytes
            of the tail the check hashed, so the read parses them instead of reading them
            again (only a read that merges parses them: a key-index lookup never does).
    """

    partition: Partition
    bucket_id: int
    files: tuple[DataFile, ...]
    read_lengths: tuple[tuple[str, int], ...] = ()
    tails: tuple[tuple[str, bytes], ...] = ()

    @property
    def values(self) -> dict[str, str | None]:
        return dict(self.partition.values)


@dataclass(frozen=True)
class FilePlan:
    """A planned read: the view it reads, the partitions it kept and their tasks.

    Attributes:
        view: the snapshot, manifest and visibility the plan was checked against.
        partitions: the partitions read (after `keep`), by path.
        partitions_pruned: partitions `keep` left out.
        partition_columns: the partition columns, outermost first.
        tasks: one per (partition, bucket with insert events), partitions in path order.
    """

    view: ReadView
    partitions: tuple[Partition, ...]
    partitions_pruned: int
    partition_columns: tuple[str, ...]
    tasks: tuple[ScanTask, ...]

    def by_partition(self) -> list[tuple[Partition, list[DataFile]]]:
        """Every partition read, with its tasks' files in task order (none for a partition
        without insert events)."""
        out: dict[str, tuple[Partition, list[DataFile]]] = {
            p.path: (p, []) for p in self.partitions}
        for t in self.tasks:
            out[t.partition.path][1].extend(t.files)
        return list(out.values())

    def read_lengths(self) -> dict[str, int]:
        """Every task's checked read lengths, by path."""
        return {path: length for t in self.tasks for path, length in t.read_lengths}

    def read_tails(self) -> dict[str, bytes]:
        """Every task's checked tail bytes (each ends at its file's read length), by path."""
        return {path: tail for t in self.tasks for path, tail in t.tails}


def covers(other: ParsedDirectory, mine: ParsedDirectory) -> bool:
    """`other` holds every event of `mine`: a base at or above its write ids, or a directory
    of the same kind whose write-id range contains its range (compaction output)."""
    if other.is_base:
        return other.max_write_id >= mine.max_write_id
    return (other.kind == mine.kind and other.min_write_id <= mine.min_write_id
            and mine.max_write_id <= other.max_write_id)


def plan_files(
    fs: fsspec.AbstractFileSystem,
    path: str,
    view: ReadView,
    *,
    root: str | None = None,
    keep: Callable[[Partition], bool] | None = None,
    keep_bucket: Callable[[Partition, int], bool] | None = None,
    partitions: Sequence[Partition] | None = None,
) -> FilePlan:
    """Plan a read of `path` (a table root or a partition inside it) as of `view`.

    Args:
        fs: the table's filesystem.
        path: what to read, as `fs` names it.
        view: the snapshot, the manifest (relative to `root`) and `_vT` visibility.
        root: the table root the manifest's paths are relative to (default: `path`).
        keep: partitions to read (default: all); the others are neither checked nor read.
        keep_bucket: buckets of a kept partition to read (default: all); the files of the
            others are neither checked nor read (a keyed lookup reads only the buckets its
            keys hash to: docs/format.md §24).
        partitions: `list_partitions(path)` when the caller has just listed them (for its
            snapshot), so the table is listed once; default: listed here.

    Returns:
        The plan; no row data was read, only side files and the tails of listed files.

    Raises:
        FileNotFoundError: `path` does not exist.
        CorruptFileError: a file the manifest lists is missing (with its directory or its
            partition too), emptied, cut below its committed length, or its tail changed.
        SchemaMismatchError: partitions disagree on their partition columns.
        NotEnoughHistoryError, UnsupportedFormatError: see `acid_state`.
    """
    path = path.rstrip("/") or "/"
    manifest = CommittedFiles(root if root is not None else path, view.committed)
    expected = _expected_entries(manifest, path, view)
    if partitions is None:
        partitions = list_partitions(path, fs=fs)
    listed = {p.path: p for p in partitions}
    table = (manifest.root if isinstance(fs, LocalFileSystem)
             else fs.unstrip_protocol(manifest.root))
    for directory, entries in sorted(expected.items()):
        if directory not in listed:
            # A partition the manifest needs and no listing found: only the files can say
            # whether anything of it is left, so it is missing unless `keep` prunes it.
            values = _values_of(directory, manifest.root)
            if keep is None or keep(Partition(directory, values)):
                _, entry, _ = entries[0]
                damage = size_damage(manifest.absolute(entry.path), entry, None)
                assert damage is not None
                raise damage_error(damage, table=table)
    partitions = sorted(listed.values(), key=lambda p: p.path)
    keys = {tuple(k for k, _ in p.values) for p in partitions}
    if len(keys) > 1:
        raise SchemaMismatchError(
            f"Cannot read table {path}: its partition directories use different partition "
            f"columns: {sorted(keys)}")
    kept = [p for p in partitions if keep is None or keep(p)]
    tasks: list[ScanTask] = []
    for p in kept:
        state, files = plan_partition(fs, p, view.snapshot, visible_txn=view.visible_txn)
        wanted = expected.get(p.path, [])
        if keep_bucket is not None:
            files = [f for f in files if keep_bucket(p, f.bucket_id)]
            wanted = [e for e in wanted if _entry_bucket_kept(e[0], p, keep_bucket)]
        lengths, tails = _check_partition(fs, view.snapshot, state, files, manifest, wanted,
                                          table=table)
        tasks.extend(_bucket_tasks(p, files, lengths, tails))
    return FilePlan(view, tuple(kept), len(partitions) - len(kept),
                    next(iter(keys)) if keys else (), tuple(tasks))


def _entry_bucket_kept(path: str, partition: Partition,
                       keep_bucket: Callable[[Partition, int], bool]) -> bool:
    """Whether a manifest entry's file lies in a bucket `keep_bucket` keeps (an entry whose
    name is no bucket file is always kept: the check then names it)."""
    bucket = parse_bucket_file(path.rsplit("/", 1)[-1])
    return bucket is None or keep_bucket(partition, bucket)


def _expected_entries(manifest: CommittedFiles, path: str, view: ReadView,
                      ) -> dict[str, list[tuple[str, CommittedFile, ParsedDirectory]]]:
    """Manifest entries below `path` that the snapshot reads unless something covers them,
    by partition directory: their write id is valid, and a compactor's `_vT` is visible."""
    prefix = path.rstrip("/") + "/"
    out: dict[str, list[tuple[str, CommittedFile, ParsedDirectory]]] = {}
    for rel, entry in manifest.entries.items():
        full = manifest.absolute(rel)
        if not full.startswith(prefix) or not view.snapshot.is_valid(entry.write_id):
            continue
        parts = full.rsplit("/", 2)
        if len(parts) < 3:
            continue
        parsed = parse_directory(parts[1])
        if parsed is None:
            continue
        if (parsed.visibility_txn_id and view.visible_txn is not None
                and not view.visible_txn(parsed.visibility_txn_id)):
            continue
        out.setdefault(parts[0], []).append((full, entry, parsed))
    return out


def _values_of(directory: str, root: str) -> tuple[tuple[str, str | None], ...]:
    rel = directory[len(root):].strip("/") if directory.startswith(root) else directory
    found = [parse_partition(part) for part in rel.split("/") if part]
    return tuple(kv for kv in found if kv is not None)


def _check_partition(
    fs: fsspec.AbstractFileSystem, snapshot: ValidWriteIdList, state: AcidState,
    files: Sequence[DataFile], manifest: CommittedFiles,
    expected: Sequence[tuple[str, CommittedFile, ParsedDirectory]], *, table: str,
) -> tuple[dict[str, int], dict[str, bytes]]:
    """Refuse a partition whose files differ from what their commits recorded; return the
    read length of each listed file, and the tail bytes (those the check hashed) of the files
    read at their committed length.

    Refused: an expected entry that no chosen directory holds or covers (its directory was
    removed), missing files of chosen directories, files emptied or cut below their committed
    length, and (only when the read stops exactly at the committed length: an open
    transaction batch's file may have grown past it) a tail that hashes differently. In a
    transaction batch's file, bytes past the committed length belong to its later write ids
    (a commit of any of them records a new length); when the snapshot holds none of them
    valid, the read stops at the committed length, whose tail the hash vouches for, instead
    of at a later footer no commit checked.

    Raises:
        CorruptFileError: naming the first such file.
    """
    chosen = ([state.base] if state.base is not None else []) + list(state.deltas)
    chosen_names = {d.name for d in chosen}
    present = {f.path for f in files}
    for full, committed, parsed in expected:
        if parsed.name in chosen_names:
            if full in present:
                continue
        elif any(covers(d, parsed) for d in chosen):
            continue
        damage = size_damage(full, committed, None)
        assert damage is not None
        raise damage_error(damage, table=table)
    lengths: dict[str, int] = {}
    tails: dict[str, bytes] = {}
    for f in files:
        entry = manifest.entry(f.path)
        if entry is None:
            continue
        # The listing's size: the file only grows past a commit, and a cut shows either way.
        size = f.size if f.size is not None else int(fs.size(f.path))
        damage = size_damage(f.path, entry, size)
        if damage is not None:
            raise damage_error(damage, table=table)
        d = f.directory
        if (d is not None and d.max_write_id > entry.write_id
                and not any(snapshot.is_valid(w)
                            for w in range(entry.write_id + 1, d.max_write_id + 1))):
            length = entry.length
        else:
            length = read_length(fs, f.path, snapshot, listed_size=f.listed_without_side_file)
        lengths[f.path] = length
        if length == entry.length:
            damage, tail_bytes = checked_tail(fs, f.path, entry)
            if damage is not None:
                raise damage_error(damage, table=table)
            tails[f.path] = tail_bytes
    return lengths, tails


def _bucket_tasks(partition: Partition, files: Sequence[DataFile],
                  lengths: Mapping[str, int], tails: Mapping[str, bytes],
                  ) -> Iterator[ScanTask]:
    inserts: dict[int, list[DataFile]] = {}
    deletes: dict[int, list[DataFile]] = {}
    for f in files:
        (deletes if f.kind == "delete_delta" else inserts).setdefault(f.bucket_id, []).append(f)
    for bucket in sorted(inserts):
        group = (*inserts[bucket], *deletes.get(bucket, ()))
        yield ScanTask(partition, bucket, group,
                       tuple((f.path, lengths[f.path]) for f in group if f.path in lengths),
                       tuple((f.path, tails[f.path]) for f in group if f.path in tails))


__all__ = ["FilePlan", "Partition", "ScanTask", "covers", "list_partitions", "plan_files",
           "plan_partition", "bucket_files", "listed_bucket_files"]
