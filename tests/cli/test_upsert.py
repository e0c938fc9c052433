"""`ingest upsert PATH --input FILE --key ...` end to end through ingest.cli.main."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import error_json, ok_json, run_cli

DDL = "id BIGINT, value STRING, v BIGINT"


def _lines(path: Path, items: list[object]) -> str:
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return str(path)


def _cat(table: str, capsys: pytest.CaptureFixture[str]) -> dict[int, dict]:
    code, out, err = run_cli(["cat", table], capsys)
    assert code == 0, err
    return {r["id"]: r for r in map(json.loads, out.splitlines())}


@pytest.fixture
def table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    location = str(tmp_path / "wh" / "users")
    ok_json(["create", location, "--schema", DDL, "--buckets", "4", "--bucketed-by", "id"],
            capsys)
    rows = [{"id": i, "value": f"v{i}", "v": 1} for i in range(10)]
    ok_json(["load", location, "--input", _lines(tmp_path / "seed.jsonl", rows)], capsys)
    return location


def test_upsert_rows_then_changes(table: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    rows = _lines(tmp_path / "rows.jsonl", [{"id": 1, "value": "one", "v": 2},
                                            {"id": 2, "value": "v2", "v": 1},
                                            {"id": 20, "value": "new", "v": 1}])
    result = ok_json(["upsert", table, "--input", rows, "--key", "id"], capsys)
    assert {k: result[k] for k in ("write_id", "events", "keys", "inserted", "updated",
                                   "unchanged", "deleted")} == {
        "write_id": 2, "events": 3, "keys": 3, "inserted": 1, "updated": 1, "unchanged": 1,
        "deleted": 0}
    assert sorted(Path(f).parent.name for f in result["files"]) == [
        "delete_delta_0000002_0000002_0000", "delta_0000002_0000002_0000",
        "delta_0000002_0000002_0000"]
    changes = _lines(tmp_path / "cdc.jsonl", [
        {"op": "u", "before": {"id": 3}, "after": {"id": 3, "value": "three", "v": 5}},
        {"op": "u", "after": {"id": 3, "value": "older", "v": 4}},
        {"op": "d", "before": {"id": 4, "value": "v4", "v": 1}},
        {"key": {"id": 4}, "value": None},
        {"key": {"id": 5}, "value": None},
    ])
    code, out, err = run_cli(["upsert", table, "--input", changes, "--key", "id",
                              "--cdc-format", "debezium", "--order-by", "v"], capsys)
    assert code == 0, err
    assert out.startswith("Upserted 5 events for 3 keys into default.users (write id 3): "
                          "0 inserted, 1 updated, 2 deleted, 0 unchanged, 0 stale")
    rows_now = _cat(table, capsys)
    assert sorted(rows_now) == [0, 1, 2, 3, 6, 7, 8, 9, 20]
    assert rows_now[3] == {"id": 3, "value": "three", "v": 5}
    assert rows_now[1]["value"] == "one"


def test_nothing_to_change_commits_nothing(table: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    same = _lines(tmp_path / "same.jsonl", [{"id": 1, "value": "v1", "v": 1}])
    code, out, err = run_cli(["upsert", table, "--input", same, "--key", "id"], capsys)
    assert code == 0, err
    assert "changed nothing in default.users" in out and "nothing written" in out
    assert "Upserting" in err  # progress goes to stderr
    assert not list(Path(table).glob("delete_delta_*"))


@pytest.mark.parametrize(("items", "args", "code", "kind", "message"), [
    ([{"op": "r", "after": {"id": 1}}, {"op": "c"}], ["--cdc-format", "debezium"], 3,
     "BadRecordError", "Cannot apply line 2: op 'c' needs the new row in 'after'"),
    ([{"op": "c", "after": {"id": 1}}, {"after": {"id": 2}}], ["--cdc-format", "debezium"], 3,
     "BadRecordError", "line 2: the Debezium envelope has no 'op'"),
    ([{"id": 1, "value": "a", "v": 1}, {"id": None, "value": "b", "v": 1}], [], 3,
     "BadRecordError", "Cannot upsert row 2: key column 'id' is null"),
    ([{"id": 1, "value": "a", "v": 1}], ["--order-by", "id"], 2, "ConfigError",
     "order-by column 'id' is part of the key"),
])
def test_bad_input_is_refused_before_anything_is_written(
        table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], items: list[object],
        args: list[str], code: int, kind: str, message: str) -> None:
    path = _lines(tmp_path / "bad.jsonl", items)
    error = error_json(["upsert", table, "--input", path, "--key", "id", *args], capsys, code)
    assert error["type"] == kind and message in error["message"]
    assert not list(Path(table).glob("delete_delta_*")) and len(_cat(table, capsys)) == 10


def test_a_line_that_is_not_json_is_named(table: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"op": "c", "after": {"id": 1}}\n\n{"op": \n')
    error = error_json(["upsert", table, "--input", str(path), "--key", "id",
                        "--cdc-format", "debezium"], capsys, 3)
    assert "line 3: not a JSON value" in error["message"]


def test_an_unbucketed_table_is_refused_with_a_hint(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    location = str(tmp_path / "wh" / "plain")
    ok_json(["create", location, "--schema", DDL], capsys)
    path = _lines(tmp_path / "rows.jsonl", [{"id": 1, "value": "a", "v": 1}])
    code, out, err = run_cli(["upsert", location, "--input", path, "--key", "id"], capsys)
    assert (code, out) == (2, "")
    assert "the table is not bucketed" in err
    assert "Hint: create the table with --buckets N --bucketed-by id" in err


def test_help_names_what_it_changes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["upsert", "--help"], capsys)
    assert code == 0
    assert "Changes the disk" in out and "--cdc-format" in out and "--order-by" in out
    code, out, _ = run_cli(["--help"], capsys)
    assert "upsert" in out
