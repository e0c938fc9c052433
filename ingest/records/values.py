"""Convert input values to a table's DECIMAL and TIMESTAMP columns, for every input form.

JSON numbers, JSON strings, CSV text, Parquet integers, floats and decimals all go through
`to_decimal`: round half up (away from zero) to the column's scale, as Hive's HiveDecimal
does, and refuse a value whose integer part overflows the precision. Timestamp text and
Arrow timestamps go through `to_timestamp`: years 0001-9999 as Hive's. Knows Arrow only.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

WIDE_DECIMAL = pa.decimal256(76, 38)
"""What input readers parse decimal text into: exact for every DECIMAL(p<=38, s) value."""


def to_decimal(values: pa.Array | pa.ChunkedArray,
               target: pa.DataType) -> tuple[pa.Array, pa.Array]:
    """Values rounded half up to `target`'s scale; (converted, bad mask).

    Args:
        values: integers, floats (by their shortest text, never their binary value), strings
            holding decimal numbers, or decimals.
        target: a decimal128/decimal256 type.

    Returns:
        The converted array (null where a value is bad or was null) and a boolean array
        that is true where a value does not parse as a number or overflows the precision.
    """
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    wide, bad = _widen(array)
    rounded = pc.round(wide, ndigits=target.scale, round_mode="half_towards_infinity")
    bound = pa.scalar(decimal.Decimal(10) ** (target.precision - target.scale), WIDE_DECIMAL)
    too_big = pc.fill_null(pc.greater_equal(pc.abs(rounded), bound), False)
    bad = pc.or_(bad, too_big)
    kept = pc.if_else(bad, pa.nulls(len(rounded), WIDE_DECIMAL), rounded)
    return kept.cast(target), bad


def describe_decimal_error(value: object, target: pa.DataType) -> str:
    """Why `value` is bad for `target` (for messages): not a number, or too many digits."""
    try:
        number = decimal.Decimal(str(value).strip())
        if not number.is_finite():
            raise decimal.InvalidOperation
    except decimal.InvalidOperation:
        return f"{value!r} is not a decimal number"
    rounded = number.quantize(decimal.Decimal(1).scaleb(-target.scale),
                              rounding=decimal.ROUND_HALF_UP, context=decimal.Context(prec=100))
    shown = format(number.normalize(), "f")
    also = "" if rounded == number else f" (rounded to {rounded})"
    return (f"{shown}{also} has more than {target.precision - target.scale} digits before "
            f"the point, which DECIMAL({target.precision},{target.scale}) cannot hold")


def _widen(array: pa.Array) -> tuple[pa.Array, pa.Array]:
    t = array.type
    no_bad = pa.repeat(pa.scalar(False), len(array))
    if pa.types.is_null(t):
        return pa.nulls(len(array), WIDE_DECIMAL), no_bad
    if pa.types.is_floating(t):
        array, t = array.cast(pa.string()), pa.string()  # "1.005", not 1.00499999999999989...
    if pa.types.is_integer(t) or pa.types.is_decimal(t):
        return array.cast(WIDE_DECIMAL), no_bad
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        try:
            return pc.utf8_trim_whitespace(array).cast(WIDE_DECIMAL), no_bad
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return _widen_slowly(array)
    raise pa.ArrowInvalid(f"cannot convert {t} to a decimal")


def _widen_slowly(array: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The per-value fallback when some text is not a number: those become bad."""
    out: list[decimal.Decimal | None] = []
    bad: list[bool] = []
    limit = decimal.Decimal(10) ** 38
    for text in array.to_pylist():
        if text is None:
            out.append(None)
            bad.append(False)
            continue
        try:
            number = decimal.Decimal(text.strip())
            ok = number.is_finite() and abs(number) < limit
        except decimal.InvalidOperation:
            ok = False
        out.append(number.quantize(decimal.Decimal(1).scaleb(-38),
                                   rounding=decimal.ROUND_HALF_UP,
                                   context=decimal.Context(prec=80)) if ok else None)
        bad.append(not ok)
    return pa.array(out, WIDE_DECIMAL), pa.array(bad, pa.bool_())


_NS_LOW, _NS_HIGH = -(2**63), 2**63 - 1  # what timestamp[ns] holds
_NS_GUARD_LOW, _NS_GUARD_HIGH = _NS_LOW + 2 * 10**9, _NS_HIGH - 2 * 10**9
_EPOCH = dt.datetime(1970, 1, 1)
_TIMESTAMP_TEXT = re.compile(
    r"\s*(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?Z?\s*")
# Text ending in `Z` that `_parse` reads as pyarrow's cast does once the `Z` is cut: ASCII
# digits, two-digit fields, minutes whenever there is an hour (the cast also takes an hour
# alone, which `_parse` refuses). Anything else, offsets included, goes to `_parse_slowly`.
_ZULU_TEXT = r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)?Z$"


@dataclass(frozen=True)
class TimestampConversion:
    """`to_timestamp`'s answer: the values, and the first one that cannot be stored.

    Attributes:
        array: timestamp[ns] when every value fits it (1677-09-21 .. 2262-04-11), else
            timestamp[us] (years 0001-9999 to the microsecond); null where a value is bad.
        bad_row: the 0-based row of the first bad value, or None.
        reason: why that value is bad (for a message naming the row).
        bad_count: how many values are bad.
    """

    array: pa.Array
    bad_row: int | None = None
    reason: str = ""
    bad_count: int = 0


def to_nanosecond_timestamp(values: pa.Array | pa.ChunkedArray) -> TimestampConversion:
    """Like `to_timestamp`, but always timestamp[ns]: a value it cannot hold is bad (for
    writers that take nanoseconds only, such as the stream's sink)."""
    converted = to_timestamp(values)
    if converted.array.type.unit == "ns":
        return converted
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    return _parse_slowly(array, wide_is_bad=True)


def to_timestamp(values: pa.Array | pa.ChunkedArray) -> TimestampConversion:
    """Timestamps from Arrow timestamps of any unit or from text (`yyyy-mm-dd[ hh:mm[:ss
    [.fffffffff]]]`, a `T` and a trailing `Z` allowed, the `Z` read as nothing: values are
    zone-less; a numeric offset such as `+02:00` is bad), as a TIMESTAMP column stores them
    (docs/format.md §19): nanoseconds when every value fits, else microseconds for the whole
    column, and then a value with digits below the microsecond is bad rather than cut.

    Raises:
        pyarrow.ArrowInvalid: `values` are neither timestamps nor text.
    """
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    t = array.type
    if pa.types.is_timestamp(t):
        if t.unit == "ns":
            return TimestampConversion(array.cast(pa.timestamp("ns")))
        try:
            return TimestampConversion(array.cast(pa.timestamp("ns", t.tz), safe=True)
                                       .cast(pa.timestamp("ns")))
        except pa.ArrowInvalid:  # a value outside nanoseconds: keep the column's precision
            return TimestampConversion(array.cast(pa.timestamp("us", t.tz)).cast(
                pa.timestamp("us")))
    if pa.types.is_null(t):
        return TimestampConversion(pa.nulls(len(array), pa.timestamp("ns")))
    if not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        raise pa.ArrowInvalid(f"cannot convert {t} to a timestamp")
    # pyarrow's cast refuses every text ending in `Z` (slowly: 80 ms per 100k values), so
    # such a column, the stream's usual `...T10:10:00Z`, is cast with the `Z` cut instead.
    if pc.any(pc.ends_with(array, "Z")).as_py():
        converted = (_cast_text(pc.utf8_slice_codeunits(array, 0, -1)) if _all_zulu(array)
                     else None)
    else:
        converted = _cast_text(array)
    if converted is None:
        return _parse_slowly(array)
    return TimestampConversion(converted)


def _cast_text(array: pa.Array) -> pa.Array | None:
    """timestamp[ns] by pyarrow's cast; None when some text does not cast or a value is
    near the range's ends."""
    try:
        converted = array.cast(pa.timestamp("ns"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    # pyarrow's text cast wraps around instead of failing for text within a second outside
    # the range (1677-09-21 00:12:43.145224191 comes back in 2262): parse those ourselves.
    low, high = pc.min_max(converted).values()
    if low.is_valid and (low.value < _NS_GUARD_LOW or high.value > _NS_GUARD_HIGH):
        return None
    return converted


def _all_zulu(array: pa.Array) -> bool:
    """Whether every non-null text matches `_ZULU_TEXT` (and one is not null)."""
    matched = pc.all(pc.match_substring_regex(array, _ZULU_TEXT))
    return matched.as_py() is True


def _parse_slowly(array: pa.Array, *, wide_is_bad: bool = False) -> TimestampConversion:
    """The per-value parse when some value is outside nanoseconds or is not a timestamp."""
    if pa.types.is_timestamp(array.type):
        array = array.cast(pa.timestamp("us")).cast(pa.string())  # wide Arrow input
    seconds = np.zeros(len(array), dtype=np.int64)
    nanos = np.zeros(len(array), dtype=np.int64)
    valid = np.zeros(len(array), dtype=bool)
    bad: list[tuple[int, str]] = []
    for i, text in enumerate(array.to_pylist()):
        if text is None:
            continue
        parsed = _parse(text)
        if parsed is None:
            bad.append((i, f"{text!r} is not a timestamp (yyyy-mm-dd hh:mm:ss.fffffffff, "
                           "years 0001-9999)"))
            continue
        seconds[i], nanos[i] = parsed
        valid[i] = True
    wide = valid & ((seconds <= _NS_LOW // 10**9) | (seconds >= _NS_HIGH // 10**9))
    wide[wide] = [not _NS_LOW <= int(s) * 10**9 + int(n) <= _NS_HIGH
                  for s, n in zip(seconds[wide], nanos[wide], strict=True)]
    if wide.any() and wide_is_bad:
        bad += [(int(i), f"timestamp {array[int(i)].as_py()!r} is outside 1677-09-21 .. "
                         "2262-04-11") for i in np.flatnonzero(wide)]
        unit, values = "ns", np.where(wide, 0, seconds) * 1_000_000_000 + nanos
    elif wide.any():
        cut = valid & (nanos % 1000 != 0)
        first_wide = int(np.argmax(wide))
        for i in (int(i) for i in np.flatnonzero(cut)):
            text = repr(array[i].as_py())
            bad.append((i, f"{text} is outside 1677-09-21 .. 2262-04-11, where timestamps "
                           "are stored to the microsecond, and has digits below it" if wide[i]
                        else f"{text} has digits below the microsecond, but row "
                             f"{first_wide + 1:,} is outside 1677-09-21 .. 2262-04-11, so "
                             "this load stores the column to the microsecond"))
        unit, values = "us", seconds * 1_000_000 + nanos // 1000
    else:
        unit, values = "ns", seconds * 1_000_000_000 + nanos
    bad.sort()
    keep = valid.copy()
    keep[[i for i, _ in bad]] = False
    converted = pa.array(values, pa.timestamp(unit), mask=~keep)
    if not bad:
        return TimestampConversion(converted)
    return TimestampConversion(converted, bad[0][0], bad[0][1], len(bad))


def outside_nanoseconds(text: str) -> bool:
    """Whether `text` is a timestamp that timestamp[ns] cannot hold (years 0001-9999)."""
    parsed = _parse(text)
    return parsed is not None and not _NS_LOW <= parsed[0] * 10**9 + parsed[1] <= _NS_HIGH


def _parse(text: str) -> tuple[int, int] | None:
    """(seconds since 1970, nanoseconds) of a timestamp text, proleptic Gregorian; None if
    it is not one."""
    m = _TIMESTAMP_TEXT.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction = m.groups()
    try:
        moment = dt.datetime(int(year), int(month), int(day), int(hour or 0),
                             int(minute or 0), int(second or 0))
    except ValueError:
        return None
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds,
            int((fraction or "").ljust(9, "0")))


__all__ = ["WIDE_DECIMAL", "TimestampConversion", "describe_decimal_error",
           "outside_nanoseconds", "to_decimal", "to_nanosecond_timestamp", "to_timestamp"]
