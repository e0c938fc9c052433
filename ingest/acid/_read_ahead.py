"""Decode the next stripe while the caller filters this one: an iterator run one item ahead
on a worker thread (pyarrow's ORC decoding and compute release the GIL).

Bounded: at most `depth` items wait in the queue. Errors raised by the worker reach the caller
at the item where they happened; closing the returned iterator stops and joins the worker,
which closes the source iterator (and the files it holds open) in its own thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")

_DONE = object()


def read_ahead(items: Iterator[T], *, depth: int = 1) -> Iterator[T]:
    """Yield what `items` yields, computing up to `depth` items ahead on a thread.

    Raises:
        Whatever `items` raises, at the point it raised.
    """
    slots: queue.Queue[tuple[object, BaseException | None]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def work() -> None:
        try:
            for item in items:
                slots.put((item, None))
                if stop.is_set():
                    return
            slots.put((_DONE, None))
        except BaseException as e:  # handed to the consumer, which re-raises it
            slots.put((_DONE, e))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=work, name="ingest-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            item, error = slots.get()
            if error is not None:
                raise error
            if item is _DONE:
                return
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        # Unblock a worker waiting to put, until it sees `stop` and ends.
        while worker.is_alive():
            try:
                slots.get(timeout=0.05)
            except queue.Empty:
                pass
        worker.join()


__all__ = ["read_ahead"]
