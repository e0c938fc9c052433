"""StreamMaintenance on real tables (no Spark): the kind rule, a signalled run, errors counted."""

from __future__ import annotations

import os
import time
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest
from support import visible

from ingest.acid import acid_state
from ingest.spark.maintenance import StreamMaintenance, choose_kind
from ingest.table import compact, create_table, load
from ingest.txn import Metastore, default_metastore_url


def make_table(tmp_path: Path, loads: int, *, rows: int = 10) -> str:
    location = str(tmp_path / "events")
    create_table(location, "id BIGINT, value STRING", partitioned_by=("dt",))
    for i in range(loads):
        ids = range(i * rows, (i + 1) * rows)
        load(location, pa.table({"id": list(ids), "value": [f"v{x}" for x in ids],
                                 "dt": ["2026-11-21"] * rows}))
    return location


def state(location: str) -> object:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    return acid_state(fsspec.filesystem("file"), f"{location}/dt=2026-11-21", snapshot)


def kind_now(location: str, min_deltas: int) -> str | None:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    return choose_kind(fsspec.filesystem("file"), f"{location}/dt=2026-11-21", snapshot,
                       min_deltas=min_deltas)


def wait_for(condition: object, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_kind_rule_none_below_threshold_then_major_then_minor_on_a_large_base(
        tmp_path: Path) -> None:
    location = make_table(tmp_path, 3)
    assert kind_now(location, 4) is None
    assert kind_now(location, 3) == "major"  # no base yet
    compact(location, kind="major")
    # A base of 50,000 random values, then 3 one-row deltas: far under a tenth of its bytes.
    n = 50_000
    load(location, pa.table({"id": list(range(100, 100 + n)),
                             "value": [os.urandom(16).hex() for _ in range(n)],
                             "dt": ["2026-11-21"] * n}))
    compact(location, kind="major")
    for i in range(3):
        load(location, pa.table({"id": [5000 + i], "value": ["x"], "dt": ["2026-11-21"]}))
    assert kind_now(location, 3) == "minor"


def test_a_signal_compacts_the_partition_on_the_thread_and_rows_stay(tmp_path: Path) -> None:
    location = make_table(tmp_path, 4)
    before = visible(location)
    maintenance = StreamMaintenance(metastore_url=default_metastore_url(location),
                                    interval_s=0, min_deltas=3)
    maintenance.start()
    try:
        maintenance.committed(location, [f"{location}/dt=2026-11-21"])
        wait_for(lambda: maintenance.stats.runs >= 1)
    finally:
        stats = maintenance.stop()
    assert stats.compactions == 1 and stats.errors == 0
    chosen = state(location)
    assert chosen.base is not None and chosen.base.write_id == 4  # type: ignore[attr-defined]
    assert visible(location) == before and len(before) == 40


def test_failures_are_counted_and_the_thread_goes_on(tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    location = make_table(tmp_path, 3)
    maintenance = StreamMaintenance(metastore_url=default_metastore_url(location),
                                    interval_s=0, min_deltas=2)
    maintenance.start()
    try:
        maintenance.committed(str(tmp_path / "not-a-table"), [str(tmp_path / "nowhere")])
        wait_for(lambda: maintenance.stats.runs >= 1)
        assert maintenance.stats.errors >= 1
        assert "not-a-table" in (maintenance.stats.last_error or "")
        maintenance.committed(location, [f"{location}/dt=2026-11-21"])
        wait_for(lambda: maintenance.stats.compactions == 1)
    finally:
        maintenance.stop()
    assert "the stream goes on" in caplog.text


def test_stop_returns_at_once_when_idle_and_nothing_runs_after_it(tmp_path: Path) -> None:
    location = make_table(tmp_path, 3)
    maintenance = StreamMaintenance(metastore_url=default_metastore_url(location),
                                    interval_s=3600, min_deltas=2)
    maintenance.start()
    maintenance.committed(location, [f"{location}/dt=2026-11-21"])
    started = time.monotonic()
    stats = maintenance.stop()
    assert time.monotonic() - started < 5
    # The first run may start at once (no run has ended yet); none can start after stop().
    runs = stats.runs
    maintenance.committed(location, [f"{location}/dt=2026-11-21"])
    time.sleep(0.2)
    assert maintenance.stats.runs == runs
