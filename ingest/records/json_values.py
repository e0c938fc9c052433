"""Parse Kafka record values (JSON objects) into Arrow rows of a table schema, on executors.

The fast path hands a whole batch to pyarrow's JSON reader with the schema as its explicit
schema (strict types; fields outside it inferred, which lists the records holding each new
top-level field, `ParsedValues.new_by_field`, at no extra cost and no Python per record).
When that fails, or the row count does not match the record count, the batch is bisected
until every bad record stands alone, so one bad record costs O(log n) parses; its reason
names the field and the conflicting value when the record is JSON. A range whose new fields
differ in kind between records (no one type to infer) is scanned once with Python's json
instead, then read ignoring them. A STRING column holding a JSON object or array takes its
JSON text (as Spark's from_json does): such a column is then filled from the same scan.
Values that are not UTF-8 or not a JSON object are bad before parsing; decimals follow
`ingest.records.values`.
Knows Arrow and JSON, not ACID.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ingest.acid.format import to_ddl
from ingest.records.fields import json_kind
from ingest.records.new_fields import NewField, NewFieldsByName, by_field, by_record, merged
from ingest.records.values import (
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
        new_by_field: by name, the records, good or bad, holding a top-level field the
            schema lacks (left out of `rows`) with a value that is not null, and its kind.
        bad_columns: `bad` as arrays (indices, reasons), when whoever made `bad` had them
            so (many records dead-lettered at once); None: `bad_arrays` makes them.
        new_field_types: by name, the exact Hive types a typed format declares for the new
            fields (Avro writer schemas); empty for JSON, whose kinds decide.
    """

    rows: pa.Table
    good: pa.Array
    bad: list[tuple[int, str]]
    skipped: list[int] = dataclasses.field(default_factory=list)
    new_by_field: NewFieldsByName = dataclasses.field(default_factory=dict)
    bad_columns: tuple[pa.Array, pa.Array] | None = dataclasses.field(
        default=None, repr=False, compare=False)
    new_field_types: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def bad_arrays(self) -> tuple[pa.Array, pa.Array]:
        """The bad records' indices (int64) and reasons (string), ascending, as arrays."""
        if self.bad_columns is not None:
            return self.bad_columns
        at, reasons = zip(*self.bad, strict=True) if self.bad else ((), ())
        return pa.array(at, pa.int64()), pa.array(reasons, pa.string())

    @property
    def new_fields(self) -> list[tuple[int, dict[str, str]]]:
        """(index, {name: JSON kind}) of each record holding new fields, ascending (made
        per record: for tests and messages, not the stream's path)."""
        return by_record(self.new_by_field)


TOMBSTONE_REASON = "the record value is null"
# Blank, or a JSON value that is not an object; other text is left to the parser's reason.
_NOT_AN_OBJECT = r"^\s*$|^\s*(null|true|false|[\[\"0-9-])"


def parse_json_values(values: pa.Array, schema: pa.Schema, *,
                      skip_tombstones: bool = False) -> ParsedValues:
    """Parse each value as one JSON object with `schema`'s fields; other top-level fields
    are left out of the rows and listed in `new_fields` (the caller applies --on-new-field).

    A record is bad when its value is null (a tombstone, unless skip_tombstones) or blank,
    is not UTF-8, is not exactly one JSON object (`null`, `[]` and `5` are not), or a field
    does not convert to its column's type (e.g. "abc" for BIGINT, 1000 for DECIMAL(5,2)):
    the reason then names the field, the value and the column. Decimals are rounded half up
    to their scale, as Hive does; missing fields are null, as Spark's from_json makes them;
    a STRING column takes a JSON object or array as its compact JSON text.
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
    text_columns: set[str] = set()
    while True:
        try:
            result = _Parse(values, schema, text_columns).run(candidates)
            break
        except _NestedJson as e:  # a STRING column holds objects: parse again, scanning it
            text_columns.add(e.column)
    rows, good_idx, more_bad, new_fields = result
    bad += more_bad
    rows, good_idx = _decimals(rows, good_idx, schema, bad)
    rows, good_idx = _timestamps(rows, good_idx, schema, bad)
    bad.sort()
    return ParsedValues(rows.cast(schema) if rows.schema != schema else rows, good_idx, bad,
                        skipped, new_fields)


class _NestedJson(Exception):
    """A STRING column got a JSON object or array in some record."""

    def __init__(self, column: str) -> None:
        super().__init__(column)
        self.column = column


_CHANGED = re.compile(r"Column\(/([^/)]+)\) changed from string to (object|array)")
_COLUMN = re.compile(r"Column\(/([^/)]+)")


class _Parse:
    """One parse of the candidate records, given which STRING columns hold JSON text."""

    def __init__(self, values: pa.Array, schema: pa.Schema, text_columns: set[str]) -> None:
        self.values, self.schema, self.text_columns = values, schema, text_columns
        self.known = set(schema.names)
        self.bad: list[tuple[int, str]] = []
        # New fields: per record where Python's json found them (the rare ranges), by field
        # where pyarrow inferred them.
        self.new: dict[int, dict[str, str]] = {}
        self.inferred: dict[str, list[NewField]] = {}
        self.texts: dict[str, dict[int, str | None]] = {c: {} for c in text_columns}
        read = [pa.field(f.name, _read_type(f.type)) for f in schema
                if f.name not in text_columns]
        self.read_schema = pa.schema(read)
        self.tables: list[pa.Table] = []
        self.good: list[pa.Array] = []

    def options(self, *, infer: bool, newlines: bool = False) -> pj.ParseOptions:
        # infer: fields outside the schema are inferred (and become new_fields); else
        # ignored, after `scan_new` listed them.
        return pj.ParseOptions(explicit_schema=self.read_schema, newlines_in_values=newlines,
                               unexpected_field_behavior="infer" if infer else "ignore")

    def run(self, candidates: pa.Array
            ) -> tuple[pa.Table, pa.Array, list[tuple[int, str]], NewFieldsByName]:
        infer = True
        if self.text_columns:
            # The JSON text of nested values comes from Python's parser, which lists new
            # fields on the way: pyarrow then reads the other columns ignoring them.
            candidates = self.scan(candidates)
            infer = False
        self.parse_range(candidates, infer=infer)
        rows = pa.concat_tables(self.tables) if self.tables else self.read_schema.empty_table()
        good = pa.concat_arrays(self.good) if self.good else pa.array([], pa.int64())
        for name in self.text_columns:
            texts = self.texts[name]
            rows = rows.append_column(name, pa.array([texts.get(i) for i in good.to_pylist()],
                                                     pa.string()))
        new = merged(by_field(sorted(self.new.items())),
                     *({name: f} for name, pieces in self.inferred.items() for f in pieces))
        return rows.select(self.schema.names), good, self.bad, new

    def scan(self, indices: pa.Array) -> pa.Array:
        """Python's json over `indices`: new fields and the text columns' values; returns the
        indices still to read (a text column holding a number or boolean is bad)."""
        keep: list[int] = []
        for i, raw in zip(indices.to_pylist(), self.values.take(indices).to_pylist(),
                          strict=True):
            obj = _loads(raw)
            if obj is None:
                keep.append(i)  # pyarrow's reader gives the reason
                continue
            unknown = _unknown(obj, self.known)
            if unknown:
                self.new[i] = unknown
            reason = None
            for name in sorted(self.text_columns):
                value = obj.get(name)
                if isinstance(value, (dict, list)):
                    self.texts[name][i] = json.dumps(value, separators=(",", ":"),
                                                     ensure_ascii=False)
                elif value is None or isinstance(value, str):
                    self.texts[name][i] = value
                elif reason is None:
                    reason = _does_not_fit(name, value, self.schema.field(name))
            if reason is None:
                keep.append(i)
            else:
                self.bad.append((i, reason))
        return pa.array(keep, pa.int64())

    def parse_range(self, indices: pa.Array, *, infer: bool) -> None:
        n = len(indices)
        if n == 0:
            return
        subset = self.values.take(indices)
        try:
            table = _read(_joined(subset), self.options(infer=infer))
            error = None if table.num_rows == n else (f"{table.num_rows} JSON objects for {n} "
                                                      "records")
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            table, error = None, _reason(e)
        if error is None and table is not None:
            if table.num_columns > len(self.read_schema):
                self.note_inferred(indices, table)
                table = table.select(self.read_schema.names)
            self.tables.append(table)
            self.good.append(indices)
            return
        column = _COLUMN.search(error or "")
        if infer and column and column.group(1) not in self.known:
            # New fields' values differ in kind between records, so pyarrow cannot infer
            # one type: Python's json lists them instead.
            self.scan_new(indices)
            self.parse_range(indices, infer=False)
            return
        nested = _CHANGED.search(error or "")
        if nested and self._holds_text(nested.group(1)):
            raise _NestedJson(nested.group(1))
        if n == 1:
            if infer:
                self.scan_new(indices)
            single = _parse_single(subset, self.options(infer=False, newlines=True),
                                   error or "unparsable")
            if isinstance(single, str):
                nested = _CHANGED.search(single)
                if nested and self._holds_text(nested.group(1)):
                    raise _NestedJson(nested.group(1))
                self.bad.append((indices[0].as_py(), _conflict(subset[0].as_py(), self.schema)
                                 or single))
            else:
                self.tables.append(single)
                self.good.append(indices)
            return
        half = n // 2
        self.parse_range(indices.slice(0, half), infer=infer)
        self.parse_range(indices.slice(half), infer=infer)

    def note_inferred(self, indices: pa.Array, table: pa.Table) -> None:
        """New fields from the columns pyarrow inferred beyond the schema, by field (records
        whose value for one is null or missing hold nothing new)."""
        for name in table.column_names:
            if name in self.known:
                continue
            column = table.column(name)
            if column.null_count == len(column):
                continue
            held = indices if column.null_count == 0 else indices.take(
                pc.indices_nonzero(pc.is_valid(column)))
            self.inferred.setdefault(name, []).append(NewField(held.cast(pa.int64()),
                                                               _arrow_kind(column.type)))

    def scan_new(self, indices: pa.Array) -> None:
        """New top-level fields of the records at `indices` (Python's json)."""
        for i, raw in zip(indices.to_pylist(), self.values.take(indices).to_pylist(),
                          strict=True):
            obj = _loads(raw)
            if obj is not None:
                unknown = _unknown(obj, self.known)
                if unknown:
                    self.new[i] = unknown

    def _holds_text(self, name: str) -> bool:
        index = self.schema.get_field_index(name)
        if index < 0 or name in self.text_columns:
            return False
        f = self.schema.field(index)
        # Plain STRING only: VARCHAR(n) and CHAR(n) carry a length the text may exceed.
        return pa.types.is_string(f.type) and not (f.metadata or {}).get(b"hive.type")


def _unknown(obj: dict[str, Any], known: set[str]) -> dict[str, str]:
    """{name: JSON kind} of a record's fields outside the schema; a null value holds
    nothing, so its field is not new (pyarrow's inference cannot tell it from missing)."""
    return {k: json_kind(v) for k, v in obj.items() if k not in known and v is not None}


def _arrow_kind(t: pa.DataType) -> str:
    """The JSON kind of values pyarrow inferred as `t`."""
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t):
        return "number"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_struct(t):
        return "object"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "array"
    return "string"  # strings, and timestamps pyarrow recognised in them


def _loads(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def _conflict(raw: bytes | None, schema: pa.Schema) -> str | None:
    """The first field of a JSON record whose value's kind does not fit its column, said
    specifically, or None (then the parser's own reason stands)."""
    obj = _loads(raw)
    if obj is None:
        return None
    for f in schema:
        value = obj.get(f.name)
        if value is not None and not _fits(json_kind(value), f):
            return _does_not_fit(f.name, value, f)
    return None


def _fits(kind: str, f: pa.Field) -> bool:
    t = f.type
    if pa.types.is_integer(t):
        return kind == "integer"
    if pa.types.is_floating(t):
        return kind in ("integer", "number")
    if pa.types.is_boolean(t):
        return kind == "boolean"
    if pa.types.is_decimal(t):
        return kind in ("integer", "number", "string")
    if pa.types.is_string(t) or pa.types.is_timestamp(t) or pa.types.is_date(t):
        return kind == "string" or (kind in ("object", "array") and pa.types.is_string(t)
                                    and not (f.metadata or {}).get(b"hive.type"))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return kind == "array"
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return kind == "object"
    return True  # binary and others: the parser's reason stands


def _does_not_fit(name: str, value: Any, f: pa.Field) -> str:
    text = json.dumps(value, ensure_ascii=False)
    text = text if len(text) <= 40 else text[:37] + "..."
    try:
        column = to_ddl(pa.schema([f.remove_metadata() if not (f.metadata or {}).get(
            b"hive.type") else f]))
    except Exception:  # noqa: BLE001 (the column's spelling is only for the message)
        column = f"{f.name} {f.type}"
    return (f"field {name!r}: the JSON {json_kind(value)} {text} does not fit column "
            f"{column} (a type conflict)")


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


def _parse_single(value: pa.Array, options: pj.ParseOptions, error: str) -> pa.Table | str:
    """One record: retried allowing newlines inside (pretty-printed JSON is still one record)."""
    try:
        table = _read(_joined(value), options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        nested = _CHANGED.search(_reason(e))
        return _reason(e) if nested else error
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
