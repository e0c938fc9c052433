"""kill -9 between writing a micro-batch's files and committing it, then restart: exactly once.

The job runs as `python jobs/kafka_to_acid.py` in a subprocess with INGEST_CRASH_AT naming the
crash point (ingest.faults), with one micro-batch per delta and then three (--txns-per-delta);
the last restart runs without it from the same checkpoint.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.acid.read.reader import read_table
from ingest.kafka.produce import produce_events, sample_events
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.crash, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"


def run_job(servers: str, topic: str, warehouse: Path, *extra: str,
            crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "INGEST_CRASH_AT"}
    if crash_at:
        env["INGEST_CRASH_AT"] = crash_at
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, str(JOB), "--bootstrap-servers", servers, "--topic", topic,
         "--table", str(warehouse / "events"), "--schema", "id BIGINT, value STRING, ts TIMESTAMP",
         "--checkpoint", str(warehouse / "checkpoint"), "--available-now",
         "--partition-by", "dt", "--max-offsets-per-trigger", "60", *extra],
        env=env, capture_output=True, text=True, timeout=180, check=False)


def committed_ids(location: str) -> list[int]:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    table = read_table(location, snapshot)
    return sorted(table.column("id").to_pylist()) if "id" in table.schema.names else []


# K=1, then K=3 (the restart armed again, so it is also the recovery of the K=1 crash), then
# one clean run: three job runs instead of four, each kill's checks made right after it.
CHAIN = [1, 3]


def test_sigkill_before_commit_then_restart_is_exactly_once(
        kafka_broker: str, topic: str, warehouse: Path) -> None:
    produce_events(kafka_broker, topic, events=sample_events(150), partitions=2,
                   key_fn=lambda e: str(e["id"]))  # type: ignore[index]
    location = str(warehouse / "events")
    left_open: set[int] = set()

    for txns_per_delta in CHAIN:
        extra = ("--txns-per-delta", str(txns_per_delta))
        crashed = run_job(kafka_broker, topic, warehouse, *extra, crash_at="sink.before_commit")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
        # The batch's files are in place, its transaction is open: readers see none of it.
        assert list(Path(location).rglob("bucket_*"))
        with Metastore.open(default_metastore_url(location)) as store:
            states = store.write_id_states(location)
        new_open = {w for w, s in states.items() if s == "open" and w not in left_open}
        assert new_open, f"K={txns_per_delta}: the killed batch left no open transaction"
        # The restart gave up what the kill before it left open; nothing is committed.
        assert {s for w, s in states.items() if w not in new_open} <= {"aborted"}, states
        assert committed_ids(location) == []
        left_open |= new_open

    restarted = run_job(kafka_broker, topic, warehouse, "--txns-per-delta", str(CHAIN[-1]))
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert "batch 0: write id" in restarted.stderr
    assert committed_ids(location) == list(range(150))
    with Metastore.open(default_metastore_url(location)) as store:
        states = store.write_id_states(location)
    assert "open" not in states.values()
    assert all(states[w] == "aborted" for w in left_open), states  # every killed batch's
