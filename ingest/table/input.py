"""Read a batch of rows for `ingest.table.load`: JSON Lines, CSV or Parquet, maybe compressed.

Picks the format from the file extension (or is told it), decompresses .gz/.bz2/.zst/.lz4,
and parses JSON/CSV values as the table's column types. Knows files, not tables or the
metastore. The input half of the CLI's `ingest load`.
"""

from __future__ import annotations

import io
import os
from typing import Any, Literal

import fsspec
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

from ingest.acid.schema import to_ddl
from ingest.errors import BadRecordError, ConfigError, SchemaMismatchError

InputFormat = Literal["jsonl", "csv", "parquet"]

_EXTENSIONS: dict[str, InputFormat] = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl",
                                       ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".lz4": "lz4"}


def read_input(
    path: str, *, format: InputFormat | None = None, schema: pa.Schema | None = None,
) -> pa.Table:
    """Read a JSON Lines, CSV or Parquet file (optionally .gz/.bz2/.zst/.lz4 compressed).

    Args:
        path: a path or fsspec URL.
        format: jsonl, csv or parquet; default from the extension.
        schema: expected columns; JSON and CSV values of these columns are parsed as these
            types (so '007' stays a string); other columns are inferred.

    Raises:
        FileNotFoundError: no such file.
        ConfigError: the format is unknown and cannot be told from the extension.
        BadRecordError: the file is not valid JSON Lines / CSV / Parquet.
        SchemaMismatchError: a value cannot be parsed as its column's type.
    """
    fs, stripped = fsspec.core.url_to_fs(path)
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
    if not fs.exists(stripped):
        raise FileNotFoundError(f"Cannot open input file, does not exist: {path}")
    data = fs.cat_file(stripped)
    stream: Any = pa.BufferReader(data)
    if codec:
        stream = pa.CompressedInputStream(stream, codec)
    try:
        if fmt == "parquet":
            return pq.read_table(io.BytesIO(stream.read()))
        if fmt == "csv":
            types = {f.name: f.type for f in schema or [] if _flat(f.type)}
            return pcsv.read_csv(stream, convert_options=pcsv.ConvertOptions(column_types=types))
        explicit = pa.schema([f for f in schema or [] if _json_native(f.type)])
        return pjson.read_json(stream, parse_options=pjson.ParseOptions(
            explicit_schema=explicit if len(explicit) else None,
            unexpected_field_behavior="infer"))
    except pa.ArrowInvalid as e:
        message = f"Cannot read input {path} as {fmt}: {e}"
        if "convert" in str(e) or "changed from" in str(e):
            hint = None if schema is None else (
                f"values must fit the columns {to_ddl(schema)}; in JSON, quote a number meant "
                "for a STRING column")
            raise SchemaMismatchError(message, hint=hint) from e
        raise BadRecordError(message, hint=f"check that {path} is {_FORMAT_NAMES[fmt]}") from e


_FORMAT_NAMES = {"jsonl": "JSON Lines (one JSON object per line)", "csv": "CSV with a header line",
                 "parquet": "a Parquet file"}


def _flat(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t))  # CSV has no nesting


def _json_native(t: pa.DataType) -> bool:
    # Types the JSON reader parses itself; strings must be explicit or ISO dates become
    # timestamps. Dates, decimals and nested types are inferred and cast by `load`.
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                or pa.types.is_string(t) or pa.types.is_timestamp(t))


__all__ = ["InputFormat", "read_input"]
