"""`ingest compact --auto`, `ingest compactions` and the backlog in `ingest status`."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from support import error_json, ok_json
from support import run_cli as run

from ingest.txn import METASTORE_FILENAME, Metastore

DDL = "id BIGINT, value STRING, dt STRING"
NUM = "compactorthreshold.hive.compactor.delta.num.threshold"


@pytest.fixture
def table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    location = str(tmp_path / "wh" / "events")
    ok_json(["create", location, "--schema", DDL, "--partitioned-by", "dt",
             "--property", f"{NUM}=2"], capsys)
    for k in range(3):
        src = tmp_path / f"in{k}.jsonl"
        src.write_text("".join(json.dumps({"id": i, "value": f"v{i}", "dt": "2026-01-01"}) + "\n"
                               for i in range(k * 10, k * 10 + 10)))
        ok_json(["load", location, "--input", str(src)], capsys)
    src = tmp_path / "other.jsonl"
    src.write_text(json.dumps({"id": 99, "value": "x", "dt": "2026-01-02"}) + "\n")
    ok_json(["load", location, "--input", str(src)], capsys)
    return location


def test_status_shows_the_backlog_and_auto_compacts_it(
        table: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = ok_json(["status", table], capsys)
    first, second = (p["compaction"] for p in status["partitions"])
    assert first["deltas"] == 3 and first["delete_deltas"] == 0 and first["base"] is None
    assert first["delta_bytes"] > 0 and first["aborted_write_ids"] == 0
    assert first["initiator"] == {"kind": "major", "reason": "no base and 3 deltas > 2"}
    assert second["initiator"] == {"kind": None, "reason": "no base, 1 deltas <= 2"}
    code, out, err = run(["status", table], capsys)
    assert code == 0, err
    assert ("Compaction backlog: 3 deltas, 0 delete deltas" in out
            and "Initiator: major (no base and 3 deltas > 2)" in out)

    done = ok_json(["compact", table, "--auto"], capsys)
    first, second = done["partitions"]
    assert first["compacted"] and first["kind"] == "major" and first["outputs"] == [
        "base_0000004"]
    assert first["reason"] == "no base and 3 deltas > 2" and first["backlog"]["deltas"] == 3
    assert not second["compacted"] and second["kind"] is None
    assert second["reason"] == "no base, 1 deltas <= 2"
    code, out, err = run(["compact", table, "--auto"], capsys)
    assert code == 0, err
    assert "dt=2026-01-01: nothing to compact [0 deltas <= 2, delta bytes 0.0% of the base" in out
    assert "0 of 2 partitions compacted (auto" in out
    after = ok_json(["status", table], capsys)["partitions"][0]["compaction"]
    assert after["base"] == "base_0000004" and after["deltas"] == 0
    assert after["initiator"]["kind"] is None


def test_compactions_lists_the_history(table: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert ok_json(["compactions", table], capsys)["compactions"] == []
    code, out, _ = run(["compactions", table], capsys)
    assert code == 0 and out == "default.events: no compactions recorded.\n"
    ok_json(["compact", table, "--minor", "--partition", "dt=2026-01-01"], capsys)
    ok_json(["compact", table, "--major"], capsys)
    history = ok_json(["compactions", table], capsys)
    assert history["table"] == "default.events"
    minor, major1, major2 = history["compactions"]
    assert (minor["partition"], minor["kind"], minor["state"]) == (
        "dt=2026-01-01", "minor", "ready for cleaning")
    assert minor["inputs"] == ["delta_0000001_0000001_0000", "delta_0000002_0000002_0000",
                               "delta_0000003_0000003_0000"]
    assert minor["outputs"] == ["delta_0000001_0000004"] and minor["rows"] == 30
    assert minor["duration_s"] >= 0 and minor["txn_state"] == "committed"
    assert [(c["partition"], c["outputs"]) for c in (major1, major2)] == [
        ("dt=2026-01-01", ["base_0000004"]), ("dt=2026-01-02", ["base_0000004"])]
    metastore = Path(table).parent / METASTORE_FILENAME
    was = metastore.read_bytes()
    code, out, err = run(["compactions", table], capsys)
    assert code == 0, err
    assert metastore.read_bytes() == was  # read-only
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "PARTITION", "KIND", "STATE", "START", "(UTC)",
                                "DURATION", "ROWS"]
    assert "dt=2026-01-01" in lines[1] and "minor" in lines[1] and "ready for cleaning" in lines[1]
    assert lines[2].strip() == ("in:  delta_0000001_0000001_0000, delta_0000002_0000002_0000, "
                                "delta_0000003_0000003_0000")
    assert lines[3].strip() == "out: delta_0000001_0000004"
    assert lines[-1] == "3 compactions of default.events."

    # A compactor that died while working shows as attempted (read-only: nothing recorded).
    url = f"sqlite://{Path(table).parent}/{METASTORE_FILENAME}"
    with Metastore.open(url, create=False) as store:
        store.begin_compaction(table, "dt=2026-01-02", "major",
                               agent=f"{socket.gethostname()}:999999999:x", stale_after_s=300)
    (last,) = ok_json(["compactions", table], capsys)["compactions"][3:]
    assert last["state"] == "attempted" and last["recorded_state"] == "working"


def test_compactions_bad_input(tmp_path: Path, table: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plain").mkdir()
    err = error_json(["compactions", str(tmp_path / "plain")], capsys, 3)
    assert err["type"] == "TableNotFoundError"
    err = error_json(["compactions", f"{table}/dt=2026-01-01"], capsys, 2)
    assert "inside table default.events" in err["message"]
    err = error_json(["compactions", table, "--metastore",
                      f"sqlite://{tmp_path}/none.sqlite"], capsys, 3)
    assert "file does not exist" in err["message"]
    err = error_json(["compact", table, "--auto", "--metastore",
                      f"sqlite://{tmp_path}/none.sqlite"], capsys, 3)
    assert "file does not exist" in err["message"]
    assert not (tmp_path / "none.sqlite").exists()
