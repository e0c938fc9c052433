"""read_ahead: same items in order, errors where they happened, an early stop closes the
source (and so the files it holds open)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from ingest.acid._read_ahead import read_ahead


def test_items_come_in_order_from_another_thread() -> None:
    threads: set[str] = set()

    def source() -> Iterator[int]:
        for i in range(50):
            threads.add(threading.current_thread().name)
            yield i

    assert list(read_ahead(source())) == list(range(50))
    assert threads == {"ingest-read-ahead"}


def test_an_error_reaches_the_caller_after_the_items_before_it() -> None:
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("stripe 3 is damaged")

    got = []
    with pytest.raises(ValueError, match="stripe 3 is damaged"):
        for item in read_ahead(source()):
            got.append(item)
    assert got == [1, 2]


def test_stopping_early_closes_the_source_and_ends_the_worker() -> None:
    closed = threading.Event()
    produced = []

    def source() -> Iterator[int]:
        try:
            for i in range(1000):
                produced.append(i)
                yield i
        finally:
            closed.set()

    stream = read_ahead(source(), depth=1)
    assert [next(stream), next(stream)] == [0, 1]
    stream.close()
    assert closed.is_set()
    assert len(produced) <= 5  # bounded: at most a few items ahead, never the whole source
    assert not any(t.name == "ingest-read-ahead" for t in threading.enumerate())
