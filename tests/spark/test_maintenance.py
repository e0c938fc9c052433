"""StreamMaintenance on real tables: a signalled run compacts what the initiator picks, errors
are counted (no Spark); the stream's foreachBatch signals its dead-letter table too (Spark)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest
from support import visible, wait_until

from ingest.acid import acid_state
from ingest.spark.maintenance import StreamMaintenance
from ingest.table import TableRef, open_table
from ingest.table.write import create_table, load
from ingest.txn import Metastore, default_metastore_url

# The initiator's delta count threshold as a table property: more than 2 deltas (Hive's ">").
DELTA_NUM = {"compactorthreshold.hive.compactor.delta.num.threshold": "2"}


def make_table(tmp_path: Path, loads: int, *, rows: int = 10) -> str:
    location = str(tmp_path / "events")
    create_table(location, "id BIGINT, value STRING", partitioned_by=("dt",),
                 properties=DELTA_NUM)
    for i in range(loads):
        ids = range(i * rows, (i + 1) * rows)
        load(open_table(location), pa.table({"id": list(ids), "value": [f"v{x}" for x in ids],
                                             "dt": ["2026-11-21"] * rows}))
    return location


def state(location: str) -> object:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    return acid_state(fsspec.filesystem("file"), f"{location}/dt=2026-11-21", snapshot)


def test_a_signal_compacts_the_partition_on_the_thread_and_rows_stay(tmp_path: Path) -> None:
    location = make_table(tmp_path, 4)
    before = visible(location)
    maintenance = StreamMaintenance(interval_s=0)
    maintenance.start()
    try:
        maintenance.committed(open_table(location).ref, [f"{location}/dt=2026-11-21"])
        wait_until("a maintenance run", lambda: maintenance.stats.runs >= 1)
    finally:
        stats = maintenance.stop()
    assert stats.compactions == 1 and stats.errors == 0
    chosen = state(location)
    assert chosen.base is not None and chosen.base.write_id == 4  # type: ignore[attr-defined]
    assert visible(location) == before and len(before) == 40


def test_failures_are_counted_and_the_thread_goes_on(tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    location = make_table(tmp_path, 3)
    maintenance = StreamMaintenance(interval_s=0)
    maintenance.start()
    try:
        nothing = TableRef(str(tmp_path / "not-a-table"), default_metastore_url(location))
        maintenance.committed(nothing, [str(tmp_path / "nowhere")])
        wait_until("a maintenance run", lambda: maintenance.stats.runs >= 1)
        assert maintenance.stats.errors >= 1
        assert "not-a-table" in (maintenance.stats.last_error or "")
        maintenance.committed(open_table(location).ref, [f"{location}/dt=2026-11-21"])
        wait_until("a compaction", lambda: maintenance.stats.compactions == 1)
    finally:
        maintenance.stop()
    assert "the stream goes on" in caplog.text


def test_stop_returns_at_once_when_idle_and_nothing_runs_after_it(tmp_path: Path) -> None:
    location = make_table(tmp_path, 3)
    maintenance = StreamMaintenance(interval_s=3600)
    before = set(threading.enumerate())
    maintenance.start()
    (thread,) = [t for t in set(threading.enumerate()) - before
                 if t.name == "ingest-maintenance"]
    maintenance.committed(open_table(location).ref, [f"{location}/dt=2026-11-21"])
    started = time.monotonic()
    stats = maintenance.stop()
    # Not the hour of its interval: at most a run already under way (generous for load).
    assert time.monotonic() - started < 120
    # The first run may start at once (no run has ended yet); none can start after stop():
    # its thread has ended (runs happen only there), so a commit noted now wakes nothing.
    assert not thread.is_alive()
    runs = stats.runs
    maintenance.committed(open_table(location).ref, [f"{location}/dt=2026-11-21"])
    assert maintenance.stats.runs == runs


