"""Avro schemas as Hive columns, by the rules of Hive's AvroSerDe (`AvroObjectInspectorGenerator`).

A top-level Avro record becomes a column list: int INT, long BIGINT, float FLOAT, double DOUBLE,
boolean BOOLEAN, string STRING (VARCHAR(n) with logicalType varchar), bytes and fixed BINARY,
enum STRING, record STRUCT, array ARRAY, map MAP<STRING, ...>; a union of null and one type is
that type (every Hive column is nullable); logical types decimal DECIMAL(p,s), date DATE,
timestamp-millis/-micros (and the local- ones) TIMESTAMP, unknown logical types their
underlying type, as the Avro specification says. Other unions and recursive records have no
Hive type and are refused. Pure: knows Avro's JSON schema form and Hive DDL, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fsspec
import pyarrow as pa

from ingest.acid.format import parse_schema, to_ddl
from ingest.errors import ConfigError

_PRIMITIVE = {
    "int": "INT", "long": "BIGINT", "float": "FLOAT", "double": "DOUBLE",
    "boolean": "BOOLEAN", "string": "STRING", "bytes": "BINARY",
}
_TIMESTAMPS = ("timestamp-millis", "timestamp-micros", "local-timestamp-millis",
               "local-timestamp-micros")
MAX_DECIMAL_PRECISION = 38  # Hive's DECIMAL limit
_HINT = "Hive holds a union only as a nullable type: make the field [\"null\", T]"


@dataclass(frozen=True)
class AvroField:
    """One top-level field of an Avro record and its Hive type.

    Attributes:
        name: the Avro field name.
        hive_type: the Hive type (e.g. ``"DECIMAL(10,2)"``), or None when it has none.
        problem: why there is no Hive type (None when there is one).
    """

    name: str
    hive_type: str | None
    problem: str | None = None


def read_avro_schema_file(path: str, *, option: str = "the Avro schema file",
                          hint: str = "give the path of an Avro schema file (.avsc)") -> str:
    """The text of an Avro schema file (a .avsc), local or at an fsspec URL.

    Raises:
        ConfigError: it cannot be read (missing, unreadable, not UTF-8), naming `option`.
    """
    try:
        with fsspec.open(path, "rt", encoding="utf-8") as f:
            return str(f.read())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"Cannot read {option} {path}: {e}", hint=hint) from e


def load_avro_schema(text: str, *, what: str = "the Avro schema") -> Any:
    """Parse an Avro schema's JSON text.

    Args:
        text: the schema as JSON (``{"type": "record", ...}``).
        what: how errors name it (a file, a subject, a schema id).

    Returns:
        The schema as Python values (dict, list or str).

    Raises:
        ConfigError: the text is not JSON.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{what} is not JSON: {e.msg} at line {e.lineno} column {e.colno}",
                          hint="an Avro schema is a JSON document such as "
                               '{"type": "record", "name": "r", "fields": [...]}') from e


def avro_fields(schema: Any, *, what: str = "the Avro schema") -> list[AvroField]:
    """The Hive type of each top-level field of an Avro record schema.

    A field without a Hive type is returned with its `problem` rather than raised, so that a
    writer schema's extra fields (which a table does not hold) never stop a read.

    Args:
        schema: the parsed schema (`load_avro_schema`).
        what: how errors name it.

    Returns:
        The fields in schema order.

    Raises:
        ConfigError: the schema is not a record, or is not a valid Avro schema.
    """
    names: dict[str, Any] = {}
    top = _resolve(schema, what)
    if not isinstance(top, Mapping) or top.get("type") != "record":
        found = top.get("type") if isinstance(top, Mapping) else top
        raise ConfigError(f"{what} is not a record (its type is {_describe(found)}): a "
                          "table's rows are Avro records",
                          hint='give a schema of {"type": "record", ...}')
    _register(top, names, None, what)
    out: list[AvroField] = []
    for f in _record_fields(top, what):
        try:
            out.append(AvroField(f["name"], _hive(f["type"], names, _namespace(top, None),
                                                  (_full_name(top, None),), what)))
        except ConfigError as e:
            out.append(AvroField(f["name"], None, e.message))
    return out


def avro_to_ddl(schema: Any, *, what: str = "the Avro schema") -> str:
    """A Hive column list for an Avro record schema, as Hive's AvroSerDe maps it.

    Args:
        schema: the parsed schema (`load_avro_schema`) or its JSON text.
        what: how errors name it.

    Returns:
        e.g. ``"id BIGINT, name STRING, ts TIMESTAMP"`` (names as Avro spells them).

    Raises:
        ConfigError: the schema is not a record, has a field without a Hive type (a union of
            several non-null types, a recursive record, a DECIMAL beyond 38 digits), or two
            fields whose names differ only in case.
    """
    if isinstance(schema, str) and schema.lstrip().startswith(("{", "[", '"')):
        schema = load_avro_schema(schema, what=what)
    fields = avro_fields(schema, what=what)
    if not fields:
        raise ConfigError(f"{what} is a record without fields: a table needs a column")
    for f in fields:
        if f.problem is not None:
            raise ConfigError(f"{what}: field {f.name!r}: {f.problem}", hint=_HINT
                              if "union" in f.problem else None)
    ddl = ", ".join(f"`{f.name}` {f.hive_type}" for f in fields)
    return to_ddl(parse_schema(ddl))


def avro_to_arrow(schema: Any, *, what: str = "the Avro schema") -> pa.Schema:
    """The Arrow schema of the Hive columns `avro_to_ddl` gives (as `parse_schema` makes it).

    Raises:
        ConfigError: as `avro_to_ddl`.
    """
    return parse_schema(avro_to_ddl(schema, what=what))


def hive_type_to_arrow(hive_type: str) -> pa.DataType:
    """The Arrow type of one Hive type (e.g. ``"ARRAY<BIGINT>"``).

    Raises:
        ConfigError: not a Hive type.
    """
    return parse_schema(f"x {hive_type}").field(0).type


def _hive(t: Any, names: dict[str, Any], namespace: str | None, open_records: tuple[str, ...],
          what: str) -> str:
    """The Hive type of Avro type `t` (named types registered in `names` as they appear)."""
    if isinstance(t, list):
        branches = [b for b in t if b != "null"]
        if len(branches) == 1 and len(t) == len(branches) + 1:
            return _hive(branches[0], names, namespace, open_records, what)
        if not branches:
            raise ConfigError("a union of null alone has no Hive type")
        shown = ", ".join(_describe(b if not isinstance(b, Mapping) else b.get("type"))
                          for b in t)
        raise ConfigError(f"a union of {shown} has no Hive type (only [\"null\", T] does)")
    if isinstance(t, str):
        if t in _PRIMITIVE:
            return _PRIMITIVE[t]
        if t == "null":
            raise ConfigError("type null alone has no Hive type")
        named = names.get(t) or names.get(f"{namespace}.{t}" if namespace else t)
        if named is None:
            raise ConfigError(f"type {t!r} is neither an Avro type nor a named type defined "
                              "before it")
        full = _full_name(named, None)
        if full in open_records:
            raise ConfigError(f"record {full!r} contains itself; Hive types cannot recurse")
        return _hive(named, names, _namespace(named, None), open_records, what)
    if not isinstance(t, Mapping) or "type" not in t:
        raise ConfigError(f"{json.dumps(t)[:60]} is not an Avro type")
    kind = t["type"]
    logical = t.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        if kind == "fixed":
            _register(t, names, namespace, what)
        precision, scale = t.get("precision"), t.get("scale", 0)
        if not (isinstance(precision, int) and isinstance(scale, int)
                and 1 <= precision <= MAX_DECIMAL_PRECISION and 0 <= scale <= precision):
            raise ConfigError(f"decimal with precision {precision} and scale {scale} has no "
                              f"Hive type (1 <= precision <= {MAX_DECIMAL_PRECISION}, "
                              "0 <= scale <= precision)")
        return f"DECIMAL({precision},{scale})"
    if logical == "date" and kind == "int":
        return "DATE"
    if logical in _TIMESTAMPS and kind == "long":
        return "TIMESTAMP"
    if logical == "varchar" and kind == "string" and isinstance(t.get("maxLength"), int):
        return f"VARCHAR({t['maxLength']})"
    if kind in ("record", "error"):
        _register(t, names, namespace, what)
        full = _full_name(t, namespace)
        inner = _namespace(t, namespace)
        members = [f"`{f['name']}`: {_hive(f['type'], names, inner, (*open_records, full), what)}"
                   for f in _record_fields(t, what)]
        if not members:
            raise ConfigError(f"record {full!r} has no fields; a Hive STRUCT needs one")
        return f"STRUCT<{', '.join(members)}>"
    if kind == "enum":
        _register(t, names, namespace, what)
        return "STRING"
    if kind == "fixed":
        _register(t, names, namespace, what)
        return "BINARY"
    if kind == "array":
        return f"ARRAY<{_hive(t.get('items'), names, namespace, open_records, what)}>"
    if kind == "map":
        return f"MAP<STRING, {_hive(t.get('values'), names, namespace, open_records, what)}>"
    # {"type": "long"} and the like; an unknown logical type reads as its underlying type.
    return _hive(kind, names, namespace, open_records, what)


def _resolve(schema: Any, what: str) -> Any:
    if isinstance(schema, Mapping) and isinstance(schema.get("type"), Mapping):
        return schema["type"]  # {"type": {"type": "record", ...}}
    if not isinstance(schema, (Mapping, list, str)):
        raise ConfigError(f"{what} is not an Avro schema (found {type(schema).__name__})")
    return schema


def _record_fields(record: Mapping[str, Any], what: str) -> list[Mapping[str, Any]]:
    fields = record.get("fields")
    if not isinstance(fields, list) or not all(
            isinstance(f, Mapping) and isinstance(f.get("name"), str) and "type" in f
            for f in fields):
        raise ConfigError(f"{what}: record {record.get('name')!r} needs a list of fields, each "
                          "with a name and a type")
    return fields


def _namespace(t: Mapping[str, Any], enclosing: str | None) -> str | None:
    name = t.get("name", "")
    if "." in name:
        return name.rsplit(".", 1)[0]
    return t.get("namespace") or enclosing


def _full_name(t: Mapping[str, Any], enclosing: str | None) -> str:
    name = str(t.get("name", ""))
    if "." in name:
        return name
    ns = _namespace(t, enclosing)
    return f"{ns}.{name}" if ns else name


def _register(t: Mapping[str, Any], names: dict[str, Any], namespace: str | None,
              what: str) -> None:
    if not isinstance(t.get("name"), str):
        raise ConfigError(f"{what}: a {t.get('type')} needs a name")
    full = _full_name(t, namespace)
    names.setdefault(full, t)
    names.setdefault(str(t["name"]).rsplit(".", 1)[-1], t)


def _describe(t: Any) -> str:
    return str(t) if isinstance(t, str) else type(t).__name__


__all__ = ["AvroField", "avro_fields", "avro_to_arrow", "avro_to_ddl", "hive_type_to_arrow",
           "load_avro_schema", "read_avro_schema_file"]
