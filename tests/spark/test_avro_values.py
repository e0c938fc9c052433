"""Avro record values decoded on executors (ingest/records/avro_values.py), without Spark.

Writer schemas come from a real schema registry (Apicurio, tests/schema_registry.py, its own
process, asked over HTTP by confluent-kafka's client) or from a plain --avro-schema. A
registry that is down: tests/spark/test_registry_down.py.
"""

from __future__ import annotations

import io
import json
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from schema_registry import schema_registry  # noqa: F401 - the fixture

from ingest.acid import read_bucket_file
from ingest.errors import ConfigError
from ingest.records import SchemaRegistry, avro_to_arrow, confluent_frame, registry
from ingest.records.avro_values import (
    AvroFormat,
    avro_format,
    check_writer_schema,
    decode_avro_values,
    plain_start_problem,
)
from ingest.records.fields import new_field_reason
from ingest.records.json_values import TOMBSTONE_REASON
from ingest.spark import with_avro_columns
from ingest.spark.options import SinkOptions, StreamOptions
from ingest.spark.sink._results import FileWritten, from_arrow
from ingest.spark.sink._tasks import DeltaTarget, TaskPlan, write_task

V1: dict[str, Any] = {
    "type": "record", "name": "Event", "namespace": "t",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                    "precision": 9, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "int"}},
        {"name": "where", "type": ["null", {"type": "record", "name": "Place", "fields": [
            {"name": "city", "type": "string"}]}]},
    ]}
TABLE = avro_to_arrow(V1)
# A newer writer with one more field, and an older one without the nullable `note`.
V2 = {**V1, "fields": [*V1["fields"], {"name": "color", "type": "string", "default": "red"}]}
V0 = {**V1, "fields": [f for f in V1["fields"] if f["name"] != "note"]}


def event(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": i, "note": f"n{i}", "ts": datetime(2024, 5, 1, 12, 0, i),
            "amount": Decimal(f"{i}.25"), "day": date(2024, 5, i + 1), "kind": "B",
            "tags": ["x", str(i)], "attrs": {"k": i}, "where": {"city": "Oslo"}, **extra}


def encode(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def values(items: list[bytes | None]) -> pa.Array:
    return pa.array(items, pa.binary())


def test_plain_avro_decodes_every_type_into_the_tables_arrow_types() -> None:
    avro = AvroFormat(writer_schema=json.dumps(V1))
    parsed = decode_avro_values(values([encode(V1, event(1)), encode(V1, event(2))]), TABLE, avro)
    assert parsed.bad == [] and parsed.good.to_pylist() == [0, 1]
    assert parsed.rows.schema == TABLE
    row = parsed.rows.to_pylist()[0]
    assert row["ts"] == datetime(2024, 5, 1, 12, 0, 1)  # naive UTC, as Hive's TIMESTAMP
    assert row["amount"] == Decimal("1.25") and row["day"] == date(2024, 5, 2)
    assert row["kind"] == "B" and row["tags"] == ["x", "1"] and row["attrs"] == [("k", 1)]
    assert row["where"] == {"city": "Oslo"} and row["note"] == "n1"


def test_confluent_framing_resolves_each_writer_schema_to_the_table(
        schema_registry: str) -> None:  # noqa: F811 - the fixture
    client = SchemaRegistry(schema_registry)
    ids = {name: client.register("events-value", json.dumps(s))
           for name, s in (("v1", V1), ("v2", V2), ("v0", V0))}
    assert len(set(ids.values())) == 3
    v0_event = {k: v for k, v in event(3).items() if k != "note"}
    items = [confluent_frame(ids["v1"], encode(V1, event(1))),
             confluent_frame(ids["v2"], encode(V2, event(2, color="blue"))),
             confluent_frame(ids["v0"], encode(V0, v0_event))]
    parsed = decode_avro_values(values(items), TABLE, AvroFormat(registry_url=schema_registry))
    assert parsed.bad == []
    rows = parsed.rows.to_pylist()
    assert [r["id"] for r in rows] == [1, 2, 3]
    assert [r["note"] for r in rows] == ["n1", "n2", None]  # missing from writer v0: null
    assert "color" not in parsed.rows.column_names
    # Judged by --on-new-field as JSON values' new fields are, with the kind Avro's type holds.
    assert parsed.new_fields == [(1, {"color": "string"})]
    assert "new field 'color'" in (new_field_reason(parsed.new_fields[0][1], TABLE.names,
                                                    "dead-letter") or "")


def test_undecodable_records_are_bad_with_their_reason_and_the_rest_go_on(
        schema_registry: str) -> None:  # noqa: F811 - the fixture
    schema_id = registry(schema_registry).register("bad-value", json.dumps(V1))
    good = confluent_frame(schema_id, encode(V1, event(1)))
    items = [good,
             b'{"id": 1}',                          # JSON, not framed
             b"\x00\x00",                           # shorter than the header
             confluent_frame(9999, encode(V1, event(2))),  # an id the registry lacks
             good[:-4],                             # truncated
             good + b"\x02",                        # trailing bytes
             None,                                  # a tombstone
             confluent_frame(schema_id, encode(V1, event(5)))]
    parsed = decode_avro_values(values(items), TABLE, AvroFormat(registry_url=schema_registry))
    assert parsed.good.to_pylist() == [0, 7]
    assert parsed.rows.column("id").to_pylist() == [1, 5]
    reasons = dict(parsed.bad)
    assert sorted(reasons) == [1, 2, 3, 4, 5, 6]
    assert reasons[1].startswith("the value starts with byte 0x7b, not Confluent's magic byte")
    assert reasons[2].startswith("the value is 2 byte(s), shorter than the 5-byte Confluent")
    assert reasons[3] == (f"schema id 9999 is not in the schema registry at {schema_registry}")
    assert "does not decode with its writer schema (EOFError" in reasons[4]
    assert reasons[5].startswith("1 byte(s) follow the Avro record")
    assert reasons[6] == TOMBSTONE_REASON
    skipped = decode_avro_values(values(items), TABLE, AvroFormat(registry_url=schema_registry),
                                 skip_tombstones=True)
    assert skipped.skipped == [6] and 6 not in dict(skipped.bad)


def test_a_writer_schema_that_does_not_fit_makes_its_records_bad_and_promotes_numbers(
        schema_registry: str) -> None:  # noqa: F811 - the fixture
    client = registry(schema_registry)
    text_id = {**V1, "fields": [{"name": "id", "type": "string"}, *V1["fields"][1:]]}
    int_id = {**V1, "fields": [{"name": "id", "type": "int"}, *V1["fields"][1:]]}
    wrong, promoted = client.register("e1", json.dumps(text_id)), client.register(
        "e2", json.dumps(int_id))
    items = [confluent_frame(wrong, encode(text_id, event(1, id="one"))),
             confluent_frame(promoted, encode(int_id, event(2)))]
    parsed = decode_avro_values(values(items), TABLE, AvroFormat(registry_url=schema_registry))
    assert parsed.rows.column("id").to_pylist() == [2]  # int promoted to BIGINT
    assert parsed.bad == [(0, f"writer schema id {wrong} does not fit the table: field 'id' is "
                              "STRING, column 'id' is BIGINT")]


def test_a_plain_writer_schema_that_does_not_fit_is_refused_before_the_first_write() -> None:
    text_id = {**V1, "fields": [{"name": "id", "type": "string"}, *V1["fields"][1:]]}
    check_writer_schema(AvroFormat(writer_schema=json.dumps(V2)), TABLE)  # extra field: fine
    check_writer_schema(None, TABLE)  # JSON values
    with pytest.raises(ConfigError, match="the --avro-schema does not fit the table: field "
                                          "'id' is STRING, column 'id' is BIGINT"):
        check_writer_schema(AvroFormat(writer_schema=json.dumps(text_id)), TABLE)


def test_a_value_outside_its_column_is_bad_and_names_the_field() -> None:
    avro = AvroFormat(writer_schema=json.dumps(V1))
    items = [encode(V1, event(1, ts=datetime(2300, 1, 1))), encode(V1, event(2))]
    parsed = decode_avro_values(values(items), TABLE, avro)
    assert parsed.good.to_pylist() == [1]
    [(index, reason)] = parsed.bad
    assert index == 0 and reason.startswith("field 'ts': datetime.datetime(2300, 1, 1")
    assert "does not fit TIMESTAMP" in reason


def test_a_string_that_is_not_utf8_is_bad_never_written() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}
    parsed = decode_avro_values(values([b"\x04\xff\xfe", b"\x04ok"]), avro_to_arrow(schema),
                                AvroFormat(writer_schema=json.dumps(schema)))
    assert parsed.rows.to_pylist() == [{"s": "ok"}]
    assert parsed.bad == [(0, "a string in the Avro body is not UTF-8: b'\\xff' (readers of "
                              "the table would fail on it)")]


def test_the_options_need_one_source_of_writer_schemas(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--avro-schema apply to --value-format avro"):
        SinkOptions(avro_schema="x.avsc")
    with pytest.raises(ConfigError, match="needs one of --avro-schema FILE .* got neither"):
        SinkOptions(value_format="avro")
    with pytest.raises(ConfigError, match="not both"):
        SinkOptions(value_format="avro", avro_schema="x.avsc", schema_registry="http://r:8081")
    with pytest.raises(ConfigError, match="applies to --mode append, not --mode upsert"):
        SinkOptions(value_format="avro", avro_schema="x.avsc", mode="upsert", key="id")
    with pytest.raises(ConfigError, match="Cannot read --avro-schema .*missing.avsc"):
        avro_format(SinkOptions(value_format="avro", avro_schema=str(tmp_path / "missing.avsc")))
    bad = tmp_path / "bad.avsc"
    bad.write_text(json.dumps({"type": "array", "items": "long"}))
    with pytest.raises(ConfigError, match=r"bad.avsc is not a record \(its type is array\)"):
        avro_format(SinkOptions(value_format="avro", avro_schema=str(bad)))


def test_the_write_task_takes_avro_values_through_the_parse_hook(tmp_path: Path) -> None:
    schema_file = tmp_path / "event.avsc"
    schema_file.write_text(json.dumps(V1))
    options = SinkOptions(value_format="avro", avro_schema=str(schema_file))
    plan = TaskPlan(
        target=DeltaTarget(str(tmp_path / "t"), 1, "delta_0000001_0000001_0000"),
        dead_letter=DeltaTarget(str(tmp_path / "dl"), 1, "delta_0000001_0000001_0000"),
        row_schema=TABLE, parse_schema=TABLE, partition_column=None, partition_from="none",
        bucket_columns=(), bucket_count=0, append=False, close_files=True,
        options=options, avro=avro_format(options))
    batch = pa.record_batch({
        "key": pa.nulls(2, pa.binary()), "value": values([encode(V1, event(1)), b"\x01"]),
        "topic": pa.array(["t"] * 2), "partition": pa.array([0] * 2, pa.int32()),
        "offset": pa.array([10, 11], pa.int64())})
    results = from_arrow(list(write_task(plan, iter([batch])))[0])
    written = {r.target: [e["row"] for e in read_bucket_file(r.staging).to_pylist()]
               for r in results if isinstance(r, FileWritten)}
    assert [r["id"] for r in written["table"]] == [1]
    [dead] = written["dead_letter"]
    assert dead["offset"] == 11 and "does not decode with its writer schema" in dead["error"]


STREAM = dict(bootstrap_servers="h:1", topic="orders", table="/wh/t", checkpoint="/ck")


def test_without_schema_the_streams_columns_come_from_the_avro_schema(
        tmp_path: Path, schema_registry: str) -> None:  # noqa: F811 - the fixture
    with pytest.raises(ConfigError, match="--schema is required"):
        StreamOptions(**STREAM)  # type: ignore[arg-type]
    columns = ("id BIGINT, note STRING, ts TIMESTAMP, amount DECIMAL(9,2), day DATE, "
               "kind STRING, tags ARRAY<STRING>, attrs MAP<STRING,INT>, "
               "`where` STRUCT<city:STRING>")
    avsc = tmp_path / "v1.avsc"
    avsc.write_text(json.dumps(V1))
    plain = StreamOptions(**STREAM, sink=SinkOptions(  # type: ignore[arg-type]
        value_format="avro", avro_schema=str(avsc)))
    assert with_avro_columns(plain).schema_ddl == columns
    given = StreamOptions(**STREAM, schema_ddl="id BIGINT", sink=SinkOptions(  # type: ignore[arg-type]
        value_format="avro", avro_schema=str(avsc)))
    assert with_avro_columns(given).schema_ddl == "id BIGINT"  # --schema wins
    framed = StreamOptions(**STREAM, sink=SinkOptions(  # type: ignore[arg-type]
        value_format="avro", schema_registry=schema_registry))
    with pytest.raises(ConfigError, match="has no subject 'orders-value'"):
        with_avro_columns(framed)
    registry(schema_registry).register("orders-value", json.dumps(V1))
    assert with_avro_columns(framed).schema_ddl == columns


def crc64_avro(data: bytes) -> int:
    """Avro's CRC-64-AVRO (Rabin) fingerprint as its specification defines it, written out
    here to check fastavro's bytes and their order independently."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp & 0xFFFFFFFFFFFFFFFF)
    fp = empty
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


def single_object(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    canonical = fastavro.schema.to_parsing_canonical_form(fastavro.parse_schema(schema))
    return (b"\xc3\x01" + crc64_avro(canonical.encode()).to_bytes(8, "little")
            + encode(schema, record))


def test_single_object_encoding_is_read_and_checked_against_the_avro_schema() -> None:
    """Avro's single-object encoding names its writer schema by fingerprint: a value of the
    --avro-schema is read, one of another schema is bad naming both fingerprints, and a
    plain body that happens to start with the magic bytes is still read as plain."""
    avro = AvroFormat(writer_schema=json.dumps(V1))
    v1_fp = crc64_avro(fastavro.schema.to_parsing_canonical_form(
        fastavro.parse_schema(V1)).encode()).to_bytes(8, "little").hex()
    v2_fp = crc64_avro(fastavro.schema.to_parsing_canonical_form(
        fastavro.parse_schema(V2)).encode()).to_bytes(8, "little").hex()
    magic_first = encode(V1, {**event(3), "id": -98})  # zig-zag -98 is 0xc3 0x01
    assert magic_first[:2] == b"\xc3\x01"
    items = [single_object(V1, event(1)),
             single_object(V2, event(2, color="blue")),
             magic_first,
             encode(V1, event(4))]
    parsed = decode_avro_values(values(items), TABLE, avro)
    assert parsed.good.to_pylist() == [0, 2, 3]
    assert parsed.rows.column("id").to_pylist() == [1, -98, 4]
    assert parsed.rows.to_pylist()[0]["note"] == "n1"
    [(index, reason)] = parsed.bad
    assert index == 1
    assert reason.startswith(
        f"the value is Avro single-object encoded by a writer schema of fingerprint {v2_fp}, "
        f"not the --avro-schema's ({v1_fp}): only values of that one schema can be read"), reason


def test_plain_avro_first_records_that_all_fail_to_decode_tell_a_wrong_schema() -> None:
    """Issue 32: fields {id, a, b} written, {id, b, a} (other types) given: not one record
    decodes, which says the --avro-schema is not the writers'; one good record is enough to
    go on (the rest are bad records, dead-lettered), and framed values are not judged here."""
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "a", "type": "string"},
        {"name": "b", "type": "long"}]}
    reordered = {**writer, "fields": [writer["fields"][i] for i in (0, 2, 1)]}
    schema = avro_to_arrow(writer)
    wrong = AvroFormat(writer_schema=json.dumps(reordered))
    bodies = [encode(writer, {"id": i, "a": f"x{i}", "b": 7 * i}) for i in range(5)]

    problem = plain_start_problem(values([None, *bodies]), schema, wrong)
    assert problem is not None and problem.startswith(
        "none of its first 5 records decodes (record 1: "), problem
    assert plain_start_problem(values(bodies), schema,
                               AvroFormat(writer_schema=json.dumps(writer))) is None
    good_one = encode(reordered, {"id": 9, "a": "y", "b": 1})
    assert plain_start_problem(values([*bodies, good_one]), schema, wrong) is None
    assert plain_start_problem(values([None]), schema, wrong) is None
    assert plain_start_problem(values(bodies), schema, None) is None
    framed = AvroFormat(registry_url="http://127.0.0.1:1")
    assert plain_start_problem(values(bodies), schema, framed) is None
