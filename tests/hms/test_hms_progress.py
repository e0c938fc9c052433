"""A stream's progress in a Hive Metastore (Hive 4.0.1 and 3.1.3): the micro-batch id and the
Kafka offsets become a row of the hidden progress table in the data's own HMS transaction, so
they are committed exactly when the data is (docs/invariants.md, 4 and 8.6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hms_server import TXN_TIMEOUT_S, Server

from ingest.acid import read_table
from ingest.errors import CommitConflictError, ConfigError
from ingest.txn import Metastore, OffsetRange, SinkProgress, TableDefinition

pytestmark = pytest.mark.hms

ROOT = Path(__file__).resolve().parents[2]


def _commit(store: Metastore, defn: TableDefinition, batch: int,
            ranges: list[OffsetRange]) -> int:
    txn = store.open_transaction(defn, agent=f"h:1:ingest-stream:{defn.name}@ck")
    store.commit(txn, sink=SinkProgress(f"{defn.name}@ck", batch), offsets=ranges)
    return txn.write_id


def test_progress_and_offsets_commit_with_the_data_and_a_replay_is_refused(
        store: Metastore, defn: TableDefinition, tmp_path: Path) -> None:
    store.create_table(defn)
    sink = f"{defn.name}@ck"
    assert store.committed_write_id(sink, 0) is None
    assert store.last_committed_batch(sink) is None
    first = _commit(store, defn, 0, [OffsetRange("t", 0, 0, 5), OffsetRange("t", 1, 0, 2)])
    second = _commit(store, defn, 1, [OffsetRange("t", 0, 5, 9)])
    assert store.committed_write_id(sink, 0, table=defn.name) == first
    assert store.committed_write_id(sink, 1) == second  # the table from the sink id
    assert store.committed_write_id(sink, 2) is None
    assert store.committed_write_id("other@ck", 0, table=defn.name) is None
    assert store.last_committed_batch(sink) == 1
    assert store.offset_ranges(defn) == [(first, OffsetRange("t", 0, 0, 5)),
                                         (first, OffsetRange("t", 1, 0, 2)),
                                         (second, OffsetRange("t", 0, 5, 9))]

    replay = store.open_transaction(defn)
    with pytest.raises(CommitConflictError, match=rf"micro-batch 0 of sink '{sink}' was "
                                                  rf"already committed as write id {first}"):
        store.commit(replay, sink=SinkProgress(sink, 0))
    store.abort(replay)
    assert store.write_id_states(defn) == {first: "committed", second: "committed",
                                           replay.write_id: "aborted"}

    # Hidden inside the table's directory, a Hive table of its own, not listed as ours.
    progress = tmp_path / "wh" / "events" / "_ingest_progress"
    assert sorted(p.name for p in progress.iterdir()) == [
        "delta_0000001_0000001_0000", "delta_0000002_0000002_0000"]
    assert f"{defn.name}__ingest_progress" not in [t.name for t in store.list_tables()]
    found = store.get_table(f"{defn.name}__ingest_progress")
    assert found.properties["ingest.progress_of"] == defn.name
    rows = read_table(str(progress), store.snapshot(found.name)).to_pylist()
    assert [(r["sink_id"], r["batch_id"], r["write_id"]) for r in rows] == [
        (sink, 0, first), (sink, 1, second)]


def test_a_sink_id_that_names_no_table_needs_the_table(store: Metastore,
                                                       defn: TableDefinition) -> None:
    store.create_table(defn)
    with pytest.raises(ConfigError, match="neither the call nor the sink id"):
        store.committed_write_id("no-table-here", 0)
    with pytest.raises(ConfigError, match="malformed"):
        store.commit(store.open_transaction(defn), offsets=[OffsetRange("t", 0, 5, 1)])


def test_killed_inside_the_commit_nothing_is_recorded_and_the_batch_commits_later(
        store: Metastore, defn: TableDefinition, metastore: Server, tmp_path: Path) -> None:
    """SIGKILL after the progress delta is written, before `commit_txn`: neither the data's
    write id nor the progress row is committed; the server aborts the silent transaction
    after its timeout, and the batch then commits once."""
    store.create_table(defn)
    sink = f"{defn.name}@ck"
    script = (
        "import sys\n"
        "from ingest.txn import Metastore, OffsetRange, SinkProgress\n"
        "with Metastore.open(sys.argv[1]) as s:\n"
        "    txn = s.open_transaction(sys.argv[2], agent='h:1:ingest-stream:' + sys.argv[3])\n"
        "    print(txn.write_id, flush=True)\n"
        "    s.commit(txn, sink=SinkProgress(sys.argv[3], 0),\n"
        "             offsets=[OffsetRange('t', 0, 0, 5)])\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "INGEST_CRASH_AT": "metastore.during_commit"}
    done = subprocess.run([sys.executable, "-c", script, metastore.uri, defn.name, sink],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    dead = int(done.stdout.split()[0])
    assert (tmp_path / "wh" / "events" / "_ingest_progress").exists(), "the row was written"
    assert store.committed_write_id(sink, 0) is None
    assert store.offset_ranges(defn) == []
    assert store.write_id_states(defn) == {dead: "open"}

    deadline = time.monotonic() + TXN_TIMEOUT_S * 4
    while store.write_id_states(defn)[dead] == "open":
        assert time.monotonic() < deadline, "the server never aborted the dead transaction"
        time.sleep(1)
    assert store.write_id_states(defn) == {dead: "aborted"}
    assert store.committed_write_id(sink, 0) is None

    again = _commit(store, defn, 0, [OffsetRange("t", 0, 0, 5)])
    assert store.committed_write_id(sink, 0) == again != dead
    assert store.offset_ranges(defn) == [(again, OffsetRange("t", 0, 0, 5))]
