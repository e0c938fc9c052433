"""The fast Avro decode (ingest/records/avro_values.py: chunks of records in one fastavro call,
timestamps and dates as raw ints cast in Arrow) gives exactly what decoding each record alone
gives: the same rows, the same bad records with the same reasons, in record order.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime
from typing import Any

import fastavro
import pyarrow as pa
from schema_registry import schema_registry  # noqa: F401 - the fixture (Apicurio)

from ingest.records import avro_to_arrow, confluent_frame, registry
from ingest.records.avro_values import AvroFormat, decode_avro_values

WRITER: dict[str, Any] = {
    "type": "record", "name": "Bulk", "fields": [
        {"name": "id", "type": "long"},
        {"name": "s", "type": "string"},
        {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}}]}
TABLE = avro_to_arrow(WRITER)


def encode(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def record(i: int) -> dict[str, Any]:
    return {"id": i, "s": f"s{i}", "day": date(2024, 1, 1 + i % 28),
            "ts": None if i % 7 == 0 else datetime(2024, 1, 1, 0, 0, i % 60, tzinfo=UTC)}


def each_alone(items: list[bytes | None], avro: AvroFormat) -> tuple[list[Any], list[Any]]:
    """Rows and bad reasons as decoding every record in a batch of its own gives them."""
    rows, bad = [], []
    for i, item in enumerate(items):
        one = decode_avro_values(pa.array([item], pa.binary()), TABLE, avro)
        rows.extend(one.rows.to_pylist())
        bad.extend((i, reason) for _, reason in one.bad)
    return rows, bad


def test_a_batch_decodes_as_its_records_each_alone_across_chunks_and_damage() -> None:
    avro = AvroFormat(writer_schema=json.dumps(WRITER))
    items: list[bytes | None] = [encode(WRITER, record(i)) for i in range(9000)]
    good = items[1]
    assert good is not None
    items[100] = good[:-1]            # truncated ...
    items[101] = good + b"\x02"       # ... then a trailing byte: the lengths balance out
    items[5000] = b"\x04\xff\xfe"     # not UTF-8
    items[5001] = None                # a tombstone
    items[8999] = encode({**WRITER, "fields": [WRITER["fields"][0], WRITER["fields"][1],
                                               WRITER["fields"][2],
                                               {"name": "day", "type": "int"}]},
                         {**record(1), "day": 3_000_000})  # a date Python cannot hold
    parsed = decode_avro_values(pa.array(items, pa.binary()), TABLE, avro)
    rows, bad = each_alone(items, avro)
    assert parsed.rows.to_pylist() == rows and parsed.bad == bad
    assert [i for i, _ in bad] == [100, 101, 5000, 5001, 8999]
    assert "does not decode with its writer schema (ValueError: year 10183" in bad[-1][1]
    assert parsed.good.to_pylist() == [i for i in range(9000) if i not in {100, 101, 5000,
                                                                           5001, 8999}]
    first = parsed.rows.slice(0, 1).to_pylist()[0]
    assert first["ts"] is None and parsed.rows.column("ts")[1].as_py() == datetime(
        2024, 1, 1, 0, 0, 1)
    assert parsed.rows.schema == TABLE


def test_records_of_interleaved_writer_schemas_keep_their_order(
        schema_registry: str) -> None:  # noqa: F811 - the fixture
    older = {**WRITER, "fields": [f for f in WRITER["fields"] if f["name"] != "ts"]}
    client = registry(schema_registry)
    new_id = client.register("bulk-value", json.dumps(WRITER))
    old_id = client.register("bulk-value", json.dumps(older))
    items: list[bytes | None] = [
        confluent_frame(old_id, encode(older, {k: v for k, v in record(i).items() if k != "ts"}))
        if i % 3 == 0 else confluent_frame(new_id, encode(WRITER, record(i)))
        for i in range(30)]
    parsed = decode_avro_values(pa.array(items, pa.binary()), TABLE,
                                AvroFormat(registry_url=schema_registry))
    assert parsed.bad == []
    assert parsed.rows.column("id").to_pylist() == list(range(30))
    assert parsed.good.to_pylist() == list(range(30))
    ts = parsed.rows.column("ts").to_pylist()
    assert [t is None for t in ts] == [i % 3 == 0 or i % 7 == 0 for i in range(30)]


def test_a_writer_field_named_like_the_bulk_nonce_still_decodes() -> None:
    writer = {"type": "record", "name": "N", "fields": [
        {"name": "ingest_avro_bulk_nonce", "type": "long"}, {"name": "id", "type": "long"}]}
    table = avro_to_arrow(writer)
    items = [encode(writer, {"ingest_avro_bulk_nonce": i, "id": -i}) for i in range(10)]
    parsed = decode_avro_values(pa.array(items, pa.binary()), table,
                                AvroFormat(writer_schema=json.dumps(writer)))
    assert parsed.bad == [] and parsed.rows.column("id").to_pylist() == [-i for i in range(10)]
