"""The streaming job over a Hive Metastore (`--metastore thrift://`), with a real Kafka-protocol
broker and real Spark: every record exactly once across restarts, crash points and a killed
metastore; the stream and `ingest load` writing one table side by side (docs/invariants.md, 4).

The job runs as `python jobs/kafka_to_acid.py` in a subprocess (crash points kill it there);
the tables are created first with `ingest create --name <new db>.events`, so that Hive 4 keeps
them in their database's managed location.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from hms_server import HMS_SH, TXN_TIMEOUT_S, Server, _script_env

from ingest.acid import read_table
from ingest.spark.produce import produce_events, sample_events
from ingest.txn import Metastore

pytestmark = [pytest.mark.hms, pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"
SCHEMA = "id BIGINT, value STRING"


def _env(crash_at: str | None = None, skip: int = 0, counter: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_CRASH")}
    env["PYTHONPATH"] = str(ROOT)
    if crash_at:
        env.update(INGEST_CRASH_AT=crash_at, INGEST_CRASH_SKIP=str(skip),
                   INGEST_CRASH_COUNTER=counter)
    return env


def _cli(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "ingest", *args, "--json"], env=_env(),
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout) if done.stdout.strip() else {}


def _create(uri: str, warehouse: Path) -> tuple[str, str]:
    """`ingest create` of the stream's table in a new database; (location, db.table)."""
    location = str(warehouse / "events")
    name = f"s_{uuid.uuid4().hex[:10]}.events"
    _cli("create", location, "--name", name, "--schema", SCHEMA, "--metastore", uri)
    return location, name


def _job_args(servers: str, topic: str, warehouse: Path, uri: str, *extra: str) -> list[str]:
    return [sys.executable, str(JOB), "--bootstrap-servers", servers, "--topic", topic,
            "--table", str(warehouse / "events"), "--schema", SCHEMA,
            "--checkpoint", str(warehouse / "checkpoint"), "--metastore", uri,
            "--max-offsets-per-trigger", "50", "--compact", "off", "--clean", "off", *extra]


def _job(servers: str, topic: str, warehouse: Path, uri: str, *extra: str,
         crash_at: str | None = None, skip: int = 0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _job_args(servers, topic, warehouse, uri, "--available-now", *extra),
        env=_env(crash_at, skip, str(warehouse / "crash-counter")), capture_output=True,
        text=True, timeout=300, check=False)


def _ids(uri: str, location: str) -> list[int]:
    with Metastore.open(uri) as store:
        snapshot = store.snapshot(location)
    table = read_table(location, snapshot)
    return sorted(table.column("id").to_pylist())


def _produce(servers: str, topic: str, start: int, count: int) -> None:
    events = sample_events(count, start_id=start)
    produce_events(servers, topic, events=events, partitions=2,
                   key_fn=lambda e: str(e["id"]))  # type: ignore[index]


def test_every_record_exactly_once_across_a_restart(
        kafka_broker: str, topic: str, warehouse: Path, metastore: Server) -> None:
    uri = metastore.uri
    location, name = _create(uri, warehouse)
    _produce(kafka_broker, topic, 0, 120)
    first = _job(kafka_broker, topic, warehouse, uri)
    assert first.returncode == 0, first.stderr[-3000:]
    assert _ids(uri, location) == list(range(120))

    _produce(kafka_broker, topic, 120, 80)
    again = _job(kafka_broker, topic, warehouse, uri)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _ids(uri, location) == list(range(200)), "every record exactly once"

    sink = f"{name}@{(warehouse / 'checkpoint').as_uri()}"
    with Metastore.open(uri) as store:
        last = store.last_committed_batch(sink, table=name)
        ranges = store.offset_ranges(name)
        states = store.write_id_states(name)
    assert last is not None and last >= 4  # 200 records, 50 per micro-batch
    assert sorted(w for w, s in states.items() if s == "committed") == sorted(
        {w for w, _ in ranges})
    covered = sorted((r.partition, r.from_offset, r.until_offset) for _, r in ranges)
    for p in (0, 1):
        mine = [(a, b) for q, a, b in covered if q == p]
        assert mine[0][0] == 0 and all(x[1] == y[0] for x, y in zip(mine, mine[1:])), mine
    assert sum(b - a for _, a, b in covered) == 200, "offsets recorded once each"
