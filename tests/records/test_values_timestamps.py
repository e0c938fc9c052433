"""Timestamp text ending in `Z` takes a vectorized path in `to_timestamp` and gives exactly
what the per-value parse gives: the `Z` read as nothing, offsets bad, range ends exact."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.records.values import (
    TimestampConversion,
    _parse_slowly,
    to_nanosecond_timestamp,
    to_timestamp,
)

NOT_A_TIMESTAMP = "{!r} is not a timestamp (yyyy-mm-dd hh:mm:ss.fffffffff, years 0001-9999)"


def _same(got: TimestampConversion, expected: TimestampConversion) -> None:
    assert got.array.type == expected.array.type
    assert got.array.to_pylist() == expected.array.to_pylist()
    assert got.array.is_null().to_pylist() == expected.array.is_null().to_pylist()
    assert (got.bad_row, got.reason, got.bad_count) == (
        expected.bad_row, expected.reason, expected.bad_count)


def test_sample_event_timestamps_with_z_are_utc_as_written_to_the_nanosecond() -> None:
    got = to_timestamp(pa.array(["2026-11-21T10:10:00Z", None, "2026-11-21 23:59:59.123456789Z",
                                 "1969-12-31T23:59:59.999999999Z", "2026-11-21Z",
                                 "2026-11-21T10:10Z"]))
    assert got.bad_row is None and got.array.type == pa.timestamp("ns")
    assert got.array.cast(pa.int64()).to_pylist() == [
        1_795_255_800_000_000_000, None, 1_795_305_599_123_456_789, -1,
        1_795_219_200_000_000_000, 1_795_255_800_000_000_000]


def test_numeric_offsets_stay_bad_values_as_before() -> None:
    got = to_timestamp(pa.array(["2026-11-21T10:10:00Z", "2026-11-21T10:10:00+02:00",
                                 "2026-11-21T10:10:00-0530"]))
    assert got.array.to_pylist()[1:] == [None, None]
    assert (got.bad_row, got.bad_count) == (1, 2)
    assert got.reason == NOT_A_TIMESTAMP.format("2026-11-21T10:10:00+02:00")


@pytest.mark.parametrize("text", [
    "2026-11-21T10Z",  # an hour alone: pyarrow's cast takes it, the parse does not
    "2026-02-30T00:00:00Z", "2026-11-21T24:00:00Z", "2026-11-21T10:10:60Z",
    "2026-11-21T10:10:00.1234567890Z", "2026-11-21T10:10:00ZZ", "2026-11-21T10:10:00z", "Z"])
def test_z_text_that_the_parse_refuses_is_bad_naming_it(text: str) -> None:
    got = to_timestamp(pa.array(["2026-11-21T10:10:00Z", text]))
    assert (got.bad_row, got.reason, got.bad_count) == (1, NOT_A_TIMESTAMP.format(text), 1)
    assert got.array.to_pylist()[1] is None


def test_z_text_just_outside_nanoseconds_does_not_wrap_around() -> None:
    values = pa.array(["1677-09-21 00:12:43.145224191Z", "2262-04-11T23:47:16.854775808Z",
                       "2262-04-11T23:47:16.854775807Z"])
    wide = to_timestamp(values)
    assert wide.array.type == pa.timestamp("us")
    assert (wide.bad_row, wide.bad_count) == (0, 3)  # digits below the microsecond, all
    narrow = to_nanosecond_timestamp(values)
    assert narrow.array.cast(pa.int64()).to_pylist() == [None, None, 2**63 - 1]
    assert (narrow.bad_row, narrow.bad_count) == (0, 2)


def test_z_and_plain_text_mixed_in_one_column_both_parse() -> None:
    got = to_timestamp(pa.chunked_array([["2026-11-21 10:10:00"], ["2026-11-21T10:10:00Z"]]))
    assert got.bad_row is None
    assert got.array.cast(pa.int64()).to_pylist() == [1_795_255_800_000_000_000] * 2


def test_z_text_in_a_large_string_column_and_all_null_text() -> None:
    got = to_timestamp(pa.array(["2026-11-21T10:10:00Z"], pa.large_string()))
    assert got.array.cast(pa.int64()).to_pylist() == [1_795_255_800_000_000_000]
    assert to_timestamp(pa.array([None, None], pa.string())).array.null_count == 2


_EDGES = ["1677-09-21T00:12:43", "1677-09-21T00:12:44", "2262-04-11T23:47:16",
          "2262-04-11T23:47:15", "0001-01-01T00:00:00", "9999-12-31T23:59:59",
          "1970-01-01T00:00:00", "1969-12-31T23:59:59", "2000-02-29T12:00:00"]


@st.composite
def _timestamp_text(draw: st.DrawFn) -> str:
    """Text near the forms `_parse` reads: edges of the range and of the calendar, every
    optional part, Z or an offset or junk at the end."""
    if draw(st.booleans()):
        base = draw(st.sampled_from(_EDGES))
        date, time = base[:10], base[11:]
    else:
        date = (f"{draw(st.integers(1, 9999)):04d}-{draw(st.integers(0, 13)):02d}-"
                f"{draw(st.integers(0, 32)):02d}")
        time = (f"{draw(st.integers(0, 24)):02d}:{draw(st.integers(0, 60)):02d}:"
                f"{draw(st.integers(0, 60)):02d}")
    # a time cut after the hour is left out without a `Z` only: pyarrow's cast reads it,
    # `_parse` does not, a difference older than the `Z` path and not about it.
    cut = draw(st.sampled_from(["date", "hh:mm", "hh:mm:ss", "fraction", "hour"]))
    text = {"date": date, "hh:mm": f"{date}T{time[:5]}", "hh:mm:ss": f"{date}T{time}",
            "hour": f"{date}T{time[:2]}",
            "fraction": f"{date}{draw(st.sampled_from('T '))}{time}."
                        f"{draw(st.text('0123456789', min_size=1, max_size=10))}"}[cut]
    end = draw(st.sampled_from(["Z", "Z", "Z", "", "+02:00", "-0530", "z", " Z", "Z "]))
    if cut == "hour" and end == "":
        end = "Z"
    return text + end


@settings(max_examples=400, deadline=None)
@given(st.lists(st.none() | _timestamp_text(), min_size=1, max_size=6))
def test_the_z_path_agrees_with_the_per_value_parse(texts: list[str | None]) -> None:
    values = pa.array(texts, pa.string())
    _same(to_timestamp(values), _parse_slowly(values))
    _same(to_nanosecond_timestamp(values), _parse_slowly(values, wide_is_bad=True))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_EDGES), min_size=1, max_size=6),
       st.lists(st.integers(0, 999_999_999), min_size=6, max_size=6))
def test_z_values_at_the_range_ends_agree_with_the_per_value_parse(
        bases: list[str], nanos: list[int]) -> None:
    values = pa.array([f"{b}.{n:09d}Z" for b, n in zip(bases, nanos, strict=False)])
    _same(to_timestamp(values), _parse_slowly(values))
    _same(to_nanosecond_timestamp(values), _parse_slowly(values, wide_is_bad=True))
