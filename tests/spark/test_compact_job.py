"""compact_on_executors and jobs/compact.py in local mode: one Spark task per partition."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pytest
from support import visible

from ingest.acid import acid_state
from ingest.errors import ConfigError, CorruptFileError, TableNotFoundError
from ingest.spark.compact_job import compact_on_executors
from ingest.table import open_table, open_table_root
from ingest.table.write import create_table, load
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
DAYS = ["2026-11-21", "2026-11-22", "2026-11-23"]
DELTA_NUM = "compactorthreshold.hive.compactor.delta.num.threshold"


def make_table(tmp_path: Path, loads: int, properties: dict[str, str] | None = None) -> str:
    """`loads` transactions, each a delta in every partition but the last, which gets one."""
    location = str(tmp_path / "events")
    create_table(location, "id BIGINT, value STRING", partitioned_by=("dt",),
                 properties=properties or {})
    for i in range(loads):
        days = DAYS[:2] if i else DAYS
        ids = [i * 10 + k for k in range(len(days))]
        load(open_table(location),
             pa.table({"id": ids, "value": [f"v{x}" for x in ids], "dt": days}))
    return location


def chosen(location: str, day: str) -> Any:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    return acid_state(fsspec.filesystem("file"), f"{location}/dt={day}", snapshot)


def test_major_runs_one_task_per_partition_with_work_and_rows_stay(
        spark: Any, tmp_path: Path) -> None:
    location = make_table(tmp_path, 4)
    before = visible(location)
    done = compact_on_executors(spark, open_table_root(location), kind="major")
    assert not done.failures and not done.report.dry_run
    results = {p.partition: p.result for p in done.report.partitions}
    assert set(results) == {f"dt={d}" for d in DAYS}
    assert all(r is not None for r in results.values())
    assert [chosen(location, d).base.write_id for d in DAYS] == [4, 4, 4]
    assert visible(location) == before and len(before) == 9
    assert "compacted 3 of 3 partitions" in done.line()
    with Metastore.open(default_metastore_url(location)) as store:
        history = store.compactions(location)
    # Recorded as `ingest compact` records, each with its own committed transaction.
    assert sorted(c.partition for c in history) == [f"dt={d}" for d in DAYS]
    assert {(c.kind, c.state, c.txn_state) for c in history} == {
        ("major", "ready for cleaning", "committed")}


def test_auto_picks_partitions_over_the_threshold_and_dry_run_writes_nothing(
        spark: Any, tmp_path: Path) -> None:
    # The initiator's threshold, as a table property: more than 2 deltas (Hive's ">").
    location = make_table(tmp_path, 4, {DELTA_NUM: "2"})
    listing = sorted(p.name for p in (tmp_path / "events").rglob("*"))
    planned = compact_on_executors(spark, open_table_root(location), kind="auto", dry_run=True)
    assert planned.kinds == {"dt=2026-11-21": "major", "dt=2026-11-22": "major"}
    assert planned.report.dry_run
    assert sorted(p.name for p in (tmp_path / "events").rglob("*")) == listing
    done = compact_on_executors(spark, open_table_root(location), kind="auto")
    assert set(done.kinds) == {"dt=2026-11-21", "dt=2026-11-22"}
    assert chosen(location, "2026-11-23").base is None  # one delta: left alone
    assert chosen(location, "2026-11-22").base is not None


def test_minor_on_one_partition_and_bad_input(spark: Any, tmp_path: Path) -> None:
    location = make_table(tmp_path, 3)
    done = compact_on_executors(spark, open_table_root(location), kind="minor",
                                partitions=["dt=2026-11-22"])
    assert done.kinds == {"dt=2026-11-22": "minor"}
    state = chosen(location, "2026-11-22")
    assert [d.name for d in state.deltas] == ["delta_0000001_0000003"]
    with pytest.raises(ConfigError, match="no partition 'dt=2026-12-01'"):
        compact_on_executors(spark, open_table_root(location), partitions=["dt=2026-12-01"])
    with pytest.raises(TableNotFoundError):
        compact_on_executors(spark, open_table_root(str(tmp_path / "nothing")))


def test_the_spark_submit_entry_compacts_and_exits_0(tmp_path: Path) -> None:
    location = make_table(tmp_path, 3)
    before = visible(location)
    run = subprocess.run([sys.executable, str(ROOT / "jobs" / "compact.py"), location,
                          "--major", "--partition", "dt=2026-11-21"],
                         env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=180, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "compacted 1 of 1 partitions" in run.stderr
    assert chosen(location, "2026-11-21").base is not None
    assert chosen(location, "2026-11-22").base is None
    assert visible(location) == before


def test_a_damaged_input_fails_the_job_before_anything_is_written(
        spark: Any, tmp_path: Path) -> None:
    """The driver's plan checks every input against the manifest: a committed delta
    directory removed fails the job naming its file; no task runs, nothing is begun."""
    location = make_table(tmp_path, 3)
    (victim,) = Path(location, "dt=2026-11-22").glob("delta_0000002_*")
    shutil.rmtree(victim)
    listing = sorted(str(p) for p in Path(location).rglob("*"))
    with pytest.raises(CorruptFileError, match=f"nothing was written: .*{victim}"):
        compact_on_executors(spark, open_table_root(location), kind="major")
    assert sorted(str(p) for p in Path(location).rglob("*")) == listing
    with Metastore.open(default_metastore_url(location)) as store:
        assert store.compactions(location) == []
