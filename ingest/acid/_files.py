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
    """Flush Python buffers and, where the file has a descriptor, fsync (invariant 1)."""
    f.flush()
    try:
        fd = f.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        return
    os.fsync(fd)


def can_append(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether files on fs can be reopened and appended to (local, memory; not object stores)."""
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return isinstance(fs, LocalFileSystem) or bool({"memory", "hdfs", "file"} & set(protocols))


def truncate(fs: fsspec.AbstractFileSystem, path: str, length: int) -> None:
    """Cut a file to `length` bytes, durably."""
    if isinstance(fs, LocalFileSystem):
        with open(path, "r+b") as f:  # noqa: PTH123 - local fast path, fsspec has no truncate
            f.truncate(length)
            f.flush()
            os.fsync(f.fileno())
        return
    data = fs.cat_file(path, start=0, end=length)
    with fs.open(path, "wb") as f:
        f.write(data)
