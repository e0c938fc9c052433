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
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from ingest.acid.predicate.conditions import Domain, value_key
from ingest.spark.source._filters import to_condition

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


CASES = [
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
    (Not(IsNotNull(("d",))), [2]),
    (Not(GreaterThanOrEqual(("s",), "b")), [0, 3]),
    (Not(LessThanOrEqual(("i",), 2)), [3]),
    (Not(EqualNullSafe(("i",), None)), [0, 1, 3]),
]


@pytest.mark.parametrize(("spark_filter", "rows"), CASES)
def test_pushed_filters_keep_the_rows_sql_keeps(spark_filter: object, rows: list[int]) -> None:
    assert kept(spark_filter) == rows


def exact_domains(row: dict[str, object]) -> dict[str, Domain]:
    """One row's values as domains, as a stripe of that one row would bound them."""
    return {n: Domain.exactly(None if row[n] is None else
                              value_key(pa.scalar(row[n], SCHEMA.field(n).type)))
            for n in ("i", "s", "d", "dec")}


@pytest.mark.parametrize(("spark_filter", "rows"), CASES)
def test_a_pushed_filters_tree_may_match_every_row_it_keeps(spark_filter: object,
                                                            rows: list[int]) -> None:
    """The tree prunes by bounds: given a row's exact values it must never rule that row out
    when the expression keeps it (else a stripe holding it would be skipped)."""
    condition = to_condition(spark_filter, SCHEMA)  # type: ignore[arg-type]
    assert condition is not None
    if isinstance(spark_filter, StringStartsWith):
        assert condition.tree is None  # no bounds: left out of pruning, still filtered
        return
    assert condition.tree is not None
    may = [pos for pos, row in enumerate(TABLE.to_pylist())
           if condition.tree.may_match(exact_domains(row))]
    assert set(rows) <= set(may)
    if isinstance(spark_filter, EqualTo | GreaterThan | LessThan | IsNull):
        assert may == rows  # not vacuous: a bare comparison rules out every other row


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
