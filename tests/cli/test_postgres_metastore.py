"""Every table command with a PostgreSQL metastore (`--metastore postgresql://…`, or
INGEST_METASTORE for the commands that find theirs): no SQLite file appears beside the table,
and the password never shows in the output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pg_server import PG_PASSWORD
from support import ok_json
from support import run_cli as run

from ingest.txn import Metastore

DDL = "id BIGINT, value STRING, dt STRING"


def test_table_commands_with_a_postgresql_metastore(
        warehouse: Path, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "events")
    ms = ["--metastore", pg_url]
    created = ok_json(["create", table, "--schema", DDL, "--partitioned-by", "dt", *ms], capsys)
    assert created["metastore"] == pg_url.replace(f":{PG_PASSWORD}@", "@")
    for batch in range(3):
        rows = tmp_path / f"in{batch}.jsonl"
        rows.write_text("".join(json.dumps({"id": i, "value": f"v{i}", "dt": f"d{i % 2}"})
                                + "\n" for i in range(batch * 10, batch * 10 + 10)))
        loaded = ok_json(["load", table, "--input", str(rows), *ms], capsys)
        assert loaded["write_id"] == batch + 1
    deleted = ok_json(["delete", table, "--where", "id < 5", *ms], capsys)
    assert (deleted["rows_deleted"], deleted["write_id"]) == (5, 4)
    compacted = ok_json(["compact", table, *ms], capsys)
    assert sorted(p["outputs"][0] for p in compacted["partitions"]) == ["base_0000004"] * 2
    cleaned = ok_json(["clean", table, "--retention", "0", *ms], capsys)
    assert cleaned["directories"] > 0

    # cat and status find the table's metastore: INGEST_METASTORE names it.
    monkeypatch.setenv("INGEST_METASTORE", pg_url)
    code, out, err = run(["cat", table], capsys)
    assert code == 0, err
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == list(range(5, 30))
    code, out, err = run(["status", table, "--json"], capsys)
    assert code == 0, err
    status = json.loads(out)
    assert (status["snapshot"], status["snapshot_source"]) == (
        "default.events:4:9223372036854775807::", "metastore")
    assert PG_PASSWORD not in out + err

    assert sorted(p.name for p in warehouse.iterdir()) == ["events"]  # no SQLite file
    with Metastore.open(pg_url, read_only=True) as store:
        assert [c.state for c in store.compactions("default.events")] == ["succeeded"] * 2
        assert store.live_readers("default.events", timeout_s=300) == []  # cat unregistered
        assert sorted(store.committed_files("default.events")) == [
            "dt=d0/base_0000004/bucket_00000", "dt=d1/base_0000004/bucket_00000"]


def test_unreachable_metastore_is_a_clear_cli_error(
        warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"postgresql://ingest:{PG_PASSWORD}@127.0.0.1:9/meta"
    code, out, err = run(["create", str(warehouse / "t"), "--schema", DDL, "--metastore", url],
                         capsys)
    assert code != 0 and out == ""
    assert "Cannot open metastore postgresql://ingest@127.0.0.1:9/meta: cannot connect to the " \
        "server at 127.0.0.1:9 (connection refused)" in err
    assert PG_PASSWORD not in err
