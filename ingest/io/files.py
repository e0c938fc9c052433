"""File primitives the ACID layer needs beyond fsspec's: durable flush, truncate, resolve."""

from __future__ import annotations

import io
import os
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractBufferedFile

from ingest.io import storage


def resolve(
    path: str, fs: fsspec.AbstractFileSystem | None,
) -> tuple[fsspec.AbstractFileSystem, str]:
    """(filesystem, path within it) for a URL or a plain path: `fs` when given (made with the
    table's storage options by the caller), else the URL's filesystem with fsspec's own
    config and environment alone (`ingest.io.storage.url_to_fs`)."""
    if fs is not None:
        return fs, fs._strip_protocol(path)
    return storage.url_to_fs(str(path))


def durable_flush(f: Any) -> None:
    """Flush Python buffers and, where the file has a descriptor, fsync (docs/invariants.md, 1)."""
    f.flush()
    try:
        fd = f.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        return
    os.fsync(fd)


# Storage where a file can be reopened and appended to; object stores (s3, gs, abfs) cannot.
_APPENDABLE_PROTOCOLS = frozenset({"file", "local", "memory", "hdfs"})


def can_append(fs: fsspec.AbstractFileSystem | str) -> bool:
    """Whether files on fs can be reopened and appended to (local, memory, HDFS; not object stores).

    Args:
        fs: a filesystem, or a URL or plain path. A URL is judged by its protocol alone, so
            no filesystem is created (s3:// is refused even where s3fs is not installed).
    """
    if isinstance(fs, str):
        protocol = fs.split("://", 1)[0].lower() if "://" in fs else "file"
        return protocol in _APPENDABLE_PROTOCOLS
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return isinstance(fs, LocalFileSystem) or bool(_APPENDABLE_PROTOCOLS & set(protocols))


def move_directory(fs: fsspec.AbstractFileSystem, source: str, target: str) -> None:
    """Move every file below `source` to the same place below `target`.

    On a filesystem with directories this is one rename. An object store has no directories
    and no rename: each file is copied, then the sources are removed, so a crash leaves both
    copies (callers name `target` so that readers ignore it until a commit says otherwise).

    Raises:
        OSError: the storage failed.
    """
    source, target = source.rstrip("/"), target.rstrip("/")
    if can_append(fs):
        fs.mv(source, target, recursive=True)
        return
    # Markers (`_orc_acid_version`, `_metadata_acid`) last: a half-copied target never
    # looks like a finished directory.
    files = sorted((str(f) for f in fs.find(source)),
                   key=lambda f: f.rsplit("/", 1)[-1].startswith("_"))
    for f in files:
        fs.copy(f, target + f[len(source):])
    fs.rm(files)


# Filesystems whose "xb" mode is checked by the store when the upload completes (S3's
# `If-None-Match: *`, honoured by AWS, MinIO and moto): no request is needed to create a
# file that must not exist. Elsewhere an object store gets an existence check first.
_EXCLUSIVE_AT_COMPLETION = frozenset({"s3", "s3a"})


def creates_exclusively(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether the store itself refuses to complete an upload whose name is taken (S3), so
    two writers of one name can never replace each other's object (`create_new`)."""
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return bool(_EXCLUSIVE_AT_COMPLETION & set(protocols))


def create_new(fs: fsspec.AbstractFileSystem, path: str) -> Any:
    """Open `path` for writing a file that must not exist yet.

    On S3 the check is the store's: the upload completes only if no object has the name
    (`If-None-Match: *`), so two writers of one name never replace each other's object and
    no HEAD or LIST is spent first; the refusal comes when the file is closed. Elsewhere the
    name is checked before it is opened (and opened with O_EXCL where the backend has mode
    "x", as local files do).

    Raises:
        FileExistsError: `path` exists (on S3: raised by `close()` instead, nothing stored).
        OSError: the storage failed.
    """
    if creates_exclusively(fs):
        return fs.open(path, "xb")
    if fs.exists(path):
        raise FileExistsError(f"Cannot create file, it already exists: {path}")
    try:
        return fs.open(path, "xb")  # a local file: O_EXCL closes the race too
    except (ValueError, NotImplementedError):  # a backend without mode "x"
        return fs.open(path, "wb")


def has_directories(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether an empty directory can exist on fs (not on object stores, whose directories
    are only the common prefixes of their keys)."""
    return can_append(fs)


def discard(f: Any) -> None:
    """Close a file opened for writing without storing what is still buffered.

    A local file keeps what was written (recovery and cleaning judge it). An object-store
    file (fsspec's buffered files) stores nothing until it is closed, and closing it would
    upload the partial bytes as a whole object: it is discarded instead (a multipart upload
    aborted), and marked closed so that garbage collection does not upload it either. A
    storage failure while discarding is ignored: nothing of the file became an object.
    """
    if isinstance(f, AbstractBufferedFile) and f.mode != "rb":
        try:
            f.discard()
        except Exception:  # noqa: BLE001 - best effort: the upload was never completed
            pass
        f.closed = True
        return
    f.close()


def truncate(fs: fsspec.AbstractFileSystem, path: str, length: int) -> None:
    """Cut a file to `length` bytes, durably."""
    if isinstance(fs, LocalFileSystem):
        with open(path, "r+b") as f:  # noqa: PTH123 - local fast path, fsspec has no truncate
            f.truncate(length)
            f.flush()
            os.fsync(f.fileno())
        return
    # No truncate in fsspec: write the kept bytes to a temporary file, then rename it over the
    # original, so a crash never leaves the file emptied (Hive's recoverFile does the same).
    data = fs.cat_file(path, start=0, end=length)
    temporary = f"{path}.ingest-truncate.tmp"
    with fs.open(temporary, "wb") as f:
        f.write(data)
    fs.mv(temporary, path)
