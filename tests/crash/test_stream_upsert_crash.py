"""The keyed stream (`--mode cdc --order-by v`, docs/format.md §24) killed with SIGKILL inside
a micro-batch's commit — an executor inside a bucket file's write, the driver inside the
metastore commit (the driver after the files are renamed into place, `sink.before_commit`, is
tests/spark/test_stream_upsert.py's kill test) — then restarted
from its checkpoint: the table ends equal to the dict model (each key's newest event; keys
moving between Kafka partitions, stale events, deletes and tombstones), every write id
committed or aborted, and each live row deleted at most once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from ingest.acid.read.reader import read_table
from ingest.kafka.produce import ensure_topic
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.crash, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"
SCHEMA = "id BIGINT, value STRING, v BIGINT"
KEYS = 16


def events() -> tuple[list[tuple[int, int, Any]], dict[int, dict[str, Any]]]:
    """(partition, id, Debezium envelope or None) records, and the rows they leave.

    Each key's versions rise in production order, its partition alternating; keys 0, 3, 6...
    also get a stale update (an older version after a newer one, in the other partition),
    keys 1, 5, 9... end deleted (a `d` with its version, or a tombstone) in the partition of
    their last update, and get no stale event: the table keeps no tombstone, so an older
    event consumed after a committed delete would insert the key again."""
    records: list[tuple[int, int, Any]] = []
    for step in range(3):
        for k in range(KEYS):
            row = {"id": k, "value": f"k{k}s{step}", "v": step + 1}
            records.append(((k + step) % 2, k, {"op": "c" if step == 0 else "u",
                                                "before": None, "after": row}))
            if step == 2 and k % 3 == 0 and k % 4 != 1:
                stale = {"id": k, "value": "stale", "v": 1}
                records.append(((k + 1) % 2, k, {"op": "u", "before": None, "after": stale}))
    for k in range(1, KEYS, 4):
        gone = {"op": "d", "before": {"id": k, "v": 4}, "after": None} if k % 8 == 1 else None
        records.append((k % 2, k, gone))
    model = {k: {"id": k, "value": f"k{k}s2", "v": 3} for k in range(KEYS) if k % 4 != 1}
    return records, model


def produce(servers: str, topic: str, records: list[tuple[int, int, Any]]) -> None:
    ensure_topic(servers, topic, partitions=2)
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": False})
    for partition, key, value in records:
        producer.produce(topic, key=json.dumps({"id": key}).encode(), partition=partition,
                         value=None if value is None else json.dumps(value).encode())
    assert producer.flush(30) == 0


def job(servers: str, topic: str, warehouse: Path, crash_at: str | None = None,
        skip: int = 0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_CRASH")}
    env["PYTHONPATH"] = str(ROOT)
    if crash_at:
        env.update(INGEST_CRASH_AT=crash_at, INGEST_CRASH_SKIP=str(skip),
                   INGEST_CRASH_COUNTER=str(warehouse / "crash-counter"))
    return subprocess.run(
        [sys.executable, str(JOB), "--bootstrap-servers", servers, "--topic", topic,
         "--table", str(warehouse / "t"), "--schema", SCHEMA, "--checkpoint",
         str(warehouse / "ck"), "--available-now", "--max-offsets-per-trigger", "16",
         "--mode", "cdc", "--key", "id", "--order-by", "v", "--buckets", "2",
         "--compact", "off", "--clean", "off"],
        env=env, capture_output=True, text=True, timeout=300, check=False)


def rows_by_key(location: str) -> dict[int, dict[str, Any]]:
    with Metastore.open(default_metastore_url(location)) as store:
        rows = read_table(location, store.snapshot(location)).to_pylist()
    by_key = {r["id"]: r for r in rows}
    assert len(by_key) == len(rows), sorted(r["id"] for r in rows)
    return by_key


# Skips put each crash in the second micro-batch of its run, over rows an earlier one
# committed. The points are links of one chain (57 records, four micro-batches of at most 16):
# the job killed in batch 1 at the first point restarts armed with the second, commits batch 1
# again and dies committing batch 2; a clean run ends it.
CHAIN = [("writer.after_stripes", 2), ("metastore.during_commit", 1)]


def test_a_keyed_stream_killed_at_each_commit_step_converges_to_the_model(
        kafka_broker: str, topic: str, warehouse: Path) -> None:
    records, model = events()
    produce(kafka_broker, topic, records)
    location = str(warehouse / "t")

    committed_before = 0
    for point, skip in CHAIN:
        (warehouse / "crash-counter").unlink(missing_ok=True)
        crashed = job(kafka_broker, topic, warehouse, crash_at=point, skip=skip)
        assert crashed.returncode != 0, f"the armed crash point {point} must stop the job"
        assert (warehouse / "crash-counter").stat().st_size > skip, f"{point} never fired"
        with Metastore.open(default_metastore_url(location)) as store:
            states = store.write_id_states(location)
        committed = list(states.values()).count("committed")
        assert committed > committed_before, (
            f"{point}: the crash came after a committed micro-batch of this run")
        committed_before = committed
        rows_by_key(location)  # one row per key so far: nothing inserted twice

    restarted = job(kafka_broker, topic, warehouse)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert rows_by_key(location) == model
    with Metastore.open(default_metastore_url(location)) as store:
        states = store.write_id_states(location)
        live = sum(f.rows for path, f in store.committed_files(location).items()
                   if not path.startswith("delete_delta_"))
        deleted = sum(f.rows for path, f in store.committed_files(location).items()
                      if path.startswith("delete_delta_"))
    assert set(states.values()) <= {"committed", "aborted"}, states
    assert live - deleted == len(model)  # no row deleted twice, none inserted twice
