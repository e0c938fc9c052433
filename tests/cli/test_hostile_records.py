"""Issue 11, items 7, 9, 10: hostile or unusual input records through `ingest load`, `cat`, `dump`.

Each test reproduces a case as the issue states it and shows the new behaviour: invalid UTF-8
is refused naming the line and never makes a table unreadable; decimals follow Hive's rule in
every input form; JSON objects load into MAP columns; a 10 MB string loads.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import run_cli as run
from support import visible

from ingest.acid import BucketFileOptions, BucketWriter
from ingest.acid.format.names import format_delta, write_acid_version_file


def ok_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run([*args, "--json"], capsys)
    assert code == 0, err
    return out


def error_json(args: list[str], capsys: pytest.CaptureFixture[str], code: int) -> dict:
    got, out, err = run([*args, "--json"], capsys)
    assert (got, out) == (code, ""), err
    return json.loads(err)["error"]


def deltas(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*delta_*") if p.is_dir())


# ---------------------------------------------------------------- 7. invalid UTF-8

def test_load_refuses_invalid_utf8_naming_the_line_and_writes_nothing(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "t")
    ok_json(["create", table, "--schema", "id BIGINT, v STRING"], capsys)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"id":1,"v":"ok"}\n{"id":2,"v":"\xff\xfe"}\n')
    error = error_json(["load", table, "--input", str(bad)], capsys, 3)
    assert error["type"] == "BadRecordError"
    assert "line 2 holds bytes that are not UTF-8" in error["message"]
    assert "nothing was loaded" in error["message"]
    assert deltas(Path(table)) == []
    csv = tmp_path / "bad.csv"
    csv.write_bytes(b"id,v\n1,ok\n2,ok\n3,\xe9t\xe9\n")
    error = error_json(["load", table, "--input", str(csv)], capsys, 3)
    assert "line 4 holds bytes that are not UTF-8" in error["message"]
    assert deltas(Path(table)) == []


def _table_with_foreign_bytes(root: Path) -> Path:
    """Two committed-looking deltas (no metastore): one good row, one row with b'\\xff\\xfe'."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    rows = [pa.table({"id": [1], "v": ["fine"]}, schema=schema),
            pa.table({"id": pa.array([2]),
                      "v": pa.array([b"\xff\xfe"], pa.binary()).view(pa.string())},
                     schema=schema)]
    for write_id, data in enumerate(rows, start=1):
        directory = root / format_delta(write_id, write_id, 0)
        directory.mkdir(parents=True)
        write_acid_version_file(fsspec.filesystem("file"), str(directory))
        options = BucketFileOptions(write_id=write_id, row_schema=schema, bucket_id=0)
        with BucketWriter.create(str(directory / "bucket_00000"), options) as writer:
            writer.write(data)
    return root / format_delta(2, 2, 0) / "bucket_00000"


def test_cat_and_dump_show_foreign_invalid_bytes_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "hive_written"
    bucket = _table_with_foreign_bytes(root)
    code, out, err = run(["cat", str(root)], capsys)
    assert code == 0, err
    got = sorted((json.loads(line) for line in out.splitlines()), key=lambda r: r["id"])
    assert got == [{"id": 1, "v": "fine"}, {"id": 2, "v": "\\xff\\xfe"}]
    code, out, err = run(["dump", str(bucket)], capsys)
    assert code == 0, err
    event = json.loads(out.splitlines()[0])
    assert event["row"] == {"id": 2, "v": "\\xff\\xfe"}


# ---------------------------------------------------------------- 9. decimals

def test_decimals_follow_hives_rule_in_every_input_form(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "d")
    ok_json(["create", table, "--schema", "id BIGINT, v DECIMAL(5,2)"], capsys)
    numbers = tmp_path / "numbers.jsonl"
    numbers.write_text('{"id":1,"v":1.239}\n{"id":2,"v":1.005}\n{"id":3,"v":5}\n'
                       '{"id":4,"v":-1.005}\n{"id":5,"v":999.994}\n')
    strings = tmp_path / "strings.jsonl"
    strings.write_text('{"id":11,"v":"1.239"}\n{"id":12,"v":"1.005"}\n{"id":13,"v":"5"}\n')
    csv = tmp_path / "rows.csv"
    csv.write_text("id,v\n21,1.239\n22,1.005\n23,5\n")
    parquet = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": [31, 32, 33],
                             "v": pa.array([Decimal("1.239"), Decimal("1.005"), Decimal(5)],
                                           pa.decimal128(10, 3))}), parquet)
    floats = tmp_path / "floats.parquet"
    pq.write_table(pa.table({"id": [41, 42], "v": [1.005, 5.0]}), floats)
    for path in (numbers, strings, csv, parquet, floats):
        ok_json(["load", table, "--input", str(path)], capsys)
    got = {r["id"]: r["v"] for r in visible(table)}
    expected = {1: "1.24", 2: "1.01", 3: "5.00", 4: "-1.01", 5: "999.99",
                11: "1.24", 12: "1.01", 13: "5.00", 21: "1.24", 22: "1.01", 23: "5.00",
                31: "1.24", 32: "1.01", 33: "5.00", 41: "1.01", 42: "5.00"}
    assert got == {k: Decimal(v) for k, v in expected.items()}


@pytest.mark.parametrize(("name", "text"), [
    ("big.jsonl", '{"id":1,"v":1.5}\n{"id":2,"v":1000}\n'),
    ("rounds_up.jsonl", '{"id":1,"v":999.995}\n'),
    ("big_string.jsonl", '{"id":1,"v":"123456.7"}\n'),
    ("big.csv", "id,v\n1,2.5\n2,1000.00\n"),
])
def test_decimals_that_overflow_the_precision_are_refused(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        name: str, text: str) -> None:
    table = str(warehouse / "d")
    ok_json(["create", table, "--schema", "id BIGINT, v DECIMAL(5,2)"], capsys)
    path = tmp_path / name
    path.write_text(text)
    error = error_json(["load", table, "--input", str(path)], capsys, 3)
    assert error["type"] == "SchemaMismatchError"
    row = text.count("\n") - (1 if name.endswith(".csv") else 0)
    assert f"column 'v' (DECIMAL(5,2)) cannot hold the value of row {row}" in error["message"]
    assert "more than 3 digits before the point" in error["message"]
    assert deltas(Path(table)) == []


def test_decimal_text_that_is_not_a_number_is_refused(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "d")
    ok_json(["create", table, "--schema", "id BIGINT, v DECIMAL(5,2)"], capsys)
    csv = tmp_path / "rows.csv"
    csv.write_text("id,v\n1,1.5\n2,abc\n")
    error = error_json(["load", table, "--input", str(csv)], capsys, 3)
    assert "cannot hold the value of row 2: 'abc' is not a decimal number" in error["message"]


# ---------------------------------------------------------------- 10. inputs users have

def test_json_objects_load_into_map_columns(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "m")
    ok_json(["create", table, "--schema", "id BIGINT, m MAP<STRING,BIGINT>"], capsys)
    data = tmp_path / "maps.jsonl"
    data.write_text('{"id":1,"m":{"a":1,"b":2}}\n\n{"id":2,"m":{}}\n{"id":3,"m":null}\n'
                    '{"id":4,"m":{"z":null}}\n{"id":5}\n')
    ok_json(["load", table, "--input", str(data)], capsys)
    assert visible(table) == [
        {"id": 1, "m": [("a", 1), ("b", 2)]}, {"id": 2, "m": []}, {"id": 3, "m": None},
        {"id": 4, "m": [("z", None)]}, {"id": 5, "m": None}]


@pytest.mark.parametrize("form", ["jsonl", "csv"])
def test_a_record_holding_a_10_mb_string_loads(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str) -> None:
    table = str(warehouse / "big")
    ok_json(["create", table, "--schema", "id BIGINT, v STRING"], capsys)
    big = "x" * 10_000_000
    path = tmp_path / f"big.{form}"
    if form == "jsonl":
        path.write_text(f'{{"id":1,"v":"a"}}\n{{"id":2,"v":"{big}"}}\n{{"id":3,"v":"b"}}\n')
    else:
        path.write_text(f"id,v\n1,a\n2,{big}\n3,b\n")
    ok_json(["load", table, "--input", str(path)], capsys)
    got = visible(table)
    assert [r["id"] for r in got] == [1, 2, 3]
    assert got[1]["v"] == big


@pytest.mark.parametrize(("name", "text"), [
    ("early.jsonl", '{"id":1,"ts":"2026-01-01 10:00:00"}\n{"id":2,"ts":"0001-01-01"}\n'
                    '{"id":3,"ts":"1500-06-01"}\n'),
    ("late.csv", "id,ts\n1,2026-01-01 10:00:00\n2,0001-01-01 00:00:00\n"
                 "3,9999-12-31 23:59:59.999999\n"),
])
def test_timestamps_hive_accepts_outside_1677_2262_load_and_read_back(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        name: str, text: str) -> None:
    # Issue 11, item 10: `0001-01-01` was refused as "couldn't parse"; it loads now, and the
    # table's reader returns the column as microseconds (docs/format.md §19).
    table = str(warehouse / "ts")
    ok_json(["create", table, "--schema", "id BIGINT, ts TIMESTAMP"], capsys)
    path = tmp_path / name
    path.write_text(text)
    loaded = json.loads(ok_json(["load", table, "--input", str(path)], capsys))
    assert loaded["rows"] == 3
    got, out, _ = run(["cat", table], capsys)
    assert got == 0
    rows = [json.loads(line) for line in out.splitlines()]
    expected = [line.split(",", 1)[1].replace(" ", "T") for line in text.splitlines()[1:]] \
        if name.endswith(".csv") else ["2026-01-01T10:00:00", "0001-01-01T00:00:00",
                                       "1500-06-01T00:00:00"]
    assert [r["ts"] for r in rows] == expected
    assert visible(table)[1]["ts"] == dt.datetime(1, 1, 1)


def test_cat_prints_the_nanosecond_range_ends_to_the_digit(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # pandas reads timestamp[ns]'s first value as NaT; cat must not print "NaT" for it.
    table = str(warehouse / "ts")
    ok_json(["create", table, "--schema", "id BIGINT, ts TIMESTAMP"], capsys)
    path = tmp_path / "ends.csv"
    path.write_text("id,ts\n1,1677-09-21 00:12:43.145224192\n2,1969-12-31 23:59:59.999999999\n"
                    "3,2262-04-11 23:47:16.854775807\n4,\n")
    ok_json(["load", table, "--input", str(path)], capsys)
    got, out, _ = run(["cat", table], capsys)
    assert got == 0
    assert [json.loads(line)["ts"] for line in out.splitlines()] == [
        "1677-09-21T00:12:43.145224192", "1969-12-31T23:59:59.999999999",
        "2262-04-11T23:47:16.854775807", None]


def test_a_timestamp_outside_1677_2262_with_nanoseconds_is_refused_naming_the_row(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Outside the nanosecond range a TIMESTAMP is stored to the microsecond: a ninth digit
    # would be lost, so it is refused rather than cut.
    table = str(warehouse / "ts")
    ok_json(["create", table, "--schema", "id BIGINT, ts TIMESTAMP"], capsys)
    path = tmp_path / "late.csv"
    path.write_text("id,ts\n1,2026-01-01 10:00:00\n2,9999-12-31 23:59:59.999999999\n")
    error = error_json(["load", table, "--input", str(path)], capsys, 3)
    assert ("column 'ts' (TIMESTAMP) cannot hold the value of row 2: "
            "'9999-12-31 23:59:59.999999999' is outside 1677-09-21 .. 2262-04-11, where "
            "timestamps are stored to the microsecond, and has digits below it"
            ) in error["message"]
    assert deltas(Path(table)) == []


@pytest.mark.parametrize(("text", "line", "shown"), [
    ('{"id":1,"v":"a"}\nnull\n', 2, "'null'"),
    ('null\n{"id":1,"v":"a"}\n', 1, "'null'"),  # pyarrow's reader crashed on this one
    ('{"id":1,"v":"a"}\n\n  null \r\n', 3, "'null'"),
])
def test_load_refuses_a_json_null_line_instead_of_loading_an_all_null_row(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        text: str, line: int, shown: str) -> None:
    table = str(warehouse / "t")
    ok_json(["create", table, "--schema", "id BIGINT, v STRING"], capsys)
    path = tmp_path / "rows.jsonl"
    path.write_text(text)
    error = error_json(["load", table, "--input", str(path)], capsys, 3)
    assert error["type"] == "BadRecordError"
    assert error["message"] == (f"Cannot read input {path}: line {line} is not a JSON object "
                                f"({shown}); nothing was loaded")
    assert deltas(Path(table)) == []
