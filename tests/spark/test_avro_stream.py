"""The stream with Confluent-framed Avro values, end to end: the tansu broker, real Spark, the
schema registry (Apicurio, tests/schema_registry.py, its own process).

`ingest create --schema-from-avro SUBJECT` makes the table from the registry; writers of three
schema versions (the table's, one with a new field that --on-new-field evolve adds as a column,
one without a nullable field) and
records that cannot be decoded go through one `--available-now` run.
"""

from __future__ import annotations

import io
import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pytest
from schema_registry import schema_registry  # noqa: F401 - the fixture
from support import run_cli

from ingest.acid.read.reader import read_table
from ingest.records import confluent_frame, registry
from ingest.txn import Metastore, default_metastore_url

V1: dict[str, Any] = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                    "precision": 9, "scale": 2}},
        {"name": "items", "type": {"type": "array", "items": "string"}},
    ]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "channel", "type": "string", "default": "web"}]}
V0 = {**V1, "fields": [f for f in V1["fields"] if f["name"] != "note"]}


def encode(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def order(i: int) -> dict[str, Any]:
    return {"id": i, "note": f"n{i}", "ts": datetime(2026, 1, 1, 0, 0, i % 60),
            "amount": Decimal(i) / 4, "items": [f"i{i}"] * (i % 3), "channel": "app"}


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.java
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")
def test_confluent_avro_values_stream_through_schema_versions_and_bad_ones_are_dead_lettered(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path,
        schema_registry: str, capsys: pytest.CaptureFixture[str]  # noqa: F811 - the fixture
) -> None:
    from ingest.kafka.produce import produce_events
    from ingest.spark.job import run_stream

    client = registry(schema_registry)
    subject = f"{topic}-value"
    v0, v2 = client.register(subject, json.dumps(V0)), client.register(subject, json.dumps(V2))
    v1 = client.register(subject, json.dumps(V1))  # the latest: the table's schema
    location = str(warehouse / "orders")
    code, out, err = run_cli(["create", location, "--schema-from-avro", subject,
                              "--schema-registry", schema_registry, "--json"], capsys)
    assert code == 0, err
    ddl = json.loads(out)["columns"]
    assert ddl == "id BIGINT, note STRING, ts TIMESTAMP, amount DECIMAL(9,2), items ARRAY<STRING>"

    events: list[bytes | None] = []
    for i in range(300):
        schema_id, schema = ((v1, V1), (v2, V2), (v0, V0))[i % 3]
        events.append(confluent_frame(schema_id, encode(schema, order(i))))
    truncated = confluent_frame(v1, encode(V1, order(1000)))[:-3]
    bad = {b'{"id": 1}': "not Confluent's magic byte",
           confluent_frame(4242, encode(V1, order(1001))): "schema id 4242 is not in the schema",
           truncated: "does not decode with its writer schema"}
    events[50:50] = list(bad)
    produce_events(kafka_broker, topic, events=events, partitions=2)

    # No --schema: the columns come from the registry's `<topic>-value` subject, as create's.
    summary = run_stream(
        spark, bootstrap_servers=kafka_broker, topic=topic, table=location,
        checkpoint=str(warehouse / "ck"), available_now=True, kafka_timeout_s=10,
        value_format="avro", schema_registry=schema_registry, on_new_field="evolve")
    assert summary.rows == 300 and summary.dead_letters == 3  # type: ignore[union-attr]

    with Metastore.open(default_metastore_url(location)) as store:
        rows = read_table(location, store.snapshot(location)).to_pylist()
        dead = read_table(location + "__dead_letter",
                          store.snapshot(location + "__dead_letter")).to_pylist()
    rows.sort(key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(300))
    for r in rows:
        expected = order(r["id"])
        assert r["ts"] == expected["ts"] and r["amount"] == expected["amount"]
        assert r["items"] == expected["items"]
        # Writer V0 has no `note`: null; V2's new `channel` became a column (evolve).
        assert r["note"] == (None if r["id"] % 3 == 2 else expected["note"])
        assert r["channel"] == ("app" if r["id"] % 3 == 1 else None)
    assert len(dead) == 3
    for d in dead:
        assert bad[d["value"]] in d["error"], d
