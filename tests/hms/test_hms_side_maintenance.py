"""The stream's maintenance compacts and cleans the Hive Metastore backend's hidden side tables
(progress, manifest) on Hive 4.0.1 and 3.1.3, and progress and the manifest read exactly as
before, from the same process, a new connection and a fresh process (docs/format.md §20,
docs/invariants.md 8.11)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from hms_server import Server, wait_until_no_txn_is_open
from support import ok_json, run_cli, wait_until

from ingest.errors import ConfigError
from ingest.spark.maintenance import StreamMaintenance
from ingest.table import open_table
from ingest.txn import Metastore, OffsetRange, SinkProgress, hms
from ingest.txn.hms.compactions import table_locks
from ingest.txn.hms.thrift import _stubs

pytestmark = pytest.mark.hms

ROOT = Path(__file__).resolve().parents[2]
Capsys = pytest.CaptureFixture[str]
COMMITS = 12  # more than Hive's delta-count threshold (10): the initiator asks for it


def _dirs(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.is_dir())


def _commit(uri: str, table: Path, name: str, k: int) -> None:
    """One load (a manifest delta) and one micro-batch's progress (a progress delta)."""
    with Metastore.open(uri) as store:
        open_table(str(table), metastore=store).load(
            pa.table({"id": pa.array(range(k * 10, k * 10 + 10), pa.int64()),
                      "v": [f"v{k}"] * 10}))
        txn = store.open_transaction(name, agent=f"h:1:ingest-stream:{name}@ck")
        store.commit(txn, sink=SinkProgress(f"{name}@ck", k),
                     offsets=[OffsetRange("t", k % 2, k * 10, k * 10 + 10)])


def _waiting_locks(uri: str, name: str) -> bool:
    """Whether a lock on table `name` is waiting (SHOW LOCKS)."""
    waiting = _stubs.ttypes().LockState.WAITING
    with hms.connect(uri) as conn:
        return any(lk.state == waiting for lk in table_locks(conn, hms.get_table(conn, name)))


def _read(store: Metastore, name: str) -> dict[str, object]:
    """Progress and manifest as plain JSON values, to compare across processes."""
    return {"last": store.last_committed_batch(f"{name}@ck", table=name),
            "ranges": [[w, r.topic, r.partition, r.from_offset, r.until_offset]
                       for w, r in store.offset_ranges(name)],
            "files": {p: [f.write_id, f.length, f.tail_hash, f.rows]
                      for p, f in store.committed_files(name).items()}}


_FRESH = """
import json, sys
from ingest.txn import Metastore
uri, name = sys.argv[1:]
with Metastore.open(uri) as store:
    print(json.dumps({"last": store.last_committed_batch(f"{name}@ck", table=name),
        "ranges": [[w, r.topic, r.partition, r.from_offset, r.until_offset]
                   for w, r in store.offset_ranges(name)],
        "files": {p: [f.write_id, f.length, f.tail_hash, f.rows]
                  for p, f in store.committed_files(name).items()}}))
"""


def _read_fresh(uri: str, name: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _FRESH, uri, name], env=env, check=True,
                          capture_output=True, text=True, timeout=120)
    value: dict[str, object] = json.loads(done.stdout)
    return value


def test_maintenance_compacts_and_cleans_the_side_tables_and_reads_stay_the_same(
        metastore: Server, tmp_path: Path, capsys: Capsys) -> None:
    uri = metastore.uri
    table = tmp_path / "wh" / "events"
    name = f"s_{uuid.uuid4().hex[:10]}.events"
    # The table itself is left alone (no_auto_compaction), so its manifest must read as it
    # was: only the side tables change.
    ok_json(["create", str(table), "--name", name, "--schema", "id BIGINT, v STRING",
             "--property", "no_auto_compaction=true",
             "--property", "ingest.cleaner.retention.seconds=0", "--metastore", uri], capsys)
    for k in range(COMMITS):
        _commit(uri, table, name, k)
    progress, files = table / "_ingest_progress", table / "_ingest_files"
    assert _dirs(progress) == [f"delta_{w:07d}_{w:07d}_0000" for w in range(1, COMMITS + 1)]
    assert _dirs(files) == [f"delta_{w:07d}_{w:07d}_0000" for w in range(1, COMMITS + 1)]
    data_before = _dirs(table)
    wait_until_no_txn_is_open(uri)  # another client's would keep the side tables' deltas

    with Metastore.open(uri) as store:
        before = _read(store, name)
        assert before["last"] == COMMITS - 1
        assert len(before["ranges"]) == COMMITS  # type: ignore[arg-type]
        assert len(before["files"]) == COMMITS  # type: ignore[arg-type]
        assert store.side_tables(name) == [f"{name}__ingest_progress", f"{name}__ingest_files"]
        assert [t.location for t in open_table(str(table), metastore=store).side_tables()] == [
            f"file://{progress}", f"file://{files}"]
        assert store.side_tables(f"{name}__ingest_progress") == []

        maintenance = StreamMaintenance(interval_s=0)
        maintenance.run_once(open_table(str(table), metastore=uri).ref, [str(table)])
        stats = maintenance.stats
        assert (stats.errors, stats.last_error) == (0, None)
        assert stats.compactions == 2 and stats.cleans == 3  # the table, then both sides

        # Each side table: its 12 deltas compacted into one base, then cleaned away.
        for side in (progress, files):
            (only,) = _dirs(side)
            assert only.startswith(f"base_{COMMITS:07d}"), _dirs(side)
        assert _dirs(table) == data_before  # the table itself was not compacted
        # No side tables of side tables: nothing recorded for the compactions' outputs.
        for side in ("progress", "files"):
            for kind in ("progress", "files"):
                assert store.find_table(f"{name}__ingest_{side}__ingest_{kind}") is None
            history = store.compactions(f"{name}__ingest_{side}")
            assert [c.state for c in history] == ["succeeded"], history
        assert not (progress / "_ingest_files").exists()

        # The same process: this object's cache, then a new connection (snapshot read).
        assert _read(store, name) == before
    with Metastore.open(uri) as fresh:
        assert _read(fresh, name) == before
    assert _read_fresh(uri, name) == before

    # A damaged committed file is still named: the manifest read from the compacted table.
    (third,) = table.glob("delta_0000003_0000003_*")
    os.truncate(third / "bucket_00000", 0)
    code, out, err = run_cli(["cat", str(table), "--metastore", uri], capsys)
    assert code == 3 and str(third / "bucket_00000") in err, (code, out, err)

    # Commits go on over the compacted side tables; each reader sees the new delta too.
    with Metastore.open(uri) as store:
        _read(store, name)  # cached before the next commit: the new delta is read alone
        _commit(uri, table, name, COMMITS)
        after = _read(store, name)
        assert after["last"] == COMMITS
        assert len(after["ranges"]) == COMMITS + 1  # type: ignore[arg-type]
        assert len(after["files"]) == COMMITS + 1  # type: ignore[arg-type]
        assert {k: v for k, v in after["files"].items()  # type: ignore[union-attr]
                if k in before["files"]} == before["files"]  # type: ignore[operator]
    assert _read_fresh(uri, name) == after


def test_compact_and_clean_take_a_side_table_and_a_commit_waits_for_its_compaction_lease(
        metastore: Server, tmp_path: Path, capsys: Capsys) -> None:
    uri = metastore.uri
    table = tmp_path / "wh" / "events"
    name = f"s_{uuid.uuid4().hex[:10]}.events"
    ok_json(["create", str(table), "--name", name, "--schema", "id BIGINT, v STRING",
             "--metastore", uri], capsys)
    with Metastore.open(uri) as store:
        for k in range(3):
            txn = store.open_transaction(name)
            store.commit(txn, sink=SinkProgress(f"{name}@ck", k),
                         offsets=[OffsetRange("t", 0, k, k + 1)])
        before = _read(store, name)
    progress = table / "_ingest_progress"
    on = ["--metastore", uri]
    wait_until_no_txn_is_open(uri)  # another client's would keep the compacted deltas
    ok_json(["compact", str(progress), "--major", *on], capsys)
    ok_json(["clean", str(progress), "--retention", "0", *on], capsys)
    (only,) = _dirs(progress)
    assert only.startswith("base_0000003"), _dirs(progress)
    assert _read_fresh(uri, name) == before

    side = f"{name}__ingest_progress"
    with Metastore.open(uri) as store:
        # Progress is never kept for a side table: it would make a side table of one.
        txn = store.open_transaction(side)
        with pytest.raises(ConfigError, match=rf"{side}: it is a hidden side table"):
            store.commit(txn, sink=SinkProgress("x@ck", 0))
        store.abort(txn)
        assert store.find_table(f"{side}__ingest_progress") is None

        # A compaction's lease (SHARED_READ on the side table) makes a commit's EXCLUSIVE
        # lock on it wait, and the commit goes through once the lease ends: no deadlock.
        committed = threading.Event()

        def commit() -> None:
            with Metastore.open(uri) as writer:
                t = writer.open_transaction(name)
                writer.commit(t, sink=SinkProgress(f"{name}@ck", 3))
            committed.set()

        with store.leased_snapshot(side, agent="h:1:ingest-compact"):
            thread = threading.Thread(target=commit)
            thread.start()
            # The commit has asked for its lock and the server keeps it waiting: only then
            # does "not committed" show that the commit waits for the lease.
            wait_until("the commit's lock waiting on the side table",
                       lambda: (_waiting_locks(uri, side) or committed.is_set()
                                or not thread.is_alive()))
            assert not committed.is_set(), "the commit did not wait for the lease"
        thread.join(180.0)
        assert committed.is_set(), "the commit did not go through once the lease ended"
        assert store.last_committed_batch(f"{name}@ck", table=name) == 3
