"""The WHERE language: what it matches (SQL null semantics) and how bad input is reported."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from ingest.acid.predicate.where import parse_predicate, parse_where
from ingest.errors import ConfigError

SCHEMA = pa.schema([
    ("id", pa.int64()), ("value", pa.string()), ("d", pa.date32()),
    ("ts", pa.timestamp("ns")), ("f", pa.float64()), ("b", pa.bool_()),
    ("dec", pa.decimal128(10, 2)), ("i8", pa.int8()), ("bin", pa.binary()),
    ("lst", pa.list_(pa.int32())), ("My Col", pa.string()), ("utc", pa.timestamp("us", "UTC")),
])

TABLE = pa.table({
    "id": [1, 2, None, 4],
    "value": ["a", "it's", "c", None],
    "d": [dt.date(2026, 1, 1), dt.date(2026, 1, 2), None, dt.date(2026, 1, 4)],
    "ts": pa.array([dt.datetime(2026, 1, 1, 10), None, dt.datetime(2026, 1, 1, 12),
                    dt.datetime(2026, 1, 2)], pa.timestamp("ns")),
    "f": [1.5, 2.5, None, 0.0],
    "b": [True, False, None, True],
    "dec": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("3"),
                     decimal.Decimal("-1")], pa.decimal128(10, 2)),
    "i8": pa.array([1, 2, -3, None], pa.int8()),
    "bin": [b"a", b"b", None, b"d"],
    "lst": [[1], [], None, [2]],
    "My Col": ["x", "y", "x", None],
    "utc": pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.UTC), None, None, None],
                    pa.timestamp("us", "UTC")),
}, schema=SCHEMA)


def matches(where: str) -> list[int]:
    """Row positions (0..3) the predicate keeps."""
    indexed = TABLE.append_column("_pos", pa.array(range(TABLE.num_rows)))
    return indexed.filter(parse_where(where, SCHEMA)).column("_pos").to_pylist()


@pytest.mark.parametrize(("where", "rows"), [
    ("id = 1", [0]),
    ("id != 1", [1, 3]),
    ("id <> 1", [1, 3]),
    ("id < 2", [0]),
    ("id <= 2", [0, 1]),
    ("id > 2", [3]),
    ("id >= 2", [1, 3]),
    ("3 < id", [3]),
    ("-1 <= i8", [0, 1]),
    ("i8 = -3", [2]),
    ("id IN (1, 4)", [0, 3]),
    ("id BETWEEN 2 AND 4", [1, 3]),
    ("value = 'it''s'", [1]),
    ("value IS NULL", [3]),
    ("value IS NOT NULL AND id IS NULL", [2]),
    ("d >= DATE '2026-01-02'", [1, 3]),
    ("d = '2026-01-01'", [0]),
    ("ts < TIMESTAMP '2026-01-01 11:00:00'", [0]),
    ("ts >= '2026-01-01T12:00'", [2, 3]),
    ("ts >= DATE '2026-01-02'", [3]),
    ("utc = TIMESTAMP '2026-01-01 00:00:00'", [0]),
    ("f > 1", [0, 1]),
    ("f = 1.5", [0]),
    ("f < 1e0", [3]),
    ("dec > 1.2", [0, 2]),
    ("dec = 3", [2]),
    ("b = TRUE", [0, 3]),
    ("b", [0, 3]),
    ("NOT b", [1]),
    ("b = FALSE OR id = 4", [1, 3]),
    ("bin = 'b'", [1]),
    ("lst IS NULL", [2]),
    ("`My Col` = 'x'", [0, 2]),
    ("ID = 1 and VALUE = 'a'", [0]),
    ("(id = 1 OR id = 2) AND NOT value = 'a'", [1]),
    ("id = 1 OR id = 2 AND value = 'a'", [0]),  # AND binds tighter than OR
    ("NOT (id = 1 OR id = 2)", [3]),
    ("id = 1.5", []),
])
def test_matches(where: str, rows: list[int]) -> None:
    assert matches(where) == rows


@pytest.mark.parametrize(("where", "rows"), [
    ("NOT id = 1", [1, 3]), ("id NOT IN (1, 2)", [3]), ("NOT id IN (1, 2)", [3]),
    ("id NOT BETWEEN 1 AND 2", [3]), ("NOT (id < 3)", [3]), ("NOT NOT NOT id = 1", [1, 3]),
])
def test_a_null_never_matches_even_under_not(where: str, rows: list[int]) -> None:
    """SQL three-valued logic: row 2 (id NULL) must not be deleted by a negated condition."""
    assert matches(where) == rows


def test_columns_are_reported_in_schema_spelling() -> None:
    predicate = parse_predicate("VALUE = 'a' OR id = 1 OR value IS NULL", SCHEMA)
    assert predicate.columns == ("value", "id")
    assert predicate.text == "VALUE = 'a' OR id = 1 OR value IS NULL"


@pytest.mark.parametrize(("where", "message", "hint"), [
    ("id = ", "expected a value after '=' at position 5", None),
    ("", "expected a condition at position 0", None),
    ("id", "expected a comparison (=, <>, <, <=, >, >=), IN, BETWEEN or IS [NOT] NULL after "
           "column 'id', found the end of the text at position 2", None),
    ("id = 'x'", "column 'id' is BIGINT but 'x' is a string at position 5",
     "compare 'id' with a number, e.g. id = 3"),
    ("value = 3", "column 'value' is STRING but 3 is an integer at position 8",
     "quote the value: value = '3'"),
    ("value = abc", "expected a value after '=', found 'abc' at position 8",
     "write strings in single quotes ('abc'); a comparison must have a column on one side "
     "and a value on the other"),
    ("nope = 1", "unknown column 'nope' at position 0",
     "columns are: id, value, d, ts, f, b, dec, i8, bin, lst, My Col, utc"),
    ("id = NULL", "NULL cannot be compared with 'id' at position 5",
     "use id IS NULL or id IS NOT NULL"),
    ("i8 = 300", "300 is out of range for column 'i8' (TINYINT) at position 5",
     "TINYINT holds -128..127"),
    ("d = '2026-13-01'", "'2026-13-01' is not a valid DATE", "write DATE '2026-01-31'"),
    ("id = 1 AND", "expected a column name, found the end of the text at position 10", None),
    ("(id = 1", "expected ')' after the condition opened at position 0, found the end of the "
                "text at position 7", None),
    ("id = 1)", "unexpected ')' at position 6", None),
    ("id IN ()", "expected a value after '(', found ')' at position 7", None),
    ("id BETWEEN 1", "expected AND after BETWEEN 1, found the end of the text at position 12",
     "write: x BETWEEN 1 AND 10"),
    ("b = 1", "column 'b' is BOOLEAN but 1 is an integer", "write b = TRUE or b = FALSE"),
    ("value = 'abc", "unterminated string at position 8",
     "close the string with ' (write '' for a quote inside it)"),
    ("id = 1 id = 2", "unexpected 'id' at position 7", None),
    ("id IS 3", "expected NULL after IS, found '3' at position 6", None),
    ("id == 1", "expected a value after '=', found '=' at position 4",
     "write the operator once, e.g. id = 3"),
    ("id = 1; drop table", "unexpected character ';' at position 6", None),
    ("lst = 1", "column 'lst' is ARRAY, which cannot be compared with a value",
     "only IS [NOT] NULL works on ARRAY, MAP and STRUCT columns"),
    ("d = DATE 3", "expected a quoted value after DATE, found '3' at position 9", None),
    ("id IN (1, 'a')", "column 'id' is BIGINT but 'a' is a string at position 10", None),
])
def test_bad_input_names_the_position_and_a_hint(where: str, message: str,
                                                 hint: str | None) -> None:
    with pytest.raises(ConfigError) as info:
        parse_where(where, SCHEMA)
    assert info.value.message.startswith(f"Cannot parse --where {where!r}: ")
    assert message in info.value.message
    assert info.value.hint
    if hint is not None:
        assert info.value.hint == hint


def test_the_option_name_is_configurable() -> None:
    with pytest.raises(ConfigError, match=r"^Cannot parse filter 'id =': expected a value"):
        parse_where("id =", SCHEMA, option="filter")


def test_a_backslash_in_a_string_is_itself() -> None:
    """SQL strings: only a doubled quote is special, so Windows paths need no escaping."""
    table = pa.table({"value": ["C:\\dir", "C:dir", "it's"]})
    schema = table.schema
    assert table.filter(parse_where(r"value = 'C:\dir'", schema)).num_rows == 1
    assert table.filter(parse_where("value = 'it''s'", schema)).column(0).to_pylist() == ["it's"]
