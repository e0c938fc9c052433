"""Parse Kafka record values (JSON objects) into Arrow rows of a table schema, on executors.

The fast path hands a whole batch to pyarrow's JSON reader with the schema as its explicit
schema (strict types, unknown fields ignored). When that fails, or the row count does not
match the record count, the batch is bisected until every bad record stands alone, so one bad
record costs O(log n) parses and the reason comes from pyarrow. Knows Arrow and JSON, not ACID.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

_NEWLINE = pa.scalar(b"\n", pa.binary())
_EMPTY = pa.scalar(b"", pa.binary())


@dataclass(frozen=True)
class ParsedValues:
    """The outcome of parsing n record values.

    Attributes:
        rows: one row per good record, in record order, with exactly the parse schema.
        good: indices (into the input) of the good records, ascending; len == rows.num_rows.
        bad: (index, reason) of every record that could not be parsed, ascending.
    """

    rows: pa.Table
    good: pa.Array
    bad: list[tuple[int, str]]


def parse_json_values(values: pa.Array, schema: pa.Schema) -> ParsedValues:
    """Parse each value as one JSON object with `schema`'s fields (others are ignored).

    A record is bad when its value is null or blank, is not exactly one JSON object, or a
    field does not convert to its column's type (e.g. "abc" for BIGINT, 1.257 for
    DECIMAL(10,2)); missing fields are null, as Spark's from_json makes them.
    """
    values = values.cast(pa.binary())
    n = len(values)
    blank = pc.fill_null(pc.match_substring_regex(values, r"^\s*$"), True)
    bad: list[tuple[int, str]] = []
    if pc.any(blank).as_py():
        for i, (is_blank, v) in enumerate(zip(blank.to_pylist(), values.is_null().to_pylist(),
                                              strict=True)):
            if is_blank:
                bad.append((i, "the record value is null" if v else "the record value is blank"))
        candidates = pc.indices_nonzero(pc.invert(blank))
    else:
        candidates = pa.array(range(n), type=pa.int64()) if n else pa.array([], pa.int64())
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    tables: list[pa.Table] = []
    good: list[pa.Array] = []
    _parse_range(values, candidates, schema, options, tables, good, bad)
    bad.sort()
    rows = pa.concat_tables(tables) if tables else schema.empty_table()
    good_idx = pa.concat_arrays(good) if good else pa.array([], pa.int64())
    return ParsedValues(rows.cast(schema) if rows.schema != schema else rows, good_idx, bad)


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
