"""Merging ORC ColumnStatistics: stripe (or chunk) statistics into file statistics.

Mirrors what ORC writers do when they fold stripe statistics into the footer: counts add,
minima and maxima combine, sums add and are dropped on int64 overflow (the C++ and Java
convention for "sum unknown"). Fields we do not know are kept from the left-hand side.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation, localcontext

from ingest.orc._protobuf import Message
from ingest.orc.proto_fields import (
    BinaryStatistics,
    BucketStatistics,
    CollectionStatistics,
    ColumnStatistics,
    DateStatistics,
    DecimalStatistics,
    DoubleStatistics,
    IntegerStatistics,
    StringStatistics,
    TimestampStatistics,
)

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_DECIMAL_DIGITS = 38


def merge_statistics(left: Message, right: Message) -> Message:
    """Return the statistics of the union of two row sets (neither argument is changed)."""
    out = Message(list(left.fields))
    count, has_null, on_disk = (ColumnStatistics.NUMBER_OF_VALUES, ColumnStatistics.HAS_NULL,
                                ColumnStatistics.BYTES_ON_DISK)
    out.set_uint(count, (left.uint(count) or 0) + (right.uint(count) or 0))
    if left.has(has_null) or right.has(has_null):
        out.set_uint(has_null, int(bool(left.uint(has_null)) or bool(right.uint(has_null))))
    if left.has(on_disk) and right.has(on_disk):
        out.set_uint(on_disk, (left.uint(on_disk) or 0) + (right.uint(on_disk) or 0))
    else:
        out.remove(on_disk)
    # Only the kinds `right` has change anything (a column has one kind: decode just that).
    for number in dict.fromkeys(n for n, _, _ in right.fields if n in _MERGERS):
        merge = _MERGERS[number]
        a, b = left.messages(number), right.messages(number)
        if not a:
            out.set_messages(number, [b[0]])
            continue
        out.set_messages(number, [merge(a[0], b[0])])
    return out


def _has_values(m: Message, min_field: int, max_field: int) -> bool:
    return m.has(min_field) or m.has(max_field)


def _merge_minmax(a: Message, b: Message, out: Message, read, write, min_field: int,
                  max_field: int) -> None:
    for field, pick in ((min_field, min), (max_field, max)):
        values = [v for v in (read(a, field), read(b, field)) if v is not None]
        if values:
            write(out, field, pick(values))


def _merge_int(a: Message, b: Message) -> Message:
    out = Message(list(a.fields))
    bounds = IntegerStatistics.MINIMUM, IntegerStatistics.MAXIMUM
    _merge_minmax(a, b, out, Message.sint, Message.set_sint, *bounds)
    total_field = IntegerStatistics.SUM
    sa, sb = a.sint(total_field), b.sint(total_field)
    # A side with values but no sum had overflowed; the merged sum is unknown too.
    if (sa is None and _has_values(a, *bounds)) or (sb is None and _has_values(b, *bounds)):
        out.remove(total_field)
    else:
        total = (sa or 0) + (sb or 0)
        if INT64_MIN <= total <= INT64_MAX:
            out.set_sint(total_field, total)
        else:
            out.remove(total_field)
    return out


def _merge_double(a: Message, b: Message) -> Message:
    out = Message(list(a.fields))
    _merge_minmax(a, b, out, Message.double, Message.set_double, DoubleStatistics.MINIMUM,
                  DoubleStatistics.MAXIMUM)
    total = DoubleStatistics.SUM
    if a.has(total) or b.has(total):
        out.set_double(total, (a.double(total) or 0.0) + (b.double(total) or 0.0))
    return out


def _merge_string(a: Message, b: Message) -> Message:
    """Minimum/maximum compare as UTF-8 bytes; truncated bounds (lowerBound, upperBound)
    take part when a writer dropped an over-long minimum or maximum."""
    out = Message(list(a.fields))
    for exact, bound, pick in ((StringStatistics.MINIMUM, StringStatistics.LOWER_BOUND, min),
                               (StringStatistics.MAXIMUM, StringStatistics.UPPER_BOUND, max)):
        candidates = []
        for side in (a, b):
            value, truncated = side.bytes_(exact), side.bytes_(bound)
            if value is not None:
                candidates.append((value, True))
            elif truncated is not None:
                candidates.append((truncated, False))
        out.remove(exact)
        out.remove(bound)
        if not candidates:
            continue
        best = pick(candidates, key=lambda c: c[0])
        exact_values = [c for c in candidates if c[0] == best[0] and c[1]]
        out.set_bytes(exact if exact_values else bound, best[0])
    total = StringStatistics.SUM
    if a.has(total) or b.has(total):
        out.set_sint(total, (a.sint(total) or 0) + (b.sint(total) or 0))
    return out


def _merge_bucket(a: Message, b: Message) -> Message:
    out = Message(list(a.fields))
    ca, cb = a.packed_uints(BucketStatistics.COUNT), b.packed_uints(BucketStatistics.COUNT)
    size = max(len(ca), len(cb))
    ca += [0] * (size - len(ca))
    cb += [0] * (size - len(cb))
    out.set_packed_uints(BucketStatistics.COUNT, [x + y for x, y in zip(ca, cb, strict=True)])
    return out


def _decimal(m: Message, field: int) -> Decimal | None:
    text = m.string(field)
    if text is None:
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def _merge_decimal(a: Message, b: Message) -> Message:
    out = Message(list(a.fields))
    bounds = DecimalStatistics.MINIMUM, DecimalStatistics.MAXIMUM
    for field, pick in zip(bounds, (min, max), strict=True):
        values = [(v, s) for s in (a, b) if (v := _decimal(s, field)) is not None]
        if values:
            out.set_bytes(field, pick(values, key=lambda p: p[0])[1].bytes_(field) or b"")
    sum_field = DecimalStatistics.SUM
    sa, sb = _decimal(a, sum_field), _decimal(b, sum_field)
    if (sa is None and _has_values(a, *bounds)) or (sb is None and _has_values(b, *bounds)):
        out.remove(sum_field)
        return out
    with localcontext(prec=200):  # exact: the default 28 digits would round the sum
        total = (sa or Decimal(0)) + (sb or Decimal(0))
    if len(total.as_tuple().digits) > MAX_DECIMAL_DIGITS:
        out.remove(sum_field)  # overflow: ORC marks the sum unknown
    else:
        out.set_bytes(sum_field, format(total, "f").encode())
    return out


def _merge_date(a: Message, b: Message) -> Message:
    out = Message(list(a.fields))
    _merge_minmax(a, b, out, Message.sint, Message.set_sint, DateStatistics.MINIMUM,
                  DateStatistics.MAXIMUM)
    return out


def _merge_binary(a: Message, b: Message) -> Message:
    out = Message(list(a.fields))
    total = BinaryStatistics.SUM
    out.set_sint(total, (a.sint(total) or 0) + (b.sint(total) or 0))
    return out


def _merge_timestamp(a: Message, b: Message) -> Message:
    """Timestamps compare on (UTC millis, nanos field); 0 in the nanos field means absent,
    otherwise it holds the sub-millisecond nanos plus one."""
    out = Message(list(a.fields))
    _merge_minmax(a, b, out, Message.sint, Message.set_sint,  # local-time millis (legacy)
                  TimestampStatistics.MINIMUM, TimestampStatistics.MAXIMUM)
    for utc, nanos, pick in (
            (TimestampStatistics.MINIMUM_UTC, TimestampStatistics.MINIMUM_NANOS, min),
            (TimestampStatistics.MAXIMUM_UTC, TimestampStatistics.MAXIMUM_NANOS, max)):
        candidates = [(s.sint(utc) or 0, s.uint(nanos) or 0) for s in (a, b) if s.has(utc)]
        if not candidates:
            continue
        best = pick(candidates, key=lambda c: (c[0], max(c[1] - 1, 0)))
        out.set_sint(utc, best[0])
        if best[1]:
            out.set_uint(nanos, best[1])
        else:
            out.remove(nanos)
    return out


def _merge_collection(a: Message, b: Message) -> Message:
    out = Message(list(a.fields))
    _merge_minmax(a, b, out, Message.uint, Message.set_uint, CollectionStatistics.MIN_CHILDREN,
                  CollectionStatistics.MAX_CHILDREN)
    total = CollectionStatistics.TOTAL_CHILDREN
    out.set_uint(total, (a.uint(total) or 0) + (b.uint(total) or 0))
    return out


_MERGERS: dict[int, Callable[[Message, Message], Message]] = {
    ColumnStatistics.INT_STATISTICS: _merge_int,
    ColumnStatistics.DOUBLE_STATISTICS: _merge_double,
    ColumnStatistics.STRING_STATISTICS: _merge_string,
    ColumnStatistics.BUCKET_STATISTICS: _merge_bucket,
    ColumnStatistics.DECIMAL_STATISTICS: _merge_decimal,
    ColumnStatistics.DATE_STATISTICS: _merge_date,
    ColumnStatistics.BINARY_STATISTICS: _merge_binary,
    ColumnStatistics.TIMESTAMP_STATISTICS: _merge_timestamp,
    ColumnStatistics.COLLECTION_STATISTICS: _merge_collection,
}

__all__ = ["merge_statistics"]
