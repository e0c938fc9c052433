"""The commands with `--metastore thrift://` on a Hive Metastore 4.0.1: create, load, cat,
delete and status round trip; Trino reads exactly what they committed; rows Trino inserts read
back exactly through `ingest cat` and `open_table`; bad input fails cleanly, a transaction
batch (`--txns-per-delta` > 1) of the stream before anything is created."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from external import free_port
from hms_server import Server, metastore_state, register_hive_acid_table, trino_query
from support import ok_json, run_cli

import ingest
from ingest.txn import Metastore, hms

ROOT = Path(__file__).resolve().parents[2]

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


def test_an_unreachable_metastore_with_json_prints_only_the_json_error(
        tmp_path: Path) -> None:
    # Thrift's socket logs its failure to connect, which Python prints to stderr when no
    # logging is set up (a real process, not pytest's); the error says it already (issue 32).
    uri = f"thrift://127.0.0.1:{free_port()}"
    done = subprocess.run([sys.executable, "-m", "ingest", "create", str(tmp_path / "wh" / "t"),
                           "--schema", "id BIGINT", "--metastore", uri, "--json"],
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (3, ""), done.stderr
    error = json.loads(done.stderr)["error"]
    assert error["type"] == "MetastoreError"
    assert error["message"].startswith(f"Cannot reach the Hive Metastore at {uri}: ")


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
    name, where = register_hive_acid_table(hms4.uri, tmp_path, [("id", "bigint"),
                                                                ("v", "string")])
    trino_query(trino_on_hms4, f"INSERT INTO {name} VALUES (1, 'a'), (2, 'b')")
    assert where == f"file://{tmp_path}/db/t"
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 3, "v": "c"}) + "\n")
    ok_json(["load", where, "--input", str(src), "--metastore", hms4.uri], capsys)
    assert trino_query(trino_on_hms4, f"SELECT id, v FROM {name} ORDER BY id") == [
        [1, "a"], [2, "b"], [3, "c"]]
    assert [r["id"] for r in _cat(where, hms4.uri, capsys)] == [1, 2, 3]


def _run_job(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "jobs" / script), *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _tables(uri: str) -> dict[str, list[str]]:
    with hms.connect(uri) as conn:
        return {db: sorted(conn.call("get_all_tables", db))
                for db in conn.call("get_all_databases")}


@pytest.mark.parametrize("entry", ["ingest stream", "jobs/kafka_to_acid.py"])
def test_a_transaction_batch_on_a_metastore_is_refused_before_anything_is_created(
        hms4: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: str) -> None:
    """`--txns-per-delta 2` with `--metastore thrift://`: exit 2 naming why (Trino and Doris
    would misread the delta) and what to do, before Spark, Kafka (no broker listens here),
    the metastore or the disk is touched."""
    before, tables = metastore_state(hms4.uri), _tables(hms4.uri)
    args = ["--bootstrap-servers", f"127.0.0.1:{free_port()}", "--topic", "events",
            "--table", str(tmp_path / "wh" / "events"), "--schema", "id BIGINT",
            "--checkpoint", str(tmp_path / "ck"), "--metastore", hms4.uri,
            "--txns-per-delta", "2", "--available-now"]
    if entry == "ingest stream":
        code, out, err = run_cli(["stream", *args], capsys)
    else:
        done = _run_job("kafka_to_acid.py", *args)
        code, out, err = done.returncode, done.stdout, done.stderr
    assert (code, out) == (2, ""), err
    assert (f"Error: Cannot use --txns-per-delta 2 with metastore {hms4.uri}: transaction "
            "batches (several micro-batches appending to one delta directory) are not "
            "supported on a Hive Metastore, whose tables other engines read: Trino does not "
            "read Hive-Streaming-style transaction batches (trino#4044) and Doris ignores the "
            "_flush_length side files, so both would misread such a delta") in err
    assert "Hint: use --txns-per-delta 1 (the default)" in err
    assert "Traceback" not in err
    assert not (tmp_path / "wh").exists() and not (tmp_path / "ck").exists()
    assert metastore_state(hms4.uri) == before, "no transaction opened, no database created"
    assert _tables(hms4.uri) == tables


def test_the_recover_job_takes_the_metastore(hms4: Server, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`jobs/recover.py --metastore thrift://` recovers as `ingest recover` does: a dead
    writer's transaction on the table is aborted. Without the flag the job looks beside the
    table, finds no metastore there, and leaves the transaction alone."""
    uri = hms4.uri
    location = str(tmp_path / "wh" / "events")
    name = f"r_{uuid.uuid4().hex[:10]}.events"
    ok_json(["create", location, "--name", name, "--schema", "id BIGINT", "--metastore", uri],
            capsys)
    with hms.connect(uri) as conn:  # a writer that died before its first heartbeat
        [txn] = hms.open_txns(conn, agent="host:1:dead-writer")
        write_id = hms.allocate_write_ids(conn, name, [txn])[txn]

    _run_job("recover.py", location, "--txn-timeout-s", "0", "--json")
    with Metastore.open(uri) as store:
        assert store.write_id_states(name)[write_id] == "open"
    done = _run_job("recover.py", location, "--metastore", uri, "--txn-timeout-s", "0",
                    "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["clean"] is True
    with Metastore.open(uri) as store:
        assert store.write_id_states(name)[write_id] == "aborted"
