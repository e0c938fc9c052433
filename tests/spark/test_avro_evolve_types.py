"""--on-new-field evolve with Avro values: a writer schema's field the table lacks becomes a
column of the exact Hive type its Avro type maps to (as `ingest create --schema-from-avro`
maps it), not one guessed from the kind of its values. Decoding runs without Spark; the
stream through the real broker and Spark with a plain --avro-schema."""

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

from ingest.acid.format import to_ddl
from ingest.acid.read.reader import read_table
from ingest.records import hive_type_to_arrow
from ingest.records.avro_values import AvroFormat, decode_avro_values
from ingest.records.fields import FieldSeen, column_type, new_columns
from ingest.records.new_fields import as_text, from_text, types_from_text
from ingest.txn import Metastore, default_metastore_url

WRITER: dict[str, Any] = {
    "type": "record", "name": "Reading", "namespace": "t",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "i32", "type": "int"},
        {"name": "f32", "type": "float"},
        {"name": "d64", "type": "double"},
        {"name": "flag", "type": "boolean"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal",
                                   "precision": 10, "scale": 3}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "place", "type": {"type": "record", "name": "Place", "fields": [
            {"name": "city", "type": "string"}, {"name": "floor", "type": "int"}]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "maybe", "type": ["null", "long"], "default": None},
    ]}
EXACT = {"d64": "DOUBLE", "day": "DATE", "f32": "FLOAT", "flag": "BOOLEAN", "i32": "INT",
         "maybe": "BIGINT", "place": "STRUCT<`city`: STRING, `floor`: INT>",
         "price": "DECIMAL(10,3)", "tags": "ARRAY<STRING>", "ts": "TIMESTAMP"}


def reading(i: int) -> dict[str, Any]:
    return {"id": i, "i32": i * 3, "f32": 0.5 * i, "d64": i / 8, "flag": i % 2 == 0,
            "ts": datetime(2026, 1, 2, 3, 4, i % 60), "price": Decimal(i) / 1000,
            "day": date(2026, 1, 1 + i % 28), "place": {"city": f"c{i}", "floor": i},
            "tags": [f"t{i}"], "maybe": None if i % 2 else i}


def encode(record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(WRITER), record)
    return out.getvalue()


def test_a_writer_schemas_new_fields_carry_their_exact_hive_types() -> None:
    table = pa.schema([("id", pa.int64())])
    parsed = decode_avro_values(pa.array([encode(reading(i)) for i in range(4)], pa.binary()),
                                table, AvroFormat(writer_schema=json.dumps(WRITER)))
    assert parsed.rows.column("id").to_pylist() == [0, 1, 2, 3]
    assert {n: types for n, types in parsed.new_field_types.items()} == {
        n: (t,) for n, t in EXACT.items()}
    # The two-stage plan carries them from the parse stage to the write stage as text.
    text = as_text(parsed.new_by_field, 4, parsed.new_field_types)
    assert types_from_text(text) == parsed.new_field_types
    assert {n: f.kind for n, f in from_text(text).items()} == {
        n: f.kind for n, f in parsed.new_by_field.items()}
    # The driver's choice: the one declared type, whatever the values' kinds; --evolve-type
    # still wins; writer schemas that disagree fall back to the kinds.
    assert column_type({"integer": 4}, None, ("INT",)) == "INT"
    assert column_type({"object": 4}, None, (EXACT["place"],)) == EXACT["place"]
    assert column_type({"integer": 4}, "SMALLINT", ("INT",)) == "SMALLINT"
    assert column_type({"integer": 4}, None, ("BIGINT", "INT")) == "BIGINT"
    seen = {"i32": FieldSeen({"integer": 2}, 2, "t", 0, 1, types=("INT",)),
            "f32": FieldSeen({"number": 2}, 2, "t", 0, 1, types=["FLOAT"])}  # type: ignore[arg-type]
    assert seen["f32"].merged(seen["f32"]).types == ("FLOAT",)
    assert new_columns(seen, ["id"], {}) == [("f32", "FLOAT"), ("i32", "INT")]


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")
def test_the_stream_adds_avro_fields_as_columns_of_their_exact_types(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    from ingest.kafka.produce import produce_events
    from ingest.spark.job import StreamSummary, run_stream

    schema_file = warehouse / "reading.avsc"
    schema_file.write_text(json.dumps(WRITER))
    produce_events(kafka_broker, topic, events=[encode(reading(i)) for i in range(20)],
                   partitions=1)
    location = str(warehouse / "readings")
    summary = run_stream(spark, bootstrap_servers=kafka_broker, topic=topic, table=location,
                         schema_ddl="id BIGINT", checkpoint=str(warehouse / "checkpoint"),
                         available_now=True, kafka_timeout_s=10, value_format="avro",
                         avro_schema=str(schema_file), on_new_field="evolve")
    assert isinstance(summary, StreamSummary)
    assert summary.rows == 20 and summary.dead_letters == 0
    with Metastore.open(default_metastore_url(location)) as store:
        defn = store.get_table(location)
        rows = read_table(location, store.snapshot(location)).to_pylist()
    # Added in name order, each with the type the Avro type maps to.
    assert defn.row_schema.names == ["id", *sorted(EXACT)]
    for name, hive_type in EXACT.items():
        assert defn.row_schema.field(name).type == hive_type_to_arrow(hive_type), name
    assert to_ddl(defn.row_schema).startswith("id BIGINT, d64 DOUBLE, day DATE, f32 FLOAT, "
                                              "flag BOOLEAN, i32 INT, maybe BIGINT, ")
    assert defn.schema_version == 1
    rows.sort(key=lambda r: r["id"])
    assert len(rows) == 20
    for r in rows:
        expected = reading(r["id"])
        assert r["ts"] == expected["ts"] and r["day"] == expected["day"]
        assert r["price"] == expected["price"] and r["place"] == expected["place"]
        assert (r["i32"], r["f32"], r["d64"], r["flag"], r["tags"], r["maybe"]) == (
            expected["i32"], expected["f32"], expected["d64"], expected["flag"],
            expected["tags"], expected["maybe"])
