"""The sink's file layout: how many files a micro-batch writes, and that rows stay exactly once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from ingest.acid.read.reader import read_table
from ingest.spark.job import ensure_tables, table_layout
from ingest.spark.options import SinkOptions
from ingest.spark.sink._packed import PACK_BUCKET, PACK_PARTITION, PACK_SLOT, pack, unpack
from ingest.spark.sink._tasks import writer_slots
from ingest.spark.sink.driver import AcidSink
from ingest.txn import Metastore, default_metastore_url

SCHEMA = "id BIGINT, value STRING, dt STRING"
PANDAS_WARNING = "ignore:PySpark does not yet fully support:FutureWarning"


def test_writer_slots_start_a_new_slot_every_writer_split_rows() -> None:
    assert writer_slots(0, 5, 2).to_pylist() == [0, 0, 1, 1, 2]
    assert writer_slots(5, 3, 2).to_pylist() == [2, 3, 3]  # continues across batches
    assert writer_slots(0, 4, 1_000_000).to_pylist() == [0, 0, 0, 0]


def test_pack_groups_rows_by_shuffle_key_and_unpacks_them_in_order() -> None:
    batch = pa.record_batch({
        "id": list(range(8)),
        "dt": ["a", "b", None, "a", "b", "a", None, "a"],
        "slot": pa.array([0, 0, 0, 1, 1, 1, 0, 0], pa.int32()),
    })
    packed = pack(batch, partition=batch.column("dt"), bucket=pa.nulls(8, pa.int32()),
                  slot=batch.column("slot"))
    keys = packed.select([PACK_PARTITION, PACK_SLOT]).to_pylist()
    groups = [b.column("id").to_pylist() for b in unpack(packed)]
    assert sorted(zip([(k[PACK_PARTITION] or "", k[PACK_SLOT]) for k in keys], groups,
                      strict=True)) == [
        (("", 0), [2, 6]), (("a", 0), [0, 7]), (("a", 1), [3, 5]), (("b", 0), [1]),
        (("b", 1), [4])]
    assert all(b.schema == batch.schema for b in unpack(packed))
    assert packed.column(PACK_BUCKET).null_count == len(keys)
    assert pack(batch.slice(0, 0), partition=None, bucket=pa.nulls(0, pa.int32()),
                slot=batch.column("slot").slice(0, 0)).num_rows == 0


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
    sink = AcidSink(table.location, sink_id="layout", options=SinkOptions(
        file_layout=layout, writer_split_rows=writer_split_rows))  # type: ignore[arg-type]
    batches = [kafka_batch(spark, 120, start=0, partitions=4),
               kafka_batch(spark, 120, start=120, partitions=4)]
    read_tasks = [sum(1 for n in b.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)])
                      .collect() if n) for b in batches]
    assert min(read_tasks) > 1
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
