"""Avro schemas as Hive columns (ingest/records/avro_schema.py), by Hive's AvroSerDe rules."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from ingest.errors import ConfigError
from ingest.records import avro_fields, avro_to_arrow, avro_to_ddl, load_avro_schema


def record(*fields: tuple[str, Any], name: str = "r", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, **extra,
            "fields": [{"name": n, "type": t} for n, t in fields]}


@pytest.mark.parametrize(("avro", "hive"), [
    ("long", "BIGINT"), ("int", "INT"), ("float", "FLOAT"), ("double", "DOUBLE"),
    ("boolean", "BOOLEAN"), ("string", "STRING"), ("bytes", "BINARY"),
    ({"type": "long"}, "BIGINT"),
    (["null", "long"], "BIGINT"), (["string", "null"], "STRING"),
    ({"type": "long", "logicalType": "timestamp-millis"}, "TIMESTAMP"),
    ({"type": "long", "logicalType": "timestamp-micros"}, "TIMESTAMP"),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, "TIMESTAMP"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}, "DECIMAL(10,2)"),
    ({"type": "fixed", "name": "f", "size": 8, "logicalType": "decimal", "precision": 18},
     "DECIMAL(18,0)"),
    ({"type": "int", "logicalType": "date"}, "DATE"),
    ({"type": "enum", "name": "color", "symbols": ["RED", "GREEN"]}, "STRING"),
    ({"type": "fixed", "name": "md5", "size": 16}, "BINARY"),
    ({"type": "string", "logicalType": "varchar", "maxLength": 20}, "VARCHAR(20)"),
    # Unknown logical types read as their underlying type (the Avro specification).
    ({"type": "string", "logicalType": "uuid"}, "STRING"),
    ({"type": "int", "logicalType": "time-millis"}, "INT"),
    ({"type": "array", "items": ["null", "long"]}, "ARRAY<BIGINT>"),
    ({"type": "map", "values": "double"}, "MAP<STRING,DOUBLE>"),
    (record(("city", "string"), ("zip", ["null", "int"]), name="addr"),
     "STRUCT<city:STRING,zip:INT>"),
])
def test_each_avro_type_maps_as_hives_avroserde_does(avro: Any, hive: str) -> None:
    assert avro_to_ddl(record(("c", avro))) == f"c {hive}"


def test_a_whole_schema_with_named_types_and_namespaces() -> None:
    schema = record(
        ("id", "long"),
        ("home", record(("city", "string"), name="Address", namespace="com.example")),
        ("work", ["null", "com.example.Address"]),
        ("kind", {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}),
        ("kinds", {"type": "array", "items": "Kind"}),
        name="Event", namespace="com.example")
    assert avro_to_ddl(json.dumps(schema)) == (
        "id BIGINT, home STRUCT<city:STRING>, work STRUCT<city:STRING>, kind STRING, "
        "kinds ARRAY<STRING>")
    arrow = avro_to_arrow(schema)
    assert arrow.field("id").type == pa.int64()
    assert arrow.field("kinds").type == pa.list_(pa.string())


@pytest.mark.parametrize(("avro", "message"), [
    (["int", "string"], "field 'c': a union of int, string has no Hive type"),
    (["null", "int", "string"], "a union of null, int, string has no Hive type"),
    (["null"], "a union of null alone has no Hive type"),
    ("null", "type null alone has no Hive type"),
    ("Nope", "type 'Nope' is neither an Avro type nor a named type"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2},
     "decimal with precision 40 and scale 2 has no Hive type"),
])
def test_types_without_a_hive_type_are_refused_naming_the_field(avro: Any, message: str) -> None:
    with pytest.raises(ConfigError, match="field 'c': ") as e:
        avro_to_ddl(record(("c", avro)), what="subject 'events-value'")
    assert message in str(e.value) and "subject 'events-value'" in str(e.value)


def test_a_recursive_record_is_refused() -> None:
    node = {"type": "record", "name": "Node",
            "fields": [{"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(ConfigError, match="record 'Node' contains itself"):
        avro_to_ddl(record(("head", node)))


@pytest.mark.parametrize(("schema", "message"), [
    ("long", r"is not a record \(its type is long\)"),
    (["null", "long"], r"is not a record \(its type is list\)"),
    ({"type": "record", "name": "r"}, "needs a list of fields"),
    ({"type": "record", "name": "r", "fields": []}, "a record without fields"),
])
def test_the_top_level_must_be_a_record_with_fields(schema: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        avro_to_ddl(schema)


def test_names_that_differ_only_in_case_are_refused_as_hive_would() -> None:
    with pytest.raises(ConfigError, match="duplicate column name"):
        avro_to_ddl(record(("Id", "long"), ("id", "long")))


def test_bad_json_is_a_config_error_naming_the_schema() -> None:
    with pytest.raises(ConfigError, match=r"events.avsc is not JSON: .* line 1"):
        load_avro_schema('{"type": "record",', what="events.avsc")


def test_fields_report_problems_instead_of_raising() -> None:
    fields = avro_fields(record(("id", "long"), ("u", ["int", "string"])))
    assert [(f.name, f.hive_type) for f in fields] == [("id", "BIGINT"), ("u", None)]
    assert fields[1].problem is not None and "union of int, string" in fields[1].problem
