"""`ingest recover` and `ingest verify` through ingest.cli.main.main: exit codes, --json,
every truncation printed, metastore time-outs, and each verify problem kind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import SIMPLE_SCHEMA, simple_table
from support import run_cli as run

from ingest.acid import BucketFileOptions, BucketWriter
from ingest.acid.format.names import format_delta
from ingest.table import open_table
from ingest.table.maintain import verify_table
from ingest.txn import Metastore, OffsetRange


def commit_batch(store: Metastore, root: Path, ids: range, offsets: tuple[int, int]) -> Path:
    """A micro-batch as the sink commits it: its offsets, and its file in the manifest."""
    txn = store.open_transaction("default.events")
    rel = f"{format_delta(txn.write_id, txn.write_id, 0)}/bucket_00000"
    with BucketWriter.create(str(root / rel), BucketFileOptions(write_id=txn.write_id,
                                                                 row_schema=SIMPLE_SCHEMA)) as w:
        w.write(simple_table(ids))
    store.commit(txn, offsets=[OffsetRange("t", 0, *offsets)],
                 files={"default.events": [w.committed_file(rel)]})
    return root / rel


def crashed_writer(store: Metastore, root: Path) -> tuple[Path, int]:
    """An open transaction whose writer flushed once, then died mid-stripe."""
    (txn,) = store.allocate_write_ids("default.events", 1)
    path = root / format_delta(txn.write_id, txn.write_id, 0) / "bucket_00000"
    w = BucketWriter.create(str(path), BucketFileOptions(write_id=txn.write_id,
                                                         row_schema=SIMPLE_SCHEMA))
    w.write(simple_table(range(500, 510)))
    flushed = w.flush()
    w.write(simple_table(range(510, 520)))
    w._write_pending()
    w._file.flush()
    w.abandon()
    return path, flushed


def test_clean_table(store: Metastore, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commit_batch(store, root, range(10), (0, 10))
    code, out, err = run(["recover", str(root), "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["nothing_to_do"] and doc["clean"] and doc["table"] == "default.events"
    code, out, err = run(["verify", str(root), "--json"], capsys)
    assert code == 0 and json.loads(out)["ok"], out


def test_live_writer_kept_then_timed_out(store: Metastore, root: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    commit_batch(store, root, range(10), (0, 10))
    path, flushed = crashed_writer(store, root)
    size = path.stat().st_size
    code, out, err = run(["recover", str(root), "--json"], capsys)  # heartbeat is fresh
    assert code == 0, err
    assert {f["action"] for f in json.loads(out)["files"]} == {"ok", "skipped"}
    assert path.stat().st_size == size
    code, out, err = run(["recover", str(root), "--dry-run", "--txn-timeout-s", "0"], capsys)
    assert code == 1 and "rerun without --dry-run" in err
    assert path.stat().st_size == size
    backup = tmp_path / "bk"
    code, out, err = run(["recover", str(root), "--txn-timeout-s", "0", "--backup-dir",
                          str(backup)], capsys)
    assert code == 0, err
    assert "truncated" in out and f"{size:,}" in out and f"{flushed:,}" in out
    assert f"backup: {backup}" in out
    assert "aborted transaction" in out
    assert path.stat().st_size == flushed
    code, out, err = run(["recover", str(root), "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["nothing_to_do"]
    assert doc["aborted_directories"] == [path.parent.name]
    code, out, err = run(["verify", str(root)], capsys)
    assert code == 0, out


def test_verify_reports_problems(store: Metastore, root: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    a = commit_batch(store, root, range(10), (0, 10))
    commit_batch(store, root, range(10, 20), (15, 20))  # gap 10..15
    commit_batch(store, root, range(20, 30), (18, 25))  # overlap 18..20
    crashed_writer(store, root)
    (root / "delta_0000099_0000099_0000").mkdir()
    shutil.rmtree(a.parent)
    report = verify_table(open_table(str(root), metastore=store),
                          txn_timeout_s=0, now=store.transactions()[-1].heartbeat_at + 10)
    kinds = sorted(p.kind for p in report.problems)
    assert kinds == ["dead-transaction", "missing-directory", "missing-file", "offset-gap",
                     "offset-overlap", "unknown-write-id"], report.problems
    code, out, err = run(["verify", str(root), "--json", "--txn-timeout-s", "0"], capsys)
    assert code == 1
    doc = json.loads(out)
    assert not doc["ok"] and {p["kind"] for p in doc["problems"]} >= {"offset-gap"}


def test_a_committed_write_id_that_wrote_no_file_is_not_a_missing_directory(
        store: Metastore, root: Path) -> None:
    """A committed write id the manifest lists no file of wrote none (as a Hive Metastore
    shows an aborted, empty transaction once its housekeeping purged it): no problem. The
    manifest listing a file of a write id whose directory is gone is one."""
    commit_batch(store, root, range(10), (0, 10))
    empty = store.open_transaction("default.events")
    store.commit(empty)  # no file, no offsets
    assert verify_table(open_table(str(root), metastore=store)).problems == ()
    shutil.rmtree(commit_batch(store, root, range(10, 20), (10, 20)).parent)
    kinds = [p.kind for p in verify_table(open_table(str(root), metastore=store)).problems]
    assert "missing-directory" in kinds


def test_verify_flags_file_needing_recovery(store: Metastore, root: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # An aborted write id's file: recovery may cut it (a committed one it leaves and names,
    # tests/cli/test_recover_damaged.py).
    (txn,) = store.allocate_write_ids("default.events", 1)
    path = root / format_delta(txn.write_id, txn.write_id, 0) / "bucket_00000"
    with BucketWriter.create(str(path), BucketFileOptions(write_id=txn.write_id,
                                                          row_schema=SIMPLE_SCHEMA)) as w:
        w.write(simple_table(range(10)))
    store.abort(txn)
    with open(path, "ab") as f:
        f.write(b"torn stripe bytes")
    code, out, err = run(["verify", str(root)], capsys)
    assert code == 1 and "needs-recovery" in out and "ingest recover" in out


def test_recover_without_metastore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "plain"
    path = root / "delta_0000001_0000002" / "bucket_00000"
    w = BucketWriter.create(str(path), BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA))
    w.write(simple_table(range(5)))
    good = w.flush()
    w.abandon()
    with open(path, "ab") as f:
        f.write(b"x" * 10)
    code, out, err = run(["recover", str(root), "--json"], capsys)
    assert code == 0, err
    (f,) = json.loads(out)["files"]
    assert (f["action"], f["new_length"]) == ("truncated", good)


def test_missing_path_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["recover", str(tmp_path / "nope")], capsys)
    assert code == 3 and out == "" and "does not exist" in err


def test_a_writer_whose_write_ids_come_after_the_snapshot_is_left_alone(
        store: Metastore, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A transaction batch allocated while recovery scans is above the snapshot's high-water
    mark: its files are live even though recovery never saw its transactions open."""
    commit_batch(store, root, range(3), (0, 3))
    ahead = store.snapshot("default.events").high_watermark + 5
    path = root / format_delta(ahead, ahead + 3, None) / "bucket_00000"
    w = BucketWriter.create(str(path),
                            BucketFileOptions(write_id=ahead,
                                              row_schema=SIMPLE_SCHEMA))  # side file holds only 0
    code, out, _ = run(["recover", str(root), "--json"], capsys)
    assert code == 0
    assert path.exists() and Path(str(path) + "_flush_length").exists()
    w.write(simple_table(range(3, 5)))
    w.close()


def test_the_recover_job_runs_the_table_recovery(store: Metastore, root: Path,
                                                 tmp_path: Path) -> None:
    """`jobs/recover.py` opens the table like `ingest recover` and calls its `recover`:
    a dead writer's torn file is cut back to its flush, its transaction aborted; a path
    with no table is exit 3 naming it."""
    import os
    import subprocess
    import sys

    commit_batch(store, root, range(10), (0, 10))
    path, flushed = crashed_writer(store, root)
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    job = [sys.executable, str(repo / "jobs" / "recover.py")]
    done = subprocess.run([*job, str(root), "--txn-timeout-s", "0", "--backup-dir",
                           str(tmp_path / "bk"), "--json"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["clean"] and path.stat().st_size == flushed
    assert "truncated" in {f["action"] for f in doc["files"]}
    assert [t.state for t in store.transactions()] == ["committed", "aborted"]
    missing = subprocess.run([*job, str(tmp_path / "nothing")], env=env,
                             capture_output=True, text=True, timeout=120, check=False)
    assert missing.returncode == 3 and "does not exist" in missing.stderr, missing.stderr
