"""The files one write transaction makes, and their removal when it does not commit.

`writing` opens the transaction and tracks every directory and bucket file written inside it;
an error removes them before the transaction is aborted, and `commit` removes them only once
the transaction is known not to be committed. So a failed load or delete leaves nothing behind
(docs/invariants.md, 7). `commit` records each file's manifest entry with the commit
(docs/format.md §20). Writes bucket files through `ingest.acid.BucketWriter`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import fsspec
import pyarrow as pa

from ingest.acid import has_directories
from ingest.acid.committed import CommittedFile
from ingest.acid.names import bucket_file_name, write_acid_version_file
from ingest.acid.writer import BucketFileOptions, BucketWriter, Compression
from ingest.errors import CommitConflictError, IngestError
from ingest.table._open import table_fs
from ingest.txn import Metastore, TableDefinition, Transaction


class Written:
    """Directories and files a transaction created, to remove if it does not commit, and
    the manifest entries its commit records."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str | None = None) -> None:
        self.fs = fs
        # The table root, for the entries' relative paths (required to write bucket files).
        self.root = None if root is None else root.rstrip("/")
        self.directories: list[str] = []  # our delta / delete_delta dirs (named by write id)
        self.parents: list[str] = []  # partition dirs this call created
        self.files: list[str] = []
        self.committed: list[CommittedFile] = []
        self.bytes = 0

    def make_directory(self, parent: str, directory: str) -> None:
        """Create `directory` (and its missing parents) with its `_orc_acid_version` file.

        Raises:
            IngestError: `directory` already exists: some writer this metastore does not
                know wrote it. It is left as it is, and never removed by `remove`.
        """
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
                     deletes: bool = False) -> None:
        """Write `directory/bucket_N`: `data` as insert events, or (deletes=True) as the keys
        of delete events (originalTransaction, bucket, rowId); count its files and bytes and
        keep its manifest entry.

        Raises:
            ValueError: this Written was made without the table root.
        """
        if self.root is None:
            raise ValueError("Cannot write bucket files: Written needs the table root to "
                             "record their manifest entries")
        path = f"{directory}/{bucket_file_name(bucket_id)}"
        writer = BucketWriter.create(path, BucketFileOptions(
            write_id=write_id, row_schema=row_schema, bucket_id=bucket_id,
            kind="delete" if deletes else "insert", compression=compression), fs=self.fs)
        self.files.append(path)
        with writer:
            if deletes:
                writer.write_deletes(data)
            else:
                writer.write(data)
        self.bytes += writer.bytes_written
        self.committed.append(writer.committed_file(relative_path(self.root, path)))

    def remove(self) -> None:
        """Remove every directory written, then the partition directories made for them."""
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
            agent: str) -> Iterator[tuple[Transaction, Written]]:
    """Open a transaction and track what it writes; an error inside the block removes the
    files and aborts it (`fail`). Committing (`commit`) or aborting an empty write is the
    caller's, after the block."""
    txn = store.open_transaction(defn, agent=agent)
    written = Written(fs, table_fs(defn)[1])
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


def commit(store: Metastore, txn: Transaction, written: Written) -> None:
    """Commit `txn` with the manifest entries of its files; if that fails and it is not
    committed after all, remove its files.

    Raises:
        CommitConflictError: the transaction was aborted meanwhile (e.g. timed out).
        MetastoreError: the metastore failed.
    """
    try:
        store.commit(txn, files={txn.table: written.committed})
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
