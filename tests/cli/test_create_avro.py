"""`ingest create PATH --schema-from-avro FILE|SUBJECT [--schema-registry URL]`."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from schema_registry import schema_registry  # noqa: F401 - the fixture
from support import run_cli

from ingest.records import registry
from ingest.txn import Metastore, default_metastore_url

ORDER = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                "scale": 2}},
    {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
    {"name": "dt", "type": "string"}]}


def test_a_schema_file_becomes_the_tables_columns(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    avsc = tmp_path / "order.avsc"
    avsc.write_text(json.dumps(ORDER))
    root = tmp_path / "wh" / "orders"
    code, out, err = run_cli(["create", str(root), "--schema-from-avro", str(avsc),
                              "--partitioned-by", "dt", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["columns"] == "id BIGINT, amount DECIMAL(9,2), ts TIMESTAMP"
    with Metastore.open(default_metastore_url(str(root))) as store:
        table = store.get_table(str(root))
    assert table.row_schema.field("amount").type == pa.decimal128(9, 2)
    assert list(table.partition_columns) == ["dt"]


def test_a_registry_subject_is_its_latest_version(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        schema_registry: str) -> None:  # noqa: F811 - the fixture
    client = registry(schema_registry)
    client.register("orders-value", json.dumps({**ORDER, "fields": ORDER["fields"][:1]}))
    client.register("orders-value", json.dumps(ORDER))
    code, out, err = run_cli(["create", str(tmp_path / "t"), "--schema-from-avro",
                              "orders-value", "--schema-registry", schema_registry, "--json"],
                             capsys)
    assert code == 0, err
    assert json.loads(out)["columns"] == (
        "id BIGINT, amount DECIMAL(9,2), ts TIMESTAMP, dt STRING")
    code, _, err = run_cli(["create", str(tmp_path / "u"), "--schema-from-avro", "nope-value",
                            "--schema-registry", schema_registry], capsys)
    assert code == 2 and f"The schema registry at {schema_registry} has no subject " \
                          "'nope-value'" in err


@pytest.mark.parametrize(("args", "message"), [
    ([], "exactly one of --schema and --schema-from-avro"),
    (["--schema", "id BIGINT", "--schema-from-avro", "x.avsc"], "not both"),
    (["--schema-from-avro", "missing.avsc"], "Cannot read the Avro schema file missing.avsc"),
    (["--schema", "id BIGINT", "--schema-registry", "http://r:8081"],
     "--schema-registry applies to --schema-from-avro SUBJECT"),
])
def test_misuse_exits_2_saying_why(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   args: list[str], message: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["create", str(tmp_path / "t"), *args], capsys)
    assert code == 2 and message in err
    assert not (tmp_path / "t").exists()


def test_a_union_field_is_refused_naming_it(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    avsc = tmp_path / "u.avsc"
    avsc.write_text(json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "id", "type": "long"}, {"name": "v", "type": ["null", "int", "string"]}]}))
    code, _, err = run_cli(["create", str(tmp_path / "t"), "--schema-from-avro", str(avsc)],
                           capsys)
    assert code == 2
    assert f"{avsc}: field 'v': a union of null, int, string has no Hive type" in err
    assert 'make the field ["null", T]' in err
