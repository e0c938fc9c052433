"""Every crash point, end to end: the streaming job is killed there, `ingest recover` runs, the
job restarts from its checkpoint, and every record produced to Kafka is in the snapshot exactly
once; every bucket file opens in pyarrow and Apache ORC Java; a second recover has nothing to do.

Writer crash points fire in Spark's Python workers (an executor dying mid-write); the metastore
point kills the driver inside its commit. The job appends K=3 micro-batches per delta, so torn
appends and open side files are exercised. (`sink.before_commit` is covered with K=1 and K=3 in
tests/spark/test_stream_kill.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require
from support import assert_each_offset_once

from ingest.acid import read_bucket_file, read_table
from ingest.acid.format.names import is_side_file, parse_bucket_file
from ingest.kafka.produce import produce_events, sample_events
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.crash, pytest.mark.slow,
              pytest.mark.java]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"
RECORDS = 120


def run(args: list[str], *, crash_at: str | None = None, skip: int = 0, counter: str = "",
        timeout: int = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_CRASH")}
    env["PYTHONPATH"] = str(ROOT)
    if crash_at:
        env.update(INGEST_CRASH_AT=crash_at, INGEST_CRASH_SKIP=str(skip),
                   INGEST_CRASH_COUNTER=counter)
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def job(servers: str, topic: str, warehouse: Path, crash_at: str | None = None,
        skip: int = 0, one_task_records: int | None = None) -> subprocess.CompletedProcess[str]:
    return run([str(JOB), "--bootstrap-servers", servers, "--topic", topic,
                "--table", str(warehouse / "events"), "--schema", "id BIGINT, value STRING",
                "--checkpoint", str(warehouse / "checkpoint"), "--available-now",
                "--max-offsets-per-trigger", "50", "--txns-per-delta", "3",
                "--flush-rows", "20", "--on-new-field", "ignore",  # ts, dt dropped
                *([] if one_task_records is None
                  else ["--one-task-records", str(one_task_records)])],
               crash_at=crash_at, skip=skip,
               counter=str(warehouse / "crash-counter"))


def recover(table: Path) -> dict:
    done = run(["-m", "ingest", "recover", str(table), "--txn-timeout-s", "0", "--json"])
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


# Skips put the crash in the second micro-batch of a K=3 run: the bucket files then already
# hold a committed batch below their last flush length when the writer dies. These
# micro-batches are small enough for one task to read and write; two of the points run with
# --one-task-records 0, so the shuffled path (stripe pieces written after the shuffle) dies
# there too. The points are links of one chain on one table and topic: after each crash and
# `ingest recover`, the job restarts armed with the next point (so each restart is also the
# recovery of the crash before it), and a clean run ends the chain.
CHAIN = [("writer.after_stripes", 4, 0), ("writer.after_footer", 4, None),
         ("writer.after_side_file", 4, 0), ("metastore.during_commit", 1, None)]


def exactly_once_so_far(location: str, produced: int) -> tuple[int, dict[int, str]]:
    """The committed rows are the records of the committed offset ranges, each once, the
    ranges contiguous from offset 0 in each partition: their number, and the write ids."""
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
        ranges = store.offset_ranges(location)
        states = store.write_id_states(location)
    ids = read_table(location, snapshot).column("id").to_pylist()
    assert_each_offset_once(ids, ranges, produced)
    return len(ids), states


def test_crash_recover_restart_is_exactly_once(
        kafka_broker: str, topic: str, warehouse: Path) -> None:
    from compat import javatools as jt

    require(*jt.available())
    table = warehouse / "events"
    location = str(table)
    produced, rows, seen = 0, 0, set()
    for point, skip, one_task_records in CHAIN:
        # RECORDS uncommitted ones before each armed run, as on a fresh table.
        more = RECORDS - (produced - rows)
        if more > 0:
            produce_events(kafka_broker, topic, events=sample_events(more, start_id=produced),
                           partitions=2, key_fn=lambda e: str(e["id"]))  # type: ignore[index]
            produced += more
        (warehouse / "crash-counter").unlink(missing_ok=True)
        crashed = job(kafka_broker, topic, warehouse, crash_at=point, skip=skip,
                      one_task_records=one_task_records)
        assert crashed.returncode != 0, f"the armed crash point {point} must stop the job"
        hits = (warehouse / "crash-counter").stat().st_size
        # Two Python workers may pass the threshold at once; both die.
        assert hits > skip, f"only {hits} hits of {point}: the crash never fired"
        # The run recovered the crash before it, lost nothing and committed more.
        now, states = exactly_once_so_far(location, produced)
        new = {w: s for w, s in states.items() if w not in seen}
        seen |= set(states)
        assert any(s == "committed" for s in new.values()), (
            f"{point}: the crash came after a committed micro-batch of this run")
        assert now > rows, f"{point}: the restarted job committed nothing"
        rows = now
        report = recover(table)
        # Nothing the earlier crashes left was still open: the restart took care of it.
        assert {t["write_id"] for t in report["aborted_transactions"]} <= set(new), report

    restarted = job(kafka_broker, topic, warehouse)
    assert restarted.returncode == 0, restarted.stderr[-3000:]

    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    ids = read_table(location, snapshot).column("id").to_pylist()
    assert sorted(ids) == list(range(produced)), "every record exactly once"
    assert exactly_once_so_far(location, produced)[0] == produced

    files = sorted(str(p) for p in table.rglob("bucket_*")
                   if parse_bucket_file(p.name) is not None and not is_side_file(p.name))
    assert files
    events = sum(read_bucket_file(f).num_rows for f in files)
    java = jt.orc_read_many([{"path": f, "rows": False} for f in files])
    assert sum(r["num_rows"] for r in java) == events >= produced

    again = recover(table)
    assert again["nothing_to_do"], again


def files_under(directories: list[Path]) -> dict[str, bytes]:
    """Every file below `directories`, by path, with its bytes."""
    return {str(f): f.read_bytes() for d in directories for f in sorted(d.rglob("*"))
            if f.is_file()}


def test_restart_repair_removes_only_the_dead_attempts_files(
        kafka_broker: str, topic: str, warehouse: Path) -> None:
    """The sink dies before committing its second micro-batch (K=1, partitioned, with dead
    letters) while `ingest load` has its own write open on the same table. The restarted
    sink removes the dead attempt's directories in both tables; the other writer's
    uncommitted directory and the committed directories stay byte for byte, and the other
    writer commits afterwards."""
    import pyarrow as pa

    from ingest.acid import read_table as read_acid
    from ingest.table.core._definition import table_compression
    from ingest.table.core._open import table_fs
    from ingest.table.core._written import commit, writing

    events = [b"not json" if i % 10 == 5 else e for i, e in enumerate(sample_events(150))]
    produce_events(kafka_broker, topic, events=events, partitions=2)
    table, dead_letters = warehouse / "events", warehouse / "events__dead_letter"
    args = [str(JOB), "--bootstrap-servers", kafka_broker, "--topic", topic,
            "--table", str(table), "--schema", "id BIGINT, value STRING, ts TIMESTAMP",
            "--partition-by", "dt", "--checkpoint", str(warehouse / "checkpoint"),
            "--available-now", "--max-offsets-per-trigger", "60"]

    crashed = run(args, crash_at="sink.before_commit", skip=1,
                  counter=str(warehouse / "crash-counter"))
    assert crashed.returncode != 0, "the armed crash point must stop the job"
    url = default_metastore_url(str(table))
    with Metastore.open(url) as store:
        states = store.write_id_states(str(table))
        assert states == {1: "committed", 2: "open"}, states
    dead_dirs = sorted(table.glob("dt=*/delta_0000002_0000002_0000")) + sorted(
        dead_letters.glob("delta_0000002_0000002_0000"))
    assert len(dead_dirs) >= 2 and dead_dirs[-1].parent == dead_letters, dead_dirs
    committed_dirs = sorted(table.glob("dt=*/delta_0000001_0000001_0000")) + sorted(
        dead_letters.glob("delta_0000001_0000001_0000"))
    assert len(committed_dirs) >= 2 and committed_dirs[-1].parent == dead_letters

    # Another writer: `ingest load`'s write, open on the same table with its own write id,
    # its directory beside the dead attempt's.
    store = Metastore.open(url)
    try:
        defn = store.get_table(str(table))
        with writing(store, defn, table_fs(defn)[0], agent="host:1:ingest-load") as (txn, w):
            partition = dead_dirs[0].parent
            directory = f"{partition}/delta_{txn.write_id:07d}_{txn.write_id:07d}_0000"
            w.make_directory(str(partition), directory)
            rows = pa.table({"id": [1000, 1001], "value": ["l0", "l1"],
                             "ts": pa.array([0, 0], defn.row_schema.field("ts").type)},
                            schema=defn.row_schema)
            w.write_bucket(directory, 0, rows, row_schema=defn.row_schema,
                           write_id=txn.write_id, compression=table_compression(defn))
        others = [Path(directory)]
        kept = files_under(committed_dirs + others)

        # Maintenance off: only the sink's restart repair may remove anything.
        restarted = run([*args, "--compact", "off", "--clean", "off"])
        assert restarted.returncode == 0, restarted.stderr[-3000:]
        assert not [d for d in dead_dirs if d.exists()], "the dead attempt's directories go"
        assert "Aborted write ids [2] of default.events left open" in restarted.stderr
        assert files_under(committed_dirs + others) == kept, "committed and other writes stay"
        assert store.write_id_states(str(table))[txn.write_id] == "open"
        commit(store, txn, w)
        snapshot = store.snapshot(str(table))
        dl_snapshot = store.snapshot(str(dead_letters))
    finally:
        store.close()
    ids = read_acid(str(table), snapshot).column("id").to_pylist()
    assert sorted(ids) == sorted([i for i in range(150) if i % 10 != 5] + [1000, 1001])
    bad = read_acid(str(dead_letters), dl_snapshot).column("value").to_pylist()
    assert bad == [b"not json"] * 15, "every dead letter exactly once"
