"""`ingest create`, `ingest load`, `ingest delete` end to end through ingest.cli.main."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import error_json, ok_json, visible
from support import run_cli as run

from ingest.acid import read_bucket_file
from ingest.acid.format.names import decode_bucket_property, parse_bucket_file
from ingest.txn import METASTORE_FILENAME, Metastore

DDL = "id BIGINT, value STRING, dt STRING"

# Runs the CLI in a fresh interpreter, as `python -m ingest` does; optionally waits for a
# start signal so two processes really run at once.
CHILD = """
import os, sys, time
from ingest.cli import main as m
go = os.environ.get("TEST_GO_FILE")
if go:
    open(go + "." + str(os.getpid()), "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.005)
m.main(sys.argv[1:])
"""


def acid_dirs(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*delta_*") if p.is_dir())


def jsonl(path: Path, ids: range, dts: tuple[str | None, ...] = ("2026-01-01",)) -> str:
    path.write_text("".join(json.dumps({"id": i, "value": f"v{i}", "dt": dts[i % len(dts)]})
                            + "\n" for i in ids))
    return str(path)


def test_create_load_delete_round_trip(warehouse: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "events")
    created = ok_json(["create", table, "--schema", DDL], capsys)
    # The token the location's marker repeats (docs/invariants.md, 7).
    assert re.fullmatch("[0-9a-f]{32}", created["properties"].pop("ingest.location_token"))
    assert created == {"table": "default.events", "location": f"file://{table}",
                       "columns": DDL, "partitioned_by": [], "buckets": 0, "bucketed_by": [],
                       "properties": {"bucketing_version": "2", "orc.compress": "ZLIB",
                                      "transactional": "true"},
                       "metastore": f"sqlite://{warehouse}/{METASTORE_FILENAME}"}
    loaded = ok_json(["load", table, "--input", jsonl(tmp_path / "in.jsonl", range(10))], capsys)
    assert (loaded["write_id"], loaded["rows"], loaded["partitions"]) == (1, 10, [""])
    assert loaded["files"] == [f"file://{table}/delta_0000001_0000001_0000/bucket_00000"]
    assert [r["id"] for r in visible(table)] == list(range(10))

    dry = ok_json(["delete", table, "--where", "id >= 7 OR value = 'v0'", "--dry-run"], capsys)
    assert (dry["rows_deleted"], dry["dry_run"], dry["write_id"], dry["files"]) == (
        4, True, None, [])
    assert acid_dirs(Path(table)) == ["delta_0000001_0000001_0000"]

    deleted = ok_json(["delete", table, "--where", "id >= 7 OR value = 'v0'"], capsys)
    assert (deleted["rows_deleted"], deleted["write_id"]) == (4, 2)
    assert deleted["files"] == [
        f"file://{table}/delete_delta_0000002_0000002_0000/bucket_00000"]
    assert [r["id"] for r in visible(table)] == [1, 2, 3, 4, 5, 6]

    code, out, err = run(["delete", table, "--where", "id = 0"], capsys)
    assert code == 0
    assert out == "No rows of default.events match 'id = 0'; nothing written.\n"
    assert err == f"Deleting rows of {table} where id = 0\n"


def test_text_output(warehouse: Path, tmp_path: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "events")
    code, out, _ = run(["create", table, "--schema", DDL, "--partitioned-by", "dt"], capsys)
    assert (code, out) == (0, f"Created table default.events at file://{table} (id BIGINT, "
                              f"value STRING; partitioned by dt); metastore "
                              f"sqlite://{warehouse}/{METASTORE_FILENAME}\n")
    code, out, err = run(["load", table, "--input",
                          jsonl(tmp_path / "in.jsonl", range(4), ("a", "b"))], capsys)
    assert code == 0 and err.startswith(f"Loading {tmp_path / 'in.jsonl'} into {table}")
    assert out.startswith("Loaded 4 rows into default.events (write id 1): 2 files in 2 "
                          "partitions, ")
    code, out, err = run(["delete", table, "--where", "dt = 'a'", "--dry-run", "-q"], capsys)
    assert (code, out, err) == (0, "Would delete 2 rows from default.events (dry run: nothing "
                                   "written).\n", "")


def test_partitioned_bucketed_csv_load_places_rows_by_bucket(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "users")
    ok_json(["create", table, "--schema", "id BIGINT, name STRING, country STRING",
             "--partitioned-by", "country", "--buckets", "8", "--bucketed-by", "id",
             "--property", "orc.compress=ZLIB"], capsys)
    csv = tmp_path / "users.csv"
    csv.write_text("id,name,country\n" + "".join(
        f"{i},n{i:03d},{['nl', 'fr', ''][i % 3]}\n" for i in range(90)))
    loaded = ok_json(["load", table, "--input", str(csv)], capsys)
    assert sorted(loaded["partitions"]) == ["country=__HIVE_DEFAULT_PARTITION__",
                                            "country=fr", "country=nl"]
    total = 0
    for url in loaded["files"]:
        path = url[len("file://"):]
        events = read_bucket_file(path)
        assert {decode_bucket_property(b)[1] for b in events.column("bucket").to_pylist()} == {
            parse_bucket_file(path)}
        total += events.num_rows
    assert total == 90
    rows = visible(table)
    assert rows[1] == {"id": 1, "name": "n001", "country": "fr"}
    assert rows[2]["country"] is None

    deleted = ok_json(["delete", table, "--where", "country IS NULL AND id < 30"], capsys)
    assert deleted["rows_deleted"] == 10
    assert deleted["partitions"] == ["country=__HIVE_DEFAULT_PARTITION__"]
    assert len(visible(table)) == 80


def test_help_says_what_changes_on_disk(capsys: pytest.CaptureFixture[str]) -> None:
    for name, first, disk in [
        ("create", "Create an empty Hive ACID (transactional ORC) table at PATH.",
         "Changes the disk: creates the PATH directory"),
        ("load", "Insert every row of FILE into the table at PATH as one transaction.",
         "Changes the disk: writes delta_W_W_0000"),
        ("delete", "Delete the rows of the table at PATH that match --where, as one transaction.",
         "Changes the disk unless --dry-run"),
    ]:
        code, out, _ = run([name, "--help"], capsys)
        assert code == 0
        assert first in out and disk in out and "Examples:" in out


def test_bad_where_exits_2_with_position_and_hint(warehouse: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "events")
    ok_json(["create", table, "--schema", DDL], capsys)
    ok_json(["load", table, "--input", jsonl(tmp_path / "in.jsonl", range(3))], capsys)
    error = error_json(["delete", table, "--where", "id = "], capsys, 2)
    assert error["type"] == "ConfigError"
    assert error["message"] == ("Cannot parse --where 'id = ': expected a value after '=' at "
                                "position 5")
    assert error["hint"]
    code, out, err = run(["delete", table, "--where", "value = 3", "-q"], capsys)
    assert (code, out) == (2, "")
    assert err == ("Error: Cannot parse --where 'value = 3': column 'value' is STRING but 3 is "
                   "an integer at position 8\nHint: quote the value: value = '3'\n")
    assert acid_dirs(Path(table)) == ["delta_0000001_0000001_0000"]


def test_rows_that_do_not_fit_exit_3_and_write_nothing(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "events")
    ok_json(["create", table, "--schema", DDL], capsys)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "value": "a", "dt": "x"}\n{"id": "two", "value": "b", "dt": "x"}\n')
    error = error_json(["load", table, "--input", str(bad)], capsys, 3)
    assert error["type"] == "SchemaMismatchError"
    assert "changed from number to string" in error["message"]
    extra = tmp_path / "extra.jsonl"
    extra.write_text('{"id": 1, "value": "a", "dt": "x", "colour": "red"}\n')
    error = error_json(["load", table, "--input", str(extra)], capsys, 3)
    assert error["message"] == ("Cannot load 1 rows into default.events: column 'colour' is not "
                                "in the table")
    assert error["hint"] == "the table's columns are: id BIGINT, value STRING, dt STRING"
    assert acid_dirs(Path(table)) == []
    assert [p.name for p in Path(table).iterdir()] == ["_ingest_metastore"]


def test_unknown_table_and_existing_table(warehouse: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    error = error_json(["load", str(warehouse / "nope"), "--input",
                        jsonl(tmp_path / "in.jsonl", range(1))], capsys, 3)
    assert error["type"] == "TableNotFoundError"
    assert error["hint"] == "run `ingest create` on the table root first, or set INGEST_METASTORE"
    error = error_json(["delete", str(warehouse / "nope"), "--where", "id = 1"], capsys, 3)
    assert error["type"] == "TableNotFoundError"
    ok_json(["create", str(warehouse / "t"), "--schema", DDL], capsys)
    error = error_json(["create", str(warehouse / "t"), "--schema", DDL], capsys, 3)
    assert error["type"] == "TableExistsError" and error["table"] == "default.t"


def test_bad_create_options_exit_2(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    error = error_json(["create", str(warehouse / "t"), "--schema", DDL, "--property", "x"],
                       capsys, 2)
    assert error["message"] == "Cannot use --property 'x': expected KEY=VALUE"
    error = error_json(["create", str(warehouse / "t"), "--schema", DDL, "--buckets", "4"],
                       capsys, 2)
    assert "give both bucket_count > 0 and bucket_columns" in error["hint"]
    code, _, err = run(["create", str(warehouse / "t"), "--schema", "id WHATEVER"], capsys)
    assert code == 2 and err.startswith("Error: ")
    assert not (warehouse / "t").exists()


def test_corrupt_metastore_is_a_clear_error(warehouse: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "events")
    ok_json(["create", table, "--schema", DDL], capsys)
    metastore = warehouse / METASTORE_FILENAME
    metastore.write_bytes(b"garbage, not SQLite " * 200)
    for suffix in ("-wal", "-shm"):
        Path(str(metastore) + suffix).unlink(missing_ok=True)
    error = error_json(["load", table, "--input", jsonl(tmp_path / "in.jsonl", range(3))],
                       capsys, 3)
    assert error["type"] == "MetastoreError"
    assert str(metastore) in error["message"]
    error = error_json(["delete", table, "--where", "id = 1"], capsys, 3)
    assert error["type"] == "MetastoreError"
    assert acid_dirs(Path(table)) == []


def test_explicit_metastore_option(warehouse: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite://{tmp_path}/ms/meta.sqlite"
    table = str(warehouse / "events")
    assert ok_json(["create", table, "--schema", DDL, "--metastore", url], capsys)[
        "metastore"] == url
    input_path = jsonl(tmp_path / "in.jsonl", range(2))
    assert ok_json(["load", table, "--input", input_path, "--metastore", url], capsys)[
        "write_id"] == 1
    assert ok_json(["delete", table, "--where", "id = 1", "--metastore", url], capsys)[
        "rows_deleted"] == 1
    error = error_json(["load", table, "--input", input_path], capsys, 3)
    assert error["type"] == "TableNotFoundError"  # not registered beside the table


def test_two_processes_loading_at_once_both_commit_with_distinct_write_ids(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "events")
    ok_json(["create", table, "--schema", DDL, "--partitioned-by", "dt", "--buckets", "2",
             "--bucketed-by", "id"], capsys)
    inputs = [jsonl(tmp_path / f"in{k}.jsonl", range(k * 20_000, (k + 1) * 20_000),
                    ("a", "b")) for k in range(2)]
    go = tmp_path / "go"
    env = {**os.environ, "TEST_GO_FILE": str(go), "INGEST_HOME": str(tmp_path / "ingest-home")}
    env.pop("INGEST_METASTORE", None)
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, "load", table, "--input", path,
                               "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for path in inputs]
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("go.*"))) < 2:  # both started and waiting
            assert time.monotonic() < deadline, "children did not start"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            time.sleep(0.01)
        go.touch()
        results = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], results
    summaries = [json.loads(out) for out, _ in results]
    assert sorted(s["write_id"] for s in summaries) == [1, 2]
    assert all(s["rows"] == 20_000 for s in summaries)
    with Metastore.open(f"sqlite://{warehouse}/{METASTORE_FILENAME}", create=False) as store:
        assert store.write_id_states(table) == {1: "committed", 2: "committed"}
    assert [r["id"] for r in visible(table)] == list(range(40_000))
    assert acid_dirs(Path(table)) == [f"dt={dt}/delta_000000{w}_000000{w}_0000"
                                      for dt in "ab" for w in (1, 2)]
