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

from ingest.acid import read_bucket_file, read_table
from ingest.acid.names import is_side_file, parse_bucket_file
from ingest.spark.produce import produce_events, sample_events
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
        skip: int = 0) -> subprocess.CompletedProcess[str]:
    return run([str(JOB), "--bootstrap-servers", servers, "--topic", topic,
                "--table", str(warehouse / "events"), "--schema", "id BIGINT, value STRING",
                "--checkpoint", str(warehouse / "checkpoint"), "--available-now",
                "--max-offsets-per-trigger", "50", "--txns-per-delta", "3",
                "--flush-rows", "20"], crash_at=crash_at, skip=skip,
               counter=str(warehouse / "crash-counter"))


def recover(table: Path) -> dict:
    done = run(["-m", "ingest", "recover", str(table), "--txn-timeout-s", "0", "--json"])
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


# Skips put the crash in the second micro-batch of a K=3 run: the bucket files then already
# hold a committed batch below their last flush length when the writer dies.
@pytest.mark.parametrize(("point", "skip"), [
    ("writer.after_stripes", 4), ("writer.after_footer", 4), ("writer.after_side_file", 4),
    ("metastore.during_commit", 1)])
def test_crash_recover_restart_is_exactly_once(
        kafka_broker: str, topic: str, warehouse: Path, point: str, skip: int) -> None:
    from compat import javatools as jt

    require(*jt.available())
    produce_events(kafka_broker, topic, events=sample_events(RECORDS), partitions=2,
                   key_fn=lambda e: str(e["id"]))  # type: ignore[index]
    table = warehouse / "events"

    crashed = job(kafka_broker, topic, warehouse, crash_at=point, skip=skip)
    assert crashed.returncode != 0, "the armed crash point must stop the job"
    hits = (warehouse / "crash-counter").stat().st_size
    # Two Python workers may pass the threshold at once; both die.
    assert hits > skip, f"only {hits} hits of {point}: the crash never fired"
    with Metastore.open(default_metastore_url(str(table))) as store:
        committed_before = [w for w, s in store.write_id_states(str(table)).items()
                            if s == "committed"]
    assert committed_before, "the crash came after a committed micro-batch"
    recover(table)

    restarted = job(kafka_broker, topic, warehouse)
    assert restarted.returncode == 0, restarted.stderr[-3000:]

    location = str(table)
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    ids = read_table(location, snapshot).column("id").to_pylist()
    assert sorted(ids) == list(range(RECORDS)), "every record exactly once"

    files = sorted(str(p) for p in table.rglob("bucket_*")
                   if parse_bucket_file(p.name) is not None and not is_side_file(p.name))
    assert files
    events = sum(read_bucket_file(f).num_rows for f in files)
    java = jt.orc_read_many([{"path": f, "rows": False} for f in files])
    assert sum(r["num_rows"] for r in java) == events >= RECORDS

    again = recover(table)
    assert again["nothing_to_do"], again
