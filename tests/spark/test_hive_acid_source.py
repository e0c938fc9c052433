"""Two chained streams: Kafka -> table A (the streaming job) -> table B (the hive-acid source and
the ACID sink). The second stream is SIGKILLed between writing a micro-batch and committing it,
then restarted from its checkpoint: table B ends equal to table A, every row once.

Both streams run as subprocesses (jobs/kafka_to_acid.py and tests/spark/acid_chain_job.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ingest.acid.read.reader import read_table
from ingest.kafka.produce import produce_events, sample_events
from ingest.spark.source._stream import readable_end
from ingest.table import open_table
from ingest.table.write import delete
from ingest.txn import Metastore, default_metastore_url

ROOT = Path(__file__).resolve().parents[2]
KAFKA_JOB = ROOT / "jobs" / "kafka_to_acid.py"
CHAIN_JOB = Path(__file__).resolve().parent / "acid_chain_job.py"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_CRASH")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def committed_rows(location: str) -> list[tuple[object, ...]]:
    with Metastore.open(default_metastore_url(location), read_only=True) as store:
        snapshot = store.snapshot(location)
    table = read_table(location, snapshot, ["id", "value", "ts", "dt"])
    return sorted(tuple(r.values()) for r in table.to_pylist())


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.crash
def test_chained_stream_killed_and_restarted_copies_table_a_exactly_once(
        kafka_broker: str, topic: str, warehouse: Path) -> None:
    table_a, table_b = str(warehouse / "a"), str(warehouse / "b")
    produce_events(kafka_broker, topic, events=sample_events(150), partitions=2,
                   key_fn=lambda e: str(e["id"]))  # type: ignore[index]
    first = subprocess.run(
        [sys.executable, str(KAFKA_JOB), "--bootstrap-servers", kafka_broker, "--topic", topic,
         "--table", table_a, "--schema", "id BIGINT, value STRING, ts TIMESTAMP",
         "--checkpoint", str(warehouse / "ck_a"), "--available-now", "--partition-by", "dt",
         "--max-offsets-per-trigger", "60"],
        env=_env(), capture_output=True, text=True, timeout=240, check=False)
    assert first.returncode == 0, first.stderr[-3000:]
    # A delete committed before the second stream reads: its rows must never reach table B.
    assert delete(open_table(table_a), "id < 10").rows_deleted == 10
    rows_a = committed_rows(table_a)
    assert len(rows_a) == 140

    chain = [sys.executable, str(CHAIN_JOB), table_a, table_b, str(warehouse / "ck_b")]
    counter = warehouse / "crash-hits"
    killed = subprocess.run(chain, env=_env(INGEST_CRASH_AT="sink.before_commit",
                                            INGEST_CRASH_SKIP="1",
                                            INGEST_CRASH_COUNTER=str(counter)),
                            capture_output=True, text=True, timeout=240, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    partial = committed_rows(table_b)
    assert 0 < len(partial) < len(rows_a)  # the first micro-batch committed, the second not

    restarted = subprocess.run(chain, env=_env(), capture_output=True, text=True, timeout=240,
                               check=False)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    rows_b = committed_rows(table_b)
    assert rows_b == rows_a
    assert max(Counter(r[0] for r in rows_b).values()) == 1
    with Metastore.open(default_metastore_url(table_b), read_only=True) as store:
        states = Counter(store.write_id_states(table_b).values())
    assert states["aborted"] >= 1 and states["open"] == 0


def test_batches_end_below_the_lowest_open_write_id() -> None:
    from ingest.acid import ValidWriteIdList

    assert readable_end(ValidWriteIdList("default.a", 9, (5, 8), (3, 6))) == 4
    assert readable_end(ValidWriteIdList("default.a", 9, (), (3,))) == 9
    assert readable_end(ValidWriteIdList("default.a", 0)) == 0
