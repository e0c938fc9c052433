"""merge_statistics: the merged statistics of two files are those ORC C++ writes for both."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal

import pyarrow as pa
import pyarrow.orc as po

from ingest.orc import Message, merge_statistics, parse_tail
from ingest.orc.proto_fields import ColumnStatistics


def _file_statistics(table: pa.Table) -> list[Message]:
    sink = io.BytesIO()
    po.write_table(table, sink)
    data = sink.getvalue()
    return parse_tail(data, len(data)).statistics


def _table(lo: int, hi: int) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table({
        "i": pa.array(ids, pa.int64()),
        "d": pa.array([i / 4 for i in ids], pa.float64()),
        "s": pa.array([f"s{i:04d}" if i % 3 else None for i in ids]),
        "b": pa.array([i % 2 == 0 for i in ids]),
        "dec": pa.array([Decimal(i) / 100 for i in ids], pa.decimal128(10, 2)),
        "day": pa.array([dt.date(2026, 1, 1) + dt.timedelta(days=i) for i in ids]),
        "ts": pa.array([dt.datetime(2026, 1, 1, 0, 0, i % 60, i) for i in ids],
                       pa.timestamp("us")),
        "bin": pa.array([bytes(i % 7) for i in ids], pa.binary()),
        "l": pa.array([[i] * (i % 4) for i in ids], pa.list_(pa.int64())),
    })


def _comparable(m: Message) -> list[tuple[int, object]]:
    """The fields but the size on disk; decimal statistics as numbers (7194.0 == 7194)."""
    out: list[tuple[int, object]] = []
    for number, _, value in m.fields:
        if number == ColumnStatistics.DECIMAL_STATISTICS:
            assert isinstance(value, bytes)
            decimals = Message.decode(value)
            out.append((number, sorted((n, Decimal(v.decode()))  # type: ignore[union-attr]
                                       for n, _, v in decimals.fields)))
        elif number != ColumnStatistics.BYTES_ON_DISK:
            out.append((number, value))
    return sorted(out, key=lambda f: f[0])


def test_merged_statistics_equal_those_of_the_whole() -> None:
    left, right = _file_statistics(_table(0, 500)), _file_statistics(_table(500, 1200))
    whole = _file_statistics(_table(0, 1200))
    assert len(left) == len(right) == len(whole)
    for a, b, expected in zip(left, right, whole, strict=True):
        merged = merge_statistics(a, b)
        assert _comparable(merged) == _comparable(expected)
        assert merge_statistics(b, a).uint(ColumnStatistics.NUMBER_OF_VALUES) == expected.uint(
            ColumnStatistics.NUMBER_OF_VALUES)
