"""The files one write transaction makes, and their removal when it does not commit.

`writing` opens the transaction and tracks every directory and bucket file written inside it;
an error removes them before the transaction is aborted, and `commit` removes them only once
the transaction is known not to be committed. So a failed load or delete leaves nothing behind
(docs/invariants.md, 7). `commit` records each file's manifest entry with the commit
(docs/format.md §20). Writes bucket files through `ingest.acid.BucketWriter`.
`remove_aborted_writes` removes what a writer that died left in the directories of its
aborted write ids (the streaming sink's restart repair), and only that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import fsspec
import pyarrow as pa

from ingest.acid import has_directories, list_partitions
from ingest.acid.format import (
    ACID_VERSION_FILE,
    SIDE_FILE_SUFFIX,
    CommittedFile,
    bucket_file_name,
    format_delta,
    parse_bucket_file,
    write_acid_version_file,
)
from ingest.acid.write import BucketFileOptions, BucketWriter, Compression
from ingest.errors import CommitConflictError, IngestError
from ingest.io import storage
from ingest.table.core._open import StorageOptions, table_fs
from ingest.table.core.schema_versions import check_written_columns
from ingest.txn import Metastore, TableDefinition, Transaction

_PROGRESS_ROWS = 65_536  # rows per write() when a caller counts them (a progress bar)


class Written:
    """Directories and files a transaction created, to remove if it does not commit, and
    the manifest entries its commit records."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str | None = None, *,
                 attempt: str | None = None) -> None:
        """Args:
            fs, root: the table's filesystem and root (the root as `fs` names it).
            attempt: a task attempt's id: write hidden staging files
                `_tmp.bucket_N.<attempt>` (`staged` maps each final path to its own) into
                directories other tasks of the same write share, for a driver to rename
                and mark (the streaming sink, docs/invariants.md 8.4); `remove` then
                removes only those files.
        """
        self.fs = fs
        # The table root, for the entries' relative paths (required to write bucket files).
        self.root = None if root is None else root.rstrip("/")
        self.attempt = attempt
        self.staged: dict[str, str] = {}
        self.directories: list[str] = []  # our delta / delete_delta dirs (named by write id)
        self.parents: list[str] = []  # partition dirs this call created
        self.files: list[str] = []
        self.committed: list[CommittedFile] = []
        self.bytes = 0
        # The row structs written, and the definition the write began with (set by
        # `writing`): `commit` checks they still read as the table's columns (§25).
        self.row_schemas: list[pa.Schema] = []
        self.began: TableDefinition | None = None
        # Files beside the data (the key index, docs/format.md §24): removed with it.
        self.side_files: list[str] = []

    def make_directory(self, parent: str, directory: str) -> None:
        """Create `directory` (and its missing parents) with its `_orc_acid_version` file.

        Raises:
            IngestError: `directory` already exists: some writer this metastore does not
                know wrote it. It is left as it is, and never removed by `remove`.
        """
        if self.attempt is not None:  # shared with the write's other tasks: no marker here
            if has_directories(self.fs):
                self.fs.makedirs(directory, exist_ok=True)
            self.directories.append(directory)
            return
        missing, p = [], parent
        while p and not self.fs.exists(p):
            missing.append(p)
            # A bucket name has no "/": stop there instead of looping on it (a missing bucket).
            p = p.rsplit("/", 1)[0] if "/" in p else ""
        try:
            if self.fs.exists(directory):
                raise FileExistsError(directory)
            if has_directories(self.fs):  # an object store's makedirs may create a bucket
                self.fs.makedirs(directory, exist_ok=False)
        except FileExistsError as e:
            raise _not_ours(directory) from e
        finally:
            # Parents made before the failure are ours to remove (only if empty).
            self.parents.extend(m for m in missing if self.fs.exists(m))  # deepest first
        self.directories.append(directory)
        write_acid_version_file(self.fs, directory)

    def write_bucket(self, directory: str, bucket_id: int, data: pa.Table, *,
                     row_schema: pa.Schema, write_id: int, compression: Compression,
                     deletes: bool = False,
                     on_rows: Callable[[int], None] | None = None) -> None:
        """Write `directory/bucket_N`: `data` as insert events, or (deletes=True) as the keys
        of delete events (originalTransaction, bucket, rowId); count its files and bytes and
        keep its manifest entry. `on_rows` (inserts only) hears of the rows encoded into
        the file as each stripe is written, so a large bucket file shows progress.

        Raises:
            ValueError: this Written was made without the table root.
        """
        if self.root is None:
            raise ValueError("Cannot write bucket files: Written needs the table root to "
                             "record their manifest entries")
        path = f"{directory}/{bucket_file_name(bucket_id)}"
        target = path if self.attempt is None else \
            f"{directory}/_tmp.{bucket_file_name(bucket_id)}.{self.attempt}"
        self.staged[path] = target
        if not any(row_schema.equals(s) for s in self.row_schemas):
            self.row_schemas.append(row_schema)
        writer = BucketWriter.create(target, BucketFileOptions(
            write_id=write_id, row_schema=row_schema, bucket_id=bucket_id,
            kind="delete" if deletes else "insert", compression=compression), fs=self.fs)
        self.files.append(path)
        told = 0
        with writer:
            if deletes:
                writer.write_deletes(data)
            elif on_rows is None:
                writer.write(data)
            else:  # in slices, so stripes are encoded (and told) as they fill
                for start in range(0, data.num_rows, _PROGRESS_ROWS):
                    writer.write(data.slice(start, _PROGRESS_ROWS))
                    if writer.rows_written > told:
                        on_rows(writer.rows_written - told)
                        told = writer.rows_written
        if on_rows is not None and not deletes and data.num_rows > told:
            on_rows(data.num_rows - told)  # the last stripe, written on close
        self.bytes += writer.bytes_written
        self.committed.append(writer.committed_file(relative_path(self.root, path)))

    def remove(self) -> None:
        """Remove every directory written, then the partition directories made for them
        (with an attempt id: only the staging files written)."""
        for side in self.side_files:
            _remove_file(self.fs, side)
        if self.attempt is not None:
            for staging in self.staged.values():
                _remove_file(self.fs, staging)
            return
        for directory in self.directories:
            if self.fs.exists(directory):
                self.fs.rm(directory, recursive=True)
        remove_empty_dirs(self.fs, self.parents)


def _not_ours(directory: str) -> IngestError:
    name = directory.rsplit("/", 1)[-1]
    return IngestError(
        f"Cannot write {directory}: the directory already exists, so a writer the metastore "
        f"does not know wrote {name} (the table was written with another metastore, or its "
        "metastore was re-created). The write stopped before writing into it, removed what "
        "it had written and left the directory as it is",
        hint="use the metastore that lists this data (--metastore or INGEST_METASTORE); "
        "`ingest verify` on the table lists every such directory; to make them the table's "
        "committed rows, register the table in a new metastore with `ingest create PATH "
        "--schema ... --adopt`")


def relative_path(root: str, path: str) -> str:
    """`path` relative to the table root `root` (both as the filesystem names them).

    Raises:
        ValueError: `path` is not below `root`.
    """
    prefix = root.rstrip("/") + "/"
    if not path.startswith(prefix):
        raise ValueError(f"{path} is not inside the table root {root}")
    return path[len(prefix):]


def join_path(root: str, *parts: str) -> str:
    """`root/part/...`, skipping empty parts (an unpartitioned table's partition is "")."""
    return "/".join([root, *(p for p in parts if p)])


def remove_empty_dirs(fs: fsspec.AbstractFileSystem, directories: Sequence[str]) -> None:
    """Remove those of `directories` that are empty, in the order given."""
    for directory in directories:
        try:
            if not fs.ls(directory):
                fs.rmdir(directory)
        except (OSError, NotImplementedError):
            pass  # another writer is using it, or the store has no directories


@contextmanager
def writing(store: Metastore, defn: TableDefinition, fs: fsspec.AbstractFileSystem, *,
            agent: str, operation: Literal["insert", "delete"] = "insert",
            ) -> Iterator[tuple[Transaction, Written]]:
    """Open a transaction for `operation` (`Metastore.open_transaction`) and track what it
    writes; an error inside the block removes the files and aborts it (`fail`). Committing
    (`commit`) or aborting an empty write is the caller's, after the block."""
    txn = store.open_transaction(defn, agent=agent, operation=operation)
    written = Written(fs, storage.path_of(defn.location))
    written.began = defn
    try:
        yield txn, written
    except BaseException as e:
        fail(store, txn, written, e)
        raise


def fail(store: Metastore, txn: Transaction, written: Written, error: BaseException) -> None:
    """Remove what the transaction wrote, then abort it (files first: nothing stays behind)."""
    try:
        written.remove()
    except OSError as e:
        error.add_note(f"Also failed to remove files of write id {txn.write_id}: {e}")
    try:
        store.abort(txn, reason=f"aborted on error: {type(error).__name__}: {error}")
    except IngestError as e:
        error.add_note(f"Also failed to abort transaction {txn.txn_id}: {e}")


def write_set(paths: Iterable[str]) -> dict[str, set[int]]:
    """The (partition, buckets) a write's bucket files are in, from their paths relative to
    the table root (`<partition>/<delta dir>/bucket_N`): what an update or delete declares
    at commit (`Metastore.commit(updated=)`, docs/format.md §24).

    Raises:
        ValueError: a path is not `[<partition>/]<directory>/bucket_N`.
    """
    out: dict[str, set[int]] = {}
    for path in paths:
        *partition, _directory, name = path.split("/")
        digits = name.removeprefix("bucket_")
        if not digits.isdigit() or not _directory:
            raise ValueError(f"{path} is not a bucket file path <partition>/<dir>/bucket_N")
        out.setdefault("/".join(partition), set()).add(int(digits))
    return out


def commit(store: Metastore, txn: Transaction, written: Written, *,
           updates: bool = False) -> None:
    """Commit `txn` with the manifest entries of its files; if that fails and it is not
    committed after all, remove its files.

    Args:
        store, txn, written: the open transaction and what it wrote.
        updates: the write updated or deleted rows: declare the partitions and buckets of
            its files as its write set, so a concurrent writer of the same buckets that
            committed first makes this commit fail (docs/format.md §24).

    Raises:
        CommitConflictError: the transaction was aborted meanwhile (e.g. timed out),
            (with `updates`) lost a write-write conflict, or its files' columns no longer
            read as the table's (changed meanwhile by another process in a way the files
            cannot follow, `check_written_columns`); its files are removed.
        MetastoreError: the metastore failed.
    """
    updated = write_set(f.path for f in written.committed) if updates else None
    try:
        if written.began is not None:
            check_written_columns(store, txn.table, written.row_schemas, began=written.began,
                                  what=f"write of transaction {txn.txn_id}")
        store.commit(txn, files={txn.table: written.committed}, updated=updated)
    except BaseException as e:
        # Remove files only once the transaction is known not to be committed.
        try:
            store.abort(txn, reason=f"commit failed: {type(e).__name__}: {e}")
        except CommitConflictError:
            raise e from None  # abort refused: it is committed after all, keep the files
        except IngestError as abort_error:
            e.add_note(f"Also failed to abort transaction {txn.txn_id}: {abort_error}")
            raise
        try:
            written.remove()
        except OSError as rm_error:
            e.add_note(f"Also failed to remove files of write id {txn.write_id}: {rm_error}")
        raise


@dataclass(frozen=True)
class AbortedWriteRemoval:
    """What `remove_aborted_writes` did.

    Attributes:
        removed: files removed (bucket files, their side files, hidden staging files).
        directories: delta directories removed once nothing else was left in them.
        kept: files left in those directories: listed by the committed-file manifest, or
            not a file a write makes (their directories stay).
        not_aborted: write ids left alone because they are not aborted.
    """

    removed: tuple[str, ...] = ()
    directories: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    not_aborted: tuple[int, ...] = ()


def remove_aborted_writes(store: Metastore, table: TableDefinition,
                          write_ids: Iterable[int], *,
                          storage_options: StorageOptions = None) -> AbortedWriteRemoval:
    """Remove what writes that died left in their `delta_W_W_0000` (and `delete_delta_W_W_0000`)
    directories, for each of
    `write_ids` that the metastore holds aborted, in every partition of the table.

    The directory is named by the write id, so no other writer writes into it; still, only
    files a write makes there go (`bucket_N`, its `_flush_length` side file, hidden
    `_tmp.bucket_N.*` staging files), never a file the committed-file manifest lists, and
    the directory only when nothing but its `_orc_acid_version` marker is left (removed
    last). Files of other write ids, committed or still open, are never looked at
    (docs/invariants.md, 7).

    Args:
        store: the table's metastore.
        table: the table.
        write_ids: the write ids of the dead writes.
        storage_options: the table's storage options.

    Raises:
        MetastoreError: the metastore failed.
        OSError: the storage failed (what was removed until then stays removed).
    """
    snapshot = store.snapshot(table.name)
    wanted = sorted(set(write_ids))
    # A keyed write (upsert, the stream's --mode upsert|cdc) adds a delete_delta of its id.
    aborted = {format_delta(w, w, 0, delete=delete) for w in wanted if snapshot.is_aborted(w)
               for delete in (False, True)}
    not_aborted = tuple(w for w in wanted if not snapshot.is_aborted(w))
    fs, root = table_fs(table, storage_options)
    if not aborted or not fs.exists(root):
        return AbortedWriteRemoval(not_aborted=not_aborted)
    listed = set(store.committed_files(table.name))
    removed: list[str] = []
    directories: list[str] = []
    kept: list[str] = []
    for partition in list_partitions(root, fs=fs):
        for name in sorted(aborted & set(partition.children)):
            directory = f"{partition.path}/{name}"
            left = []
            for path in sorted(str(p).rstrip("/") for p in fs.ls(directory, detail=False)):
                file_name = path.rsplit("/", 1)[-1]
                if file_name == ACID_VERSION_FILE:
                    continue
                if _made_by_a_write(file_name) and relative_path(root, _data_file(path)) \
                        not in listed:
                    _remove_file(fs, path)
                    removed.append(path)
                else:
                    left.append(path)
            kept.extend(left)
            if not left:
                # Marker last: a directory cut short keeps its name, and the next run ends it.
                _remove_file(fs, f"{directory}/{ACID_VERSION_FILE}")
                remove_empty_dirs(fs, [directory])
                directories.append(directory)
    return AbortedWriteRemoval(tuple(removed), tuple(directories), tuple(kept), not_aborted)


def _made_by_a_write(name: str) -> bool:
    """A bucket file, its side file, or a hidden staging file of one."""
    data = name.removesuffix(SIDE_FILE_SUFFIX)
    return parse_bucket_file(data) is not None or data.startswith("_tmp.bucket_")


def _data_file(path: str) -> str:
    """The data file a side file belongs to (a data file is its own)."""
    return path.removesuffix(SIDE_FILE_SUFFIX)


def _remove_file(fs: fsspec.AbstractFileSystem, path: str) -> None:
    try:
        fs.rm_file(path)
    except FileNotFoundError:
        pass  # removed meanwhile (a cleaner, or an earlier run cut short)
