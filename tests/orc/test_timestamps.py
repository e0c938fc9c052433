"""ingest.orc.timestamps: TIMESTAMP columns outside timestamp[ns], decoded from their streams."""

from __future__ import annotations

import zoneinfo
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.orc as po
import pytest

from ingest.orc import WideTimestampFile, open_orc, read_tail, wide_timestamp_columns
from ingest.orc._rle import decode_unsigned_v1, decode_unsigned_v2
from ingest.orc.timestamps import to_microseconds

FS = fsspec.filesystem("file")


@pytest.mark.parametrize(("encoded", "values"), [
    # The examples of the ORC specification, one per RLE v2 sub-encoding.
    ([0x0A, 0x27, 0x10], [10000] * 5),  # SHORT_REPEAT
    ([0x5E, 0x03, 0x5C, 0xA1, 0xAB, 0x1E, 0xDE, 0xAD, 0xBE, 0xEF],
     [23713, 43806, 57005, 48879]),  # DIRECT
    ([0x8E, 0x13, 0x2B, 0x21, 0x07, 0xD0, 0x1E, 0x00, 0x14, 0x70, 0x28, 0x32, 0x3C, 0x46,
      0x50, 0x5A, 0x64, 0x6E, 0x78, 0x82, 0x8C, 0x96, 0xA0, 0xAA, 0xB4, 0xBE, 0xFC, 0xE8],
     [2030, 2000, 2020, 1000000, *range(2040, 2200, 10)]),  # PATCHED_BASE
    ([0xC6, 0x09, 0x02, 0x02, 0x22, 0x42, 0x42, 0x46],
     [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]),  # DELTA
])
def test_rle_v2_decodes_the_specification_examples(encoded: list[int], values: list[int]) -> None:
    assert decode_unsigned_v2(bytes(encoded), len(values)).tolist() == values


def test_rle_v1_decodes_runs_and_literals() -> None:
    # A run of 5 (control 2) counting down from 100, then 2 literals 7 and 300.
    data = bytes([0x02, 0xFF, 100, 0xFE, 7, 0xAC, 0x02])
    assert decode_unsigned_v1(data, 7).tolist() == [100, 99, 98, 97, 96, 7, 300]


def test_a_short_stream_is_an_error_not_zeros() -> None:
    with pytest.raises(ValueError, match="ends after 5 of 6 values"):
        decode_unsigned_v2(bytes([0x0A, 0x27, 0x10]), 6)


def test_seconds_before_1970_decode_as_orc_readers_decode_them() -> None:
    epoch = 1_420_070_400
    cases = [  # (seconds since 1970 as stored, nanos, encoded nanos) -> microseconds
        (-1, 500_000_000, (5 << 3) | 7, -1_500_000),  # ORC Java: -1.5 s, rounded toward zero
        (0, -500_000_000, ((-5 << 3) | 7) & (2**64 - 1), -500_000),  # ORC C++: -0.5 s
        (-1, 123_456_789, 123_456_789 << 3, -1_876_544),  # ORC Java: -1.876543211 s
        (0, -123_456_789, (-123_456_789 << 3) & (2**64 - 1), -123_457),  # ORC C++, floored
        # ORC Java writes -0.5 s as second 0 and every ORC reader (Java, C++) reads +0.5 s.
        (0, 500_000_000, (5 << 3) | 7, 500_000),
        (-62135596800, 0, 0, -62135596800 * 10**6),  # 0001-01-01
    ]
    stored = np.array([c[0] - epoch for c in cases], dtype=np.int64)
    encoded = np.array([c[2] for c in cases], dtype=np.uint64)
    micros, dropped = to_microseconds(stored, encoded)
    assert micros.tolist() == [c[3] for c in cases]
    assert dropped == 2  # the two values with nanoseconds below the microsecond


def _stamps(*texts: str | None) -> pa.Array:
    return pa.array([None if t is None else np.datetime64(t, "us") for t in texts],
                    pa.timestamp("us"))


def test_a_file_with_values_outside_nanoseconds_reads_them_exactly_as_microseconds(
        tmp_path: Path) -> None:
    values = _stamps("0001-01-01T00:00:00", "1500-06-01T00:00:00.5",
                     "1677-09-21T00:12:43.145224", "1969-12-31T23:59:59.999999",
                     "1969-12-31T23:59:58.000500", None, "2262-04-11T23:47:16.854776",
                     "9999-12-31T23:59:59.999999")
    table = pa.table({"id": pa.array(range(len(values))), "ts": values,
                      "s": pa.StructArray.from_arrays([values], names=["ts"])})
    path = str(tmp_path / "wide.orc")
    po.write_table(table, path, compression="zstd")
    with open_orc(FS, path, FS.size(path)) as orc:
        assert isinstance(orc, WideTimestampFile)
        assert orc.schema.field("ts").type == pa.timestamp("us")
        got = orc.read()
        only = orc.read_stripe(0, columns=["s"])
    assert got.column("ts").combine_chunks().equals(values)
    assert got.column("s").combine_chunks().field("ts").equals(values)
    assert only.schema.names == ["s"] and only.column(0).field("ts").equals(values)


def test_a_file_within_nanoseconds_keeps_pyarrows_reader(tmp_path: Path) -> None:
    path = str(tmp_path / "narrow.orc")
    po.write_table(pa.table({"ts": _stamps("1677-09-21T00:12:45", "2262-04-11T23:47:15")}), path)
    assert wide_timestamp_columns(read_tail(FS, path, FS.size(path))) == []
    with open_orc(FS, path, FS.size(path)) as orc:
        assert isinstance(orc, po.ORCFile)
        assert orc.read().column("ts").type == pa.timestamp("ns")


def test_pyorc_reads_the_same_instants(tmp_path: Path) -> None:
    pyorc = pytest.importorskip("pyorc")

    class Raw(pyorc.converters.ORCConverter):  # (seconds, nanoseconds) as pyorc decodes them
        @staticmethod
        def from_orc(seconds: int, nanoseconds: int, timezone: object) -> tuple[int, int]:
            return seconds, nanoseconds

        @staticmethod
        def to_orc(*args: object) -> object:
            raise NotImplementedError

    values = _stamps("0001-01-01T00:00:00", "1500-06-01T00:00:00.5",
                     "1969-12-31T23:59:59.999999", "9999-12-31T23:59:59.999999")
    path = tmp_path / "wide.orc"
    po.write_table(pa.table({"ts": values}), str(path))
    with path.open("rb") as f:
        got = [row[0] for row in pyorc.Reader(f, timezone=zoneinfo.ZoneInfo("UTC"),
                                              converters={pyorc.TypeKind.TIMESTAMP: Raw})]
    micros = [s * 10**6 + n // 1000 for s, n in got]
    assert micros == values.cast(pa.int64()).to_pylist()
