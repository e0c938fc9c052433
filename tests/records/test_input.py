"""read_input: JSON Lines, CSV and Parquet files, compressed or not, typed by the table."""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ingest.errors import BadRecordError, ConfigError, SchemaMismatchError
from ingest.records import read_input


def test_read_input_formats(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("zip", pa.string()), ("dt", pa.string())])
    (tmp_path / "a.jsonl").write_text('{"id": 1, "zip": "007", "dt": "2026-01-01"}\n'
                                      '{"id": 2}\n')
    got = read_input(str(tmp_path / "a.jsonl"), schema=schema)
    assert got.select(["id", "zip", "dt"]).to_pylist() == [
        {"id": 1, "zip": "007", "dt": "2026-01-01"}, {"id": 2, "zip": None, "dt": None}]
    (tmp_path / "a.csv").write_text("id,zip,dt\n1,007,2026-01-01\n")
    assert read_input(str(tmp_path / "a.csv"), schema=schema).to_pylist() == [
        {"id": 1, "zip": "007", "dt": "2026-01-01"}]
    pq.write_table(pa.table({"id": [5]}), tmp_path / "a.parquet")
    assert read_input(str(tmp_path / "a.parquet")).to_pylist() == [{"id": 5}]
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(b'{"id": 9}\n'))
    assert read_input(str(tmp_path / "b.jsonl.gz")).to_pylist() == [{"id": 9}]
    (tmp_path / "data.txt").write_text("id\n3\n")
    assert read_input(str(tmp_path / "data.txt"), format="csv").to_pylist() == [{"id": 3}]


def test_read_input_errors(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("x")
    with pytest.raises(ConfigError, match="cannot tell the format from its extension '.txt'"):
        read_input(str(tmp_path / "data.txt"))
    with pytest.raises(FileNotFoundError, match="Cannot open input file, does not exist"):
        read_input(str(tmp_path / "missing.jsonl"))
    (tmp_path / "bad.jsonl").write_text('{"id": 1}\nnot json\n')
    with pytest.raises(BadRecordError, match="as jsonl: JSON parse error") as info:
        read_input(str(tmp_path / "bad.jsonl"))
    assert info.value.hint == f"check that {tmp_path / 'bad.jsonl'} is JSON Lines (one JSON " \
                              "object per line)"
    (tmp_path / "typed.jsonl").write_text('{"id": "abc"}\n')
    with pytest.raises(SchemaMismatchError,
                       match="Column\\(/id\\) changed from number to string") as info:
        read_input(str(tmp_path / "typed.jsonl"), schema=pa.schema([("id", pa.int64())]))
    assert info.value.hint == ("values must fit the columns id BIGINT; in JSON, quote a number "
                               "meant for a STRING column")


def test_timestamps_come_as_text_for_load_to_parse_and_csv_null_spellings_stay_null(
        tmp_path: Path) -> None:
    # pyarrow's readers refuse nine fraction digits into microseconds and years outside
    # 1677-2262 into nanoseconds: timestamp columns are read as text (docs/format.md §19).
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("ns"))])
    csv = tmp_path / "t.csv"
    csv.write_text("id,ts\n1,0001-01-01\n2,\n3,NULL\n4,2026-01-01 10:00:00.123456789\n")
    got = read_input(str(csv), schema=schema)
    assert got.column("ts").to_pylist() == ["0001-01-01", None, None,
                                            "2026-01-01 10:00:00.123456789"]
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"id":1,"ts":"9999-12-31 23:59:59"}\n{"id":2,"ts":null}\n')
    assert read_input(str(jsonl), schema=schema).column("ts").to_pylist() == [
        "9999-12-31 23:59:59", None]
