"""StripeDecoder and ahead: stripes decoded on the worker thread in reading order, the source
drawn at most `depth` items ahead, decoding errors reported where the stripe is used."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as po
import pytest

from ingest.acid.read._stripe_decoder import StripeDecoder, ahead


def _orc(tmp_path: Path, stripes: int) -> po.ORCFile:
    path = tmp_path / "f.orc"
    table = pa.table({"a": pa.array(range(stripes * 1000), pa.int64())})
    po.write_table(table, str(path), stripe_size=1)  # as small as the writer allows
    return po.ORCFile(str(path))


@pytest.mark.parametrize("threaded", [True, False])
def test_stripes_come_back_in_order(tmp_path: Path, threaded: bool) -> None:
    orc = _orc(tmp_path, 5)
    decoder = StripeDecoder(threaded=threaded)
    try:
        futures = [decoder.submit(orc, i, ["a"]) for i in range(orc.nstripes)]
        got = pa.Table.from_batches([f.result() for f in futures])
    finally:
        decoder.close()
    assert got.column("a").to_pylist() == list(range(orc.nrows))
    assert decoder.depth == (3 if threaded else 0)


def test_a_decoding_error_is_raised_by_result(tmp_path: Path) -> None:
    orc = _orc(tmp_path, 1)
    decoder = StripeDecoder(threaded=True)
    try:
        future = decoder.submit(orc, 0, ["no_such_column"])
        with pytest.raises((pa.ArrowException, ValueError, KeyError, OSError)):
            future.result()
    finally:
        decoder.close()
    assert not any(t.name.startswith("ingest-decode") for t in threading.enumerate())


def test_ahead_draws_the_source_depth_items_early_and_no_further() -> None:
    drawn: list[int] = []

    def source() -> Iterator[int]:
        for i in range(6):
            drawn.append(i)
            yield i

    seen = []
    for item in ahead(source(), 2):
        seen.append((item, len(drawn)))
    assert [i for i, _ in seen] == list(range(6))
    assert [n for _, n in seen] == [3, 4, 5, 6, 6, 6]  # item k is yielded once k+2 was drawn


def test_call_aside_runs_beside_the_decodes_and_close_stops_it(tmp_path: Path) -> None:
    orc = _orc(tmp_path, 2)
    decoder = StripeDecoder(threaded=True)
    release = threading.Event()
    try:
        # The aside call blocks until released: a decode submitted after it still finishes,
        # so the two run on different threads.
        # Its cap and the deadlines are generous: a decode slower than the cap under load
        # would end the aside on its own and fail the check below for nothing.
        aside = decoder.call_aside(lambda: (release.wait(180), threading.current_thread().name))
        decoded = decoder.submit(orc, 0, ["a"]).result(timeout=180)
        assert not aside.done()
        release.set()
        assert aside.result(timeout=180)[1].startswith("ingest-deletes")
        assert decoded.num_rows == orc.read_stripe(0).num_rows
    finally:
        release.set()
        decoder.close()
    assert not any(t.name.startswith(("ingest-decode", "ingest-deletes"))
                   for t in threading.enumerate())


def test_call_aside_unthreaded_runs_at_once_and_keeps_the_error() -> None:
    decoder = StripeDecoder(threaded=False)
    assert decoder.call_aside(lambda: 7).result() == 7
    failed = decoder.call_aside(lambda: 1 // 0)
    with pytest.raises(ZeroDivisionError):
        failed.result()


def test_ahead_with_rows_draws_small_items_further_up_to_depth_largest_items() -> None:
    sizes = [100, 1, 1, 1, 1, 1, 100, 1, 1, 100, 100]
    drawn: list[int] = []

    def source() -> Iterator[int]:
        for i, _ in enumerate(sizes):
            drawn.append(i)
            yield i

    seen = [(item, len(drawn)) for item in ahead(source(), 1, rows=lambda i: sizes[i])]
    assert [i for i, _ in seen] == list(range(len(sizes)))
    # Depth 1: the items ahead hold at most 1 x 100 rows (the largest so far). Item 0 leaves
    # with one item ahead, as without `rows`; the small items 1-5 wait until the next large
    # one (6) is drawn, so it decodes while they are filtered.
    assert [n for _, n in seen] == [2, 7, 7, 7, 7, 7, 8, 10, 10, 11, 11]


def test_ahead_with_rows_of_equal_items_is_ahead_by_depth() -> None:
    drawn: list[int] = []

    def source() -> Iterator[int]:
        for i in range(6):
            drawn.append(i)
            yield i

    seen = [len(drawn) for _ in ahead(source(), 2, rows=lambda i: 10)]
    assert seen == [3, 4, 5, 6, 6, 6]


def test_ahead_with_rows_never_holds_more_than_most_items() -> None:
    drawn: list[int] = []

    def source() -> Iterator[int]:
        for i in range(10):
            drawn.append(i)
            yield i

    seen = [len(drawn) for _ in ahead(source(), 1, rows=lambda i: 1 if i == 0 else 0,
                                      most=3)]
    assert seen == [4, 5, 6, 7, 8, 9, 10, 10, 10, 10]
