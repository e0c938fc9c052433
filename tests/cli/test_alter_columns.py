"""`ingest alter --add-columns / --change-column / --replace-columns` (docs/format.md §25):
rows loaded before read new columns as null through `ingest cat`, widened values widened;
refused changes exit 2 with the reason and a hint, and leave the table as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import error_json, ok_json
from support import run_cli as run


def _jsonl(path: Path, rows: list[dict[str, object]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _cat(table: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    code, out, err = run(["cat", table], capsys)
    assert code == 0, err
    return sorted((json.loads(line) for line in out.splitlines()), key=lambda r: r["id"])


def test_add_columns_then_load_old_rows_read_null(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(tmp_path / "wh" / "events")
    ok_json(["create", table, "--schema", "id INT, value STRING, dt STRING",
             "--partitioned-by", "dt"], capsys)
    ok_json(["load", table, "--input", _jsonl(tmp_path / "a.jsonl", [
        {"id": 1, "value": "a", "dt": "x"}, {"id": 2, "value": "b", "dt": "y"}])], capsys)
    code, out, err = run(["alter", table, "--add-columns", "note STRING COMMENT 'why'",
                          "--change-column", "id BIGINT"], capsys)
    assert code == 0, err
    assert out.splitlines() == [
        "Altered table default.events: column id INT -> BIGINT",
        "Altered table default.events: added column note STRING"]
    ok_json(["load", table, "--input", _jsonl(tmp_path / "b.jsonl", [
        {"id": 2**40, "value": "c", "note": "n", "dt": "x"}])], capsys)
    assert _cat(table, capsys) == [
        {"id": 1, "value": "a", "note": None, "dt": "x"},
        {"id": 2, "value": "b", "note": None, "dt": "y"},
        {"id": 2**40, "value": "c", "note": "n", "dt": "x"}]
    done = ok_json(["alter", table, "--change-column", "id BIGINT"], capsys)
    assert done["columns"] == "id BIGINT, value STRING, note STRING COMMENT 'why'"
    assert done["columns_changed"] == [] and done["changed"] == []


def test_json_names_each_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(tmp_path / "wh" / "events")
    ok_json(["create", table, "--schema", "id BIGINT, f FLOAT"], capsys)
    done = ok_json(["alter", table, "--replace-columns", "id BIGINT, f DOUBLE, n INT",
                    "--property", "orc.compress=SNAPPY"], capsys)
    assert done["columns_changed"] == [
        {"kind": "widen", "column": "f", "old_type": "FLOAT", "new_type": "DOUBLE"},
        {"kind": "add", "column": "n", "old_type": None, "new_type": "INT"}]
    assert done["changed"] == [{"key": "orc.compress", "old": "ZLIB", "new": "SNAPPY"}]


@pytest.mark.parametrize(("args", "message", "hint"), [
    (["--change-column", "id INT"], "column id: BIGINT -> INT narrows the type",
     "add a new column of type INT"),
    (["--change-column", "id ident BIGINT"], "renaming column id to ident",
     "--add-columns \"ident BIGINT\""),
    (["--replace-columns", "value STRING"], "it drops ['id']", "keep every column"),
    (["--replace-columns", "value STRING, id BIGINT"], "it reorders the columns",
     "keep the existing order"),
    (["--change-column", "dt INT"], "dt is a partition column", "ingest create"),
    (["--change-column", "value BIGINT"], "STRING -> BIGINT is not a widening",
     "add a new column"),
    # issue 32: a second change of one column no longer silently wins; ROW__ID as create.
    (["--change-column", "value VARCHAR(9)", "--change-column", "VALUE STRING"],
     "column value is changed twice ('value VARCHAR(9)' and 'VALUE STRING')",
     "give one change of value"),
    (["--add-columns", "n INT, ROW__ID BIGINT"], "column 'ROW__ID' is reserved by Hive",
     "e.g. row_id"),
    (["--replace-columns", "id BIGINT, value STRING, row__id STRING"],
     "column 'row__id' is reserved by Hive", "e.g. row_id"),
])
def test_refused_changes_exit_2_and_change_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str,
        hint: str) -> None:
    table = str(tmp_path / "wh" / "events")
    ok_json(["create", table, "--schema", "id BIGINT, value STRING, dt STRING",
             "--partitioned-by", "dt"], capsys)
    error = error_json(["alter", table, *args], capsys, 2)
    assert error["type"] == "ConfigError"
    assert error["message"].startswith("Cannot alter the columns of table default.events: ")
    assert message in error["message"]
    assert hint in error["hint"]
    code, out, err = run(["alter", table, *args], capsys)
    assert code == 2 and message in err and "Hint:" in err
    described = ok_json(["alter", table, "--change-column", "id BIGINT"], capsys)
    assert described["columns"] == "id BIGINT, value STRING"
