"""A stream evolving while readers read (docs/format.md §25): a real Spark job with
--on-new-field evolve adds a column in each of several micro-batches while this process reads
the table over and over; every read is consistent with its snapshot's schema version.

Each micro-batch b (10 records, ids 10b..10b+9) holds fields f1..fb; record i holds
fj = 100 i + j. So a read is consistent when: its row count is a whole number of
micro-batches, its columns are id, value, f1..fm with m at least the highest batch it holds
(a committed batch's column is never missing), every batch it streams has those same columns,
and every value sits in its own column (fj of record i is 100 i + j when batch i // 10 holds
fj, else null).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

import ingest
from ingest.errors import TableNotFoundError
from ingest.kafka.produce import produce_events
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"
BATCHES = 6
PER_BATCH = 10


def record(i: int) -> dict[str, object]:
    b = i // PER_BATCH
    return {"id": i, "value": f"v{i}", **{f"f{j}": 100 * i + j for j in range(1, b + 1)}}


def check_read(batches: list[pa.RecordBatch]) -> tuple[int, int]:
    """Assert one read is consistent; returns (its number of f columns, rows)."""
    names = batches[0].schema.names if batches else None
    assert all(b.schema.names == names for b in batches), [b.schema.names for b in batches]
    rows = [r for b in batches for r in b.to_pylist()]
    if names is None:
        return -1, 0
    m = len(names) - 2
    assert names == ["id", "value", *(f"f{j}" for j in range(1, m + 1))], names
    ids = sorted(r["id"] for r in rows)
    assert len(ids) % PER_BATCH == 0 and ids == list(range(len(ids))), ids
    if ids:
        assert m >= ids[-1] // PER_BATCH, (m, ids[-1])  # a committed batch's column is there
    for r in rows:
        b = r["id"] // PER_BATCH
        assert r["value"] == f"v{r['id']}"
        for j in range(1, m + 1):
            assert r[f"f{j}"] == (100 * r["id"] + j if j <= b else None), (r, j)
    return m, len(ids)


@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")
def test_reads_while_the_stream_adds_columns_are_each_consistent(
        kafka_broker: str, topic: str, warehouse: Path) -> None:
    produce_events(kafka_broker, topic, events=[record(i) for i in range(BATCHES * PER_BATCH)],
                   partitions=1)
    location = str(warehouse / "events")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_CRASH")}
    env["PYTHONPATH"] = str(ROOT)
    job = subprocess.Popen(
        [sys.executable, str(JOB), "--bootstrap-servers", kafka_broker, "--topic", topic,
         "--table", location, "--schema", "id BIGINT, value STRING",
         "--checkpoint", str(warehouse / "checkpoint"), "--available-now",
         "--max-offsets-per-trigger", str(PER_BATCH), "--compact", "off", "--clean", "off",
         "--on-new-field", "evolve"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + 600
    try:
        while job.poll() is None and time.monotonic() < deadline:
            try:
                table = ingest.open_table(location)
            except (TableNotFoundError, FileNotFoundError):
                time.sleep(0.2)  # the job has not created it yet
                continue
            seen.append(check_read(list(table.scan().to_batches())))
    finally:
        if job.poll() is None:
            job.kill()
        out, err = job.communicate(timeout=60)
    assert job.returncode == 0, err[-3000:]
    final = check_read(list(ingest.open_table(location).scan().to_batches()))
    assert final == (BATCHES - 1, BATCHES * PER_BATCH)
    with Metastore.open(default_metastore_url(location)) as store:
        assert store.get_table(location).schema_version == BATCHES - 1
        changes = [i for i in store.transactions(location) if i.is_schema_change]
        assert len(changes) == BATCHES - 1 and all(i.state == "committed" for i in changes)
    # The reads saw the table grow: several schema versions, and rows before the end.
    versions = {m for m, _ in seen if m >= 0}
    assert len(versions) >= 2, seen
    assert any(0 < rows < BATCHES * PER_BATCH for _, rows in seen), seen
