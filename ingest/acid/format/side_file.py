"""The `<bucket file>_flush_length` side file: 8-byte big-endian lengths, the last one wins.

Mirrors Hive's OrcAcidUtils.getLastFlushLength / OrcRecordUpdater: a trailing partial value
(a torn write) is ignored; Hive 3 starts a new side file with a 0 entry.
"""

from __future__ import annotations

import struct

import fsspec

from ingest.acid.format.names import side_file_path


def encode_length(length: int) -> bytes:
    return struct.pack(">q", length)


def read_flush_lengths(fs: fsspec.AbstractFileSystem, path: str) -> list[int] | None:
    """Every complete entry of the side file of `path`, or None when there is no side file."""
    side = side_file_path(path)
    try:
        data = fs.cat_file(side)
    except FileNotFoundError:
        return None
    whole = len(data) - len(data) % 8
    return [v for (v,) in struct.iter_unpack(">q", data[:whole])]


def last_flush_length(fs: fsspec.AbstractFileSystem, path: str) -> int | None:
    """The authoritative flush length, or None when there is no side file.

    A side file with no complete entry gives 0: nothing in the file is readable yet
    (Hive's getLastFlushLength returns -1 there).
    """
    lengths = read_flush_lengths(fs, path)
    if lengths is None:
        return None
    return lengths[-1] if lengths else 0
