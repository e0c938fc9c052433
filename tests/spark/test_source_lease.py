"""A Spark read of a Hive ACID table holds a reader lease until it ends, so a cleaner with
retention 0 keeps its inputs (docs/invariants.md, 7).

The query is made slow deterministically: six partitions give six tasks on local[2], and a
Python UDF holds the first two until a flag file exists. While they wait, a major compaction
commits and `ingest clean --retention 0` runs in another process; the four tasks that start
afterwards read the compacted-away deltas, which the lease kept.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from ingest.spark import register
from ingest.spark.source._lease import renewing
from ingest.spark.source._plan import Lease
from ingest.table import open_table
from ingest.table.maintain import compact
from ingest.table.write import create_table, load
from ingest.txn import Metastore, default_metastore_url

PARTITIONS = 6
ROWS = 50


def partitioned(location: str) -> list[int]:
    """Two loads into each of six partitions: twelve deltas; returns every id."""
    create_table(location, "id BIGINT, value STRING", partitioned_by=["dt"])
    for k in range(2 * PARTITIONS):
        ids = range(k * ROWS, (k + 1) * ROWS)
        load(open_table(location), pa.table({"id": pa.array(list(ids), pa.int64()),
                                             "value": [f"v{i}" for i in ids],
                                             "dt": [f"d{k % PARTITIONS}"] * ROWS}))
    return list(range(2 * PARTITIONS * ROWS))


def live_readers(location: str) -> list[Any]:
    with Metastore.open(default_metastore_url(location), read_only=True) as store:
        return store.live_readers(location, timeout_s=300)


def deltas(location: str) -> list[str]:
    return sorted(p.name for p in Path(location).glob("dt=*/delta_*"))


def wait_for(check: Any, what: str, *, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")
def test_a_concurrent_clean_with_retention_0_keeps_a_running_querys_inputs(
        spark: Any, tmp_path: Path) -> None:
    from pyspark.sql.functions import col, udf
    from pyspark.sql.types import LongType

    register(spark, filter_pushdown=False)
    location = str(tmp_path / "events")
    expected = partitioned(location)
    before = deltas(location)
    assert len(before) == 2 * PARTITIONS
    started, flag = tmp_path / "started", tmp_path / "go"

    def held(i: int) -> int:
        started.touch()
        deadline = time.monotonic() + 300
        while not flag.exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the test never set the flag")
            time.sleep(0.02)
        return i

    df = (spark.read.format("hive-acid").option("maxPartitionBytes", "1")
          .option("minPartitions", str(PARTITIONS)).load(location))
    query = df.select(udf(held, LongType(), useArrow=False)(col("id")).alias("id"))
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["ids"] = sorted(r.id for r in query.collect())
        except BaseException as e:  # reported by the assertion below
            result["error"] = e

    reading = threading.Thread(target=run, daemon=True)
    reading.start()
    try:
        wait_for(started.exists, "a task of the query to start")
        (lease,) = live_readers(location)
        assert lease.agent.endswith(":ingest-spark-read")

        report = compact(open_table(location), kind="major")
        assert len(report.partitions) == PARTITIONS
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run(
            [sys.executable, "-m", "ingest", "clean", location, "--retention", "0", "--json"],
            env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        cleaned = json.loads(done.stdout)
        assert cleaned["live_readers"] == 1 and cleaned["directories"] == 0, cleaned
        kept = [k for p in cleaned["partitions"] for k in p["kept"]]
        assert all("registered readers" in k["reason"] for k in kept) and kept, kept
        assert deltas(location) == before
    finally:
        flag.touch()
        reading.join(timeout=300)
    assert "error" not in result, result.get("error")
    assert result["ids"] == expected

    # Nothing renews the lease once the query is over: it lapses after the time-out, and
    # the cleaner then removes the inputs.
    from ingest.table.maintain import clean

    def lapsed() -> bool:
        return clean(open_table(location), retention_s=0, txn_timeout_s=1).directories > 0

    wait_for(lapsed, "the finished query's lease to lapse", timeout_s=60)
    assert deltas(location) == []
    assert ingest_count(spark, location) == len(expected)


def ingest_count(spark: Any, location: str) -> int:
    return int(spark.read.format("hive-acid").load(location).count())


def test_a_task_renews_an_old_lease_and_a_lapsed_one_is_only_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    location = str(tmp_path / "t")
    create_table(location, "id BIGINT")
    url = default_metastore_url(location)
    with Metastore.open(url) as store, store.read_view(
            location, agent="test:1:ingest-spark-read", keep_lease=True) as view:
        lease_id = view.lease_id
    assert lease_id is not None
    (registered,) = live_readers(location)  # kept after the planning block
    # Planned longer ago than one heartbeat: renewed before the task reads anything.
    with renewing(Lease(url, lease_id, taken_at=0.0, heartbeat_s=30.0)):
        (renewed,) = live_readers(location)
    assert renewed.heartbeat_at > registered.heartbeat_at
    with Metastore.open(url) as store:
        store.end_reader(lease_id)
    assert live_readers(location) == []
    with caplog.at_level(logging.WARNING), renewing(Lease(url, lease_id, 0.0, 30.0)):
        pass
    assert f"the lease {lease_id} of this hive-acid read has lapsed" in caplog.text
