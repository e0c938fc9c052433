"""AcidSink on a real SparkSession: exactly once, dead letters, fail mode, transaction batches.

Micro-batches are static DataFrames with the Kafka source's columns, handed to the sink as
foreachBatch would; the streaming path itself is covered in test_stream_e2e.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pytest
from compat import javatools
from conftest import require

from ingest.acid import read_flush_lengths
from ingest.acid.format.bucketing import bucket_ids
from ingest.acid.format.names import parse_bucket_file
from ingest.acid.read.reader import read_table
from ingest.errors import BadRecordError, ConfigError
from ingest.records.json_values import parse_json_values
from ingest.spark.job import ensure_tables, table_layout
from ingest.spark.options import SinkOptions, stream_trigger
from ingest.spark.sink._results import FileWritten, from_arrow
from ingest.spark.sink._tasks import DeltaTarget, TaskPlan, write_task
from ingest.spark.sink.driver import AcidSink
from ingest.table import TableRef, open_table
from ingest.table.write import create_table
from ingest.txn import Metastore, default_metastore_url

SCHEMA = "id BIGINT, value STRING, ts TIMESTAMP"
# pyspark 4.3 warns that pandas 3 is not fully supported whenever it checks pandas.
PANDAS_WARNING = "ignore:PySpark does not yet fully support:FutureWarning"
pytestmark = pytest.mark.filterwarnings(PANDAS_WARNING)


def event(i: int, **extra: Any) -> bytes:
    day = 21 + i % 3
    return json.dumps({"id": i, "value": f"v{i}", "ts": f"2026-11-{day}T10:00:00Z",
                       "dt": f"2026-11-{day}", **extra}).encode()


def kafka_batch(spark: Any, values: list[bytes | None], *, start: int = 0, partitions: int = 2,
                topic: str = "events") -> Any:
    """A DataFrame shaped like the Kafka source's, records spread over `partitions`."""
    n = len(values)
    table = pa.table({
        "key": pa.array([str(i).encode() for i in range(n)], pa.binary()),
        "value": pa.array(values, pa.binary()),
        "topic": pa.array([topic] * n),
        "partition": pa.array([i % partitions for i in range(n)], pa.int32()),
        "offset": pa.array([start + i // partitions for i in range(n)], pa.int64()),
    })
    return spark.createDataFrame(table).repartition(partitions, "partition")


def committed(location: str, *, metastore_url: str | None = None) -> pa.Table:
    url = metastore_url or default_metastore_url(location)
    with Metastore.open(url) as store:
        snapshot = store.snapshot(location)
    return read_table(location, snapshot)


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def make_sink(warehouse: Path, *, partition_by: str | None = "dt", **options: Any) -> AcidSink:
    location = str(warehouse / "events")
    layout = table_layout(SCHEMA + (", dt STRING" if partition_by == "dt" else ""), partition_by)
    table, _ = ensure_tables(location, layout)
    return AcidSink(open_table(table.location), sink_id="test-sink", options=SinkOptions(**options),
                    partition_expression=layout.partition_expression)


# -- no Spark --------------------------------------------------------------------------------

def test_parse_reports_each_bad_record_with_its_reason() -> None:
    from ingest.acid.format.schema import parse_schema

    values = pa.array([b'{"id": 1, "value": "a"}', None, b"  ", b'{"id": "x"}',
                       b'{\n "id": 5\n}', b'{"id": 6}{"id": 7}', b"\xff", b"[1]",
                       b'{"id": 8, "ts": "2026-11-21T10:00:00Z", "extra": true}'], pa.binary())
    parsed = parse_json_values(values, parse_schema(SCHEMA))
    assert parsed.good.to_pylist() == [0, 4, 8]
    assert parsed.rows.column("id").to_pylist() == [1, 5, 8]
    reasons = dict(parsed.bad)
    assert sorted(reasons) == [1, 2, 3, 5, 6, 7]
    assert reasons[1] == "the record value is null"
    assert reasons[2] == "the record value is blank"
    assert reasons[3] == ("field 'id': the JSON string \"x\" does not fit column id BIGINT "
                          "(a type conflict)")
    assert reasons[5] == "expected one JSON object, found 2"
    assert parsed.new_fields == [(8, {"extra": "boolean"})]


def test_table_layout_and_trigger() -> None:
    layout = table_layout("id BIGINT, dt STRING", "dt")
    assert layout.row_schema.names == ["id"] and layout.partition_column == "dt"
    assert layout.partition_expression is None
    layout = table_layout(SCHEMA, "date_format(ts, 'yyyy-MM-dd')")
    assert layout.partition_column == "dt" and layout.row_schema.names == ["id", "value", "ts"]
    with pytest.raises(ConfigError, match="also in --schema"):
        table_layout("id BIGINT, dt STRING", "upper(dt)")
    assert stream_trigger("2min") == (120.0, False)
    assert stream_trigger("available-now") == (0.0, True)
    with pytest.raises(ConfigError, match="Cannot parse trigger"):
        stream_trigger("soon")


def test_txns_per_delta_refused_on_object_stores() -> None:
    with pytest.raises(ConfigError, match="cannot append") as info:
        AcidSink(TableRef("s3://bucket/events", "sqlite://:memory:"), sink_id="s",
                 options=SinkOptions(txns_per_delta=3))
    assert info.value.hint is not None and "--txns-per-delta 1" in info.value.hint


def test_txns_per_delta_refused_with_a_hive_metastore(tmp_path: Path) -> None:
    """Refused from the URL alone, before any connection (nothing listens on port 1), and
    only above 1."""
    uri = "thrift://127.0.0.1:1"
    with pytest.raises(ConfigError, match=rf"Cannot use --txns-per-delta 3 with metastore "
                       rf"{uri}: transaction batches .* not supported on a Hive Metastore"):
        AcidSink(TableRef(str(tmp_path / "events"), uri), sink_id="s",
                 options=SinkOptions(txns_per_delta=3))
    AcidSink(TableRef(str(tmp_path / "events"), uri), sink_id="s",
             options=SinkOptions(txns_per_delta=1))
    AcidSink(TableRef(str(tmp_path / "events"), f"sqlite:///{tmp_path}/m.sqlite"), sink_id="s",
             options=SinkOptions(txns_per_delta=3))
    assert not any(tmp_path.iterdir()), "nothing is created"


def test_retried_append_attempt_does_not_duplicate_rows(tmp_path: Path) -> None:
    """K > 1: an attempt that flushed and then failed is cut back by the retry."""
    from ingest.acid import read_bucket_file
    from ingest.acid.format.schema import parse_schema

    schema = parse_schema(SCHEMA)
    dead = DeltaTarget(str(tmp_path / "dl"), 1, "delta_0000001_0000001_0000")
    base = dict(dead_letter=dead,
                row_schema=schema, parse_schema=schema, partition_column=None,
                partition_from="none", bucket_columns=(), bucket_count=0, append=True,
                close_files=False,
                options=SinkOptions(flush_rows=10, on_new_field="ignore"))  # dt is dropped

    def target(write_id: int) -> DeltaTarget:  # the run's delta: K = 3 write ids
        return DeltaTarget(str(tmp_path / "t"), write_id, "delta_0000001_0000003")

    def batch(lo: int, hi: int) -> pa.RecordBatch:
        n = hi - lo
        return pa.record_batch({
            "key": pa.nulls(n, pa.binary()),
            "value": pa.array([event(i) for i in range(lo, hi)], pa.binary()),
            "topic": pa.array(["t"] * n), "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(lo, hi), pa.int64())})

    plan1 = TaskPlan(target=target(1), **base)
    first = from_arrow(list(write_task(plan1, iter([batch(0, 25)])))[0])
    assert isinstance(first[0], FileWritten)
    length, path = first[0].length, first[0].path
    plan2 = TaskPlan(target=target(2), committed_lengths={path: length}, **base)
    list(write_task(plan2, iter([batch(25, 40)])))          # attempt 1: flushed, then "lost"
    list(write_task(plan2, iter([batch(25, 40)])))          # attempt 2 (the retry)
    events = read_bucket_file(path)
    assert events.column("currentTransaction").to_pylist() == [1] * 25 + [2] * 15
    assert [r["id"] for r in events.column("row").to_pylist()] == list(range(40))
    assert read_flush_lengths(fsspec.filesystem("file"), path)[-1] == fsspec.filesystem(
        "file").size(path)


# -- Spark -----------------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.slow
def test_batches_commit_once_and_a_replayed_batch_is_skipped(spark: Any, warehouse: Path) -> None:
    sink = make_sink(warehouse, flush_rows=7)
    df0 = kafka_batch(spark, [event(i) for i in range(40)])
    df1 = kafka_batch(spark, [event(i) for i in range(40, 100)], start=20)
    with sink:
        sink(df0, 0)
        sink(df1, 1)
        sink(df1, 1)  # replay of a committed batch: skipped
        sink(df0, 0)
    assert [r.skipped for r in sink.reports] == [False, False, True, True]
    table = committed(sink.table_location)
    assert ids(table) == list(range(100))
    assert set(table.column("dt").to_pylist()) == {"2026-11-21", "2026-11-22", "2026-11-23"}
    assert table.schema.names == ["id", "value", "ts", "dt"]
    with Metastore.open(sink.metastore_url) as store:
        ranges = store.offset_ranges(sink.table_location)
        assert store.committed_write_id("test-sink", 1) == sink.reports[1].write_id
    assert sorted((r.partition, r.from_offset, r.until_offset) for _, r in ranges) == [
        (0, 0, 20), (0, 20, 50), (1, 0, 20), (1, 20, 50)]
    files = list(Path(sink.table_location[len("file://"):]).rglob("*"))
    assert not [f for f in files if f.name.startswith("_tmp") or f.name.endswith("_flush_length")]
    assert all((f.parent / "_orc_acid_version").exists() for f in files
               if f.name.startswith("bucket_"))


@pytest.mark.spark
@pytest.mark.slow
def test_bad_records_go_to_the_dead_letter_table_with_raw_bytes(spark: Any,
                                                                 warehouse: Path) -> None:
    sink = make_sink(warehouse, partition_by="date_format(ts, 'yyyy-MM-dd')",
                     on_tombstone="dead-letter")
    values: list[bytes | None] = [event(i) for i in range(10)]
    values[3] = b"not json"
    values[7] = b'{"id": "seven"}'
    values[8] = None
    with sink:
        sink(kafka_batch(spark, values), 0)
    good = committed(sink.table_location)
    assert ids(good) == [0, 1, 2, 4, 5, 6, 9]
    assert set(good.column("dt").to_pylist()) == {"2026-11-21", "2026-11-22", "2026-11-23"}
    dead = committed(sink.dead_letter_location).sort_by("offset")
    assert dead.column("value").to_pylist() == [b"not json", b'{"id": "seven"}', None]
    assert dead.column("key").to_pylist() == [b"3", b"7", b"8"]
    assert dead.column("partition").to_pylist() == [1, 1, 0]
    assert dead.column("offset").to_pylist() == [1, 3, 4]
    assert "Invalid value" in dead.column("error")[0].as_py()
    assert sink.reports[0].dead_letters == 3 and sink.reports[0].rows == 7


@pytest.mark.spark
@pytest.mark.slow
def test_fail_mode_raises_bad_record_error_and_commits_nothing(spark: Any,
                                                               warehouse: Path) -> None:
    sink = make_sink(warehouse, on_bad_record="fail")
    values: list[bytes | None] = [event(i) for i in range(10)]
    values[5] = b'{"id": 1.5}'
    with sink, pytest.raises(BadRecordError) as info:
        sink(kafka_batch(spark, values), 0)
    message = str(info.value)
    assert "events-1 offset 2" in message
    assert "field 'id': the JSON number 1.5 does not fit column id BIGINT" in message
    assert "--on-bad-record dead-letter" in message
    with Metastore.open(sink.metastore_url) as store:
        assert store.last_committed_batch("test-sink") is None
        assert {i.state for i in store.transactions(sink.table_location)} == {"aborted"}
    assert not list(Path(sink.table_location[len("file://"):]).rglob("bucket_*"))


@pytest.mark.spark
@pytest.mark.slow
def test_bucketed_table_writes_hive_buckets(spark: Any, warehouse: Path) -> None:
    location = str(warehouse / "bucketed")
    create_table(location, SCHEMA, buckets=4, bucketed_by=["id"])
    create_table(location + "__dead_letter",
                 "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                 "error STRING")
    with AcidSink(open_table(location), sink_id="b",  # the events' dt is not a column here: dropped
                  options=SinkOptions(on_new_field="ignore")) as sink:
        sink(kafka_batch(spark, [event(i) for i in range(50)]), 0)
    root = Path(location)
    files = sorted(root.glob("delta_*/bucket_*"))
    assert 1 < len(files) <= 4
    from ingest.acid import read_bucket_file

    for f in files:
        rows = pa.Table.from_pylist(read_bucket_file(str(f)).column("row").to_pylist())
        assert set(bucket_ids(rows, ["id"], 4).to_pylist()) == {parse_bucket_file(f.name)}
    assert ids(committed(location)) == list(range(50))


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.java
def test_transaction_batches_readers_see_exactly_the_committed_batches(
        spark: Any, warehouse: Path) -> None:
    sink = make_sink(warehouse, partition_by=None, txns_per_delta=3, flush_rows=8,
                     on_new_field="ignore")  # the events' dt is dropped
    root = Path(sink.table_location[len("file://"):])
    seen: list[list[int]] = []
    lengths: dict[str, list[int]] = {}
    with sink:
        for b in range(4):
            sink(kafka_batch(spark, [event(i) for i in range(b * 20, b * 20 + 20)],
                             start=b * 10), b)
            seen.append(ids(committed(sink.table_location)))
            for f in root.glob("delta_*/bucket_?????"):
                side = read_flush_lengths(fsspec.filesystem("file"), str(f))
                if side is not None:
                    lengths[str(f)] = side
        open_dirs = sorted(p.name for p in root.glob("delta_*"))
        assert open_dirs == ["delta_0000001_0000003", "delta_0000004_0000006"]
        # The first run is closed (no side files); the second is open after one batch.
        assert not list(root.glob("delta_0000001_0000003/*_flush_length"))
        assert list(root.glob("delta_0000004_0000006/*_flush_length"))
    assert seen == [list(range((b + 1) * 20)) for b in range(4)]
    with Metastore.open(sink.metastore_url) as store:
        states = store.write_id_states(sink.table_location)
    assert states == {1: "committed", 2: "committed", 3: "committed", 4: "committed",
                      5: "aborted", 6: "aborted"}
    assert not list(root.glob("delta_*/*_flush_length"))  # close() closed the open run
    assert ids(committed(sink.table_location)) == list(range(80))
    _java_reads_every_flush_length(lengths)


def _java_reads_every_flush_length(lengths: dict[str, list[int]]) -> None:
    """Apache ORC Java opens each bucket file at each flush length the side file recorded."""
    ok, why = javatools.available()
    require(ok, why)
    specs = [{"path": path, "max_length": n, "rows": True}
             for path, entries in lengths.items() for n in entries if n > 0]
    assert specs
    results = javatools.orc_read_many(specs)
    for spec, result in zip(specs, results, strict=True):
        assert result["num_rows"] == len(result["rows"]), spec
        assert result["max_length"] == spec["max_length"]
    assert max(r["num_rows"] for r in results) > 8
