"""The sink's file layout: how many files a micro-batch writes, and that rows stay exactly once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as po
import pytest

from ingest.acid import read_bucket_file
from ingest.acid.read.reader import read_table
from ingest.spark.job import ensure_tables, table_layout
from ingest.spark.options import SinkOptions
from ingest.spark.sink._packed import PackKind, unpacked
from ingest.spark.sink._results import (
    BadRecords,
    FileWritten,
    OffsetsRead,
    Tombstones,
    from_arrow,
)
from ingest.spark.sink._size import planned_records
from ingest.spark.sink._stripes import _Pieces, parse_stripes_task, write_stripes_task
from ingest.spark.sink._tasks import DeltaTarget, TaskPlan, writer_slots
from ingest.spark.sink.driver import AcidSink
from ingest.table import open_table
from ingest.txn import Metastore, default_metastore_url

SCHEMA = "id BIGINT, value STRING, dt STRING"
PANDAS_WARNING = "ignore:PySpark does not yet fully support:FutureWarning"


def test_writer_slots_start_a_new_slot_every_writer_split_rows() -> None:
    assert writer_slots(0, 5, 2).to_pylist() == [0, 0, 1, 1, 2]
    assert writer_slots(5, 3, 2).to_pylist() == [2, 3, 3]  # continues across batches
    assert writer_slots(0, 4, 1_000_000).to_pylist() == [0, 0, 0, 0]


def stripes_plan(tmp_path: Path, **options: Any) -> TaskPlan:
    row_schema = pa.schema([("id", pa.int64()), ("value", pa.string())])
    return TaskPlan(
        target=DeltaTarget(str(tmp_path / "t"), 1, "delta_0000001_0000001_0000"),
        dead_letter=DeltaTarget(str(tmp_path / "dl"), 1, "delta_0000001_0000001_0000"),
        row_schema=row_schema, parse_schema=row_schema.append(pa.field("dt", pa.string())),
        partition_column="dt", partition_from="field", bucket_columns=(), bucket_count=0,
        append=False, close_files=True,
        options=SinkOptions(**options))


def records_batch(ids: range) -> pa.RecordBatch:
    """Records of days a and b; every 7th is not JSON, every 11th a tombstone."""
    values = [None if i % 11 == 5 else b"{" if i % 7 == 3 else
              json.dumps({"id": i, "value": f"v{i}", "dt": "ab"[i % 2]}).encode() for i in ids]
    return pa.record_batch({
        "key": pa.nulls(len(ids), pa.binary()), "value": pa.array(values, pa.binary()),
        "topic": pa.array(["events"] * len(ids)), "partition": pa.array([0] * len(ids), pa.int32()),
        "offset": pa.array(list(ids), pa.int64())})


def test_parse_tasks_send_stripe_pieces_that_the_write_task_appends_in_order(
        tmp_path: Path) -> None:
    plan = stripes_plan(tmp_path, flush_rows=4, writer_split_rows=10)
    packed = list(parse_stripes_task(plan, iter([records_batch(range(0, 13)),
                                                 records_batch(range(13, 30))])))
    rows = [row for batch in packed for row in unpacked(batch)]
    kinds = [kind for _, kind, _ in rows]
    assert kinds[-1] is PackKind.RECORDS and kinds.count(PackKind.RECORDS) == 1
    assert kinds.count(PackKind.DEAD_LETTERS) == 2  # one per input batch holding some
    pieces = [(key, po.ORCFile(pa.BufferReader(data)).read()) for key, kind, data in rows
              if kind is PackKind.STRIPE]
    good = [i for i in range(30) if i % 11 != 5 and i % 7 != 3]
    # Pieces of at most flush_rows rows; a day's slot changes every 10 good rows of the task.
    assert all(0 < t.num_rows <= 4 for _, t in pieces)
    for (part, bucket, slot), t in pieces:
        assert bucket is None and part in ("dt=a", "dt=b")
        assert all(good.index(i) // 10 == slot and "ab"[i % 2] == part[-1]
                   for i in t.column("id").to_pylist())
    results = from_arrow(next(write_stripes_task(plan, iter(packed))))
    files = {r.path: r for r in results if isinstance(r, FileWritten)}
    table_files = sorted(p for p, f in files.items() if f.target == "table")
    assert [p.split("/t/", 1)[1] for p in table_files] == [
        "dt=a/delta_0000001_0000001_0000/bucket_00000",
        "dt=b/delta_0000001_0000001_0000/bucket_00000"]
    for path in table_files:
        events = read_bucket_file(files[path].staging)
        ids = [r["id"] for r in events.column("row").to_pylist()]
        assert sorted(ids) == [i for i in good if "ab"[i % 2] == path.split("dt=")[1][0]]
        assert events.column("rowId").to_pylist() == list(range(len(ids)))
    dead = [f for f in files.values() if f.target == "dead_letter"]
    assert [f.rows for f in dead] == [sum(1 for i in range(30) if i % 7 == 3 and i % 11 != 5)]
    assert [(r.min_offset, r.max_offset, r.rows) for r in results
            if isinstance(r, OffsetsRead)] == [(0, 29, 30)]
    assert [r.rows for r in results if isinstance(r, Tombstones)] == [3]


def test_a_parse_task_holds_a_stripe_of_bytes_at_most_however_many_groups(
        tmp_path: Path) -> None:
    pieces = _Pieces(stripes_plan(tmp_path))
    rows = pa.table({"id": pa.array(range(100), pa.int64()),
                     "value": pa.array([f"v{i}" for i in range(100)])})
    pieces.max_bytes = 3 * rows.nbytes
    assert pieces.add(("dt=a", None, 0), rows) == []
    assert pieces.add(("dt=b", None, 0), rows) == []
    encoded = pieces.add(("dt=c", None, 0), rows)  # three groups: every group encoded
    assert [(key[0], po.ORCFile(pa.BufferReader(data)).read().num_rows)
            for key, _, data in encoded] == [("dt=a", 100), ("dt=b", 100), ("dt=c", 100)]
    assert pieces.groups == {} and pieces.buffered_bytes == 0


def test_a_bad_record_under_on_bad_record_fail_is_reported_and_nothing_is_written(
        tmp_path: Path) -> None:
    plan = stripes_plan(tmp_path, on_bad_record="fail")
    packed = list(parse_stripes_task(plan, iter([records_batch(range(0, 13))])))
    (bad,) = from_arrow(next(write_stripes_task(plan, iter(packed))))
    assert isinstance(bad, BadRecords) and (bad.offset, bad.rows) == (3, 2)
    assert not list((tmp_path / "t").rglob("bucket_*"))


def kafka_batch(spark: Any, count: int, *, start: int, partitions: int) -> Any:
    """Kafka-shaped rows over `partitions` read tasks; ids cycle through three days."""
    values = [json.dumps({"id": i, "value": f"v{i}", "dt": f"2026-11-{21 + i % 3}"}).encode()
              for i in range(start, start + count)]
    table = pa.table({
        "key": pa.array([str(i).encode() for i in range(count)], pa.binary()),
        "value": pa.array(values, pa.binary()),
        "topic": pa.array(["events"] * count),
        "partition": pa.array([i % partitions for i in range(count)], pa.int32()),
        "offset": pa.array([start // partitions + i // partitions for i in range(count)],
                           pa.int64()),
    })
    return spark.createDataFrame(table).repartition(partitions, "partition")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.filterwarnings(PANDAS_WARNING)
@pytest.mark.parametrize(("layout", "writer_split_rows", "files"),
                         [("task", 1_000_000, None), ("partition", 1_000_000, 3),
                          ("partition", 10, None)])
def test_files_per_micro_batch_by_layout_and_every_row_once(
        spark: Any, tmp_path: Path, layout: str, writer_split_rows: int, files: int | None) -> None:
    location = str(tmp_path / "events")
    table, _ = ensure_tables(location, table_layout(SCHEMA, "dt"))
    # Without adaptive execution the shuffle keeps its 2 partitions (the session's setting), so
    # the slots of a day are seen on both write tasks instead of being merged into one.
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    if layout == "partition" and files is None:
        spark.conf.set("spark.sql.adaptive.enabled", "false")
    sink = AcidSink(open_table(table.location), sink_id="layout", options=SinkOptions(
        file_layout=layout, writer_split_rows=writer_split_rows))  # type: ignore[arg-type]
    batches = [kafka_batch(spark, 120, start=0, partitions=4),
               kafka_batch(spark, 120, start=120, partitions=4)]
    read_tasks = [sum(1 for n in b.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)])
                      .collect() if n) for b in batches]
    assert min(read_tasks) > 1
    # Not a Kafka micro-batch: its size is not known, so it is shuffled (not one task).
    assert planned_records(batches[0]) is None
    try:
        with sink:
            for batch_id, batch in enumerate(batches):
                sink(batch, batch_id)
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    written = [r.files for r in sink.reports]
    if layout == "task":
        assert written == [3 * n for n in read_tasks]  # a file per read task and day
    elif files is not None:
        assert written == [files, files]  # one writer per day
    else:
        # 30 rows per read task in slots of 10: a day's slots hash to both write tasks.
        assert all(3 < f <= 6 for f in written)
    paths = sorted(p.relative_to(tmp_path) for p in (tmp_path / "events").rglob("bucket_*"))
    assert len(paths) == len(set(paths)) == sum(written)
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    ids = read_table(location, snapshot).column("id").to_pylist()
    assert sorted(ids) == list(range(240))
