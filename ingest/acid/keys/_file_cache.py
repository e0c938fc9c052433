"""A process-wide cache of what is decoded from committed files, which never change once
committed: a file's key-index entries and a delete-delta file's events, each kept under the
identity its commit recorded (path, length, tail hash; docs/format.md §20, §24). A caller
puts a value only after checking the file against its manifest entry in the same read, and
looks it up with the entry of the read at hand, so a changed, replaced or uncommitted file
never meets a cached value. Bounded by bytes, least recently used first out.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")

_DEFAULT_BYTES = 1 << 30


def _limit_bytes() -> int:
    """INGEST_FILE_CACHE_BYTES, default 1 GiB (0 turns the cache off)."""
    try:
        return max(0, int(os.environ.get("INGEST_FILE_CACHE_BYTES", _DEFAULT_BYTES)))
    except ValueError:
        return _DEFAULT_BYTES


class FileCache:
    """Values by key, at most `limit_bytes` of them (as their `size` said), LRU."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._values: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> object | None:
        with self._lock:
            found = self._values.get(key)
            if found is None:
                return None
            self._values.move_to_end(key)
            return found[0]

    def put(self, key: Hashable, value: object, size: int) -> None:
        if size > self.limit_bytes:
            return
        with self._lock:
            old = self._values.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._values[key] = (value, size)
            self._bytes += size
            while self._bytes > self.limit_bytes:
                _, (_, dropped) = self._values.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._bytes = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get_or_make(self, key: Hashable, make: Callable[[], tuple[T, int] | None]) -> T | None:
        """The cached value of `key`, else `make()`'s (value, bytes), cached; None (not
        cached) when `make` returns None."""
        found = self.get(key)
        if found is not None:
            return found  # type: ignore[return-value]
        made = make()
        if made is None:
            return None
        self.put(key, made[0], made[1])
        return made[0]


FILES = FileCache(_limit_bytes())
"""The process's cache."""


__all__ = ["FILES", "FileCache"]
