"""Merging ORC ColumnStatistics: stripe (or chunk) statistics into file statistics.

Mirrors what ORC writers do when they fold stripe statistics into the footer: counts add,
minima and maxima combine, sums add and are dropped on int64 overflow (the C++ and Java
convention for "sum unknown"). Fields we do not know are kept from the left-hand side.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation, localcontext

from ingest.orc._protobuf import Message

# ColumnStatistics field numbers (orc_proto.proto).
NUMBER_OF_VALUES, INT, DOUBLE, STRING, BUCKET, DECIMAL, DATE, BINARY, TIMESTAMP = range(1, 10)
HAS_NULL, BYTES_ON_DISK, COLLECTION = 10, 11, 12

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_DECIMAL_DIGITS = 38


def merge_statistics(left: Message, right: Message) -> Message:
    """Return the statistics of the union of two row sets (neither argument is changed)."""
    out = Message(list(left.fields))
    out.set_uint(NUMBER_OF_VALUES, (left.uint(NUMBER_OF_VALUES) or 0)
                 + (right.uint(NUMBER_OF_VALUES) or 0))
    if left.has(HAS_NULL) or right.has(HAS_NULL):
        out.set_uint(HAS_NULL, int(bool(left.uint(HAS_NULL)) or bool(right.uint(HAS_NULL))))
    if left.has(BYTES_ON_DISK) and right.has(BYTES_ON_DISK):
        out.set_uint(BYTES_ON_DISK,
                     (left.uint(BYTES_ON_DISK) or 0) + (right.uint(BYTES_ON_DISK) or 0))
    else:
        out.remove(BYTES_ON_DISK)
    # Only the kinds `right` has change anything (a column has one kind: decode just that).
    for number in dict.fromkeys(n for n, _, _ in right.fields if n in _MERGERS):
        merge = _MERGERS[number]
        a, b = left.messages(number), right.messages(number)
        if not a:
            out.set_messages(number, [b[0]])
            continue
        out.set_messages(number, [merge(a[0], b[0])])
    return out


def _has_values(m: Message) -> bool:
    return m.has(1) or m.has(2)


def _merge_minmax(a: Message, b: Message, out: Message, read, write, min_field: int = 1,
                  max_field: int = 2) -> None:
    for field, pick in ((min_field, min), (max_field, max)):
        values = [v for v in (read(a, field), read(b, field)) if v is not None]
        if values:
            write(out, field, pick(values))


def _merge_int(a: Message, b: Message) -> Message:
    out = Message(list(a.fields))
    _merge_minmax(a, b, out, Message.sint, Message.set_sint)
    sa, sb = a.sint(3), b.sint(3)
    # A side with values but no sum had overflowed; the merged sum is unknown too.
    if (sa is None and _has_values(a)) or (sb is None and _has_values(b)):
        out.remove(3)
    else:
        total = (sa or 0) + (sb or 0)
        if INT64_MIN <= total <= INT64_MAX:
            out.set_sint(3, total)
        else:
            out.remove(3)
    return out


def _merge_double(a: Message, b: Message) -> Message:
    out = Message(list(a.fields))
    _merge_minmax(a, b, out, Message.double, Message.set_double)
    if a.has(3) or b.has(3):
        out.set_double(3, (a.double(3) or 0.0) + (b.double(3) or 0.0))
    return out


def _merge_string(a: Message, b: Message) -> Message:
    """Minimum/maximum compare as UTF-8 bytes; truncated bounds (lowerBound 4, upperBound 5)
    take part when a writer dropped an over-long minimum or maximum."""
    out = Message(list(a.fields))
    for exact, bound, pick in ((1, 4, min), (2, 5, max)):
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
    if a.has(3) or b.has(3):
        out.set_sint(3, (a.sint(3) or 0) + (b.sint(3) or 0))
    return out


def _merge_bucket(a: Message, b: Message) -> Message:
    out = Message(list(a.fields))
    ca, cb = a.packed_uints(1), b.packed_uints(1)
    size = max(len(ca), len(cb))
    ca += [0] * (size - len(ca))
    cb += [0] * (size - len(cb))
    out.set_packed_uints(1, [x + y for x, y in zip(ca, cb, strict=True)])
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
    for field, pick in ((1, min), (2, max)):
        values = [(v, s) for s in (a, b) if (v := _decimal(s, field)) is not None]
        if values:
            out.set_bytes(field, pick(values, key=lambda p: p[0])[1].bytes_(field) or b"")
    sa, sb = _decimal(a, 3), _decimal(b, 3)
    if (sa is None and _has_values(a)) or (sb is None and _has_values(b)):
        out.remove(3)
        return out
    with localcontext(prec=200):  # exact: the default 28 digits would round the sum
        total = (sa or Decimal(0)) + (sb or Decimal(0))
    if len(total.as_tuple().digits) > MAX_DECIMAL_DIGITS:
        out.remove(3)  # overflow: ORC marks the sum unknown
    else:
        out.set_bytes(3, format(total, "f").encode())
    return out


def _merge_date(a: Message, b: Message) -> Message:
    out = Message(list(a.fields))
    _merge_minmax(a, b, out, Message.sint, Message.set_sint)
    return out


def _merge_binary(a: Message, b: Message) -> Message:
    out = Message(list(a.fields))
    out.set_sint(1, (a.sint(1) or 0) + (b.sint(1) or 0))
    return out


def _merge_timestamp(a: Message, b: Message) -> Message:
    """Timestamps compare on (UTC millis, nanos field); 0 in the nanos field means absent,
    otherwise it holds the sub-millisecond nanos plus one."""
    out = Message(list(a.fields))
    _merge_minmax(a, b, out, Message.sint, Message.set_sint)  # local-time millis (legacy)
    for utc, nanos, pick in ((3, 5, min), (4, 6, max)):
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
    _merge_minmax(a, b, out, Message.uint, Message.set_uint)
    out.set_uint(3, (a.uint(3) or 0) + (b.uint(3) or 0))
    return out


_MERGERS = {
    INT: _merge_int,
    DOUBLE: _merge_double,
    STRING: _merge_string,
    BUCKET: _merge_bucket,
    DECIMAL: _merge_decimal,
    DATE: _merge_date,
    BINARY: _merge_binary,
    TIMESTAMP: _merge_timestamp,
    COLLECTION: _merge_collection,
}

__all__ = ["merge_statistics"]
