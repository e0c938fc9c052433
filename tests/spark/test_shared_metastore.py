"""Two streaming jobs in separate processes write two tables through one PostgreSQL metastore
(as jobs on different hosts would) while a third process reads both again and again: write
ids and transactions never collide, every read holds exactly whole committed micro-batches,
and each table ends with every record once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ingest.kafka.produce import produce_events, sample_events
from ingest.table import open_table
from ingest.txn import Metastore

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"
READER = Path(__file__).with_name("shared_reader.py")
RECORDS = 400


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_CRASH")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _job(servers: str, topic: str, table: str, checkpoint: Path, metastore: str,
         log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, str(JOB), "--bootstrap-servers", servers, "--topic", topic,
             "--table", table, "--schema", "id BIGINT, value STRING",
             "--checkpoint", str(checkpoint), "--available-now", "--metastore", metastore,
             "--max-offsets-per-trigger", "60", "--compact", "off", "--master", "local[1]",
             "--on-new-field", "ignore"],  # sample events' ts and dt are dropped
            env=_env(), stdout=out, stderr=subprocess.STDOUT)


def run_two_jobs_and_a_reader(kafka_broker: str, metastore: str, locations: list[str],
                              work: Path) -> None:
    topics = [f"shared-{i}-{time.monotonic_ns()}" for i in range(len(locations))]
    for i, topic in enumerate(topics):
        produce_events(kafka_broker, topic, events=sample_events(RECORDS, seed=i), partitions=2,
                       key_fn=lambda e: str(e["id"]))  # type: ignore[index]
    stop = work / "stop-reader"
    reads_file, reader_log = work / "reads.jsonl", work / "reader.log"
    # Files, not pipes: a full pipe would stall the reader while the jobs run.
    with reads_file.open("wb") as out, reader_log.open("wb") as err:
        reader = subprocess.Popen([sys.executable, str(READER), metastore, str(stop),
                                   *locations], env=_env(), stdout=out, stderr=err)
    jobs = [_job(kafka_broker, topic, location, work / f"checkpoint{i}", metastore,
                 work / f"job{i}.log")
            for i, (topic, location) in enumerate(zip(topics, locations, strict=True))]
    try:
        for i, job in enumerate(jobs):
            assert job.wait(timeout=300) == 0, (work / f"job{i}.log").read_text()[-4000:]
    finally:
        stop.touch()
        reader.wait(timeout=120)
    assert reader.returncode == 0, reader_log.read_text()[-4000:]

    reads = [json.loads(line) for line in reads_file.read_text().splitlines()]
    for location in locations:
        mine = [r for r in reads if r["table"] == location]
        assert len(mine) >= 3, f"the reader read {location} only {len(mine)} times"
        assert all(r["rows"] == r["expected"] for r in mine), [
            r for r in mine if r["rows"] != r["expected"]][:3]
        # Snapshots only move forward, and some read saw the stream half-way.
        rows = [r["rows"] for r in mine]
        assert rows == sorted(rows)
        assert any(0 < r < RECORDS for r in rows) or len(set(rows)) > 1, rows

    with Metastore.open(metastore, create=False, read_only=True) as store:
        txns = [store.write_id_states(location) for location in locations]
    for states in txns:
        assert set(states.values()) == {"committed"}
    for location in locations:
        ids = open_table(location, metastore=metastore).to_arrow(columns=["id"]).column("id")
        assert sorted(ids.to_pylist()) == list(range(RECORDS))


def test_two_jobs_and_a_reader_share_one_postgresql_metastore(
        kafka_broker: str, tmp_path: Path, pg_url: str) -> None:
    locations = [str(tmp_path / "wh" / "clicks"), str(tmp_path / "wh" / "orders")]
    run_two_jobs_and_a_reader(kafka_broker, pg_url, locations, tmp_path)
