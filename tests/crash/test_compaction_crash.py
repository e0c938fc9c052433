"""Real SIGKILL at every compaction crash point: the table reads the same rows, `ingest
verify` is clean after `ingest recover`, and the next compaction succeeds and takes over the
dead compactor's partition (docs/invariants.md, 3 and 7)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import ok_json, three_loads_and_a_delete
from support import run_cli as cli

from ingest.acid.compaction.compact import TEMP_PREFIX
from ingest.acid.read.reader import read_table
from ingest.txn import find_metastore_for

pytestmark = [pytest.mark.crash, pytest.mark.slow]

# (crash point, kind): every point, each with the kind that reaches it; minor compaction of a
# range holding inserts and deletes renames twice.
POINTS = [
    ("compact.after_write", "minor"),
    ("compact.after_write", "major"),
    ("compact.between_renames", "minor"),
    ("compact.after_rename", "minor"),
    ("compact.after_rename", "major"),
    ("compact.during_record", "major"),
    ("compact.after_record", "minor"),
]


def keyed(location: str) -> list[tuple[object, ...]]:
    store, table = find_metastore_for(location, read_only=True)
    try:
        snapshot = store.snapshot(table.name)
    finally:
        store.close()
    t = read_table(location, snapshot, with_row_id=True)
    return sorted((r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"],
                   r["id"], r["value"]) for r in t.to_pylist())


def compact_killed(location: str, kind: str, point: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "INGEST_CRASH_AT": point}
    return subprocess.run([sys.executable, "-m", "ingest", "compact", location, f"--{kind}"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("point", "kind"), POINTS)
def test_sigkill_during_compaction(point: str, kind: str, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    location = three_loads_and_a_delete(tmp_path, capsys)
    before = keyed(location)
    assert len(before) == 26

    done = compact_killed(location, kind, point)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert keyed(location) == before
    (attempt,) = ok_json(["compactions", location], capsys)["compactions"]
    if point == "compact.after_record":
        assert attempt["state"] == "ready for cleaning"
    else:
        # The compactor died working; its process is gone, so it shows as attempted.
        assert (attempt["state"], attempt["recorded_state"]) == ("attempted", "working")
    hidden = [p.name for p in Path(location).iterdir() if p.name.startswith(TEMP_PREFIX)]
    if point == "compact.between_renames":
        assert hidden == [f"{TEMP_PREFIX}delete_delta_0000001_0000004"]

    code, out, err = cli(["recover", location], capsys)
    assert code == 0, out + err
    assert keyed(location) == before
    code, out, err = cli(["verify", location, "--json"], capsys)
    assert code == 0, out + err
    assert json.loads(out)["problems"] == []

    # The next compaction, after one more write, takes over: a leftover is finished or
    # removed, never read.
    src = tmp_path / "more.jsonl"
    src.write_text(json.dumps({"id": 100, "value": "v100"}) + "\n")
    ok_json(["load", location, "--input", str(src)], capsys)
    before = keyed(location)
    again = ok_json(["compact", location, "--major"], capsys)
    assert again["partitions"][0]["compacted"]
    assert again["partitions"][0]["outputs"] == ["base_0000005"]
    assert keyed(location) == before and len(before) == 27
    assert not [p for p in Path(location).iterdir() if p.name.startswith(TEMP_PREFIX)]
    history = ok_json(["compactions", location], capsys)["compactions"]
    states = [c["state"] for c in history]
    assert states == ["ready for cleaning"] * 2 if point == "compact.after_record" else [
        "failed", "ready for cleaning"]
    if point != "compact.after_record":
        assert "compactor stopped" in history[0]["error"]
    code, out, err = cli(["verify", location], capsys)
    assert code == 0, out + err
