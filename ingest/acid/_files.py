"""File primitives the ACID layer needs beyond fsspec's: durable flush, truncate, resolve."""

from __future__ import annotations

import io
import os
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem


def resolve(
    path: str, fs: fsspec.AbstractFileSystem | None,
) -> tuple[fsspec.AbstractFileSystem, str]:
    """(filesystem, path within it) for a URL or a plain path."""
    if fs is not None:
        return fs, fs._strip_protocol(path)
    fs, stripped = fsspec.core.url_to_fs(str(path))
    return fs, stripped


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
