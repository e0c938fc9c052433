"""The stream's parse of TIMESTAMP fields: values outside 1677-09-21 .. 2262-04-11 are
dead-lettered with a reason naming the range (docs/format.md §19), the others parse exactly."""

from __future__ import annotations

import pyarrow as pa

from ingest.records.json_values import parse_json_values

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("ns"))])


def test_timestamps_outside_nanoseconds_are_bad_records_naming_the_range() -> None:
    values = pa.array([b'{"id":1,"ts":"0001-01-01"}',
                       b'{"id":2,"ts":"1677-09-21 00:12:43.145224192"}',
                       b'{"id":3,"ts":"1677-09-21 00:12:43.145224191"}',
                       b'{"id":4,"ts":"2262-04-11 23:47:16.854775807"}',
                       b'{"id":5,"ts":"9999-12-31 23:59:59.999999999"}',
                       b'{"id":6,"ts":"not a time"}'])
    parsed = parse_json_values(values, SCHEMA)
    assert parsed.good.to_pylist() == [1, 3]
    assert parsed.rows.column("ts").cast(pa.int64()).to_pylist() == [-(2**63), 2**63 - 1]
    reason = ("field 'ts': timestamp {!r} is outside 1677-09-21 .. 2262-04-11, which the "
              "stream does not write (ingest load does: docs/format.md §19)")
    assert parsed.bad == [
        (0, reason.format("0001-01-01")), (2, reason.format("1677-09-21 00:12:43.145224191")),
        (4, reason.format("9999-12-31 23:59:59.999999999")),
        (5, "field 'ts': 'not a time' is not a timestamp (yyyy-mm-dd hh:mm:ss.fffffffff, "
            "years 0001-9999)")]


def test_timestamps_in_range_parse_to_the_nanosecond_with_nulls() -> None:
    values = pa.array([b'{"id":1,"ts":"2026-01-01 10:00:00.123456789"}', b'{"id":2}',
                       b'{"id":3,"ts":null}', b'{"id":4,"ts":"1969-12-31T23:59:59.999999999"}'])
    parsed = parse_json_values(values, SCHEMA)
    assert parsed.bad == []
    assert parsed.rows.schema == SCHEMA
    assert parsed.rows.column("ts").cast(pa.int64()).to_pylist() == [
        1_767_261_600_123_456_789, None, None, -1]
