"""default_table_name: one name for a table's path, whoever creates the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_cli

from ingest.spark.job import ensure_tables, table_layout
from ingest.table import default_table_name


@pytest.mark.parametrize(("location", "name"), [
    ("/wh/2026-Events", "default.t_2026_events"),
    ("/wh/Events-2026", "default.events_2026"),
    ("memory://wh/_raw", "default.t__raw"),
    ("/wh/café", "default.caf_"),
])
def test_default_table_name(location: str, name: str) -> None:
    assert default_table_name(location) == name


def test_ingest_create_and_the_stream_name_a_path_alike(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    by_cli = tmp_path / "cli" / "wh" / "2026-Events"
    by_cli.parent.mkdir(parents=True)
    code, out, err = run_cli(["create", str(by_cli), "--schema", "id BIGINT", "--json"], capsys)
    assert code == 0, err
    by_stream = tmp_path / "stream" / "wh" / "2026-Events"
    by_stream.parent.mkdir(parents=True)
    table, dead = ensure_tables(str(by_stream), table_layout("id BIGINT", None))
    assert json.loads(out)["table"] == table.name == "default.t_2026_events"
    assert dead.name.startswith("default.t_2026_events")
