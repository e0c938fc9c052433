"""Timestamps outside 1677-09-21 .. 2262-04-11 between our files and ORC Java (Hive's writer).

Our loads are read by ORC Java to the digit; files ORC Java writes are read by our reader as
ORC Java itself reads them (docs/format.md §19).
"""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest
from compat import javatools as jt
from conftest import require

from ingest.orc import TimestampPrecisionWarning, WideTimestampFile, open_orc
from ingest.table import open_table
from ingest.table.write import create_table, load

pytestmark = pytest.mark.java
FS = fsspec.filesystem("file")


@pytest.fixture(scope="module")
def java_tools() -> None:
    ok, what = jt.available()
    require(ok, what)
    jt.build()


def _loaded(tmp_path: Path, name: str, texts: list[str | None]) -> str:
    location = str(tmp_path / name)
    create_table(location, "id BIGINT, ts TIMESTAMP")
    load(open_table(location), pa.table({"id": pa.array(range(len(texts)), pa.int64()),
                                         "ts": pa.array(texts, pa.string())}))
    (bucket,) = Path(location).glob("delta_*/bucket_00000")
    return str(bucket)


def test_orc_java_reads_our_timestamps_to_the_digit(tmp_path: Path, java_tools: None) -> None:
    wide = ["0001-01-01 00:00:00", "1500-06-01 00:00:00.5", "1677-09-21 00:12:43.145224",
            "1969-12-31 23:59:59.999999", "1969-12-31 23:59:58.0005", None,
            "2262-04-11 23:47:16.854776", "9999-12-31 23:59:59.999999"]
    narrow = ["1677-09-21 00:12:43.145224192", "1969-12-31 23:59:59.999999999",
              "1969-12-31 23:59:59.5", "2262-04-11 23:47:16.854775807"]
    files = [_loaded(tmp_path, "wide", wide), _loaded(tmp_path, "narrow", narrow)]
    answers = jt.orc_read_many(files)
    for texts, answer in zip((wide, narrow), answers, strict=True):
        got = [r["row"]["ts"] for r in answer["rows"]]
        assert got == [None if t is None else t.replace(" ", "T").ljust(29, "0")
                       if "." in t else t.replace(" ", "T") + ".000000000" for t in texts]
    statistics = answers[0]["file_statistics"][8]  # the row's ts column
    assert (statistics["min"], statistics["max"]) == ("0001-01-01T00:00:00.000000000",
                                                      "9999-12-31T23:59:59.999999000")


def test_our_reader_reads_what_orc_java_writes(tmp_path: Path, java_tools: None) -> None:
    pairs = [(-62135596800, 0), (-14182940400, 500_000_000), (-9223372037, 854_775_000),
             (-2, 1_500_000), (-2, 123_456_789), None, (9223372036, 854_776_000),
             (253402300799, 999_999_999), (1767261600, 123_456_789)]
    for compression in ("ZLIB", "NONE"):
        path = tmp_path / f"java-{compression}.orc"
        jt.orc_write_timestamps(path, pairs, compression=compression)
        with open_orc(FS, str(path), FS.size(str(path))) as orc:
            assert isinstance(orc, WideTimestampFile)
            with pytest.warns(TimestampPrecisionWarning, match="3 of them have digits"):
                got = orc.read().column("ts").to_pylist()
        epoch = dt.datetime(1970, 1, 1)
        assert got == [None if p is None else
                       epoch + dt.timedelta(seconds=p[0], microseconds=p[1] // 1000)
                       for p in pairs]


def test_orc_java_values_within_nanoseconds_read_as_pyarrow_reads_them(
        tmp_path: Path, java_tools: None) -> None:
    pairs = [(-9223372037, 145_224_192), (-2, 123_456_789), (0, 1), (9223372036, 854_775_807)]
    path = tmp_path / "java.orc"
    jt.orc_write_timestamps(path, pairs)
    with open_orc(FS, str(path), FS.size(str(path))) as orc, warnings.catch_warnings():
        warnings.simplefilter("error")
        # pyarrow's reader refuses the first value (it checks the seconds alone): values
        # within the range's end seconds are decoded here, still as nanoseconds.
        assert isinstance(orc, WideTimestampFile)
        got = orc.read().column("ts")
    assert got.type == pa.timestamp("ns")
    assert got.cast(pa.int64()).to_pylist() == [s * 10**9 + n for s, n in pairs]
