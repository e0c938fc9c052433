"""Convert input values to a table's DECIMAL columns by Hive's rule, for every input form.

JSON numbers, JSON strings, CSV text, Parquet integers, floats and decimals all go through
`to_decimal`: round half up (away from zero) to the column's scale, as Hive's HiveDecimal
does, and refuse a value whose integer part overflows the precision. Knows Arrow only.
"""

from __future__ import annotations

import decimal

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


__all__ = ["WIDE_DECIMAL", "describe_decimal_error", "to_decimal"]
