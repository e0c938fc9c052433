"""Issue 11, item 4: read-only commands (cat, status, dump, verify) write nothing, metastore
included (cat's reader registration, removed when it ends, aside), and verify reports what
no metastore knows, stray directories and damaged files of open transactions."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from support import SIMPLE_SCHEMA, metastore_contents, simple_table
from support import run_cli as run

from ingest.acid import BucketFileOptions, BucketWriter
from ingest.acid.format.names import format_delta
from ingest.txn import METASTORE_FILENAME, Metastore

READ_ONLY = ("cat", "status", "verify")


def commit(store: Metastore, root: Path, ids: range) -> Path:
    with store.transaction("default.events") as txn:
        path = root / format_delta(txn.write_id, txn.write_id, 0) / "bucket_00000"
        with BucketWriter.create(str(path), BucketFileOptions(
                write_id=txn.write_id, row_schema=SIMPLE_SCHEMA)) as w:
            w.write(simple_table(ids))
    return path


def open_batch(store: Metastore, root: Path) -> Path:
    """A transaction batch of 3 write ids: the first committed, the second open (flushed
    twice), the third not started; the file keeps its side file."""
    txns = store.allocate_write_ids("default.events", 3)
    path = root / format_delta(txns[0].write_id, txns[-1].write_id) / "bucket_00000"
    w = BucketWriter.create(str(path), BucketFileOptions(write_id=txns[0].write_id,
                                                         row_schema=SIMPLE_SCHEMA))
    w.write(simple_table(range(100, 200)))
    w.flush()
    store.commit(txns[0])
    w.write(simple_table(range(200, 210)))
    w.flush()
    w.abandon()
    return path


def digest_tree(root: Path) -> dict[str, str]:
    """Each file's bytes; the metastore's rows (registered readers aside: cat's lease)."""
    return {str(p.relative_to(root)): "dir" if p.is_dir() else
            metastore_contents(p) if p.name == METASTORE_FILENAME else
            hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))}


def sqlite_lock_files(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {name for name in set(after) - set(before)
            if name.endswith((f"{METASTORE_FILENAME}-wal", f"{METASTORE_FILENAME}-shm"))}


def test_read_only_commands_leave_every_file_and_the_metastore_identical(
        store: Metastore, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bucket = commit(store, root, range(100))
    commit(store, root, range(100, 150))
    side = open_batch(store, root)
    store.close()  # its connection's -wal and -shm go with it
    warehouse = root.parent
    before = digest_tree(warehouse)
    assert f"{METASTORE_FILENAME}-wal" not in before
    commands = [
        ["cat", str(root)], ["cat", str(root), "--row-id", "--limit", "3"],
        ["status", str(root)], ["status", str(root), "--json"],
        ["dump", str(bucket)], ["dump", "--meta", str(bucket)], ["dump", str(side)],
        ["dump", "--meta", str(side)],
        ["verify", str(root)], ["verify", str(root), "--shallow", "--json"],
    ]
    for args in commands:
        code, out, err = run(args, capsys)
        assert code == 0, (args, out, err)
        after = digest_tree(warehouse)
        # SQLite's read-only connection may leave its empty WAL and its lock index: they
        # hold no data, and the next writer uses and removes them.
        lock_files = sqlite_lock_files(before, after)
        assert {k: v for k, v in after.items() if k not in lock_files} == before, args
        assert all((warehouse / name).stat().st_size == 0 for name in lock_files
                   if name.endswith("-wal")), args
    with Metastore.open(f"sqlite://{warehouse / METASTORE_FILENAME}", read_only=True) as after:
        assert after.live_readers("default.events", timeout_s=1e9) == []  # cat's lease ended


@pytest.mark.parametrize("content", [b"", b"not a database at all\n" * 50])
def test_emptied_or_foreign_metastore_is_an_error_never_rebuilt(
        store: Metastore, root: Path, content: bytes,
        capsys: pytest.CaptureFixture[str]) -> None:
    commit(store, root, range(10))
    store.close()
    metastore = root.parent / METASTORE_FILENAME
    metastore.write_bytes(content)  # the issue's `: > _ingest_metastore.sqlite`
    for command in ("cat", "status"):
        code, out, err = run([command, str(root), "--json"], capsys)
        assert (code, out) == (3, ""), err
        error = json.loads(err)["error"]
        assert error["type"] == "MetastoreError" and str(metastore) in error["message"]
        assert metastore.read_bytes() == content
    code, out, err = run(["verify", str(root), "--json"], capsys)
    assert code == 1, err
    problems = {p["kind"]: p for p in json.loads(out)["problems"]}
    assert set(problems) == {"unreadable-metastore", "unregistered-data"}
    assert str(metastore) in problems["unreadable-metastore"]["message"]
    assert "--adopt" in problems["unregistered-data"]["message"]
    assert metastore.read_bytes() == content
    assert sorted(p.name for p in root.parent.iterdir()) == [METASTORE_FILENAME, "events"]


def test_verify_reports_acid_data_that_no_metastore_knows(
        store: Metastore, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commit(store, root, range(10))
    store.close()
    (root.parent / METASTORE_FILENAME).unlink()
    code, out, err = run(["verify", str(root), "--json"], capsys)
    assert code == 1, err
    (problem,) = json.loads(out)["problems"]
    assert problem["kind"] == "unregistered-data"
    assert problem["path"] == str(root / format_delta(1, 1, 0))
    assert not (root.parent / METASTORE_FILENAME).exists()
    # A plain directory without ACID data is no problem: nothing to lose.
    empty = root.parent / "empty"
    empty.mkdir()
    code, out, err = run(["verify", str(empty)], capsys)
    assert code == 0, out + err


def test_stray_directory_verify_and_cat_agree(store: Metastore, root: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    commit(store, root, range(10))
    (root / "delta_abc_def").mkdir()  # the issue's `mkdir T/delta_abc_def`
    code, out, err = run(["verify", str(root), "--json"], capsys)
    assert code == 1, err
    (problem,) = json.loads(out)["problems"]
    assert problem["kind"] == "stray-directory"
    assert problem["path"] == str(root / "delta_abc_def")
    assert "rename it to start with '_'" in problem["message"]
    code, out, err = run(["cat", str(root)], capsys)
    assert (code, out) == (3, "")
    assert "'delta_abc_def' starts like an ACID directory" in err
    assert "rename it to start with '_'" in err
    (root / "delta_abc_def").rename(root / "_delta_abc_def")
    assert run(["verify", str(root)], capsys)[0] == 0
    assert run(["cat", str(root)], capsys)[0] == 0


@pytest.mark.parametrize("damage", ["shorter-than-flushed", "garbage-in-flushed-stripes"])
def test_verify_checks_files_of_open_transactions_with_the_default_timeout(
        store: Metastore, root: Path, damage: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    commit(store, root, range(10))
    path = open_batch(store, root)
    assert run(["verify", str(root)], capsys)[0] == 0  # healthy, writer alive
    data = path.read_bytes()
    if damage == "shorter-than-flushed":
        path.write_bytes(data[:-40])
    else:
        path.write_bytes(data[:3] + bytes(b ^ 0x5A for b in data[3:-200]) + data[-200:])
    code, out, err = run(["verify", str(root), "--json"], capsys)
    assert code == 1, err
    problems = json.loads(out)["problems"]
    assert [(p["kind"], p["path"]) for p in problems] == [("unreadable-file", str(path))]
    assert "of an open transaction" in problems[0]["message"]

