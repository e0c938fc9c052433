"""kill -9 at each of the cleaner's crash points: the table reads the same rows, `ingest verify`
is clean after `ingest recover`, and the next `ingest clean` finishes the work."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from support import run_cli, visible, write_rows

from ingest.acid.format.names import format_base, format_delta
from ingest.table import open_table
from ingest.table.maintain import compact
from ingest.table.write import create_table, delete, load
from ingest.txn import Metastore, default_metastore_url

pytestmark = pytest.mark.crash

ROOT = Path(__file__).resolve().parents[2]
DT = "dt=2026-01-01"


def rows(ids: range, dt: str = "2026-01-01") -> pa.Table:
    return pa.table({"id": list(ids), "value": [f"v{i}" for i in ids], "dt": [dt] * len(ids)})


def build(location: str) -> list[int]:
    """Loads, a delete, an aborted write left on disk, a minor then a major compaction of
    DT; returns the ids of the history rows the compactions left 'ready for cleaning'."""
    create_table(location, "id BIGINT, value STRING, dt STRING", partitioned_by=["dt"])
    for i in range(4):
        load(open_table(location), rows(range(i * 10, i * 10 + 10)))
    load(open_table(location), rows(range(100, 110), "2026-01-02"))
    with Metastore.open(default_metastore_url(location), create=False) as store:
        txn = store.open_transaction(location)
        write_rows(f"{location}/{DT}/{format_delta(txn.write_id, txn.write_id, 0)}",
                   txn.write_id, range(900, 910))
        store.abort(txn)
    delete(open_table(location), "id < 5 OR id = 105")
    compact(open_table(location), kind="minor")
    (done,) = compact(open_table(location), kind="major", partitions=[DT]).partitions
    assert done.result is not None
    with Metastore.open(default_metastore_url(location), create=False) as store:
        return [c.compaction_id for c in store.compactions_to_clean(location)]


def history_state(location: str, record: int) -> str:
    conn = sqlite3.connect(default_metastore_url(location)[len("sqlite://"):])
    try:
        return str(conn.execute("SELECT state FROM compactions WHERE compaction_id = ?",
                                (record,)).fetchone()[0])
    finally:
        conn.close()


def acid_entries(location: str) -> dict[str, list[str]]:
    return {p.name: sorted(os.listdir(p)) for p in sorted(Path(location).iterdir())
            if p.is_dir()}


@pytest.mark.parametrize("point", ["clean.midway_directory", "clean.before_record",
                                   "clean.after_record"])
def test_sigkill_while_cleaning(tmp_path: Path, point: str,
                                capsys: pytest.CaptureFixture[str]) -> None:
    location = str(tmp_path / "wh" / "events")
    records = build(location)
    before = visible(location)
    obsolete = set(os.listdir(f"{location}/{DT}")) - {format_base(7)}
    assert len(obsolete) == 8  # 4 loads, the aborted write, the delete, the minor pair

    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_CRASH")}
    env.update(PYTHONPATH=str(ROOT), INGEST_CRASH_AT=point)
    done = subprocess.run([sys.executable, "-m", "ingest", "clean", location, "--retention",
                           "0", "--quiet"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr

    left = set(os.listdir(f"{location}/{DT}")) - {format_base(7)}
    if point == "clean.midway_directory":
        # Killed after the first file of the first directory: it is there, cut short.
        cut = [n for n in left if os.listdir(f"{location}/{DT}/{n}") == ["_orc_acid_version"]]
        assert len(cut) == 1
        assert left == obsolete
    else:
        assert left == set()
    expected_state = "succeeded" if point == "clean.after_record" else "ready for cleaning"
    assert {history_state(location, r) for r in records} == {expected_state}
    assert visible(location) == before
    code, out, err = run_cli(["cat", location], capsys)
    assert code == 0, err
    assert sorted((json.loads(line) for line in out.splitlines()),
                  key=lambda r: r["id"]) == before

    assert run_cli(["recover", location, "--txn-timeout-s", "0", "--json"], capsys)[0] == 0
    code, out, err = run_cli(["verify", location, "--json"], capsys)
    assert code == 0, out + err

    code, out, err = run_cli(["clean", location, "--retention", "0", "--json"], capsys)
    assert code == 0, err
    report = json.loads(out)
    assert report["compactions_cleaned"] == ([] if point == "clean.after_record" else records)
    assert {history_state(location, r) for r in records} == {"succeeded"}
    assert acid_entries(location)[DT] == [format_base(7)]
    assert visible(location) == before
    assert run_cli(["verify", location], capsys)[0] == 0
