"""--on-new-field evolve across a crash: the job is killed (SIGKILL) after it added the new
fields' columns but before the micro-batch committed; the restart neither adds a column twice
nor fails, and writes the micro-batch's rows, new fields included, exactly once.

The two crash points are links of one chain on one table and topic: the restart after the first
kill replays that micro-batch, then meets a second new field and dies at the second point.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.acid import read_table
from ingest.kafka.produce import produce_events
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.crash, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"


def job(servers: str, topic: str, warehouse: Path, crash_at: str | None = None, skip: int = 0,
        counter: str = "crash-counter") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_CRASH")}
    env["PYTHONPATH"] = str(ROOT)
    if crash_at:
        env.update(INGEST_CRASH_AT=crash_at, INGEST_CRASH_SKIP=str(skip),
                   INGEST_CRASH_COUNTER=str(warehouse / counter))
    return subprocess.run(
        [sys.executable, str(JOB), "--bootstrap-servers", servers, "--topic", topic,
         "--table", str(warehouse / "events"), "--schema", "id BIGINT, value STRING",
         "--checkpoint", str(warehouse / "checkpoint"), "--available-now",
         "--max-offsets-per-trigger", "20", "--compact", "off", "--clean", "off",
         "--on-new-field", "evolve", "--evolve-type", "tags=ARRAY<STRING>"],
        env=env, capture_output=True, text=True, timeout=300, check=False)


def expected_rows() -> list[dict[str, object]]:
    old = [{"id": i, "value": f"v{i}"} for i in range(30)]
    new = [{"id": i, "value": f"v{i}", "color": f"c{i % 3}", "n": i, "tags": [str(i)]}
           for i in range(30, 40)]
    newer = [{"id": i, "value": f"v{i}", "color": f"c{i % 3}", "n": i, "tags": [str(i)],
              "k": f"k{i}"} for i in range(40, 60)]
    return old + new + newer


def committed(location: str) -> tuple[list[str], list[int], list[bool]]:
    """The table's columns, its committed ids, and which committed transactions changed columns."""
    with Metastore.open(default_metastore_url(location)) as store:
        table = store.get_table(location)
        infos = store.transactions(location)
        snapshot = store.snapshot(location)
    ids = sorted(r["id"] for r in read_table(location, snapshot).to_pylist())
    return (table.row_schema.names, ids,
            [i.is_schema_change for i in infos if i.state == "committed"])


def added_columns(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "added columns" in line]


def test_a_crash_after_adding_columns_restarts_into_the_same_rows(
        kafka_broker: str, topic: str, warehouse: Path) -> None:
    produce_events(kafka_broker, topic, events=expected_rows(), partitions=1)
    location = str(warehouse / "events")

    # Batch 0 (ids 0..19) has no new field and commits; batch 1 adds color, n and tags,
    # then the job dies right after the columns changed.
    crashed = job(kafka_broker, topic, warehouse, crash_at="sink.after_evolve")
    assert crashed.returncode != 0, crashed.stderr[-3000:]
    names, ids, changes = committed(location)
    assert names == ["id", "value", "color", "n", "tags"]
    assert ids == list(range(20))
    # One micro-batch committed, and the column change (a transaction of its own, §25).
    assert changes == [False, True]

    # The restart replays batch 1 (its columns in place: before_commit passes once there),
    # then batch 2 (ids 40..59) adds k and the job dies in the round that wrote the
    # micro-batch again, before its commit.
    crashed = job(kafka_broker, topic, warehouse, crash_at="sink.before_commit", skip=1,
                  counter="crash-counter-2")
    assert crashed.returncode != 0, crashed.stderr[-3000:]
    added = added_columns(crashed.stderr)
    assert added and all("`k`" in a and "`color`" not in a for a in added), added
    names, ids, changes = committed(location)
    assert names == ["id", "value", "color", "n", "tags", "k"]
    assert ids == list(range(40))
    assert changes == [False, True, False, True]

    restarted = job(kafka_broker, topic, warehouse)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert not added_columns(restarted.stderr)  # the replay finds them in place
    with Metastore.open(default_metastore_url(location)) as store:
        table = store.get_table(location)
        snapshot = store.snapshot(location)
    assert [(f.name, str(f.type)) for f in table.row_schema] == [
        ("id", "int64"), ("value", "string"), ("color", "string"), ("n", "int64"),
        ("tags", "list<item: string>"), ("k", "string")]
    rows = sorted(read_table(location, snapshot).to_pylist(), key=lambda r: r["id"])
    wanted = [{"color": None, "n": None, "tags": None, "k": None, **r} for r in expected_rows()]
    assert rows == wanted  # every record exactly once, new fields in their columns
