"""Real SIGKILL at every writer crash point, then `recover`: committed rows exactly, files
readable by pyarrow (and ORC Java), a second `recover` has nothing to do (docs/invariants.md, 5)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.orc as po
import pytest
from conftest import require
from support import run_cli as cli

from ingest.acid import read_events
from ingest.acid.format.names import is_side_file, parse_bucket_file
from ingest.txn import find_metastore_for

SCRIPT = Path(__file__).with_name("writer_script.py")
WRITER_POINTS = ["writer.after_stripes", "writer.after_footer", "writer.after_side_file"]

pytestmark = pytest.mark.crash


def run_writer(root: Path, mode: str, crash_txn: int, point: str | None) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("INGEST_CRASH_AT", None)
    if point:
        env["INGEST_CRASH_AT"] = point
    proc = subprocess.run([sys.executable, str(SCRIPT), str(root), mode, str(crash_txn)],
                          env=env, capture_output=True, timeout=120)
    if point is None:
        assert proc.returncode == 0, proc.stderr.decode()
    return proc.returncode


def bucket_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("bucket_*")
                  if parse_bucket_file(p.name) is not None and not is_side_file(p.name))


def committed_ids(root: Path) -> list[int]:
    """Ids of rows whose write id is valid in the metastore's snapshot (docs/invariants.md, 2)."""
    store, table = find_metastore_for(str(root))
    try:
        snapshot = store.snapshot(table.name)
    finally:
        store.close()
    ids: list[int] = []
    for f in bucket_files(root):
        for batch in read_events(str(f)):
            d = batch.to_pydict()
            ids += [r["id"] for r, w in zip(d["row"], d["currentTransaction"], strict=True)
                    if snapshot.is_valid(w)]
    return sorted(ids)


def expected_ids(committed_txns: int) -> list[int]:
    return sorted(i for t in range(1, committed_txns + 1) for i in range(100 * t, 100 * t + 40))


def check_recovered(root: Path, committed_txns: int,
                    capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code, out, err = cli(["recover", str(root), "--txn-timeout-s", "0", "--json",
                          "--backup-dir", str(root.parent / "backup")], capsys)
    assert code == 0, err
    first = json.loads(out)
    assert first["clean"], first
    for f in bucket_files(root):
        assert not Path(f"{f}_flush_length").exists(), f
        po.ORCFile(str(f)).read()  # the whole file, no side file: a complete ORC file
    assert committed_ids(root) == expected_ids(committed_txns)
    code, out, err = cli(["recover", str(root), "--json"], capsys)
    assert code == 0, err
    second = json.loads(out)
    assert second["nothing_to_do"], second
    assert all(f["action"] == "ok" for f in second["files"])
    code, out, err = cli(["verify", str(root), "--json"], capsys)
    assert code == 0, out
    return first


@pytest.mark.parametrize("mode", ["batch", "single"])
@pytest.mark.parametrize("crash_txn", [1, 2])
@pytest.mark.parametrize("point", WRITER_POINTS)
def test_sigkill_at_writer_point(tmp_path: Path, mode: str, crash_txn: int, point: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "wh" / "crash"
    code = run_writer(root, mode, crash_txn, point)
    assert code == -signal.SIGKILL
    before = {str(f): f.stat().st_size for f in bucket_files(root)}
    report = check_recovered(root, crash_txn - 1, capsys)
    # docs/invariants.md, 5: nothing cut below a recorded flush length of a committed transaction.
    for f in report["files"]:  # type: ignore[attr-defined]
        lengths = f["flush_lengths"] or []
        if f["action"] == "truncated":
            assert f["new_length"] == max(x for x in lengths if x <= before[f["path"]])


def test_no_crash_recover_changes_nothing(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "wh" / "crash"
    run_writer(root, "batch", 0, None)
    before = {f: f.read_bytes() for f in root.rglob("*") if f.is_file()}
    code, out, err = cli(["recover", str(root), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["nothing_to_do"]
    assert {f: f.read_bytes() for f in root.rglob("*") if f.is_file()} == before
    assert committed_ids(root) == expected_ids(3)


@pytest.mark.java
@pytest.mark.parametrize("point", WRITER_POINTS)
def test_java_reads_recovered_files(tmp_path: Path, point: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    from compat import javatools as jt

    ok, missing = jt.available()
    require(ok, missing)
    root = tmp_path / "wh" / "crash"
    assert run_writer(root, "batch", 2, point) == -signal.SIGKILL
    check_recovered(root, 1, capsys)
    store, table = find_metastore_for(str(root))
    try:
        snapshot = store.snapshot(table.name)
    finally:
        store.close()
    results = jt.orc_read_many([str(f) for f in bucket_files(root)])
    assert all(not r["side_file_exists"] for r in results)
    ids = sorted(r["row"]["id"] for res in results for r in res["rows"]
                 if snapshot.is_valid(r["currentTransaction"]))
    assert ids == expected_ids(1)
