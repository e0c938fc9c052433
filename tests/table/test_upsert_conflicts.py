"""Concurrent keyed writers (docs/format.md §24, write-write conflicts): of two upserts or
deletes that overlap in time and touch a common (partition, bucket), the first to commit
wins and the other's commit fails with CommitConflictError, its transaction aborted and its
files removed; a retry reads the winner's rows. Writers of disjoint buckets both commit.
The table always equals the model: one row per key, the last committed image."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from contextlib import ExitStack
from pathlib import Path

import pyarrow as pa
import pytest

import ingest
from ingest.acid.format import bucket_ids
from ingest.acid.read import ReadView
from ingest.errors import CommitConflictError
from ingest.io import storage
from ingest.records.changes import from_rows
from ingest.table import Table
from ingest.table.core._committed import table_manifest
from ingest.table.core._definition import table_compression
from ingest.table.core._written import Written, commit
from ingest.table.write import create_table
from ingest.table.write.keyed import check_keyed_table, resolve
from ingest.table.write.upsert import write_changes
from ingest.txn import Metastore, default_metastore_url

DDL = "id BIGINT, value STRING"
BUCKETS = 4


def _table(tmp_path: Path, n: int) -> Table:
    location = str(tmp_path / "wh" / "t")
    create_table(location, DDL, buckets=BUCKETS, bucketed_by=["id"])
    t = ingest.open_table(location)
    t.load(pa.table({"id": pa.array(range(n), pa.int64()), "value": ["seed"] * n}))
    return t


def _rows(t: Table) -> dict[int, str]:
    rows = t.to_arrow().to_pylist()
    by_key = {r["id"]: r["value"] for r in rows}
    assert len(by_key) == len(rows), "a key holds two live rows"
    return by_key


def _keys_in_bucket(bucket: int, n: int) -> list[int]:
    ids = pa.table({"id": pa.array(range(n), pa.int64())})
    return [i for i, b in enumerate(bucket_ids(ids, ["id"], BUCKETS).to_pylist()) if b == bucket]


class _Upsert:
    """One `Table.upsert` taken apart at the steps `upsert._apply` runs (open the
    transaction, take the view and write, commit), so a test can interleave two writers."""

    def __init__(self, stack: ExitStack, location: str, changes: dict[int, str]) -> None:
        table = ingest.open_table(location)
        self.store, self.defn = stack.enter_context(table.to_write("upsert rows"))
        self.spec = check_keyed_table(self.defn, ["id"], None)
        data = pa.table({"id": pa.array(list(changes), pa.int64()),
                         "value": list(changes.values())})
        self.resolved = resolve(from_rows(data), self.defn, self.spec)
        self.fs = table.fs
        self.txn = self.store.open_transaction(self.defn, agent="test")
        self.written = Written(self.fs, storage.path_of(self.defn.location))

    def write(self) -> None:
        manifest = table_manifest(self.store, self.defn)
        view = ReadView(self.defn.name, self.store.snapshot(self.defn), manifest.entries)
        write_changes(self.fs, manifest.root, self.defn, view, self.written, self.resolved,
                      spec=self.spec, write_id=self.txn.write_id,
                      compression=table_compression(self.defn))

    def commit(self) -> None:
        commit(self.store, self.txn, self.written, updates=True)


def test_the_later_committer_of_a_key_conflicts_and_its_retry_converges(
        tmp_path: Path) -> None:
    t = _table(tmp_path, 20)
    key = _keys_in_bucket(1, 20)[0]
    with ExitStack() as stack:
        a = _Upsert(stack, t.location, {key: "a", 100: "a-new"})
        b = _Upsert(stack, t.location, {key: "b"})
        a.write()
        b.write()  # both read the seed row of `key` and delete its ROW__ID
        a.commit()
        with pytest.raises(CommitConflictError) as e:
            b.commit()
    message = str(e.value)
    assert f"transaction {a.txn.txn_id} committed updates or deletes in default.t" in message
    assert "it is aborted" in message and "retry" in (e.value.hint or "")
    assert b.written.files and not any(Path(p).exists() for p in b.written.files)
    states = {h.write_id: h.state for h in t.history()}
    assert (states[a.txn.write_id], states[b.txn.write_id]) == ("committed", "aborted")
    model = {i: "seed" for i in range(20)} | {key: "a", 100: "a-new"}
    assert _rows(t) == model
    retry = t.upsert(pa.table({"id": pa.array([key], pa.int64()), "value": ["b"]}), key=["id"])
    assert retry.counts.updated == 1
    assert _rows(t) == model | {key: "b"}


def test_writers_of_disjoint_buckets_both_commit(tmp_path: Path) -> None:
    t = _table(tmp_path, 40)
    one, two = _keys_in_bucket(1, 40)[0], _keys_in_bucket(2, 40)[0]
    with ExitStack() as stack:
        a = _Upsert(stack, t.location, {one: "a"})
        b = _Upsert(stack, t.location, {two: "b"})
        a.write()
        b.write()
        a.commit()
        b.commit()
    assert _rows(t) == {i: "seed" for i in range(40)} | {one: "a", two: "b"}


def test_a_delete_conflicts_with_an_upsert_of_its_rows(tmp_path: Path) -> None:
    t = _table(tmp_path, 20)
    key = _keys_in_bucket(3, 20)[0]
    with ExitStack() as stack:
        a = _Upsert(stack, t.location, {key: "a"})
        a.write()
        t.delete(f"id = {key}")  # opened after `a`, committed first: it wins
        with pytest.raises(CommitConflictError):
            a.commit()
    assert key not in _rows(t)


WORKER = textwrap.dedent(
    """
    import subprocess, sys
    table, changes, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print("ready", flush=True)
    sys.stdin.readline()  # start barrier: both writers race from here
    conflicts = 0
    for i in range(rounds):
        while True:
            run = subprocess.run([sys.executable, "-m", "ingest", "upsert", table, "--input",
                                  changes.format(i), "--key", "id"],
                                 capture_output=True, text=True)
            if run.returncode == 0:
                break
            assert run.returncode == 3, run.stderr
            assert "write-write conflict" in run.stderr and "Hint: retry" in run.stderr, \\
                run.stderr
            conflicts += 1
    print(conflicts, flush=True)
    """
)


def test_two_processes_upserting_the_same_keys_leave_one_row_per_key(tmp_path: Path) -> None:
    """Through the CLI: each writer upserts every key with its own value, a few rounds,
    retrying on exit 3. Without the check two overlapping rounds would delete the same
    ROW__IDs and each insert a row: keys held twice. With it, every key holds the last
    committed round's value. (Whether the writers overlap is up to the scheduler; the
    deterministic interleavings are the tests above.)"""
    n, rounds = 20000, 3
    t = _table(tmp_path, n)
    procs = []
    for w in ("p", "q"):
        for i in range(rounds):
            path = tmp_path / f"{w}{i}.jsonl"
            path.write_text("".join(json.dumps({"id": k, "value": f"{w}{i}"}) + "\n"
                                    for k in range(n)))
        procs.append(subprocess.Popen(
            [sys.executable, "-c", WORKER, t.location, str(tmp_path / (w + "{}.jsonl")),
             str(rounds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ}))
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    conflicts = sum(int(o.split()[-1]) for o in outs)
    rows = _rows(t)  # one live row per key
    assert len(rows) == n
    values = set(rows.values())
    assert len(values) == 1, f"keys hold the images of different writes: {sorted(values)}"
    committed = [h for h in t.history() if h.state == "committed"]
    assert len(committed) == 1 + 2 * rounds  # the seed, then every round once
    aborted = [h for h in t.history() if h.state == "aborted"]
    assert len(aborted) == conflicts
    # First committer wins: no two committed writes were open at the same time (each wrote
    # every bucket). Holds whether or not this run's writers happened to overlap.
    with Metastore.open(default_metastore_url(t.location)) as store:
        spans = sorted((i.opened_at, i.finished_at) for i in store.transactions(t.location)
                       if i.state == "committed")
    for (_, first_done), (then_opened, _) in zip(spans, spans[1:], strict=False):
        assert first_done is not None and first_done <= then_opened
