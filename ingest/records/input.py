"""Read a batch of rows for `ingest.table.write.load`: JSON Lines, CSV or Parquet, maybe compressed.

Picks the format from the file extension (or is told it), decompresses .gz/.bz2/.zst/.lz4,
and parses JSON/CSV values as the table's column types. Knows files, not tables or the
metastore. The input half of the CLI's `ingest load`.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

from ingest.acid.format import to_ddl
from ingest.errors import BadRecordError, ConfigError, SchemaMismatchError
from ingest.io import storage
from ingest.records.values import WIDE_DECIMAL

InputFormat = Literal["jsonl", "csv", "parquet"]

ProgressFn = Callable[[int, int, str], None]
"""Called with (done, total, what is being done) as a long step advances."""

_READ_CHUNK_BYTES = 8 << 20  # with a progress callback: how often it hears of the read

_EXTENSIONS: dict[str, InputFormat] = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl",
                                       ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".lz4": "lz4"}


def read_input(
    path: str, *, format: InputFormat | None = None, schema: pa.Schema | None = None,
    storage_options: Mapping[str, Any] | None = None, on_progress: ProgressFn | None = None,
) -> pa.Table:
    """Read a JSON Lines, CSV or Parquet file (optionally .gz/.bz2/.zst/.lz4 compressed).

    Args:
        path: a path or fsspec URL.
        format: jsonl, csv or parquet; default from the extension.
        schema: expected columns; JSON and CSV values of these columns are parsed as these
            types (so '007' stays a string), except decimals and timestamps, which stay
            text for `load` to convert (ingest/records/values.py); other columns are inferred.
        storage_options: fsspec options for the file's storage; None: fsspec's own config.
        on_progress: called with (bytes read, the file's size, path) as the file is read
            (stored bytes, before decompression), then with (size, size, "parsing") before
            the rows are parsed.

    Raises:
        FileNotFoundError: no such file.
        ConfigError: the format is unknown and cannot be told from the extension.
        BadRecordError: the file is not valid JSON Lines / CSV / Parquet, or JSON / CSV
            text is not UTF-8 (the line is named).
        SchemaMismatchError: a value cannot be parsed as its column's type.
    """
    fs, stripped = storage.url_to_fs(path, storage_options)
    name = str(stripped).lower()
    ext = os.path.splitext(name)[1]
    codec = _COMPRESSED.get(ext)
    if codec:
        ext = os.path.splitext(name[: -len(ext)])[1]
    fmt = format or _EXTENSIONS.get(ext)
    if fmt not in ("jsonl", "csv", "parquet"):
        raise ConfigError(
            f"Cannot read input {path}: " + (f"unknown format {format!r}" if format else
                                             f"cannot tell the format from its extension {ext!r}"),
            hint="give --format jsonl, csv or parquet")
    data = _file_bytes(fs, stripped, path, codec, on_progress)
    try:
        if fmt == "parquet":
            return pq.read_table(io.BytesIO(data))
        _check_utf8(path, data)
        if fmt == "csv":
            _check_quotes(path, data)
            return _csv_timestamp_nulls(_with_block_size(data, lambda options: pcsv.read_csv(
                pa.BufferReader(data), read_options=options,
                convert_options=pcsv.ConvertOptions(column_types=_csv_types(schema))),
                pcsv.ReadOptions), schema)
        _check_objects(path, data)
        table = _with_block_size(data, lambda options: pjson.read_json(
            pa.BufferReader(data), read_options=options,
            parse_options=pjson.ParseOptions(explicit_schema=_json_schema(schema),
                                             unexpected_field_behavior="infer")),
            pjson.ReadOptions)
        return _with_maps(path, data, _without_absent_keys(data, table, schema), schema)
    except pa.ArrowInvalid as e:
        message = f"Cannot read input {path} as {fmt}: {e}"
        if "convert" in str(e) or "changed from" in str(e):
            hint = None if schema is None else (
                f"values must fit the columns {to_ddl(schema)}; in JSON, quote a number meant "
                "for a STRING column")
            raise SchemaMismatchError(message, hint=hint) from e
        raise BadRecordError(message, hint=f"check that {path} is {_FORMAT_NAMES[fmt]}") from e


def read_input_bytes(path: str, *, storage_options: Mapping[str, Any] | None = None) -> bytes:
    """The bytes of an input file, decompressed by its extension (.gz/.bz2/.zst/.lz4).

    Raises:
        FileNotFoundError: no such file.
    """
    fs, stripped = storage.url_to_fs(path, storage_options)
    ext = os.path.splitext(str(stripped).lower())[1]
    return _file_bytes(fs, stripped, path, _COMPRESSED.get(ext))


def _file_bytes(fs: Any, stripped: str, path: str, codec: str | None,
                on_progress: ProgressFn | None = None) -> bytes:
    if not fs.exists(stripped):
        raise FileNotFoundError(f"Cannot open input file, does not exist: {path}")
    data = fs.cat_file(stripped) if on_progress is None else _read_chunks(fs, stripped,
                                                                          on_progress)
    if codec:
        data = pa.CompressedInputStream(pa.BufferReader(data), codec).read()
    return bytes(data)


def _read_chunks(fs: Any, stripped: str, on_progress: ProgressFn) -> bytes:
    """The file's bytes, read a chunk at a time with the progress told after each."""
    size = int(fs.size(stripped) or 0)
    chunks, done = [], 0
    with fs.open(stripped, "rb") as f:
        while chunk := f.read(_READ_CHUNK_BYTES):
            chunks.append(chunk)
            done += len(chunk)
            on_progress(done, max(size, done), stripped)
    on_progress(done, max(size, done), "parsing")
    return b"".join(chunks)


def _check_utf8(path: str, data: bytes) -> None:
    """JSON and CSV text must be UTF-8: refuse other bytes, naming the line (docs/invariants.md, 6).

    pyarrow's readers copy invalid bytes into string columns unchecked, and such a string
    would then fail every reader of the table.
    """
    if not data:
        return
    text = pa.StringArray.from_buffers(1, pa.py_buffer(np.array([0, len(data)], np.int32)),
                                       pa.py_buffer(data))
    try:
        text.validate(full=True)
        return
    except pa.ArrowInvalid:
        pass
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        line = bytes(data).count(b"\n", 0, e.start) + 1
        start = bytes(data).rfind(b"\n", 0, e.start) + 1
        raise BadRecordError(
            f"Cannot read input {path}: line {line:,} holds bytes that are not UTF-8 "
            f"({bytes(data)[e.start:e.end]!r} at column {e.start - start + 1}); nothing was "
            "loaded", hint="convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8), or fix "
            "that line") from None


_NULL_LINE = re.compile(rb"(?m)^[ \t\r]*(null)[ \t\r]*$")


def _check_objects(path: str, data: bytes) -> None:
    """A JSON Lines record `null` is not an object (docs/invariants.md, 6).

    pyarrow's reader turns a `null` line into an all-null row (and crashes the process when
    the first line is `null`), where it refuses `[]` and `5`; refuse it too, naming the line.
    """
    m = _NULL_LINE.search(data)
    if m is None:
        return
    line = data.count(b"\n", 0, m.start()) + 1
    text = m.group(1)
    raise BadRecordError(
        f"Cannot read input {path}: line {line:,} is not a JSON object "
        f"({text.decode('utf-8', 'backslashreplace')!r}); nothing was loaded",
        hint=f"check that {path} is {_FORMAT_NAMES['jsonl']}")


# A quoted CSV field: a quote at the start of a field (line start or after a comma; pyarrow
# takes a quote elsewhere literally), its body with doubled quotes, then the closing quote,
# or the end of the data when it is never closed.
_QUOTED_FIELD = re.compile(rb'(?m)(?:^|(?<=,))"[^"]*(?:""[^"]*)*("|\Z)')


def _check_quotes(path: str, data: bytes) -> None:
    """A quoted CSV field must be closed (docs/invariants.md, 6).

    pyarrow's reader takes an unterminated quote as a value running to the end of the file,
    so one missing quote would load the rest of the file as a single string.
    """
    if b'"' not in data:
        return
    last = deque(_QUOTED_FIELD.finditer(data), maxlen=1)
    if not last or last[0].group(1):
        return
    start = last[0].start()
    line = data.count(b"\n", 0, start) + 1
    raise BadRecordError(
        f"Cannot read input {path}: the quoted field opened on line {line:,} is never closed "
        "(the file ends inside it); nothing was loaded",
        hint='close the quote on that line; a quote inside a quoted value is written twice ("")')


_MIN_BLOCK_BYTES = 1 << 20


def _with_block_size(data: bytes, read: Any, options_type: Any) -> pa.Table:
    """Read with a block size above the longest line, so that no record straddles blocks.

    pyarrow refuses a record longer than its block ("straddling object ... increase block
    size"); a CSV record with quoted newlines can span lines, so retry with doubled blocks.
    """
    size = max(_MIN_BLOCK_BYTES, 2 * _longest_line(data) + 1024)
    while True:
        try:
            return read(options_type(block_size=size))  # type: ignore[no-any-return]
        except pa.ArrowInvalid as e:
            if "straddling" not in str(e) or size > len(data):
                raise
            size *= 2


def _longest_line(data: bytes) -> int:
    if not data:
        return 0
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    bounds = np.concatenate(([-1], ends, [len(data)]))
    return int(np.diff(bounds).max())


def _json_schema(schema: pa.Schema | None) -> pa.Schema | None:
    fields = []
    for f in schema or []:
        if pa.types.is_decimal(f.type):
            # JSON numbers and strings as exact decimal text, never through float64; `load`
            # rounds them to the column's scale (ingest/records/values.py).
            fields.append(pa.field(f.name, WIDE_DECIMAL))
        elif _json_native(f.type):
            fields.append(pa.field(f.name, _as_text(f.type)))
    return pa.schema(fields) if fields else None


def _csv_types(schema: pa.Schema | None) -> dict[str, pa.DataType]:
    # Decimals stay text here: `load` converts them with Hive's rounding.
    return {f.name: pa.string() if pa.types.is_decimal(f.type) else _as_text(f.type)
            for f in schema or [] if _flat(f.type)}


def _as_text(t: pa.DataType) -> pa.DataType:
    # Timestamps stay text: `load` parses them (ingest/records/values.py), years 0001-9999 and
    # nine fraction digits as Hive's, which pyarrow's readers refuse or wrap around.
    return pa.string() if pa.types.is_timestamp(t) else t


_CSV_NULLS = pa.array(pcsv.ConvertOptions().null_values, pa.string())


def _csv_timestamp_nulls(table: pa.Table, schema: pa.Schema | None) -> pa.Table:
    """CSV timestamp columns read as text: what pyarrow reads as null in a typed column
    ('', NULL, null, NA, ...) is null there too."""
    for f in schema or []:
        if not pa.types.is_timestamp(f.type) or f.name not in table.column_names:
            continue
        column = table.column(f.name)
        if not pa.types.is_string(column.type):
            continue
        is_null = pc.is_in(column, value_set=_CSV_NULLS)
        column = pc.if_else(is_null, pa.scalar(None, pa.string()), column)
        table = table.set_column(table.column_names.index(f.name), f.name, column)
    return table


def _with_maps(path: str, data: bytes, table: pa.Table, schema: pa.Schema | None) -> pa.Table:
    """JSON objects of MAP columns, as maps (pyarrow's reader makes them structs)."""
    maps = [f for f in schema or [] if pa.types.is_map(f.type) and f.name in table.column_names]
    if not maps:
        return table
    records = [json.loads(line) for line in bytes(data).splitlines() if line.strip()]
    for f in maps:
        values = [_map_items(r.get(f.name)) if isinstance(r, dict) else None for r in records]
        try:
            array = pa.array(values, f.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise SchemaMismatchError(
                f"Cannot read input {path}: column {f.name!r} holds a value that is not a "
                f"JSON object of {f.type}: {e}") from e
        table = table.set_column(table.column_names.index(f.name), f.name, array)
    return table


def _without_absent_keys(data: bytes, table: pa.Table, schema: pa.Schema | None) -> pa.Table:
    """Drop the columns the JSON reader's explicit schema added though no record names them.

    pyarrow adds every column of an explicit schema, all null when no record has it, so a
    column wholly missing from the input would load as NULL for the types the reader is
    given (`_json_schema`) and be refused for the others; `load` decides about missing
    columns once, for every type (its `missing_columns`). A column some record names stays.
    """
    given = _json_schema(schema)
    for f in given or []:
        if f.name not in table.column_names:
            continue
        column = table.column(f.name)
        if column.null_count < len(column) or _names_key(data, f.name):
            continue
        table = table.remove_column(table.column_names.index(f.name))
    return table


def _names_key(data: bytes, name: str) -> bool:
    # `"name"` then `:` outside a string can only be an object key; inside a JSON string an
    # opening quote would be escaped (`\"`), which the look-behind excludes.
    key = re.escape(json.dumps(name, ensure_ascii=False).encode())
    return re.search(rb'(?<!\\)' + key + rb'\s*:', data) is not None


def _map_items(value: Any) -> Any:
    return list(value.items()) if isinstance(value, dict) else value


_FORMAT_NAMES = {"jsonl": "JSON Lines (one JSON object per line)", "csv": "CSV with a header line",
                 "parquet": "a Parquet file"}


def _flat(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t))  # CSV has no nesting


def _json_native(t: pa.DataType) -> bool:
    # Types the JSON reader parses itself; strings must be explicit or ISO dates become
    # timestamps. Dates, decimals and nested types are inferred and cast by `load`.
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                or pa.types.is_string(t) or pa.types.is_timestamp(t))


__all__ = ["InputFormat", "read_input", "read_input_bytes"]
