"""Parse Kafka record values (JSON objects) into Arrow rows of a table schema, on executors.

The fast path hands a whole batch to pyarrow's JSON reader with the schema as its explicit
schema (strict types, unknown fields ignored). When that fails, or the row count does not
match the record count, the batch is bisected until every bad record stands alone, so one bad
record costs O(log n) parses and the reason comes from pyarrow. Values that are not UTF-8 or
not a JSON object are bad before parsing; decimals follow `ingest.table.values`. Knows Arrow
and JSON, not ACID.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ingest.table import (
    WIDE_DECIMAL,
    describe_decimal_error,
    outside_nanoseconds,
    to_decimal,
    to_nanosecond_timestamp,
)

_NEWLINE = pa.scalar(b"\n", pa.binary())
_EMPTY = pa.scalar(b"", pa.binary())


@dataclass(frozen=True)
class ParsedValues:
    """The outcome of parsing n record values.

    Attributes:
        rows: one row per good record, in record order, with exactly the parse schema.
        good: indices (into the input) of the good records, ascending; len == rows.num_rows.
        bad: (index, reason) of every record that could not be parsed, ascending.
        skipped: indices of tombstones (null values) left out with skip_tombstones.
    """

    rows: pa.Table
    good: pa.Array
    bad: list[tuple[int, str]]
    skipped: list[int] = dataclasses.field(default_factory=list)


TOMBSTONE_REASON = "the record value is null"
# Blank, or a JSON value that is not an object; other text is left to the parser's reason.
_NOT_AN_OBJECT = r"^\s*$|^\s*(null|true|false|[\[\"0-9-])"


def parse_json_values(values: pa.Array, schema: pa.Schema, *,
                      skip_tombstones: bool = False) -> ParsedValues:
    """Parse each value as one JSON object with `schema`'s fields (others are ignored).

    A record is bad when its value is null (a tombstone, unless skip_tombstones) or blank,
    is not UTF-8, is not exactly one JSON object (`null`, `[]` and `5` are not), or a field
    does not convert to its column's type (e.g. "abc" for BIGINT, 1000 for DECIMAL(5,2));
    decimals are rounded half up to their scale, as Hive does; missing fields are null, as
    Spark's from_json makes them.
    """
    values = values.cast(pa.binary())
    n = len(values)
    # Not an object: blank, `null`, `[]`, a number or string; also a tombstone (null value).
    # (pyarrow makes `null` an all-null row, and crashes on a batch that starts with one.)
    blank = pc.fill_null(pc.match_substring_regex(values, _NOT_AN_OBJECT), True)
    bad: list[tuple[int, str]] = []
    skipped: list[int] = []
    if pc.any(blank).as_py():
        flagged = pc.indices_nonzero(blank)
        for i, v in zip(flagged.to_pylist(), values.take(flagged).to_pylist(), strict=True):
            if v is None:
                (skipped.append(i) if skip_tombstones else bad.append((i, TOMBSTONE_REASON)))
            elif not v.strip():
                bad.append((i, "the record value is blank"))
            else:
                bad.append((i, _not_an_object(v)))
        candidates = pc.indices_nonzero(pc.invert(blank))
    else:
        candidates = pa.array(range(n), type=pa.int64()) if n else pa.array([], pa.int64())
    candidates = _drop_invalid_utf8(values, candidates, bad)
    read_schema = pa.schema([pa.field(f.name, _read_type(f.type)) for f in schema])
    options = pj.ParseOptions(explicit_schema=read_schema, unexpected_field_behavior="ignore")
    tables: list[pa.Table] = []
    good: list[pa.Array] = []
    _parse_range(values, candidates, read_schema, options, tables, good, bad)
    rows = pa.concat_tables(tables) if tables else read_schema.empty_table()
    good_idx = pa.concat_arrays(good) if good else pa.array([], pa.int64())
    rows, good_idx = _decimals(rows, good_idx, schema, bad)
    rows, good_idx = _timestamps(rows, good_idx, schema, bad)
    bad.sort()
    return ParsedValues(rows.cast(schema) if rows.schema != schema else rows, good_idx, bad,
                        skipped)


def _not_an_object(value: bytes) -> str:
    start = value.strip()[:20].decode("utf-8", "backslashreplace")
    return f"the record value is not a JSON object (it starts with {start!r})"


def _drop_invalid_utf8(values: pa.Array, candidates: pa.Array,
                       bad: list[tuple[int, str]]) -> pa.Array:
    """Candidates whose bytes are UTF-8; the others are bad (JSON text must be UTF-8).

    pyarrow's JSON reader copies invalid bytes into string columns unchecked, and such a
    string would make every reader of the table fail (docs/invariants.md, 6).
    """
    subset = values.take(candidates)
    try:
        subset.cast(pa.string())
        return candidates
    except pa.ArrowInvalid:
        pass
    keep: list[int] = []
    for index, value in zip(candidates.to_pylist(), subset.to_pylist(), strict=True):
        try:
            value.decode("utf-8")
            keep.append(index)
        except UnicodeDecodeError as e:
            bad.append((index, f"the record value is not UTF-8: {value[e.start:e.end]!r} at "
                               f"byte {e.start}"))
    return pa.array(keep, pa.int64())


def _decimals(rows: pa.Table, good: pa.Array, schema: pa.Schema,
              bad: list[tuple[int, str]]) -> tuple[pa.Table, pa.Array]:
    """Decimal fields rounded to their scale; records whose value overflows become bad."""
    fields = [f for f in schema if pa.types.is_decimal(f.type)]
    if not fields or rows.num_rows == 0:
        return rows, good
    overflow = pa.repeat(pa.scalar(False), rows.num_rows)
    for f in fields:
        converted, wrong = to_decimal(rows.column(f.name), f.type)
        for i in pc.indices_nonzero(pc.and_(wrong, pc.invert(overflow))).to_pylist():
            value = rows.column(f.name)[i].as_py()
            bad.append((good[i].as_py(), f"field {f.name!r}: "
                                         f"{describe_decimal_error(value, f.type)}"))
        overflow = pc.or_(overflow, wrong)
        rows = rows.set_column(rows.schema.get_field_index(f.name), f.name, converted)
    if pc.any(overflow).as_py():
        keep = pc.invert(overflow)
        rows, good = rows.filter(keep), good.filter(keep)
    return rows, good


def _read_type(t: pa.DataType) -> pa.DataType:
    # Decimals as exact text and timestamps as text: pyarrow's JSON reader rounds the one
    # and refuses the other in the first second of the nanosecond range.
    if pa.types.is_decimal(t):
        return WIDE_DECIMAL
    return pa.string() if pa.types.is_timestamp(t) else t


def _timestamps(rows: pa.Table, good: pa.Array, schema: pa.Schema,
                bad: list[tuple[int, str]]) -> tuple[pa.Table, pa.Array]:
    """Timestamp fields parsed; a record whose value is no timestamp, or one outside
    1677-09-21 .. 2262-04-11 (the sink writes nanoseconds), becomes bad."""
    fields = [f for f in schema if pa.types.is_timestamp(f.type)]
    if not fields or rows.num_rows == 0:
        return rows, good
    wrong = np.zeros(rows.num_rows, dtype=bool)
    for f in fields:
        converted = to_nanosecond_timestamp(rows.column(f.name))
        if converted.bad_row is not None:
            mask = converted.array.is_null().to_numpy(zero_copy_only=False) & ~pc.is_null(
                rows.column(f.name)).to_numpy(zero_copy_only=False)
            for i in np.flatnonzero(mask & ~wrong):
                text = rows.column(f.name)[int(i)].as_py()
                bad.append((good[int(i)].as_py(), _timestamp_reason(f.name, text)))
            wrong |= mask
        rows = rows.set_column(rows.schema.get_field_index(f.name), f.name,
                               converted.array.cast(f.type))
    if wrong.any():
        keep = pa.array(~wrong)
        rows, good = rows.filter(keep), good.filter(keep)
    return rows, good


def _timestamp_reason(name: str, text: str) -> str:
    if outside_nanoseconds(text):
        # A valid Hive timestamp the sink cannot write yet: say so, not "couldn't parse".
        return (f"field {name!r}: timestamp {text!r} is outside 1677-09-21 .. 2262-04-11, "
                "which the stream does not write (ingest load does: docs/format.md §19)")
    return (f"field {name!r}: {text!r} is not a timestamp (yyyy-mm-dd hh:mm:ss.fffffffff, "
            "years 0001-9999)")


def _joined(values: pa.Array) -> pa.Buffer:
    """The values as newline-delimited JSON: one contiguous buffer, no Python loop."""
    lines = pc.binary_join_element_wise(values, _NEWLINE, _EMPTY)
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)
    start, end = int(offsets[lines.offset]), int(offsets[lines.offset + len(lines)])
    return lines.buffers()[2].slice(start, end - start)


def _read(data: pa.Buffer, options: pj.ParseOptions) -> pa.Table:
    return pj.read_json(pa.BufferReader(data), parse_options=options)


def _parse_range(values: pa.Array, indices: pa.Array, schema: pa.Schema,
                 options: pj.ParseOptions, tables: list[pa.Table], good: list[pa.Array],
                 bad: list[tuple[int, str]]) -> None:
    n = len(indices)
    if n == 0:
        return
    subset = values.take(indices)
    try:
        table = _read(_joined(subset), options)
        error = None if table.num_rows == n else f"{table.num_rows} JSON objects for {n} records"
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        table, error = None, _reason(e)
    if error is None and table is not None:
        tables.append(table)
        good.append(indices)
        return
    if n == 1:
        single = _parse_single(subset, schema, error or "unparsable")
        if isinstance(single, str):
            bad.append((indices[0].as_py(), single))
        else:
            tables.append(single)
            good.append(indices)
        return
    half = n // 2
    _parse_range(values, indices.slice(0, half), schema, options, tables, good, bad)
    _parse_range(values, indices.slice(half), schema, options, tables, good, bad)


def _parse_single(value: pa.Array, schema: pa.Schema, error: str) -> pa.Table | str:
    """One record: retried allowing newlines inside (pretty-printed JSON is still one record)."""
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore",
                              newlines_in_values=True)
    try:
        table = _read(_joined(value), options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return error
    if table.num_rows != 1:
        return f"expected one JSON object, found {table.num_rows}"
    return table


def _reason(e: Exception) -> str:
    text = str(e).strip()
    for suffix in (" in row 0",):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    return text


__all__ = ["ParsedValues", "parse_json_values"]
