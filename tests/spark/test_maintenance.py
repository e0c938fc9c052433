"""StreamMaintenance on real tables: a signalled run compacts what the initiator picks, errors
are counted (no Spark); the stream's foreachBatch signals its dead-letter table too (Spark)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pytest
from support import visible

import ingest
from ingest.acid import acid_state
from ingest.spark.maintenance import StreamMaintenance
from ingest.table import alter_table, create_table, load
from ingest.table._definition import RETENTION_PROPERTY
from ingest.txn import Metastore, default_metastore_url

# The initiator's delta count threshold as a table property: more than 2 deltas (Hive's ">").
DELTA_NUM = {"compactorthreshold.hive.compactor.delta.num.threshold": "2"}


def make_table(tmp_path: Path, loads: int, *, rows: int = 10) -> str:
    location = str(tmp_path / "events")
    create_table(location, "id BIGINT, value STRING", partitioned_by=("dt",),
                 properties=DELTA_NUM)
    for i in range(loads):
        ids = range(i * rows, (i + 1) * rows)
        load(location, pa.table({"id": list(ids), "value": [f"v{x}" for x in ids],
                                 "dt": ["2026-11-21"] * rows}))
    return location


def state(location: str) -> object:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    return acid_state(fsspec.filesystem("file"), f"{location}/dt=2026-11-21", snapshot)


def wait_for(condition: object, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_signal_compacts_the_partition_on_the_thread_and_rows_stay(tmp_path: Path) -> None:
    location = make_table(tmp_path, 4)
    before = visible(location)
    maintenance = StreamMaintenance(metastore_url=default_metastore_url(location),
                                    interval_s=0)
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
                                    interval_s=0)
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
                                    interval_s=3600)
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


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")
def test_the_stream_compacts_and_cleans_its_dead_letter_table_too(spark: Any,
                                                                   warehouse: Path) -> None:
    from spark.test_sink import kafka_batch

    from ingest.spark.job import _then_signal, ensure_tables, table_layout
    from ingest.spark.options import SinkOptions
    from ingest.spark.sink import AcidSink

    location = str(warehouse / "events")
    table, dead = ensure_tables(location, table_layout("id BIGINT, value STRING", None))
    alter_table(dead.location, properties={**DELTA_NUM, RETENTION_PROPERTY: "0"})
    sink = AcidSink(table.location, sink_id="test-sink", options=SinkOptions())
    maintenance = StreamMaintenance(metastore_url=default_metastore_url(location),
                                    interval_s=0)
    write_batch = _then_signal(sink, maintenance)
    with sink:
        for batch in range(3):  # one dead letter each: three deltas > 2
            values = [json.dumps({"id": batch, "value": "ok"}).encode(), b"not json"]
            write_batch(kafka_batch(spark, values, start=2 * batch, partitions=1), batch)
    maintenance.start()
    try:
        # One run for each table the micro-batches wrote.
        wait_for(lambda: maintenance.stats.runs >= 2)
    finally:
        stats = maintenance.stop()
    assert (stats.compactions, stats.cleans, stats.errors) == (1, 2, 0), stats.last_error
    dl_root = warehouse / "events__dead_letter"
    dirs = sorted(p.name for p in dl_root.iterdir() if not p.name.startswith(("_", ".")))
    assert len(dirs) == 1 and dirs[0].startswith("base_"), dirs  # compacted, then cleaned
    dead_rows = ingest.open_table(sink.dead_letter_location).to_arrow()
    assert dead_rows.column("value").to_pylist() == [b"not json"] * 3
    # The target has its own thresholds (Hive's default 10): three deltas stay.
    assert len([p for p in Path(location).iterdir() if p.name.startswith("delta_")]) == 3
    assert sorted(ingest.open_table(location).to_arrow().column("id").to_pylist()) == [0, 1, 2]
