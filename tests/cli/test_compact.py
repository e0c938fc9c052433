"""`ingest compact`: major and minor compaction through the CLI, dry run, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import error_json, ok_json
from support import run_cli as run

from ingest.acid.read.reader import read_table
from ingest.txn import METASTORE_FILENAME, Metastore

DDL = "id BIGINT, value STRING, dt STRING"


def snapshot_rows(location: str) -> list[tuple[object, ...]]:
    with Metastore.open(f"sqlite://{Path(location).parent}/{METASTORE_FILENAME}",
                        create=False) as store:
        snap = store.snapshot(location)
    t = read_table(location, snap, with_row_id=True)
    return sorted((r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"],
                   r["id"], r["value"], r["dt"]) for r in t.to_pylist())


@pytest.fixture
def table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    location = str(tmp_path / "wh" / "events")
    ok_json(["create", location, "--schema", DDL, "--partitioned-by", "dt"], capsys)
    for k in range(4):
        src = tmp_path / f"in{k}.jsonl"
        src.write_text("".join(json.dumps({"id": i, "value": f"v{i}",
                                           "dt": f"2026-01-0{1 + i % 2}"}) + "\n"
                               for i in range(k * 100, k * 100 + 100)))
        ok_json(["load", location, "--input", str(src)], capsys)
    ok_json(["delete", location, "--where", "id < 50 OR id = 250"], capsys)
    return location


def test_minor_then_major(table: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot_rows(table)
    dry = ok_json(["compact", table, "--minor", "--dry-run"], capsys)
    assert dry["dry_run"] and [p["compacted"] for p in dry["partitions"]] == [True, True]
    assert snapshot_rows(table) == before
    minor = ok_json(["compact", table, "--minor"], capsys)
    assert [p["outputs"] for p in minor["partitions"]] == [
        ["delta_0000001_0000005", "delete_delta_0000001_0000005"]] * 2
    assert snapshot_rows(table) == before
    major = ok_json(["compact", table, "--partition", "dt=2026-01-01"], capsys)
    (part,) = major["partitions"]
    assert part["partition"] == "dt=2026-01-01" and part["outputs"] == ["base_0000005"]
    assert part["rows"] == sum(1 for r in before if r[5] == "2026-01-01")
    assert part["inputs"] == ["delete_delta_0000001_0000005", "delta_0000001_0000005"]
    assert snapshot_rows(table) == before
    code, out, err = run(["compact", table], capsys)
    assert code == 0, err
    assert "dt=2026-01-01: nothing to compact" in out
    assert "dt=2026-01-02: 2 dirs -> base_0000005:" in out
    assert "1 of 2 partitions compacted" in out
    assert snapshot_rows(table) == before


def test_bad_input(table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = error_json(["compact", table, "--partition", "dt=2030-01-01"], capsys, 2)
    assert "has no partition 'dt=2030-01-01'" in err["message"]
    err = error_json(["compact", table, "--partition", "nonsense"], capsys, 2)
    assert "col=value" in err["message"]
    (tmp_path / "plain").mkdir()
    error_json(["compact", str(tmp_path / "plain")], capsys, 3)
    listing = sorted(p.name for p in Path(table, "dt=2026-01-01").iterdir())
    assert all(n.startswith(("delta_", "delete_delta_")) for n in listing)
