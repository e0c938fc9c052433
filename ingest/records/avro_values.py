"""Decode Kafka record values in Avro binary into Arrow rows of a table schema, on executors.

Values are either plain Avro binary of one writer schema (`--avro-schema FILE`) or Confluent's
wire format (`--schema-registry URL`: magic byte 0, a 4-byte big-endian schema id, the Avro
body), whose writer schema the registry gives by id (cached per process). Each writer schema
is resolved once against the table, as Avro's schema resolution does: columns match fields by
name (case-insensitively, as Hive's names), a column the writer lacks is null, a field the
table lacks is a *new field* (`ParsedValues.new_fields`, with the JSON kind its Avro type
holds, judged by --on-new-field as JSON values' new fields are), a field whose type does not
fit its column (Avro's promotions int -> long -> float -> double allowed) makes every record
of that writer schema bad. A record that cannot be decoded (no magic byte, an unknown schema
id, truncated or trailing bytes, a value outside its column) is bad with its reason; the
others go on. For speed, a chunk of one writer schema's records is decoded by one fastavro
call (`_read_bulk`, proven record by record by a nonce), each column is built from one list,
and top-level timestamps and dates are read as raw ints and cast in Arrow; the reasons stay
those of decoding each record alone with its logical types. Knows Avro and Arrow, not ACID.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import lru_cache
from typing import Any, Protocol, cast

import pyarrow as pa
import pyarrow.compute as pc
from fastavro import parse_schema as parse_avro
from fastavro import schemaless_reader
from fastavro.schema import (
    SchemaParseException,
    UnknownType,
    fingerprint,
    to_parsing_canonical_form,
)

from ingest.acid.format import to_ddl
from ingest.errors import ConfigError
from ingest.records.avro_schema import (
    avro_fields,
    hive_type_to_arrow,
    load_avro_schema,
    read_avro_schema_file,
)
from ingest.records.json_values import TOMBSTONE_REASON, ParsedValues
from ingest.records.new_fields import by_field
from ingest.records.schema_registry import registry, registry_settings, split_frame


class AvroOptions(Protocol):
    """The stream options `avro_format` reads (the sink's `SinkOptions` has them)."""

    @property
    def value_format(self) -> str: ...
    @property
    def avro_schema(self) -> str | None: ...
    @property
    def schema_registry(self) -> str | None: ...
    @property
    def schema_registry_options(self) -> tuple[str, ...]: ...


# What a damaged or mismatched body raises inside fastavro's reader.
_DECODE_ERRORS = (EOFError, ValueError, IndexError, KeyError, TypeError, OverflowError)


@dataclass(frozen=True)
class AvroFormat:
    """How a stream's values are Avro; pickled into each task.

    Attributes:
        writer_schema: plain Avro binary: the writers' one schema (JSON text, read on the
            driver from `--avro-schema FILE`, since executors may not see that file).
        registry_url: Confluent wire format: the schema registry giving writer schemas by id.
        registry_settings: that registry client's settings (credentials, TLS files).
    """

    writer_schema: str | None = None
    registry_url: str | None = None
    registry_settings: tuple[tuple[str, str], ...] = dataclass_field(default=(), repr=False)

    def __post_init__(self) -> None:
        """Raises: ConfigError: neither or both of a writer schema and a registry."""
        if (self.writer_schema is None) == (self.registry_url is None):
            raise ConfigError("--value-format avro needs exactly one of --avro-schema FILE "
                              "(plain Avro binary) and --schema-registry URL (Confluent's "
                              "framing with a schema id)")


@dataclass(frozen=True)
class _Resolution:
    """One writer schema against the table: how to read it and what it cannot give."""

    parsed: Any  # fastavro's parsed writer schema
    columns: tuple[tuple[str, str | None], ...]  # (table column, writer field or None)
    extra: dict[str, str]  # writer fields the table lacks -> the JSON kind of their values
    problem: str | None = None
    # The writer schema with its top-level timestamps and dates read as their raw ints, and
    # per table column the logical type so read (None: fastavro's own value), cast in Arrow.
    fast: Any = None
    raw: tuple[str | None, ...] = ()
    bulk: Any = None  # `fast` as the items of an array, for `_read_bulk` (None: cannot)
    # Writer fields the table lacks -> their exact Hive type (`avro_fields`, as `ingest
    # create --schema-from-avro` maps it): the column --on-new-field evolve adds.
    extra_types: dict[str, str] = dataclass_field(default_factory=dict)


def decode_avro_values(values: pa.Array, schema: pa.Schema, avro: AvroFormat, *,
                       skip_tombstones: bool = False) -> ParsedValues:
    """Decode each value as one Avro record and make the table's rows of it.

    A record is bad when its value is null (a tombstone, unless skip_tombstones), is not
    framed (registry), names a schema id the registry does not have, has a writer schema
    that does not fit the table, is truncated or has bytes after its record, or holds a value
    its column cannot (a timestamp outside 1677-2262, a decimal beyond its precision). A
    writer's fields that the table lacks are the record's `new_fields`, for --on-new-field.

    Args:
        values: the Kafka values (binary).
        schema: the columns to produce (the table's row columns and a bare partition field).
        avro: the values' framing and writer schema source.
        skip_tombstones: leave null values out (`ParsedValues.skipped`) instead of bad.

    Returns:
        The rows, good and bad indices, skipped tombstones and new fields per record.

    Raises:
        IngestError: the schema registry could not be asked (not the record's fault: the
            task fails and nothing of the micro-batch is committed).
    """
    bad: list[tuple[int, str]] = []
    skipped: list[int] = []
    new_fields: dict[int, dict[str, str]] = {}
    new_types: dict[str, set[str]] = {}
    typed: set[int] = set()  # the resolutions whose extra types are in new_types
    good: list[int] = []
    resolutions: list[_Resolution] = []
    bodies: list[bytes | memoryview] = []
    plain = None if avro.writer_schema is None else _resolve(avro.writer_schema, schema,
                                                             "the --avro-schema")
    header = None if avro.writer_schema is None else single_object_header(avro.writer_schema)
    # Values single-object encoded by another writer schema, by its fingerprint: read as
    # plain Avro (a plain body may start with the magic too), their failure explained so.
    foreign: dict[int, bytes] = {}
    client = None if avro.registry_url is None else registry(avro.registry_url,
                                                               avro.registry_settings)
    by_id: dict[int, _Resolution | str] = {}  # this batch's writer schemas, or why not
    for i, value in enumerate(values.cast(pa.binary()).to_pylist()):
        if value is None:
            (skipped.append(i) if skip_tombstones else bad.append((i, TOMBSTONE_REASON)))
            continue
        body: bytes | memoryview = value
        if plain is not None:
            how = plain
            if header is not None and value[:2] == SINGLE_OBJECT_MAGIC \
                    and len(value) >= len(header):
                if value.startswith(header):
                    body = memoryview(value)[len(header):]
                else:
                    foreign[i] = value[2:10]
        else:
            assert client is not None
            framed = split_frame(value)
            if isinstance(framed, str):
                bad.append((i, framed))
                continue
            schema_id, body = framed
            found = by_id.get(schema_id)
            if found is None:
                text = client.schema_by_id(schema_id)
                found = by_id[schema_id] = (f"schema id {schema_id} is not in the schema "
                                            f"registry at {client.url}" if text is None else
                                            _resolve(text, schema, f"writer schema id {schema_id}"))
            if isinstance(found, str):
                bad.append((i, found))
                continue
            how = found
        if how.problem is not None:
            bad.append((i, how.problem))
            continue
        if how.extra:
            new_fields[i] = how.extra
            if id(how) not in typed:
                typed.add(id(how))
                for name, hive_type in how.extra_types.items():
                    new_types.setdefault(name, set()).add(hive_type)
        resolutions.append(how)
        bodies.append(body)
        good.append(i)
    records, resolutions, bodies, good = _read_records(bodies, resolutions, good, bad)
    rows, kept = _to_arrow(records, resolutions, bodies, schema, good, bad)
    if foreign:
        assert header is not None
        bad = [(i, reason if i not in foreign else (
            f"the value is Avro single-object encoded by a writer schema of fingerprint "
            f"{foreign[i].hex()}, not the --avro-schema's ({header[2:].hex()}): only values "
            f"of that one schema can be read ({reason})")) for i, reason in bad]
    bad.sort()
    for i, _ in bad:
        new_fields.pop(i, None)
    return ParsedValues(rows, pa.array(kept, pa.int64()), bad, skipped,
                        by_field(sorted(new_fields.items())),
                        new_field_types={n: tuple(sorted(t)) for n, t in new_types.items()})


_CHUNK = 4096  # records decoded by one call; a bad one costs its chunk a second, slow read


def _read_records(bodies: list[bytes | memoryview], resolutions: list[_Resolution],
                  good: list[int], bad: list[tuple[int, str]]
                  ) -> tuple[list[dict[str, Any]], list[_Resolution], list[bytes | memoryview],
                             list[int]]:
    """Decode the bodies (each of its resolution's writer schema); the ones that do not
    decode are bad with their reason, the others returned with their inputs."""
    out_records: list[dict[str, Any]] = []
    out_resolutions: list[_Resolution] = []
    out_bodies: list[bytes | memoryview] = []
    out_good: list[int] = []
    start = 0
    while start < len(bodies):
        how, end = resolutions[start], min(start + _CHUNK, len(bodies))
        for j in range(start + 1, end):  # a run of one writer schema
            if resolutions[j] is not how:
                end = j
                break
        chunk = bodies[start:end]
        records = None if how.bulk is None else _read_bulk(chunk, how.bulk)
        if records is not None:  # all good
            out_records.extend(records)
            out_resolutions.extend([how] * len(chunk))
            out_bodies.extend(chunk)
            out_good.extend(good[start:end])
            start = end
            continue
        each = [_read_record(body, how.fast) for body in chunk]
        for j, record in zip(range(start, end), each, strict=True):
            if isinstance(record, str):
                bad.append((good[j], record))
                continue
            out_records.append(record)
            out_resolutions.append(how)
            out_bodies.append(bodies[j])
            out_good.append(good[j])
        start = end
    return out_records, out_resolutions, out_bodies, out_good


def _read_bulk(bodies: list[bytes | memoryview], bulk: Any) -> list[dict[str, Any]] | None:
    """Decode many bodies with one fastavro call, or None (then each alone gives its reason).

    The bodies are joined as the Avro encoding of an array of the writer's record with one
    more field, an 8-byte random nonce, written after each body: every item reading that
    nonce back, and the array ending exactly at the end, proves that each record decoded
    from exactly its own bytes, as it would alone (no body truncated or with trailing bytes).
    The records keep the nonce field; columns are taken from them by name.
    """
    nonce = os.urandom(8)
    data = b"".join((_varint(len(bodies)), nonce.join(bodies), nonce, b"\x00"))
    stream = io.BytesIO(data)
    try:
        # fastavro types its result as any Avro value; an array of records reads as this.
        records = cast(list[dict[str, Any]], schemaless_reader(stream, bulk, None))
    except (UnicodeDecodeError, *_DECODE_ERRORS):
        return None
    if stream.tell() != len(data) or any(r[_NONCE] != nonce for r in records):
        return None
    return records


_NONCE = "ingest_avro_bulk_nonce"


# Avro's single-object encoding: these two bytes, the writer schema's 8-byte little-endian
# CRC-64-AVRO fingerprint of its Parsing Canonical Form, then the plain body.
SINGLE_OBJECT_MAGIC = b"\xc3\x01"


@lru_cache(maxsize=16)
def single_object_header(schema_text: str) -> bytes:
    """The first 10 bytes of a value single-object encoded with this writer schema."""
    canonical = to_parsing_canonical_form(parse_avro(json.loads(schema_text)))
    # fastavro gives the fingerprint's bytes in the order the encoding puts them.
    return SINGLE_OBJECT_MAGIC + bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))


def _varint(n: int) -> bytes:
    """A non-negative Avro long (zig-zag, then 7 bits a byte)."""
    n <<= 1
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_record(body: bytes | memoryview, parsed: Any) -> dict[str, Any] | str:
    stream = io.BytesIO(body)
    try:
        # fastavro types its result as any Avro value; a record schema reads as a dict.
        record = cast(dict[str, Any], schemaless_reader(stream, parsed, None))
    except UnicodeDecodeError as e:
        return (f"a string in the Avro body is not UTF-8: {e.object[e.start:e.end]!r} "
                f"(readers of the table would fail on it)")
    except _DECODE_ERRORS as e:
        detail = f": {e}" if str(e) else ""
        return (f"the Avro body ({len(body)} bytes) does not decode with its writer schema "
                f"({type(e).__name__}{detail}); truncated or not Avro")
    left = len(body) - stream.tell()
    if left:
        return (f"{left} byte(s) follow the Avro record ({len(body)} bytes in all): the body is "
                "not one record of its writer schema")
    return record


def _to_arrow(records: list[dict[str, Any]], resolutions: list[_Resolution],
              bodies: list[bytes | memoryview], schema: pa.Schema, good: list[int],
              bad: list[tuple[int, str]]) -> tuple[pa.Table, list[int]]:
    """The good records as columns, built per writer schema (usually one per batch) and put
    back in record order; a value its column cannot hold makes its record bad."""
    if not records or resolutions.count(resolutions[0]) == len(resolutions):
        return _columns(records, resolutions[0] if records else _EMPTY, bodies, schema, good,
                        bad)
    groups: dict[int, list[int]] = {}
    for j, how in enumerate(resolutions):
        groups.setdefault(id(how), []).append(j)
    tables, kepts = [], []
    for members in groups.values():
        rows, kept = _columns([records[j] for j in members], resolutions[members[0]],
                              [bodies[j] for j in members], schema,
                              [good[j] for j in members], bad)
        tables.append(rows)
        kepts.extend(kept)
    order = sorted(range(len(kepts)), key=kepts.__getitem__)
    return (pa.concat_tables(tables).take(pa.array(order, pa.int64())).combine_chunks(),
            [kepts[j] for j in order])


_EMPTY = _Resolution(None, (), {})  # no record: every column is empty


def _columns(records: list[dict[str, Any]], how: _Resolution, bodies: list[bytes | memoryview],
             schema: pa.Schema, good: list[int], bad: list[tuple[int, str]]
             ) -> tuple[pa.Table, list[int]]:
    """The records of one writer schema as the table's columns: one list per column, one
    pa.array of it; raw timestamps and dates cast in Arrow. A value a column cannot hold
    (rare) is found record by record and its record dropped, then the columns built again."""
    while True:
        columns: list[pa.Array] = []
        wrong: dict[int, str] = {}
        for k, f in enumerate(schema):
            name = how.columns[k][1] if records else None
            if name is None:
                columns.append(pa.nulls(len(records), f.type))
                continue
            values = [r[name] for r in records]
            raw = how.raw[k]
            try:
                columns.append(pa.array(values, type=f.type) if raw is None
                               else _cast_raw(values, raw, f.type))
                continue
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError,
                    ValueError) as e:
                error = e
            if raw is not None:  # the value as fastavro's logical reader makes it
                values = [_logical_value(bodies[j], how, name) for j in range(len(records))]
            for j, v in enumerate(values):
                if isinstance(v, _Undecodable):
                    wrong[j] = v.reason
                    continue
                problem = _convert_problem(v, f.type)
                if problem is not None:
                    wrong[j] = f"field {f.name!r}: {problem}"
            if not wrong:
                raise error  # no one value is at fault: not the records' (as before)
            break
        if not wrong:
            return pa.Table.from_arrays(columns, schema=schema), good
        for j, reason in wrong.items():
            bad.append((good[j], reason))
        keep = [j for j in range(len(records)) if j not in wrong]
        records = [records[j] for j in keep]
        bodies = [bodies[j] for j in keep]
        good = [good[j] for j in keep]


# Logical types read as raw ints: their Arrow type, and the raw values Python's datetime and
# date can hold (fastavro's logical readers fail outside them, making the record bad).
_RAW = {"timestamp-millis": (pa.int64(), pa.timestamp("ms", tz="UTC")),
        "timestamp-micros": (pa.int64(), pa.timestamp("us", tz="UTC")),
        "date": (pa.int32(), pa.date32())}
_DATE_RANGE = (-719162, 2932896)  # 0001-01-01 .. 9999-12-31 in days from 1970-01-01


def _cast_raw(values: list[Any], logical: str, t: pa.DataType) -> pa.Array:
    """Raw ints of a logical type as column type `t`, in Arrow.

    Raises:
        ArrowInvalid: a value outside `t` (or a date outside Python's), to find record by record.
    """
    raw_type, arrow_type = _RAW[logical]
    ints = pa.array(values, raw_type)
    if logical == "date":
        low, high = pc.min_max(ints).values()
        if ints.null_count < len(ints) and (low.as_py() < _DATE_RANGE[0]
                                            or high.as_py() > _DATE_RANGE[1]):
            raise pa.ArrowInvalid("a date outside 0001-9999")
    return ints.view(arrow_type).cast(t)  # safe: out of range raises


class _Undecodable:
    """A record that reads as raw ints but not with its logical types (fastavro's reason)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _logical_value(body: bytes | memoryview, how: _Resolution, name: str) -> Any:
    record = _read_record(body, how.parsed)
    return _Undecodable(record) if isinstance(record, str) else record[name]


def _convert_problem(value: Any, t: pa.DataType) -> str | None:
    try:
        pa.array([value], type=t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as e:
        return f"{value!r} does not fit {_hive(t)}: {e}"
    return None


# The JSON kind an Avro field's values have, so --on-new-field judges (and evolve types) them
# as it does JSON values' new fields.
_KIND_OF_TYPE = (("TINYINT", "integer"), ("SMALLINT", "integer"), ("INT", "integer"),
                 ("BIGINT", "integer"), ("FLOAT", "number"), ("DOUBLE", "number"),
                 ("DECIMAL", "number"), ("BOOLEAN", "boolean"), ("STRUCT", "object"),
                 ("MAP", "object"), ("ARRAY", "array"))


def _json_kind(hive_type: str | None) -> str:
    head = (hive_type or "STRING").split("(", 1)[0].split("<", 1)[0].strip().upper()
    return dict(_KIND_OF_TYPE).get(head, "string")


@lru_cache(maxsize=256)
def _resolve(writer_text: str, schema: pa.Schema, what: str) -> _Resolution:
    """Resolve one writer schema against the table's columns (once per process and schema)."""
    try:
        writer = load_avro_schema(writer_text, what=what)
        parsed = parse_avro(writer)
        fields = avro_fields(writer, what=what)
    except (ConfigError, SchemaParseException, UnknownType, ValueError, TypeError) as e:
        text = e.message if isinstance(e, ConfigError) else f"{what} is not valid Avro: {e}"
        return _Resolution(None, (), {}, text)
    by_name = {f.name.lower(): f for f in fields}
    columns: list[tuple[str, str | None]] = []
    problems: list[str] = []
    for column in schema:
        f = by_name.get(column.name.lower())
        if f is None:
            columns.append((column.name, None))  # a field the writer lacks: null
            continue
        columns.append((column.name, f.name))
        if f.hive_type is None:
            problems.append(f"field {f.name!r}: {f.problem}")
            continue
        problem = _fits(hive_type_to_arrow(f.hive_type), column.type)
        if problem is not None:
            problems.append(f"field {f.name!r} is {f.hive_type}, column {column.name!r} is "
                            f"{_hive(column.type)}{problem}")
    known = {c.name.lower() for c in schema}
    extra = {f.name: _json_kind(f.hive_type) for f in fields if f.name.lower() not in known}
    extra_types = {f.name: f.hive_type for f in fields
                   if f.name.lower() not in known and f.hive_type is not None}
    if problems:
        return _Resolution(parsed, tuple(columns), extra,
                           f"{what} does not fit the table: {'; '.join(problems)}",
                           extra_types=extra_types)
    fast, raw_fields = _raw_schema(writer)
    raw = tuple(None if name is None else raw_fields.get(name) for _, name in columns)
    return _Resolution(parsed, tuple(columns), extra, None,
                       parse_avro(fast) if raw_fields else parsed, raw, _bulk_schema(fast),
                       extra_types)


def _bulk_schema(writer: dict[str, Any]) -> Any:
    """The parsed schema `_read_bulk` reads with, or None when the writer's names clash."""
    if any(f.get("name") == _NONCE for f in writer["fields"]):
        return None
    nonce = {"name": _NONCE, "type": {"type": "fixed", "name": _NONCE, "size": 8}}
    try:
        return parse_avro({"type": "array", "items": {
            **writer, "fields": [*writer["fields"], nonce]}})
    except (SchemaParseException, UnknownType, ValueError, TypeError):
        return None


def _raw_schema(writer: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The writer schema with each top-level timestamp-millis/-micros or date field (or its
    ["null", ...] union) read as its plain int, and those fields' logical types: the same
    bytes, decoded without a Python datetime per value (Arrow casts the ints)."""
    fields, raw = [], {}
    for field in writer["fields"]:
        t = field["type"]
        branches = t if isinstance(t, list) else [t]
        logical = [b.get("logicalType") for b in branches if isinstance(b, dict)]
        plain = [b for b in branches if b != "null"]
        if (len(plain) == 1 and isinstance(plain[0], dict) and len(logical) == 1
                and logical[0] in _RAW and plain[0].get("type") == ("int" if logical[0] == "date"
                                                                    else "long")):
            bare = plain[0]["type"]
            field = {**field, "type": [bare if b is plain[0] else b for b in branches]
                     if isinstance(t, list) else bare}
            raw[field["name"]] = logical[0]
        fields.append(field)
    return {**writer, "fields": fields}, raw


# Avro's promotions (the specification's schema resolution), as Arrow types.
_PROMOTIONS = {
    pa.int32(): (pa.int64(), pa.float32(), pa.float64()),
    pa.int64(): (pa.float32(), pa.float64()),
    pa.float32(): (pa.float64(),),
}


def _fits(writer: pa.DataType, reader: pa.DataType) -> str | None:
    """None when values of the writer's type read as the reader's, else a short reason."""
    if writer == reader and not pa.types.is_nested(writer):
        return None
    if reader in _PROMOTIONS.get(writer, ()):
        return None
    if pa.types.is_decimal(writer) and pa.types.is_decimal(reader):
        if writer.scale == reader.scale and writer.precision <= reader.precision:
            return None
        return " (a decimal needs the same scale and no more precision)"
    if pa.types.is_list(writer) and pa.types.is_list(reader):
        return _fits(writer.value_type, reader.value_type)
    if pa.types.is_map(writer) and pa.types.is_map(reader):
        return _fits(writer.item_type, reader.item_type)
    if pa.types.is_struct(writer) and pa.types.is_struct(reader):
        members = {writer.field(k).name.lower(): writer.field(k) for k in range(writer.num_fields)}
        for k in range(reader.num_fields):
            r = reader.field(k)
            w = members.get(r.name.lower())
            if w is not None and w.name != r.name:
                return f" (member {w.name!r} differs from {r.name!r} in case)"
            problem = None if w is None else _fits(w.type, r.type)
            if problem is not None:
                return f" (member {r.name!r}{problem or ''})"
        return None
    return ""


def _hive(t: pa.DataType) -> str:
    return to_ddl(pa.schema([pa.field("x", t)])).split(" ", 1)[1]


def check_writer_schema(avro: AvroFormat | None, schema: pa.Schema) -> None:
    """Check a plain --avro-schema against the table before the first write (a registry's
    writer schemas are checked per schema id as records name them).

    Raises:
        ConfigError: a field of the writer schema does not fit its column, so that every
            record would be dead-lettered.
    """
    if avro is None or avro.writer_schema is None:
        return
    problem = _resolve(avro.writer_schema, schema, "the --avro-schema").problem
    if problem is not None:
        raise ConfigError(problem, hint="make the table's columns and the writers' schema "
                                        "agree (ingest create --schema-from-avro FILE)")


def plain_start_problem(values: pa.Array, schema: pa.Schema,
                        avro: AvroFormat | None) -> str | None:
    """Why a plain-Avro stream's first records show that its --avro-schema is not the
    writers' schema: not one of them (tombstones aside) decodes as its records. Plain Avro
    carries no schema id, so a wrong schema would otherwise dead-letter every record; None
    when one decodes, when there are none, or when the values name their writer schema (a
    registry's id; a single-object fingerprint is checked record by record).

    Args:
        values: the first records' values (binary), in offset order.
        schema: the columns the stream produces (the table's and a bare partition field).
        avro: the stream's Avro settings (None: not Avro).
    """
    if avro is None or avro.writer_schema is None:  # none, or a registry's framing
        return None
    parsed = decode_avro_values(values, schema, avro, skip_tombstones=True)
    if len(parsed.good) or not parsed.bad:
        return None
    index, reason = parsed.bad[0]
    return f"none of its first {len(parsed.bad):,} records decodes (record {index}: {reason})"


def avro_format(options: AvroOptions) -> AvroFormat | None:
    """The sink's `AvroFormat` (None for JSON values), its --avro-schema file read now.

    Raises:
        ConfigError: the file cannot be read, or is not an Avro record schema.
    """
    if options.value_format != "avro":
        return None
    text = (None if options.avro_schema is None
            else read_avro_schema_file(options.avro_schema, option="--avro-schema"))
    return avro_format_of(text, options.schema_registry,
                          what=f"--avro-schema {options.avro_schema}",
                          registry_settings=registry_settings(options.schema_registry_options))


def avro_format_of(text: str | None, registry_url: str | None, *,
                   what: str = "the --avro-schema",
                   registry_settings: tuple[tuple[str, str], ...] = ()) -> AvroFormat:
    """The `AvroFormat` of `--avro-schema` text or `--schema-registry`, checked on the driver.

    Raises:
        ConfigError: neither or both given, or the schema text is not a valid Avro record.
    """
    avro = AvroFormat(text, registry_url, registry_settings)
    if text is not None:
        schema = load_avro_schema(text, what=what)
        try:
            parse_avro(schema)
        except (SchemaParseException, UnknownType, ValueError, TypeError) as e:
            raise ConfigError(f"{what} is not valid Avro: {e}") from e
        avro_fields(schema, what=what)
    return avro


__all__ = ["AvroFormat", "avro_format", "avro_format_of",
           "check_writer_schema",
           "decode_avro_values"]
