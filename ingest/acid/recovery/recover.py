"""Bring the bucket files of a table back to their last complete footer after a writer died.

Mirrors Hive's `orcfiledump --recover` (FileDump.recoverFiles / recoverFile) and does more: the
`_flush_length` side file is consulted first, so only tails are read (docs/invariants.md, 1
and 5; docs/recovery.md); files without one are scanned back from the end for the last
complete postscript, as Hive scans for "ORC". Knows files and write-id lists, never the
metastore: the caller says which files a live writer still owns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

import fsspec

from ingest.acid.format import (
    SIDE_FILE_SUFFIX,
    ValidWriteIdList,
    encode_length,
    is_acid_directory_prefix,
    is_hidden,
    is_side_file,
    parse_bucket_file,
    parse_directory,
    read_flush_lengths,
    side_file_path,
)
from ingest.acid.read import (
    SideFileWarning,
    committed_footer_past,
    committed_read_length,
    data_problem,
    last_complete_footer,
    max_write_id,
    parsed_at,
    tail_at_end,
    tail_at_flush,
)
from ingest.errors import CorruptFileError
from ingest.io import files as _files
from ingest.orc import FileTail

Action = Literal["ok", "skipped", "truncated", "side-file-removed", "removed", "unrecoverable"]
LiveFiles = Callable[[str], bool]
Committed = Callable[[int], bool]
CommittedLength = Callable[[str], "int | None"]
"""A file's committed length (the committed-file manifest's, docs/format.md §20), or None
when nothing records one."""
# Default backup directory below the table: hidden from Hive and from our scans by the "_".
BACKUP_DIR_NAME = "_ingest_recovery_backup"


def default_backup_dir(table_path: str) -> str:
    """`<table>/_ingest_recovery_backup/<UTC timestamp>/`: where recovery keeps what it
    removes unless told otherwise (created only when something is removed)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{str(table_path).rstrip('/')}/{BACKUP_DIR_NAME}/{stamp}"


@dataclass(frozen=True)
class FileRecovery:
    """What recovery did (or, in a dry run, would do) to one bucket file.

    Attributes:
        path: the bucket file.
        old_length: its length before, in bytes (-1 when only an orphan side file exists).
        new_length: its length after (0 when removed).
        action: ok, skipped (a live writer owns it), truncated, side-file-removed, removed,
            or unrecoverable (left untouched; needs a person).
        reason: one sentence on why.
        flush_lengths: the side file's complete entries, or None without a side file.
        backup_path: where the cut bytes or the removed file were copied, if anywhere.
        skipped_lengths: recorded flush lengths above `new_length` at which no complete footer
            ends; rows of the transactions that recorded them are lost (storage lost data).
        readable_rows: rows readable at `new_length` (for an unrecoverable file: at its last
            complete footer, 0 when there is none); None when not counted.
    """

    path: str
    old_length: int
    new_length: int
    action: Action
    reason: str
    flush_lengths: tuple[int, ...] | None = None
    backup_path: str | None = None
    skipped_lengths: tuple[int, ...] = ()
    readable_rows: int | None = None

    @property
    def changed(self) -> bool:
        return self.action not in ("ok", "skipped")


@dataclass(frozen=True)
class RecoveryReport:
    """Per-file outcome of `recover_table`, plus directories the cleaner may delete.

    Attributes:
        path: the table or partition directory recovered.
        files: one entry per bucket file (and orphan side file), sorted by path.
        aborted_directories: ACID directories (relative to `path`) whose write ids are all
            aborted in the given write-id list; empty when no list was given.
        dry_run: nothing was changed on disk.
        stray_directories: directories named like ACID ones (`delta_abc`) that do not parse:
            readers refuse the partition holding one, and recovery cannot repair that.
    """

    path: str
    files: tuple[FileRecovery, ...]
    aborted_directories: tuple[str, ...] = ()
    dry_run: bool = False
    stray_directories: tuple[str, ...] = ()

    @property
    def changed(self) -> tuple[FileRecovery, ...]:
        """Files that were (or would be) changed."""
        return tuple(f for f in self.files if f.changed and f.action != "unrecoverable")

    @property
    def unrecoverable(self) -> tuple[FileRecovery, ...]:
        return tuple(f for f in self.files if f.action == "unrecoverable")

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(
            f"{f.path}: recorded flush lengths {list(f.skipped_lengths)} end in no complete "
            f"footer; rows flushed there are lost" for f in self.files if f.skipped_lengths)

    @property
    def nothing_to_do(self) -> bool:
        """True when every file is ok or owned by a live writer."""
        return all(not f.changed for f in self.files)

    @property
    def clean(self) -> bool:
        """The table is consistent after this run (a dry run is clean only with nothing to do)."""
        if self.unrecoverable or self.stray_directories:
            return False
        return self.nothing_to_do or not self.dry_run


@dataclass
class _Ctx:
    fs: fsspec.AbstractFileSystem
    root: str
    dry_run: bool
    backup_dir: str | None
    backup_fs: fsspec.AbstractFileSystem | None
    live_files: LiveFiles
    committed: Committed | None = None
    valid_write_ids: ValidWriteIdList | None = None
    check_data: bool = False
    committed_length: CommittedLength | None = None
    removed_bytes: list[int] = field(default_factory=list)

    def holds_committed(self, path: str) -> bool:
        """The file's directory holds a write id known (or, without a metastore, assumed) to
        be committed: its bytes may hold committed rows (docs/invariants.md, 7)."""
        if self.committed is None:
            return False
        parsed = parse_directory(path.rstrip("/").rsplit("/", 2)[-2])
        if parsed is None:
            return True
        if parsed.is_base:
            return self.committed(parsed.max_write_id)
        return any(self.committed(w) for w in range(parsed.min_write_id, parsed.max_write_id + 1))

    def below_committed(self, path: str, length: int) -> str | None:
        """Why cutting `path` to `length` keeps every committed byte, or None when nothing
        shows it: the commits recorded the file's committed length, and it is at most
        `length` (docs/recovery.md, 4)."""
        committed = None if self.committed_length is None else self.committed_length(path)
        if committed is None or committed > length:
            return None
        return (f"; the committed length {committed:,} (recorded by the commit) lies at or "
                "below it, so the lengths past it hold no committed row")

    def settled(self, write_id: int) -> bool:
        """Committed or aborted: no writer will add rows of it (open ones are not)."""
        if self.valid_write_ids is not None and self.valid_write_ids.is_aborted(write_id):
            return True
        return self.committed is not None and self.committed(write_id)

    def stray_side_file(self, path: str) -> bool:
        """A side file here cannot be a writer's: the directory is a committed base, which
        never keeps one (docs/recovery.md, 9)."""
        if self.committed is None:
            return False
        parsed = parse_directory(path.rstrip("/").rsplit("/", 2)[-2])
        return parsed is not None and parsed.is_base and self.committed(parsed.max_write_id)


def recover_table(
    path: str,
    *,
    fs: fsspec.AbstractFileSystem | None = None,
    dry_run: bool = False,
    backup_dir: str | None = None,
    live_files: LiveFiles | None = None,
    valid_write_ids: ValidWriteIdList | None = None,
    committed: Committed | None = None,
    check_data: bool = False,
    committed_length: CommittedLength | None = None,
    backup_fs: fsspec.AbstractFileSystem | None = None,
    on_progress: Callable[[int, int, str], None] | None = None,
) -> RecoveryReport:
    """Truncate every bucket file under `path` to its last complete footer; drop dead side files.

    With a side file, its entries are tried from last to first; the first length L that is at
    most the file size and at which a complete ORC tail ends (postscript, footer, metadata and
    every stripe below the tail) wins, and bytes past L are cut. Never cuts below that L
    (docs/invariants.md, 5). A tail that repeats the previous flush's tail and adds to it is
    checked for what it adds only, so a healthy file costs the same however many flushes it
    holds; any other is checked in full. The side file is removed unless `live_files(path)`
    says a writer still owns the file; live files are not touched at all. A file whose side
    file holds no usable entry and no flushed length (never flushed) holds no committed row
    and is removed. A file without side file is scanned back for the last complete
    postscript. Running it twice changes nothing the second time; on a healthy table it
    changes nothing.

    Args:
        path: the table or partition directory (path or fsspec URL).
        fs: its filesystem (from the URL when None).
        dry_run: report what would be done, change nothing.
        backup_dir: a local or fsspec directory; cut bytes go to
            `<backup_dir>/<relative path>.<old>-<new>.cut`, removed files and side files to
            `<backup_dir>/<relative path>`. Nothing is kept when None.
        live_files: True for files an open transaction still writes; None means no writer is
            live (the CLI decides with the metastore).
        valid_write_ids: when given, directories whose write ids are all aborted are listed in
            the report for the cleaner, and its valid write ids count as committed unless
            `committed` is given.
        committed: True for write ids whose rows are committed. Bytes that may hold them
            are never cut or removed: a file of a committed write id whose tail is damaged
            is `unrecoverable`, and complete footers past a side file cut short are kept
            (docs/recovery.md, 4). None (and no `valid_write_ids`): nothing is known
            committed, only the side files decide.
        check_data: also decode every stripe of the files left as they are; a file whose
            tail is sound but whose stripes do not decode is `unrecoverable`.
        committed_length: a file's committed length from the committed-file manifest
            (None: not recorded). A file of committed write ids whose later recorded flush
            lengths end in no footer goes back to its last complete footer only when that
            footer lies at or above its committed length; otherwise it is `unrecoverable`.
        backup_fs: the filesystem of `backup_dir` (from its URL when None).
        on_progress: called after each bucket file with (files done, files in all, the
            file's path): for a progress bar.

    Returns:
        The per-file report.

    Raises:
        FileNotFoundError: `path` does not exist (on a filesystem with directories).
    """
    fs, root = _files.resolve(path, fs)
    root = root.rstrip("/")
    # An object store keeps no empty directory: a missing root there holds no file to recover.
    if _files.has_directories(fs) and not fs.exists(root):
        raise FileNotFoundError(f"Cannot recover table, directory does not exist: {root}")
    backup_root = None
    if backup_dir is not None:
        backup_fs, backup_root = _files.resolve(backup_dir, backup_fs)
        backup_root = backup_root.rstrip("/")
    if committed is None and valid_write_ids is not None:
        committed = valid_write_ids.is_valid
    ctx = _Ctx(fs, root, dry_run, backup_root, backup_fs, live_files or (lambda _p: False),
               committed, valid_write_ids, check_data, committed_length)
    results = []
    bucket_files, orphan_sides, acid_dirs, stray = _scan(fs, root)
    for file in bucket_files:
        results.append(recover_file(file, ctx))
        if on_progress is not None:
            on_progress(len(results), len(bucket_files), file)
    for side in orphan_sides:
        results.append(_orphan_side_file(side, ctx))
    aborted: list[str] = []
    if valid_write_ids is not None:
        for d in acid_dirs:
            parsed = parse_directory(d.rsplit("/", 1)[-1])
            if parsed is not None and valid_write_ids.range_aborted(
                    parsed.min_write_id, parsed.max_write_id) == "ALL":
                aborted.append(_relative(root, d))
    return RecoveryReport(root, tuple(sorted(results, key=lambda r: r.path)),
                          tuple(sorted(aborted)), dry_run, tuple(stray))


def _scan(fs: fsspec.AbstractFileSystem, root: str
          ) -> tuple[list[str], list[str], list[str], list[str]]:
    """(bucket files, side files without a bucket file, ACID directories, directories named
    like ACID ones that do not parse) below root."""
    buckets: list[str] = []
    sides: list[str] = []
    dirs: list[str] = []
    stray: list[str] = []
    for directory, subdirs, files in fs.walk(root):
        directory = str(directory).rstrip("/")
        subdirs[:] = [d for d in subdirs if not is_hidden(d)]
        for d in subdirs:
            if parse_directory(d) is not None:
                dirs.append(f"{directory}/{d}")
            elif is_acid_directory_prefix(d):
                stray.append(f"{directory}/{d}")
        if parse_directory(directory.rsplit("/", 1)[-1]) is None:
            continue
        names = set(files)
        for name in sorted(names):
            if is_side_file(name):
                if name[: -len(SIDE_FILE_SUFFIX)] not in names:
                    sides.append(f"{directory}/{name}")
            elif parse_bucket_file(name) is not None:
                buckets.append(f"{directory}/{name}")
    return buckets, sides, sorted(dirs), sorted(stray)


def _relative(root: str, path: str) -> str:
    return path[len(root) + 1:] if path.startswith(root + "/") else path.lstrip("/")


def recover_file(path: str, ctx: _Ctx) -> FileRecovery:
    """Recover one bucket file; see `recover_table`."""
    result = _recover_file(path, ctx)
    if ctx.check_data and result.action in ("ok", "side-file-removed"):
        problem = data_problem(ctx.fs, path, result.new_length)
        if problem is not None:
            return FileRecovery(
                path, result.old_length, result.old_length, "unrecoverable",
                f"its tail is complete but {problem}; recovery cannot repair damaged stripe "
                "data, left untouched", result.flush_lengths)
    return result


def _recover_file(path: str, ctx: _Ctx) -> FileRecovery:
    fs = ctx.fs
    size = int(fs.size(path))
    lengths = read_flush_lengths(fs, path)
    entries = None if lengths is None else tuple(lengths)
    if ctx.live_files(path):
        return FileRecovery(path, size, size, "skipped",
                            "a live writer owns the file; left alone", entries)
    if lengths is None:
        return _recover_without_side_file(path, size, ctx)
    if ctx.stray_side_file(path):
        # Readers ignore it (as Hive does): the file is judged as one without side file.
        result = _recover_without_side_file(path, size, ctx)
        if result.action != "ok":
            return replace(result, flush_lengths=entries)
        if not ctx.dry_run:
            _remove_side_file(path, ctx)
        return replace(result, action="side-file-removed", flush_lengths=entries,
                       reason="a stray side file beside a complete base (a base never has "
                              "one)")
    skipped: list[int] = []
    positive = [x for x in lengths if x > 0]
    for i in range(len(positive) - 1, -1, -1):
        length = positive[i]
        if length > size:
            skipped.append(length)
            continue
        tail = tail_at_flush(fs, path, length, positive[:i], size)
        safe = "" if tail is None or not skipped else ctx.below_committed(path, length)
        if tail is not None and skipped and ctx.holds_committed(path) and safe is None:
            # Lengths recorded later than this one no longer end in a footer: the file lost
            # or damaged bytes below them, and the flushes there may be committed. Going back
            # to this length would make the file read without them, exit 0, from then on
            # (docs/invariants.md, 7): left as it is, and named, unless the commits recorded
            # a committed length at or below it (`safe`).
            return FileRecovery(
                path, size, size, "unrecoverable",
                f"recorded flush lengths {sorted(set(skipped))} end in no complete ORC footer "
                f"(file has {size:,} bytes) and its directory holds committed write ids; the "
                f"last readable flush length is {length:,} ({tail.number_of_rows:,} rows); "
                "left untouched", entries, None, tuple(skipped), tail.number_of_rows)
        if tail is not None:
            later, note = _past_side_file(path, size, tail, ctx)
            return _cut(path, size, later or tail, entries, tuple(skipped), ctx,
                        note + (safe or ""), by_footers=later is not None)
        skipped.append(length)
    if skipped and ctx.holds_committed(path) and max(skipped) <= size:
        end = tail_at_end(fs, path, size)
        if end is not None:
            # No recorded length reads, but the whole file does, and it is no shorter than
            # any of them: the side file is what is damaged. Nothing is cut; it goes (to the
            # backup).
            if not ctx.dry_run:
                _remove_side_file(path, ctx)
            return FileRecovery(
                path, size, size, "side-file-removed",
                f"no recorded flush length {sorted(set(skipped))} ends in a complete ORC "
                f"footer, but the whole file is complete ({end.number_of_rows:,} rows): the "
                "side file was damaged", entries, None, tuple(skipped), end.number_of_rows)
    if skipped:
        # Lengths were recorded (so transactions may have committed) but none is readable:
        # cutting anywhere could destroy what is left; a person must look
        # (docs/invariants.md, 5). Unless the commits recorded a committed length that the
        # file's last complete footer reaches: then only uncommitted bytes lie past it.
        last = tail_at_end(fs, path, size) or last_complete_footer(fs, path, size)
        safe = None if last is None else ctx.below_committed(path, last.length)
        if last is not None and safe is not None:
            return _cut(path, size, last, entries, tuple(skipped), ctx, safe, by_footers=True)
        rows = 0 if last is None else last.number_of_rows
        return FileRecovery(
            path, size, size, "unrecoverable",
            f"no recorded flush length {sorted(set(skipped))} ends in a complete ORC footer "
            f"(file has {size:,} bytes, {rows:,} rows readable at its last complete footer); "
            "left untouched", entries, None, tuple(skipped), rows)
    if not lengths or ctx.holds_committed(path):
        # No complete entry at all: BucketWriter starts every new side file with 0, so this is
        # a reopened file (open_append) torn while writing its first entry, whose earlier rows
        # are committed, or a Hive 2 file never flushed (no footer). Or a side file holding
        # only 0 beside a file whose directory holds committed write ids (a side file cut
        # short): footers in the file decide. Keep the last footer.
        last = tail_at_end(fs, path, size) or last_complete_footer(fs, path, size)
        if last is not None:
            note = "" if not lengths else (
                f"; the side file records no flush but the file's own footers go to "
                f"{last.length:,} bytes ({last.number_of_rows:,} rows) and its directory "
                "holds committed write ids: kept")
            return _cut(path, size, last, entries, (), ctx, note)
    # Only 0 entries: never flushed, so it holds no row of any committed transaction.
    backup = None if ctx.dry_run else _backup_whole(path, ctx)
    if not ctx.dry_run:
        fs.rm_file(path)
        _remove_side_file(path, ctx)
    return FileRecovery(path, size, 0, "removed",
                        "the side file records no flush: no transaction committed rows here",
                        entries, backup, (), 0)


def _past_side_file(path: str, size: int, tail: FileTail, ctx: _Ctx
                    ) -> tuple[FileTail | None, str]:
    """A complete footer past the side file's last readable length, with a note for the
    report; (None, "") when there is none.

    A side file cut short (or an entry lost) would make recovery cut committed rows: when
    the directory holds a committed write id, the file's own footers past `tail` are looked
    for, and the last one that extends it with stripes of no open write id is kept
    (docs/recovery.md, 5). A flush whose length never reached the side file (its writer
    died in between) holds rows of an uncommitted write id only; keeping it is harmless,
    readers drop them.
    """
    if tail.length >= size or not ctx.holds_committed(path):
        return None, ""
    later = committed_footer_past(ctx.fs, path, tail, size, ctx.settled)
    if later is None:
        return None, ""
    return later, (f"; the side file stops at {tail.length:,} bytes but the file's own "
                   f"footers go to {later.length:,} ({later.number_of_rows:,} rows, write ids up "
                   f"to {max_write_id(later)}): side file rebuilt from them")


def _cut(path: str, size: int, tail: FileTail, entries: tuple[int, ...] | None,
         skipped: tuple[int, ...], ctx: _Ctx, note: str = "", *,
         by_footers: bool = False) -> FileRecovery:
    """Truncate to the end of `tail`, a checked tail (if the file is longer), and remove the
    side file. `by_footers`: the tail was found among the file's own footers, past the side
    file's last length."""
    fs = ctx.fs
    length = tail.length
    rows = tail.number_of_rows
    if skipped:
        note += (f"; recorded lengths {list(skipped)} end in no complete footer, "
                 f"went back to {length:,}")
    if length == size:
        if entries is not None:
            if not ctx.dry_run:
                _remove_side_file(path, ctx)
            return FileRecovery(path, size, size, "side-file-removed",
                                "complete at its last flush length; no live writer" + note,
                                entries, None, skipped, rows)
        return FileRecovery(path, size, size, "ok", "complete ORC file", entries, None, (),
                            rows)
    backup = None
    if not ctx.dry_run:
        backup = _backup_cut(path, size, length, ctx)
        _files.truncate(fs, path, length)
        # The tail was checked before the cut: after it, the same tail must end the file.
        after = parsed_at(fs, path, length, check=False)
        if int(fs.size(path)) != length or after is None or not _same_tail(after, tail):
            raise CorruptFileError(
                f"Cannot recover {path}: after truncating to {length:,} bytes no complete ORC "
                "footer ends there", path=path, offset=length,
                hint=f"restore it from {backup}" if backup else None)
        if entries is not None:
            _remove_side_file(path, ctx)
    where = ("last flush length" if entries is not None and not by_footers
             else "last complete footer")
    return FileRecovery(path, size, length, "truncated",
                        f"{size - length:,} bytes past the {where} {length:,}" + note,
                        entries, backup, skipped, rows)


def _same_tail(a: FileTail, b: FileTail) -> bool:
    return (a.start, a.postscript.fields, a.footer.fields, a.metadata.fields) == (
        b.start, b.postscript.fields, b.footer.fields, b.metadata.fields)


def _recover_without_side_file(path: str, size: int, ctx: _Ctx) -> FileRecovery:
    end = tail_at_end(ctx.fs, path, size)
    if end is not None:
        return FileRecovery(path, size, size, "ok", "complete ORC file", None, None, (),
                            end.number_of_rows)
    last = last_complete_footer(ctx.fs, path, size)
    if ctx.holds_committed(path):
        # Every row of a file without side file belongs to its directory's write ids: when
        # one committed, the bytes past the last good footer may hold committed rows. Cutting
        # back to that footer (as Hive's `orcfiledump --recover` would) makes the file read
        # with those rows missing and no error ever again, so the file is left as it is and
        # named (docs/invariants.md, 7; docs/recovery.md, 4).
        rows = 0 if last is None else last.number_of_rows
        where = ("it holds no complete ORC footer anywhere" if last is None else
                 f"its last complete footer ends at {last.length:,} bytes ({rows:,} rows), "
                 f"the {size - last.length:,} bytes past it may hold committed rows")
        return FileRecovery(
            path, size, size, "unrecoverable",
            f"a file of committed write ids whose tail is damaged or cut ({size:,} bytes): "
            f"{where}; left untouched", None, None, (), rows)
    if last is not None:
        return _cut(path, size, last, None, (), ctx)
    backup = None if ctx.dry_run else _backup_whole(path, ctx)
    if not ctx.dry_run:
        ctx.fs.rm_file(path)
    return FileRecovery(path, size, 0, "removed",
                        "no side file and no complete ORC footer anywhere: nothing readable",
                        None, backup, (), 0)


def _orphan_side_file(side: str, ctx: _Ctx) -> FileRecovery:
    data_file = side[: -len(SIDE_FILE_SUFFIX)]
    if ctx.live_files(data_file):
        return FileRecovery(data_file, -1, -1, "skipped",
                            "side file of a live writer whose bucket file is not there yet")
    if not ctx.dry_run:
        _remove_side_file(data_file, ctx)
    return FileRecovery(data_file, -1, 0, "side-file-removed",
                        "side file without its bucket file")


def _remove_side_file(path: str, ctx: _Ctx) -> None:
    """Move the side file into the backup dir (as FileDump does) or delete it."""
    side = side_file_path(path)
    if not ctx.fs.exists(side):
        return
    if ctx.backup_dir is not None:
        _copy_to_backup(ctx.fs.cat_file(side), _relative(ctx.root, side), ctx)
    ctx.fs.rm_file(side)


def _backup_cut(path: str, size: int, length: int, ctx: _Ctx) -> str | None:
    if ctx.backup_dir is None:
        return None
    data = ctx.fs.cat_file(path, start=length, end=size)
    return _copy_to_backup(data, f"{_relative(ctx.root, path)}.{size}-{length}.cut", ctx)


def _backup_whole(path: str, ctx: _Ctx) -> str | None:
    if ctx.backup_dir is None:
        return None
    return _copy_to_backup(ctx.fs.cat_file(path), _relative(ctx.root, path), ctx)


def _copy_to_backup(data: bytes, relative: str, ctx: _Ctx) -> str:
    assert ctx.backup_fs is not None and ctx.backup_dir is not None
    target = f"{ctx.backup_dir}/{relative}"
    ctx.backup_fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
    with ctx.backup_fs.open(target, "wb") as f:
        f.write(data)
        _files.durable_flush(f)
    return target


__all__ = ["BACKUP_DIR_NAME", "Action", "Committed", "CommittedLength", "FileRecovery",
           "LiveFiles",
           "RecoveryReport", "SideFileWarning", "committed_read_length", "default_backup_dir",
           "recover_file", "recover_table"]


def rollback_file(fs: fsspec.AbstractFileSystem, path: str, length: int) -> None:
    """Cut a bucket file and its side file back to `length`, a committed flush length.

    A retried attempt of a transaction-batch micro-batch would otherwise append its rows
    after rows a failed attempt already flushed under the same write id (duplicates). The
    side file is cut first: a crash between the two steps then leaves a file longer than
    its last entry (readers stop at the entry), never an entry past the end of the file.
    """
    size = fs.size(path)
    lengths = read_flush_lengths(fs, path)
    if size == length and lengths and lengths[-1] == length:
        return
    kept = [x for x in (lengths or []) if x <= length] or [length]
    if kept[-1] != length:
        kept.append(length)
    side = side_file_path(path)
    temporary = side + ".tmp"
    with fs.open(temporary, "wb") as f:
        f.write(b"".join(encode_length(x) for x in kept))
        _files.durable_flush(f)
    fs.mv(temporary, side)
    if size > length:
        _files.truncate(fs, path, length)
