"""Open the first N bytes of an ORC file: the tail at N, and a pyarrow reader limited to N.

A writer that adds intermediate footers leaves several valid tails in one file; which one a
reader sees is decided by the length it opens the file at (docs/invariants.md, 2).
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import fsspec
import pyarrow.orc as po

from ingest.errors import CorruptFileError, TailError
from ingest.orc.tail import FileTail, parse_tail, tail_bytes_needed
from ingest.orc.timestamps import SubMicroseconds, with_wide_timestamps

_FIRST_READ = 16 * 1024


class _ParsedTails:
    """Tails parsed in this process, by their exact bytes and the length they end at.

    `parse_tail` is a function of those bytes alone, so a tail whose bytes were parsed (and
    checked) before gives the same result, errors included, without decoding its messages
    again: the bytes are still read from the file on every call, so a file changed since
    reads as it is now. A table read again (a stream's next batch, a bench's next round, a
    key lookup of every upsert) re-reads hundreds of small tails; their decoding, in Python,
    cost more than pyarrow's decoding of the stripes. Bounded; safe across threads. The
    `FileTail` values are shared: nobody changes a tail in place (writers copy its messages).
    """

    def __init__(self, *, entries: int, tail_bytes: int) -> None:
        self._entries = entries
        self._tail_bytes = tail_bytes  # parsed messages take a few times their bytes
        self._held = 0
        self._items: OrderedDict[tuple[int, bool, bytes], FileTail] = OrderedDict()
        self._lock = threading.Lock()

    def parse(self, data: bytes, length: int, *, check: bool) -> FileTail:
        key = (length, check, data)
        with self._lock:
            tail = self._items.get(key)
            if tail is not None:
                self._items.move_to_end(key)
                return tail
        tail = parse_tail(data, length, check=check)  # raises: nothing is kept
        with self._lock:
            if key not in self._items:
                self._items[key] = tail
                self._held += len(data)
            while self._items and (len(self._items) > self._entries
                                   or self._held > self._tail_bytes):
                (_, _, old), _ = self._items.popitem(last=False)
                self._held -= len(old)
        return tail


_PARSED = _ParsedTails(entries=4096, tail_bytes=4 * 1024 * 1024)


def read_tail(fs: fsspec.AbstractFileSystem, path: str, length: int, *,
              check: bool = True) -> FileTail:
    """Parse the ORC tail that ends at byte `length` of the file.

    Args:
        fs: the file's filesystem.
        path: the file.
        length: where the tail ends (a flush length, or the file size).
        check: decode every nested message and check the stripe bounds (see `parse_tail`).

    Raises:
        CorruptFileError: no complete ORC tail ends at `length` (not ORC, or cut).
    """
    if length <= 0:
        raise CorruptFileError(f"Cannot read ORC file {path}: it is empty (0 bytes)", path=path,
                               offset=0)
    start = max(0, length - _FIRST_READ)
    data = fs.cat_file(path, start=start, end=length)
    if len(data) != length - start:
        raise CorruptFileError(
            f"Cannot read ORC file {path}: expected {length} bytes but the file has "
            f"{start + len(data)}", path=path, offset=start + len(data))
    needed = tail_bytes_needed(data)
    if needed is not None and needed > len(data) and needed <= length:
        start = length - needed
        data = fs.cat_file(path, start=start, end=length)
    try:
        if needed is not None and needed <= len(data):
            # Only the tail's own bytes are the key (a small file's first read holds its
            # stripes too); the same tail parses the same from any longer suffix.
            return _PARSED.parse(bytes(data[len(data) - needed:]), length, check=check)
        return parse_tail(data, length, check=check)
    except TailError as e:
        raise CorruptFileError(f"Cannot read ORC file {path} at length {length}: {e}", path=path,
                               offset=e.offset) from e


def tail_from_bytes(data: bytes, length: int, *, path: str) -> FileTail:
    """`read_tail` of bytes already read: the tail's own bytes (`tail_bytes_needed` of them)
    ending at byte `length` of the file at `path`, parsed and checked as `read_tail` does.

    Raises:
        CorruptFileError: they are not a complete ORC tail.
    """
    try:
        return _PARSED.parse(bytes(data), length, check=True)
    except TailError as e:
        raise CorruptFileError(f"Cannot read ORC file {path} at length {length}: {e}", path=path,
                               offset=e.offset) from e


class BoundedFile(io.RawIOBase):
    """A read-only view of the first `length` bytes of a file, for pyarrow's ORC reader."""

    def __init__(self, fs: fsspec.AbstractFileSystem, path: str, length: int) -> None:
        self._f = fs.open(path, "rb")
        self._length = length
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._length}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def size(self) -> int:
        return self._length

    def read(self, size: int = -1) -> bytes:
        end = self._length if size is None or size < 0 else min(self._length, self._pos + size)
        if end <= self._pos:
            return b""
        self._f.seek(self._pos)
        data = self._f.read(end - self._pos)
        self._pos += len(data)
        return data

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._f.close()
        super().close()


@contextmanager
def open_orc(fs: fsspec.AbstractFileSystem, path: str, length: int, *,
             sub_microseconds: SubMicroseconds = "warn") -> Iterator[po.ORCFile]:
    """A pyarrow ORCFile that sees only the first `length` bytes (validated first).

    TIMESTAMP columns holding values outside timestamp[ns] read as timestamp[us]
    (`ingest.orc.timestamps`; `sub_microseconds` says what digits below the microsecond do).

    Raises:
        CorruptFileError: no complete ORC tail ends at `length`.
        UnsupportedFormatError: such timestamps sit where this reader cannot decode them.
    """
    tail = read_tail(fs, path, length)
    bounded = BoundedFile(fs, path, length)
    try:
        yield with_wide_timestamps(  # type: ignore[misc]
            po.ORCFile(bounded), tail,
            lambda start, end: fs.cat_file(path, start=start, end=end), where=path,
            sub_microseconds=sub_microseconds)
    finally:
        bounded.close()
