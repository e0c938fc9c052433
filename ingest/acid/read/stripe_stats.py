"""Per-stripe column bounds from an ORC tail, for skipping stripes no row of which can match.

Reads the `Metadata` section's `StripeStatistics` (docs/format.md §21) into `Domain` values
that `ingest.acid.predicate.conditions` evaluates. Every doubt widens a domain to "anything":
a stripe is skipped only when its statistics prove that none of its rows can match. Knows ORC
statistics and the ACID event struct's column layout, not snapshots.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

import pyarrow as pa

from ingest.acid.format import ACID_FIELD_NAMES, KEY_COLUMNS, ROW_POSITION
from ingest.acid.predicate import UNKNOWN, Domain
from ingest.orc import (
    BucketStatistics,
    ColumnStatistics,
    DateStatistics,
    DecimalStatistics,
    DoubleStatistics,
    FileTail,
    IntegerStatistics,
    Message,
    StringStatistics,
    TimestampStatistics,
    Type,
)

# ORC keeps timestamp bounds in UTC milliseconds, shifted by the writer's time zone for the
# zone-less type; one day either side covers every zone offset, so a bound never excludes a
# value the column holds.
_TIMESTAMP_MARGIN_MS = 24 * 3600 * 1000
_PER_MS = {"s": None, "ms": 1, "us": 1_000, "ns": 1_000_000}


def row_columns(tail: FileTail, *, acid: bool) -> dict[str, int]:
    """The ORC column id of each top-level row field, by the file's field name.

    Args:
        tail: the file's tail.
        acid: True for an ACID event file (row fields under the `row` struct), False for an
            original file (row fields at the root).

    Returns:
        {} when the file's types do not have the expected shape (no skipping then).
    """
    types = tail.types
    if not types:
        return {}
    parent = 0
    if acid:
        root = _children(types[0])
        if len(root) <= ROW_POSITION:
            return {}
        parent = root[ROW_POSITION][1]
        if parent >= len(types):
            return {}
    return {name: column for name, column in _children(types[parent]) if column < len(types)}


def _children(t: Message) -> list[tuple[str, int]]:
    ids = t.packed_uints(Type.SUBTYPES)
    names = [bytes(n).decode("utf-8", "replace") for n in t.raw(Type.FIELD_NAMES)
             if isinstance(n, bytes)]
    return list(zip(names, ids, strict=False))


def stripe_domains(tail: FileTail, stripe: int, columns: Mapping[str, tuple[int, pa.DataType]],
                   ) -> dict[str, Domain] | None:
    """Domains of the given columns in one stripe, or None when the file has no statistics
    for that stripe.

    Args:
        columns: table column name -> (ORC column id, the table's Arrow type).
    """
    stats = tail.stripe_statistics
    if stripe >= len(stats):
        return None
    per_column = stats[stripe]
    out = {}
    for name, (column, arrow_type) in columns.items():
        if column >= len(per_column):
            continue
        out[name] = column_domain(per_column[column], arrow_type)
    return out


def column_domain(stats: Message, arrow_type: pa.DataType) -> Domain:
    """A column's domain from its `ColumnStatistics`, compared as `value_key` orders the
    table's type; anything not understood gives unknown bounds."""
    count = stats.uint(ColumnStatistics.NUMBER_OF_VALUES)
    # Writers before ORC 1.4 leave hasNull out: then nulls may be there.
    has_null = bool(stats.uint(ColumnStatistics.HAS_NULL, 1))
    if count is None:
        return UNKNOWN
    if count == 0:
        return Domain(None, None, has_values=False, has_null=True)
    try:
        low, high = _bounds(stats, arrow_type, count)
    except (ValueError, InvalidOperation, OverflowError):
        low, high = None, None
    return Domain(low, high, has_values=True, has_null=has_null)


def _bounds(stats: Message, t: pa.DataType, count: int) -> tuple[object, object]:
    none = (None, None)
    if pa.types.is_integer(t):
        m = _one(stats, ColumnStatistics.INT_STATISTICS)
        if m is None:
            return none
        return m.sint(IntegerStatistics.MINIMUM), m.sint(IntegerStatistics.MAXIMUM)
    if pa.types.is_floating(t):
        m = _one(stats, ColumnStatistics.DOUBLE_STATISTICS)
        if m is None:
            return none
        # ORC leaves NaN out of the bounds; a NaN makes the sum NaN, and NaN != x holds.
        total = m.double(DoubleStatistics.SUM)
        if total is None or math.isnan(total):
            return none
        return m.double(DoubleStatistics.MINIMUM), m.double(DoubleStatistics.MAXIMUM)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        m = _one(stats, ColumnStatistics.STRING_STATISTICS)
        if m is None:
            return none
        low = m.bytes_(StringStatistics.MINIMUM)
        high = m.bytes_(StringStatistics.MAXIMUM)
        # A bound kept in place of an over-long value is still below (above) every value.
        low = low if low is not None else m.bytes_(StringStatistics.LOWER_BOUND)
        high = high if high is not None else m.bytes_(StringStatistics.UPPER_BOUND)
        return low, high
    if pa.types.is_decimal(t):
        m = _one(stats, ColumnStatistics.DECIMAL_STATISTICS)
        if m is None:
            return none
        return (_decimal(m.string(DecimalStatistics.MINIMUM)),
                _decimal(m.string(DecimalStatistics.MAXIMUM)))
    if pa.types.is_date32(t):
        m = _one(stats, ColumnStatistics.DATE_STATISTICS)
        if m is None:
            return none
        return m.sint(DateStatistics.MINIMUM), m.sint(DateStatistics.MAXIMUM)
    if pa.types.is_timestamp(t):
        m = _one(stats, ColumnStatistics.TIMESTAMP_STATISTICS)
        per_ms = _PER_MS.get(t.unit)
        if m is None or per_ms is None:
            return none
        low_ms = m.sint(TimestampStatistics.MINIMUM_UTC)
        high_ms = m.sint(TimestampStatistics.MAXIMUM_UTC)
        if low_ms is None or high_ms is None:
            return none
        # +1 ms: the nanos within the last millisecond are not part of the bound.
        return ((low_ms - _TIMESTAMP_MARGIN_MS) * per_ms,
                (high_ms + _TIMESTAMP_MARGIN_MS + 1) * per_ms)
    if pa.types.is_boolean(t):
        m = _one(stats, ColumnStatistics.BUCKET_STATISTICS)
        counts = m.packed_uints(BucketStatistics.COUNT) if m is not None else []
        if not counts:
            return none
        trues = counts[0]
        return trues == count, trues > 0
    return none


# ORC column ids of the event struct's key fields: id 0 is the struct, its fields follow in order.
_KEY_COLUMN_IDS = tuple(ACID_FIELD_NAMES.index(name) + 1 for name in KEY_COLUMNS)


def sequential_keys(tail: FileTail, stripe: int) -> tuple[int, int, int] | None:
    """(originalTransaction, bucket, first rowId) of an ACID stripe whose statistics prove
    that its ROW__IDs are (w, b, first), (w, b, first + 1), ... in row order; else None.

    The proof: one write id, one bucket, no null keys, and a rowId range exactly as long as
    the stripe. Events in an ACID file are sorted by ROW__ID and each ROW__ID is unique (every
    writer keeps both, and Hive's merge relies on them), so n distinct ascending rowIds within
    a range of n values are that range. A stripe proven so needs its key columns made, not
    decoded (docs/format.md §21).
    """
    stats = tail.stripe_statistics
    if stripe >= len(stats) or stripe >= len(tail.stripes):
        return None
    rows = tail.stripes[stripe].number_of_rows
    bounds = []
    for column in _KEY_COLUMN_IDS:
        if column >= len(stats[stripe]):
            return None
        column_stats = stats[stripe][column]
        ints = _one(column_stats, ColumnStatistics.INT_STATISTICS)
        # Values counted are the non-null ones: as many as rows means no null.
        if ints is None or column_stats.uint(ColumnStatistics.NUMBER_OF_VALUES) != rows:
            return None
        low, high = ints.sint(IntegerStatistics.MINIMUM), ints.sint(IntegerStatistics.MAXIMUM)
        if low is None or high is None:
            return None
        bounds.append((low, high))
    (w_low, w_high), (b_low, b_high), (r_low, r_high) = bounds
    if rows == 0 or w_low != w_high or b_low != b_high or r_high - r_low + 1 != rows:
        return None
    return w_low, b_low, r_low


def _one(stats: Message, number: int) -> Message | None:
    found = stats.messages(number)
    return found[0] if found else None


def _decimal(text: str | None) -> Decimal | None:
    return None if text is None else Decimal(text)


__all__ = ["column_domain", "row_columns", "sequential_keys", "stripe_domains"]
