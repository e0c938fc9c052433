"""TIMESTAMP values outside 1677-09-21 .. 2262-04-11: loaded, read back, compacted.

Hive's TIMESTAMP spans years 0001-9999; timestamp[ns] does not. The rule (docs/format.md
§19): a load holding such a value stores the column to the microsecond, and a read
over a file holding one returns the column as timestamp[us].
"""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ingest.acid.read.reader import read_table
from ingest.errors import SchemaMismatchError, UnsupportedFormatError
from ingest.orc import TimestampPrecisionWarning
from ingest.table import open_table
from ingest.table.maintain import compact
from ingest.table.write import create_table, load, load_file
from ingest.txn import Metastore, default_metastore_url

WIDE = ["0001-01-01 00:00:00", "1500-06-01", "1677-09-21 00:12:43.145224",
        "1969-12-31 23:59:59.999999", "2262-04-11 23:47:16.854776",
        "9999-12-31 23:59:59.999999", None]
NARROW = ["1677-09-21 00:12:43.145224192", "1969-12-31 23:59:59.999999999",
          "2262-04-11 23:47:16.854775807", "2026-01-01 10:00:00.123456789"]


def _table(tmp_path: Path) -> str:
    location = str(tmp_path / "wh" / "t")
    create_table(location, "id BIGINT, ts TIMESTAMP")
    return location


def _rows(texts: list[str | None], start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + len(texts)), pa.int64()),
                     "ts": pa.array(texts, pa.string())})


def _read(location: str) -> pa.Table:
    with Metastore.open(default_metastore_url(location)) as store:
        return read_table(location, store.snapshot(location)).sort_by("id")


def _micros(text: str | None) -> dt.datetime | None:
    if text is None:
        return None
    return dt.datetime.fromisoformat(text if " " in text else text + " 00:00:00")


def test_values_outside_nanoseconds_load_and_read_back_as_microseconds(tmp_path: Path) -> None:
    location = _table(tmp_path)
    load(open_table(location), _rows(WIDE))
    got = _read(location)
    assert got.schema.field("ts").type == pa.timestamp("us")
    assert got.column("ts").to_pylist() == [_micros(t) for t in WIDE]


def test_the_nanosecond_boundaries_keep_every_digit(tmp_path: Path) -> None:
    location = _table(tmp_path)
    load(open_table(location), _rows(NARROW))
    got = _read(location)
    assert got.schema.field("ts").type == pa.timestamp("ns")
    assert got.column("ts").cast(pa.int64()).to_pylist() == [
        -(2**63), -1, 2**63 - 1, 1_767_261_600_123_456_789]


@pytest.mark.parametrize(("text", "why"), [
    ("1677-09-21 00:12:43.145224191", "is outside 1677-09-21 .. 2262-04-11, where timestamps "
                                      "are stored to the microsecond, and has digits below it"),
    ("2262-04-11 23:47:16.854775808", "is outside"),
    ("9999-12-31 23:59:59.999999999", "is outside"),
    ("10000-01-01", "is not a timestamp"),
    ("2026-02-30", "is not a timestamp"),
])
def test_a_value_that_would_lose_digits_or_is_no_timestamp_is_refused(
        tmp_path: Path, text: str, why: str) -> None:
    location = _table(tmp_path)
    with pytest.raises(SchemaMismatchError) as e:
        load(open_table(location), _rows(["2026-01-01", text]))
    assert f"column 'ts' (TIMESTAMP) cannot hold the value of row 2: {text!r} {why}" in str(e.value)
    assert list((Path(location)).glob("delta_*")) == []


def test_nanoseconds_beside_a_value_outside_are_refused_not_cut(tmp_path: Path) -> None:
    location = _table(tmp_path)
    with pytest.raises(SchemaMismatchError, match=(
            r"row 2: '1969-12-31 23:59:59.999999999' has digits below the microsecond, but row "
            r"1 is outside 1677-09-21 .. 2262-04-11, so this load stores the column to the "
            r"microsecond")):
        load(open_table(location), _rows(["0001-01-01", "1969-12-31 23:59:59.999999999"]))


def test_parquet_timestamps_of_any_unit_load(tmp_path: Path) -> None:
    location = _table(tmp_path)
    path = tmp_path / "in.parquet"
    stamps = pa.array([dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)],
                      pa.timestamp("us"))
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "ts": stamps}), path)
    load_file(open_table(location), str(path))
    assert _read(location).column("ts").to_pylist() == stamps.to_pylist()


def test_a_read_over_both_kinds_of_files_is_microseconds_and_says_what_it_dropped(
        tmp_path: Path) -> None:
    location = _table(tmp_path)
    load(open_table(location), _rows(NARROW))  # write id 1: nanoseconds
    with Metastore.open(default_metastore_url(location)) as store:
        first = store.snapshot(location)
    load(open_table(location), _rows(["0001-01-01"], start=10))  # write id 2: microseconds
    with pytest.warns(TimestampPrecisionWarning, match="digits below the microsecond"):
        got = _read(location)
    assert got.schema.field("ts").type == pa.timestamp("us")
    assert got.column("ts").to_pylist() == [
        dt.datetime(1677, 9, 21, 0, 12, 43, 145224), dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
        dt.datetime(2262, 4, 11, 23, 47, 16, 854775), dt.datetime(2026, 1, 1, 10, 0, 0, 123456),
        dt.datetime(1, 1, 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        older = read_table(location, first).sort_by("id")  # write id 1 only: nanoseconds
    assert older.column("ts").cast(pa.int64()).to_pylist()[1] == -1


def test_major_compaction_keeps_values_outside_nanoseconds(tmp_path: Path) -> None:
    location = _table(tmp_path)
    load(open_table(location), _rows(WIDE))
    load(open_table(location), _rows(["2026-01-01 10:00:00.5"], start=10))
    before = _read(location)
    report = compact(open_table(location), kind="major")
    assert report.partitions[0].result is not None
    assert list(Path(location).glob("base_*"))
    assert _read(location).equals(before)


def test_compaction_refuses_to_drop_nanoseconds_and_the_table_still_reads(
        tmp_path: Path) -> None:
    location = _table(tmp_path)
    load(open_table(location), _rows(["2026-01-01 10:00:00.123456789"]))
    load(open_table(location), _rows(["0001-01-01"], start=10))
    with pytest.raises(UnsupportedFormatError, match="digits below the microsecond"):
        compact(open_table(location), kind="major")
    assert not list(Path(location).glob("base_*"))
    with pytest.warns(TimestampPrecisionWarning):
        assert _read(location).num_rows == 2


def test_minor_compaction_keeps_values_outside_nanoseconds_or_refuses_to_cut(
        tmp_path: Path) -> None:
    kept, refused = _table(tmp_path / "a"), _table(tmp_path / "b")
    for location, last in ((kept, "2026-01-01 00:00:00.123456"),
                           (refused, "2026-01-01 00:00:00.123456789")):
        load(open_table(location), _rows(["0001-01-01"]))
        load(open_table(location), _rows(["2026-01-01 00:00:00.5"], start=1))
        load(open_table(location), _rows([last], start=2))
    before = _read(kept)
    compact(open_table(kept), kind="minor")
    assert (Path(kept) / "delta_0000001_0000003").is_dir()
    assert _read(kept).equals(before)
    with pytest.raises(UnsupportedFormatError, match="digits below the microsecond"):
        compact(open_table(refused), kind="minor")
    assert not list(Path(refused).glob("delta_0000001_0000003"))
