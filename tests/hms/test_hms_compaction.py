"""`ingest compact`, `clean` and `compactions` over a Hive Metastore (4.0.1 and 3.1.3): minor
then major compaction and cleaning keep exactly the committed rows (our `cat`, and Trino's
SELECT on Hive 4); Hive 4 gets `_vT` names and SHOW COMPACTIONS rows, 3.1 Hive 3 names; the
cleaner keeps what an older open transaction may read; a `_vT` directory of an open
transaction is not read; a killed compactor's `_vT` output is removed before the retry writes
its own (Trino, which does not check T, would read both); the Spark compaction job names its
output as `ingest compact` does; bad input fails clearly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hms_server import Server, create_plain_orc_table, trino_query
from support import ok_json, run_cli

from ingest.errors import UnsupportedFormatError
from ingest.txn import Metastore, hms
from ingest.txn.hms.thrift import compact_api

pytestmark = pytest.mark.hms

ROOT = Path(__file__).resolve().parents[2]


def _table(tmp_path: Path, uri: str, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """Two loads of five rows in two partitions and a delete of ids 1 and 2 (six rows
    left): three directories per partition. Returns (location, db.table)."""
    location = str(tmp_path / "wh" / "events")
    name = f"k_{uuid.uuid4().hex[:10]}.events"
    ok_json(["create", location, "--name", name, "--schema", "id BIGINT, v STRING, dt STRING",
             "--partitioned-by", "dt", "--metastore", uri], capsys)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "v": f"v{i}", "dt": f"2024-01-0{1 + i % 2}"})
                           + "\n" for i in range(5)))
    for _ in range(2):
        ok_json(["load", location, "--input", str(src), "--metastore", uri], capsys)
    ok_json(["delete", location, "--where", "id = 1 OR id = 2", "--metastore", uri], capsys)
    return location, name


EXPECTED = [0, 0, 3, 3, 4, 4]


def _ids(location: str, uri: str, capsys: pytest.CaptureFixture[str]) -> list[int]:
    code, out, err = run_cli(["cat", location, "--metastore", uri], capsys)
    assert code == 0, err
    return sorted(json.loads(line)["id"] for line in out.splitlines())


def _dirs(location: str) -> list[str]:
    return sorted(p.name for p in (Path(location) / "dt=2024-01-01").iterdir())


def test_minor_then_major_compaction_and_cleaning_keep_the_committed_rows(
        metastore: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = metastore.uri
    location, _ = _table(tmp_path, uri, capsys)
    hive4 = hms.connect(uri).info.major >= 4
    ok_json(["compact", location, "--minor", "--metastore", uri], capsys)
    assert _ids(location, uri, capsys) == EXPECTED
    outputs = [d for d in _dirs(location) if d.endswith(("_0000001_0000003",)) or "_v" in d]
    if hive4:  # Hive 4's names: the compactor's transaction in the suffix
        assert [d.split("_v")[0] for d in outputs] == ["delete_delta_0000001_0000003",
                                                       "delta_0000001_0000003"]
        assert all(d.split("_v")[1].isdigit() for d in outputs)
    else:  # Hive 3's: no suffix, which Hive 3 readers could not parse
        assert outputs == ["delete_delta_0000001_0000003", "delta_0000001_0000003"]
    history = ok_json(["compactions", location, "--metastore", uri], capsys)
    assert [c["state"] for c in history["compactions"]] == ["ready for cleaning"] * 2
    ok_json(["clean", location, "--retention", "0", "--metastore", uri], capsys)
    assert _dirs(location) == outputs
    assert _ids(location, uri, capsys) == EXPECTED
    ok_json(["compact", location, "--metastore", uri], capsys)
    ok_json(["clean", location, "--retention", "0", "--metastore", uri], capsys)
    (base,) = _dirs(location)
    assert base.startswith("base_0000003") and ("_v" in base) == hive4
    assert _ids(location, uri, capsys) == EXPECTED
    history = ok_json(["compactions", location, "--metastore", uri], capsys)
    assert [(c["kind"], c["state"]) for c in history["compactions"]] == [
        ("minor", "succeeded")] * 2 + [("major", "succeeded")] * 2


def test_hive_4_shows_the_compactions_in_its_queue(
        hms4: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location, name = _table(tmp_path, hms4.uri, capsys)
    ok_json(["compact", location, "--partition", "dt=2024-01-01", "--metastore", hms4.uri],
            capsys)
    db, table = name.split(".")
    with hms.connect(hms4.uri) as conn:
        (entry,) = compact_api.show(conn, db, table)
    assert (entry.partition, entry.kind, entry.state) == ("dt=2024-01-01", "major",
                                                          "ready for cleaning")
    assert entry.pool == f"ingest-{entry.txn_id}"
    assert entry.next_txn_id is not None and entry.next_txn_id >= (entry.txn_id or 0)
    (base,) = [d for d in _dirs(location) if d.startswith("base_")]
    assert base == f"base_0000003_v{entry.txn_id:07d}"


def test_the_cleaner_keeps_what_an_older_open_transaction_may_read(
        metastore: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = metastore.uri
    location, _ = _table(tmp_path, uri, capsys)
    with hms.connect(uri) as conn:
        (older,) = hms.open_txns(conn, 1)  # e.g. a Hive or Trino query that listed the inputs
        ok_json(["compact", location, "--metastore", uri], capsys)
        before = _dirs(location)
        report = ok_json(["clean", location, "--retention", "0", "--metastore", uri], capsys)
        assert _dirs(location) == before
        kept = [k for p in report["partitions"] for k in p["kept"]]
        assert len(kept) == 6 and all(str(older) in k["reason"] for k in kept), kept
        assert _ids(location, uri, capsys) == EXPECTED
        hms.abort_txn(conn, older)
    ok_json(["clean", location, "--retention", "0", "--metastore", uri], capsys)
    assert [d[:12] for d in _dirs(location)] == ["base_0000003"]
    assert _ids(location, uri, capsys) == EXPECTED


def test_a_visibility_suffix_of_an_open_transaction_is_not_read(
        hms4: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location, name = _table(tmp_path, hms4.uri, capsys)
    ok_json(["compact", location, "--metastore", hms4.uri], capsys)
    part = Path(location) / "dt=2024-01-01"
    (base,) = [d for d in part.iterdir() if d.name.startswith("base_")]
    src = tmp_path / "more.jsonl"
    src.write_text(json.dumps({"id": 9, "v": "v9", "dt": "2024-01-01"}) + "\n")
    ok_json(["load", location, "--input", str(src), "--metastore", hms4.uri], capsys)
    with hms.connect(hms4.uri) as conn:
        (open_txn,) = hms.open_txns(conn, 1)
        # A write id and a write lock record the transaction's components, so Hive keeps its
        # aborted record (its housekeeper purges an aborted transaction that has none within
        # seconds, after which the id reads as committed).
        hms.allocate_write_ids(conn, name, [open_txn])
        hms.lock(conn, open_txn, hms.get_table(conn, name), lock_type="SHARED_WRITE",
                 operation="UPDATE", timeout_s=30)
        # A compactor's output renamed into place before its transaction commits: were it
        # read, base_4 would hide delta 4 (row 9).
        shutil.copytree(base, part / f"base_0000004_v{open_txn:07d}")
        assert _ids(location, hms4.uri, capsys) == sorted([*EXPECTED, 9])
        hms.abort_txn(conn, open_txn)
    assert _ids(location, hms4.uri, capsys) == sorted([*EXPECTED, 9])
    report = ok_json(["clean", location, "--retention", "0", "--metastore", hms4.uri], capsys)
    removed = [r["name"] for p in report["partitions"] for r in p["removed"]]
    assert f"base_0000004_v{open_txn:07d}" in removed


def test_a_second_compactor_of_a_partition_is_refused(
        metastore: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location, name = _table(tmp_path, metastore.uri, capsys)
    with Metastore.open(metastore.uri) as store:
        cid, txn = store.begin_compaction(name, "dt=2024-01-01", "major", agent="x:1:test",
                                          stale_after_s=60)
        code, _, err = run_cli(["compact", location, "--partition", "dt=2024-01-01",
                                "--metastore", metastore.uri], capsys)
        assert code == 3 and "is still working on it" in err, err
        store.fail_compaction(cid, txn, "test: given up")
    ok_json(["compact", location, "--partition", "dt=2024-01-01", "--metastore",
             metastore.uri], capsys)
    history = ok_json(["compactions", location, "--metastore", metastore.uri], capsys)
    assert [c["state"] for c in history["compactions"]] == ["failed", "ready for cleaning"]


def test_compacting_a_table_that_is_not_transactional_is_refused(
        hms4: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = create_plain_orc_table(hms4.uri, tmp_path)
    (tmp_path / "ext" / "p").mkdir(parents=True, exist_ok=True)
    code, out, err = run_cli(["compact", str(tmp_path / "ext" / "p"), "--metastore",
                              hms4.uri], capsys)
    assert code == 3 and out == "", err
    assert "transactional" in err, err
    with Metastore.open(hms4.uri) as store, pytest.raises(UnsupportedFormatError):
        store.begin_compaction(f"{db}.plain", "", "major", agent="a", stale_after_s=60)


@pytest.mark.trino
@pytest.mark.slow
def test_trino_reads_exactly_the_committed_rows_after_compaction_and_cleaning(
        hms4: Server, trino_on_hms4: Server, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    location, name = _table(tmp_path, hms4.uri, capsys)

    def trino_ids() -> list[int]:
        return [int(r[0]) for r in trino_query(trino_on_hms4,
                                               f"SELECT id FROM {name} ORDER BY id")]

    assert trino_ids() == EXPECTED
    ok_json(["compact", location, "--minor", "--metastore", hms4.uri], capsys)
    assert trino_ids() == EXPECTED
    ok_json(["clean", location, "--retention", "0", "--metastore", hms4.uri], capsys)
    assert trino_ids() == EXPECTED
    ok_json(["delete", location, "--where", "id = 0", "--metastore", hms4.uri], capsys)
    ok_json(["compact", location, "--metastore", hms4.uri], capsys)
    assert trino_ids() == [3, 3, 4, 4]
    ok_json(["clean", location, "--retention", "0", "--metastore", hms4.uri], capsys)
    assert trino_ids() == [3, 3, 4, 4] == _ids(location, hms4.uri, capsys)


def _killed_compactor(location: str, uri: str, point: str) -> subprocess.CompletedProcess[str]:
    """`ingest compact --minor` in a process of its own, SIGKILLed at crash point `point`.

    The dead process's reader lease (a read transaction) stays open until the metastore's
    `hive.txn.timeout` aborts it, and the cleaner rightly waits for it; it is aborted here as
    that timeout would, so the test need not wait. Its compactor transaction T is left to
    the retry's takeover."""
    with hms.connect(uri) as conn:
        before = set(hms.txn_snapshot(conn).open_txns)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "INGEST_CRASH_AT": point}
    done = subprocess.run([sys.executable, "-m", "ingest", "compact", location, "--minor",
                           "--metastore", uri], env=env, capture_output=True, text=True,
                          timeout=240, check=False)
    with Metastore.open(uri) as store:
        compactors = {c.txn_id for c in store.compactions(location)}
    with hms.connect(uri) as conn:
        for txn in set(hms.txn_snapshot(conn).open_txns) - before - compactors:
            hms.abort_txn(conn, txn)
    return done


def _visible_outputs(location: str) -> list[str]:
    return [d for d in _dirs(location) if "_v" in d]


@pytest.mark.trino
@pytest.mark.slow
@pytest.mark.crash
def test_a_killed_compactors_outputs_go_before_the_retry_writes_so_trino_reads_no_duplicate(
        hms4: Server, trino_on_hms4: Server, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The compactor is SIGKILLed after renaming `delta_1_3_vT1` and `delete_delta_1_3_vT1`
    into place, before T1 commits. Trino reads a `_vT` directory as soon as it exists, so it
    reads that output alone (the same rows). The retry takes the partition over (T1
    aborted) and, before writing `..._vT2` of the same range, removes T1's output: were both
    there, Trino would read every row of the range twice."""
    uri = hms4.uri
    location, name = _table(tmp_path, uri, capsys)

    def trino_ids() -> list[int]:
        return [int(r[0]) for r in trino_query(trino_on_hms4,
                                               f"SELECT id FROM {name} ORDER BY id")]

    killed = _killed_compactor(location, uri, "compact.after_rename")
    assert killed.returncode == -9, killed.stderr[-3000:]
    dead = _visible_outputs(location)
    assert [d.split("_v")[0] for d in dead] == ["delete_delta_0000001_0000003",
                                                "delta_0000001_0000003"], dead
    assert _ids(location, uri, capsys) == EXPECTED
    assert trino_ids() == EXPECTED

    ok_json(["compact", location, "--minor", "--metastore", uri], capsys)
    retried = _visible_outputs(location)
    assert [d.split("_v")[0] for d in retried] == [d.split("_v")[0] for d in dead]
    assert not set(retried) & set(dead), "T1's output is gone, T2's in its place"
    assert trino_ids() == EXPECTED == _ids(location, uri, capsys)
    history = ok_json(["compactions", location, "--metastore", uri], capsys)
    first = [c for c in history["compactions"] if c["partition"] == "dt=2024-01-01"]
    assert [c["state"] for c in first] == ["failed", "ready for cleaning"], first
    ok_json(["clean", location, "--retention", "0", "--metastore", uri], capsys)
    assert _visible_outputs(location) == retried
    assert trino_ids() == EXPECTED == _ids(location, uri, capsys)


@pytest.mark.spark
@pytest.mark.slow
def test_the_spark_compaction_job_names_its_outputs_as_the_metastore_needs(
        spark: object, metastore: Server, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`jobs/compact.py` (`compact_on_executors`): on Hive 4 its outputs are `_vT` after the
    compactor's HMS transaction (visible once T commits), on 3.1 Hive 3's names; on Hive 4 a
    killed compactor's `_vT` output is removed before the job writes its own."""
    from ingest.spark import compact_on_executors
    from ingest.table import open_table_root

    uri = metastore.uri
    location, name = _table(tmp_path, uri, capsys)
    hive4 = hms.connect(uri).info.major >= 4
    dead: list[str] = []
    if hive4:
        killed = _killed_compactor(location, uri, "compact.after_rename")
        assert killed.returncode == -9, killed.stderr[-3000:]
        dead = _visible_outputs(location)
        assert len(dead) == 2, dead
    done = compact_on_executors(spark, open_table_root(location, uri),
                                kind="minor")
    assert not done.failures, done.failures
    assert _ids(location, uri, capsys) == EXPECTED
    outputs = [d for d in _dirs(location) if "_0000001_0000003" in d]
    assert [d.split("_v")[0] for d in outputs] == ["delete_delta_0000001_0000003",
                                                   "delta_0000001_0000003"], outputs
    if hive4:
        with Metastore.open(uri) as store:
            txns = {c.txn_id for c in store.compactions(name) if c.state == "ready for cleaning"}
        assert {int(d.split("_v")[1]) for d in outputs} <= txns and not set(outputs) & set(dead)
    else:
        assert all("_v" not in d for d in outputs), outputs
    # Hive 4 queues no second compaction at the same high-water mark before cleaning.
    ok_json(["clean", location, "--retention", "0", "--metastore", uri], capsys)
    done = compact_on_executors(spark, open_table_root(location, uri),
                                kind="major")
    assert not done.failures, done.failures
    (base,) = [d for d in _dirs(location) if d.startswith("base_")]
    assert base.startswith("base_0000003") and ("_v" in base) == hive4
    assert _ids(location, uri, capsys) == EXPECTED
