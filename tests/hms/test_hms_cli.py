"""The commands with `--metastore thrift://` on a Hive Metastore 4.0.1: create, load, cat,
delete and status round trip; Trino reads exactly what they committed; rows Trino inserts read
back exactly through `ingest cat` and `open_table`; bad input fails cleanly."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from external import free_port
from hms_server import Server, trino_query
from support import ok_json, run_cli

import ingest
from ingest.txn import Metastore, hms

pytestmark = pytest.mark.hms


def _load_and_delete(tmp_path: Path, uri: str, capsys: pytest.CaptureFixture[str]
                     ) -> tuple[str, str]:
    """`ingest create` in a new database, one load of five rows in two partitions, one
    delete of two; returns (location, db.table)."""
    location = str(tmp_path / "wh" / "events")
    name = f"c_{uuid.uuid4().hex[:10]}.events"
    ok_json(["create", location, "--name", name, "--schema", "id BIGINT, v STRING, dt STRING",
             "--partitioned-by", "dt", "--metastore", uri], capsys)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "v": f"v{i}", "dt": f"2024-01-0{1 + i % 2}"})
                           + "\n" for i in range(5)))
    ok_json(["load", location, "--input", str(src), "--metastore", uri], capsys)
    ok_json(["delete", location, "--where", "id = 1 OR id = 2", "--metastore", uri], capsys)
    return location, name


def _cat(location: str, uri: str, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    code, out, err = run_cli(["cat", location, "--metastore", uri], capsys)
    assert code == 0, err
    return sorted((json.loads(line) for line in out.splitlines()), key=lambda r: r["id"])


def test_create_load_delete_cat_status_round_trip(hms4: Server, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    location, name = _load_and_delete(tmp_path, hms4.uri, capsys)
    assert [r["id"] for r in _cat(location, hms4.uri, capsys)] == [0, 3, 4]
    status = ok_json(["status", location, "--metastore", hms4.uri], capsys)
    assert json.dumps(status).count("delete_delta_0000002_0000002_0000") >= 1
    assert name in json.dumps(status)
    rows = ingest.open_table(location, metastore=hms4.uri).to_arrow().sort_by("id")
    assert rows.column("id").to_pylist() == [0, 3, 4]


def test_an_unreachable_metastore_fails_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = f"thrift://127.0.0.1:{free_port()}"
    location = tmp_path / "wh" / "events"
    code, out, err = run_cli(["create", str(location), "--schema", "id BIGINT",
                              "--metastore", uri], capsys)
    assert code == 3, err
    assert f"Cannot reach the Hive Metastore at {uri}" in err
    assert out == ""
    assert not (tmp_path / "wh").exists()


def test_a_table_the_metastore_does_not_list_is_not_found(
        hms4: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1}\n')
    code, _, err = run_cli(["load", str(tmp_path / "nothing"), "--input", str(src),
                            "--metastore", hms4.uri], capsys)
    assert code == 3, err
    assert f"at or above {tmp_path}/nothing in metastore {hms4.uri}" in err
    code, _, err = run_cli(["cat", str(tmp_path / "nothing"), "--metastore", hms4.uri], capsys)
    assert code == 3, err
    assert "Cannot find" in err


@pytest.mark.trino
@pytest.mark.slow
def test_trino_reads_what_load_and_delete_committed(
        hms4: Server, trino_on_hms4: Server, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    _, name = _load_and_delete(tmp_path, hms4.uri, capsys)
    assert trino_query(trino_on_hms4, f"SELECT id, v, dt FROM {name} ORDER BY id") == [
        [0, "v0", "2024-01-01"], [3, "v3", "2024-01-02"], [4, "v4", "2024-01-01"]]


@pytest.mark.trino
@pytest.mark.slow
def test_rows_trino_inserts_read_back_exactly(
        hms4: Server, trino_on_hms4: Server, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    location, name = _load_and_delete(tmp_path, hms4.uri, capsys)
    trino_query(trino_on_hms4, f"INSERT INTO {name} VALUES (10, 'trino', '2024-01-01'), "
                          "(11, 'trino', '2024-01-03')")
    expected = [0, 3, 4, 10, 11]
    rows = _cat(location, hms4.uri, capsys)
    assert [r["id"] for r in rows] == expected
    assert {r["dt"] for r in rows if r["v"] == "trino"} == {"2024-01-01", "2024-01-03"}
    table = ingest.open_table(location, metastore=hms4.uri).to_arrow().sort_by("id")
    assert table.column("id").to_pylist() == expected


@pytest.mark.trino
@pytest.mark.slow
def test_a_table_another_engine_registered_is_a_target(
        hms4: Server, trino_on_hms4: Server, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A table registered as Hive's CREATE TABLE ... STORED AS ORC TBLPROPERTIES
    ('transactional'='true') does (no ingest property, no marker; the metastore picks its
    location; Trino 476 cannot create ACID tables on Hive 4: "Processor has no capabilities"),
    written by Trino and by `ingest load`."""
    db = f"tr_{uuid.uuid4().hex[:10]}"
    with hms.connect(hms4.uri) as conn:
        hms.create_database(conn, db, location=f"file://{tmp_path}/ext",
                            managed_location=f"file://{tmp_path}/db")
        hms.create_table(conn, hms.HiveTableSpec(
            f"{db}.t", (hms.HiveColumn("id", "bigint"), hms.HiveColumn("v", "string"))))
    trino_query(trino_on_hms4, f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')")
    with Metastore.open(hms4.uri) as store:
        where = store.get_table(f"{db}.t").location
    assert where == f"file://{tmp_path}/db/t"
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 3, "v": "c"}) + "\n")
    ok_json(["load", where, "--input", str(src), "--metastore", hms4.uri], capsys)
    assert trino_query(trino_on_hms4, f"SELECT id, v FROM {db}.t ORDER BY id") == [
        [1, "a"], [2, "b"], [3, "c"]]
    assert [r["id"] for r in _cat(where, hms4.uri, capsys)] == [1, 2, 3]
