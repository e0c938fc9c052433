"""Trino 476 writing our tables through the Hive Metastore: rows it INSERTs, DELETEs and
UPDATEs in a table `ingest create` made read back exactly through `ingest cat`, the Table API
and Hive 4's own readers, and rows `ingest` deletes from what Trino wrote are gone for Trino.
Trino creates transactional tables on a Hive 3.1 metastore (which `ingest` then reads and
writes) but not on Hive 4, which refuses a client that declares no capabilities."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import trino
from hms.hive4 import read_rows, read_rows_vectorized
from hms_server import Server, trino_query
from support import ok_json, run_cli

import ingest
from ingest.errors import TableNotFoundError
from ingest.txn import hms

pytestmark = [pytest.mark.hms, pytest.mark.trino, pytest.mark.slow]


def _load(location: str, uri: str, rows: list[dict[str, Any]], tmp_path: Path,
          capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / f"in-{uuid.uuid4().hex[:6]}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ok_json(["load", location, "--input", str(src), "--metastore", uri], capsys)


def _cat(location: str, uri: str, capsys: pytest.CaptureFixture[str],
         *extra: str) -> list[dict[str, Any]]:
    code, out, err = run_cli(["cat", location, "--metastore", uri, *extra], capsys)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def _rows(location: str, uri: str, capsys: pytest.CaptureFixture[str]) -> list[list[Any]]:
    """[id, v, dt] of `ingest cat`, by id; the Table API must read the same."""
    cat = sorted([r["id"], r["v"], r["dt"]] for r in _cat(location, uri, capsys))
    api = ingest.open_table(location, metastore=uri).to_arrow().sort_by("id")
    assert [[r["id"], r["v"], r["dt"]] for r in api.to_pylist()] == cat
    return cat


@pytest.mark.java
def test_rows_trino_inserts_updates_and_deletes_read_back_exactly(
        hms4: Server, trino_on_hms4: Server, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    location = str(tmp_path / "wh" / "events")
    name = f"tw_{uuid.uuid4().hex[:10]}.events"
    ok_json(["create", location, "--name", name, "--schema", "id BIGINT, v STRING, dt STRING",
             "--partitioned-by", "dt", "--metastore", hms4.uri], capsys)
    _load(location, hms4.uri, [{"id": i, "v": f"v{i}", "dt": f"2024-01-0{1 + i % 2}"}
                               for i in range(5)], tmp_path, capsys)
    ok_json(["delete", location, "--where", "id = 1", "--metastore", hms4.uri], capsys)

    # Trino's writes, each its own HMS transaction: an insert (one new partition), a delete
    # and an update of rows `ingest load` wrote.
    assert trino_query(trino_on_hms4, f"INSERT INTO {name} VALUES (10, 't10', '2024-01-01'), "
                                      "(11, 't11', '2024-01-05')") == [[2]]
    assert trino_query(trino_on_hms4, f"DELETE FROM {name} WHERE id = 3") == [[1]]
    assert trino_query(trino_on_hms4, f"UPDATE {name} SET v = 'upd' WHERE id = 0") == [[1]]
    expected = [[0, "upd", "2024-01-01"], [2, "v2", "2024-01-01"], [4, "v4", "2024-01-01"],
                [10, "t10", "2024-01-01"], [11, "t11", "2024-01-05"]]
    assert _rows(location, hms4.uri, capsys) == expected
    assert trino_query(trino_on_hms4, f"SELECT id, v, dt FROM {name} ORDER BY id") == expected
    with hms.connect(hms4.uri) as conn:
        hive = read_rows(conn, name)
        assert sorted([r["id"], r["v"], r["dt"]] for r in hive) == expected
        assert sorted([r["id"], r["v"], r["dt"]] for r in read_rows_vectorized(conn, name)) == \
            expected
        # Trino's ROW__IDs are the ones `ingest cat --row-id` reports.
        assert sorted(hive, key=lambda r: r["id"]) == sorted(
            _cat(location, hms4.uri, capsys, "--row-id"), key=lambda r: r["id"])

    # `ingest delete` of a row Trino inserted and of the row Trino updated.
    ok_json(["delete", location, "--where", "id = 10 OR id = 0", "--metastore", hms4.uri],
            capsys)
    expected = [[2, "v2", "2024-01-01"], [4, "v4", "2024-01-01"], [11, "t11", "2024-01-05"]]
    assert trino_query(trino_on_hms4, f"SELECT id, v, dt FROM {name} ORDER BY id") == expected
    assert _rows(location, hms4.uri, capsys) == expected
    code, _, err = run_cli(["verify", location, "--metastore", hms4.uri], capsys)
    assert code == 0, err


def test_trino_cannot_create_a_transactional_table_on_hive4(
        hms4: Server, trino_on_hms4: Server, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Hive 4 creates an ACID table only for a client that declares its capabilities, which
    Trino 476 does not: create it with `ingest create` (or Hive) and Trino writes it."""
    db = f"tc_{uuid.uuid4().hex[:10]}"
    trino_query(trino_on_hms4, f"CREATE SCHEMA {db} WITH (location = 'file://{tmp_path}/db')")
    with pytest.raises(trino.exceptions.TrinoQueryError,
                       match="Processor has no capabilities, cannot create an ACID table"):
        trino_query(trino_on_hms4, f"CREATE TABLE {db}.t (id bigint) "
                                   "WITH (format = 'ORC', transactional = true)")
    with hms.connect(hms4.uri) as conn, pytest.raises(TableNotFoundError):
        hms.get_table(conn, f"{db}.t")
    # Without `transactional`, Hive 4 makes Trino's table an external, non-ACID one, which
    # `ingest` refuses to write, naming the property.
    trino_query(trino_on_hms4, f"CREATE TABLE {db}.t (id bigint) WITH (format = 'ORC')")
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1}\n')
    code, out, err = run_cli(["load", f"{tmp_path}/db/t", "--input", str(src),
                              "--metastore", hms4.uri], capsys)
    assert code == 3, err
    assert f"Cannot write table {db}.t" in err
    assert "its property transactional is not set, expected 'true'" in err
    assert out == ""
    assert trino_query(trino_on_hms4, f"SELECT count(*) FROM {db}.t") == [[0]]


def test_a_table_trino_creates_on_hive3_is_read_and_written_by_ingest(
        hms3: Server, trino_on_hms3: Server, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    db = f"tc_{uuid.uuid4().hex[:10]}"
    trino_query(trino_on_hms3, f"CREATE SCHEMA {db} WITH (location = 'file://{tmp_path}/db')")
    trino_query(trino_on_hms3, f"CREATE TABLE {db}.events (id bigint, v varchar, dt varchar) "
                               "WITH (format = 'ORC', transactional = true, "
                               "partitioned_by = ARRAY['dt'])")
    trino_query(trino_on_hms3, f"INSERT INTO {db}.events VALUES (1, 'a', 'x'), (2, 'b', 'y'), "
                               "(3, 'c', 'y')")
    trino_query(trino_on_hms3, f"DELETE FROM {db}.events WHERE id = 2")
    location = f"{tmp_path}/db/events"
    assert _rows(location, hms3.uri, capsys) == [[1, "a", "x"], [3, "c", "y"]]
    _load(location, hms3.uri, [{"id": 4, "v": "d", "dt": "z"}], tmp_path, capsys)
    ok_json(["delete", location, "--where", "id = 1", "--metastore", hms3.uri], capsys)
    expected = [[3, "c", "y"], [4, "d", "z"]]
    assert _rows(location, hms3.uri, capsys) == expected
    assert trino_query(trino_on_hms3, f"SELECT id, v, dt FROM {db}.events ORDER BY id") == \
        expected


def test_rows_trino_writes_into_a_bucketed_table_read_back_exactly(
        hms4: Server, trino_on_hms4: Server, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Trino places its rows in the buckets of the table `ingest create` declared (Hive's
    bucketing version 2), and the bucket each ROW__ID names is the file Trino reads it from."""
    location = str(tmp_path / "wh" / "bk")
    name = f"tw_{uuid.uuid4().hex[:10]}.bk"
    ok_json(["create", location, "--name", name, "--schema", "id BIGINT, v STRING",
             "--buckets", "4", "--bucketed-by", "id", "--metastore", hms4.uri], capsys)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "v": f"v{i}"}) + "\n" for i in range(12)))
    ok_json(["load", location, "--input", str(src), "--metastore", hms4.uri], capsys)
    trino_query(trino_on_hms4, f"INSERT INTO {name} VALUES (100, 't'), (101, 't'), (102, 't')")
    trino_query(trino_on_hms4, f"DELETE FROM {name} WHERE id IN (1, 100)")
    ok_json(["delete", location, "--where", "id = 101 OR id = 2", "--metastore", hms4.uri],
            capsys)
    buckets = dict(trino_query(trino_on_hms4, f'SELECT id, "$bucket" FROM {name}'))
    assert sorted(buckets) == [0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 102]
    assert len(set(buckets.values())) > 1
    cat = _cat(location, hms4.uri, capsys, "--row-id")
    # Hive's bucket property: version 1 in the top bits, the bucket id in bits 16-27.
    assert {r["id"]: r["row__id"]["bucketid"] >> 16 & 0xFFF for r in cat} == buckets
    api = ingest.open_table(location, metastore=hms4.uri).to_arrow()
    assert sorted(api.column("id").to_pylist()) == sorted(buckets)
