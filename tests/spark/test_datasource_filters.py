"""Spark filters pushed into the hive-acid reader keep SQL's answers, nulls included; a filter
that cannot be answered exactly is left to Spark. No SparkSession needed."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    In,
    IsNull,
    LessThan,
    Not,
    StringStartsWith,
)

from ingest.spark._datasource_filters import to_condition

SCHEMA = pa.schema([("i", pa.int32()), ("s", pa.string()), ("d", pa.date32()),
                    ("dec", pa.decimal128(5, 2)), ("f", pa.float64()),
                    ("ts", pa.timestamp("ns")), ("st", pa.struct([("x", pa.int32())]))])
TABLE = pa.table({
    "i": pa.array([1, 2, None, 4], pa.int32()),
    "s": ["ab", None, "b", "abc"],
    "d": [dt.date(2026, 1, 1), dt.date(2026, 1, 2), None, dt.date(2026, 1, 4)],
    "dec": [decimal.Decimal("1.50"), None, decimal.Decimal("2.00"), decimal.Decimal("0.10")],
    "f": [1.0, float("nan"), None, 2.0],
    "ts": [None] * 4, "st": [None] * 4,
}, schema=SCHEMA)


def kept(spark_filter: object) -> list[int]:
    """Row positions the pushed condition keeps."""
    condition = to_condition(spark_filter, SCHEMA)  # type: ignore[arg-type]
    assert condition is not None
    mask = TABLE.append_column("_pos", pa.array(range(TABLE.num_rows))).filter(
        condition.expression)
    return mask.column("_pos").to_pylist()


@pytest.mark.parametrize(("spark_filter", "rows"), [
    (EqualTo(("i",), 2), [1]),
    (Not(EqualTo(("i",), 2)), [0, 3]),              # null stays out under NOT
    (In(("i",), (1, 4)), [0, 3]),
    (Not(In(("i",), (1, 4))), [1]),                 # NOT IN: the null row is not kept
    (Not(In(("i",), (1, None))), []),               # a null in the list: never true
    (EqualNullSafe(("i",), None), [2]),
    (Not(EqualNullSafe(("i",), 2)), [0, 2, 3]),     # <=> is never null
    (GreaterThan(("d",), dt.date(2026, 1, 1)), [1, 3]),
    (LessThan(("dec",), decimal.Decimal("2")), [0, 3]),
    (StringStartsWith(("s",), "ab"), [0, 3]),
    (IsNull(("s",)), [1]),
])
def test_pushed_filters_keep_the_rows_sql_keeps(spark_filter: object, rows: list[int]) -> None:
    assert kept(spark_filter) == rows


@pytest.mark.parametrize("spark_filter", [
    EqualTo(("f",), 1.0),                 # NaN compares differently in Spark and Arrow
    EqualTo(("ts",), dt.datetime(2026, 1, 1)),
    EqualTo(("st", "x"), 1),              # nested column
    EqualTo(("i",), "1"),                 # literal of another type
    EqualTo(("i",), 2**40),               # does not fit INT
    EqualTo(("nope",), 1),
])
def test_filters_not_answered_exactly_are_left_to_spark(spark_filter: object) -> None:
    assert to_condition(spark_filter, SCHEMA) is None  # type: ignore[arg-type]
