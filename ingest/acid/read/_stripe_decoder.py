"""Decode stripes on one worker thread while the reading thread opens the next file, checks its
tail and checksums, and filters the stripe decoded before (pyarrow releases the GIL while it
decodes); a second worker reads the next bucket's delete events meanwhile (`call_aside`), so
they are not on the decoding thread's path. A stripe's future is resolved in reading order, at
most `depth` stripes ahead, or further while the stripes ahead are small (`ahead`), so memory
stays bounded by a few of the largest stripes.

Knows pyarrow's ORC reader, not ACID: `_merge` decides which stripes and columns to read.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.orc as po

T = TypeVar("T")


def finished(value: pa.RecordBatch) -> Future[pa.RecordBatch]:
    """A future that already holds `value` (rows built on the reading thread)."""
    future: Future[pa.RecordBatch] = Future()
    future.set_result(value)
    return future


class StripeDecoder:
    """`submit(orc, i, columns)` decodes stripe i on the worker thread, or at once when not
    `threaded`; `close()` cancels what has not started and waits for the rest."""

    def __init__(self, *, threaded: bool) -> None:
        self._pool = (ThreadPoolExecutor(1, thread_name_prefix="ingest-decode") if threaded
                      else None)
        self._aside = (ThreadPoolExecutor(1, thread_name_prefix="ingest-deletes") if threaded
                       else None)

    @property
    def depth(self) -> int:
        """How many stripes the reading thread may hand out ahead of the one it filters: a
        few, so a large stripe's filtering overlaps the decoding of several small ones."""
        return 3 if self._pool is not None else 0

    def call_aside(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """`fn(*args)` on the second worker, in order with its other calls but alongside the
        decodes (at once when not threaded): work the next stripes do not wait for."""
        return _call(self._aside, fn, *args)

    def submit(self, orc: po.ORCFile, stripe: int, columns: list[str]
               ) -> Future[pa.RecordBatch]:
        if self._pool is not None:
            return self._pool.submit(orc.read_stripe, stripe, columns=columns)
        future: Future[pa.RecordBatch] = Future()
        try:
            future.set_result(orc.read_stripe(stripe, columns=columns))
        except Exception as e:  # noqa: BLE001 - raised where the caller resolves it
            future.set_exception(e)
        return future

    def close(self) -> None:
        for pool in (self._pool, self._aside):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)


def _call(pool: ThreadPoolExecutor | None, fn: Callable[..., T], *args: Any) -> Future[T]:
    if pool is not None:
        return pool.submit(fn, *args)
    future: Future[T] = Future()
    try:
        future.set_result(fn(*args))
    except BaseException as e:  # raised where the caller resolves it
        future.set_exception(e)
    return future


def ahead(items: Iterator[T], depth: int, *, rows: Callable[[T], int] | None = None,
          most: int = 32) -> Iterator[T]:
    """`items`, each yielded once `depth` later items have been drawn from the source: the
    source's work for those (opening files, submitting decodes) is done before the caller
    waits for this one.

    With `rows` (an item's row count), it draws further ahead while the items drawn and not
    yet yielded hold at most `depth` times the rows of the largest item so far (and number at
    most `most`): the memory of a few of the largest stripes, as without it, but many small
    stripes (a bucket's deltas) no longer keep the decoder waiting for a large one after them
    (the next bucket's base).
    """
    window: deque[T] = deque()
    held = largest = 0
    for item in items:
        window.append(item)
        n = rows(item) if rows is not None else 0
        held += n
        largest = max(largest, n)
        while len(window) > depth and (rows is None or held > depth * largest
                                       or len(window) > most):
            first = window.popleft()
            held -= rows(first) if rows is not None else 0
            yield first
    while window:
        yield window.popleft()


__all__ = ["StripeDecoder", "ahead", "finished"]
