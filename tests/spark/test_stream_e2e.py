"""run_stream end to end: a real Kafka-protocol broker (tansu), real Spark, real tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import free_port

from ingest.acid.read.reader import read_table
from ingest.errors import BadRecordError, ConfigError, IngestError, SchemaMismatchError
from ingest.kafka.produce import produce_events, sample_events
from ingest.spark.job import StreamSummary, run_stream
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.kafka, pytest.mark.spark,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")]

SCHEMA = "id BIGINT, value STRING, ts TIMESTAMP"


def produce(servers: str, topic: str, count: int, *, start_id: int = 0) -> None:
    produce_events(servers, topic, events=sample_events(count, start_id=start_id),
                   key_fn=lambda e: str(e["id"]), partitions=3)  # type: ignore[index]


def committed(location: str) -> Any:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    return read_table(location, snapshot)


def stream(spark: Any, servers: str, topic: str, warehouse: Path, **options: Any) -> StreamSummary:
    summary = run_stream(spark, bootstrap_servers=servers, topic=topic,
                         table=str(warehouse / "events"), schema_ddl=SCHEMA,
                         checkpoint=str(warehouse / "checkpoint"), available_now=True,
                         kafka_timeout_s=10, **options)
    assert isinstance(summary, StreamSummary)
    return summary


@pytest.mark.slow
def test_every_record_exactly_once_across_batches_and_a_restart(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    produce(kafka_broker, topic, 300)
    first = stream(spark, kafka_broker, topic, warehouse, partition_by="dt",
                   max_offsets_per_trigger=120, flush_rows=25)
    assert first.batches == 3 and first.rows == 300 and first.dead_letters == 0
    location = str(warehouse / "events")
    table = committed(location)
    assert sorted(table.column("id").to_pylist()) == list(range(300))

    produce(kafka_broker, topic, 200, start_id=300)
    second = stream(spark, kafka_broker, topic, warehouse, partition_by="dt",
                    max_offsets_per_trigger=120, flush_rows=25)
    assert second.rows == 200 and second.skipped == 0
    table = committed(location)
    assert sorted(table.column("id").to_pylist()) == list(range(500))
    rows = table.to_pylist()
    assert all(r["dt"] == r["ts"].strftime("%Y-%m-%d") for r in rows)
    with Metastore.open(default_metastore_url(location)) as store:
        ranges = [r for _, r in store.offset_ranges(location)]
        states = set(store.write_id_states(location).values())
    assert states == {"committed"}
    for partition in range(3):
        spans = sorted((r.from_offset, r.until_offset) for r in ranges if r.partition == partition)
        assert spans[0][0] == 0
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))  # contiguous
    assert sum(r.until_offset - r.from_offset for r in ranges) == 500


@pytest.mark.slow
def test_fail_mode_stops_the_query_with_bad_record_error(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    produce(kafka_broker, topic, 20)
    produce_events(kafka_broker, topic, events=[b"{broken"], partitions=3)
    with pytest.raises(BadRecordError, match=r"Cannot parse Kafka record .* offset \d+"):
        stream(spark, kafka_broker, topic, warehouse, on_bad_record="fail")
    assert not list((warehouse / "events").rglob("bucket_*"))


def test_nonexistent_topic_is_a_clear_error_before_anything_is_written(
        spark: Any, kafka_broker: str, warehouse: Path) -> None:
    with pytest.raises(ConfigError, match="Kafka topic 'no-such-topic' does not exist"):
        stream(spark, kafka_broker, "no-such-topic", warehouse)
    assert list(warehouse.iterdir()) == []


def test_unreachable_broker_is_a_clear_error_before_anything_is_written(
        spark: Any, warehouse: Path) -> None:
    servers = f"127.0.0.1:{free_port()}"
    with pytest.raises(IngestError, match=f"Cannot get metadata .* on Kafka at {servers}: no "
                                          "broker answered within 2 s"):
        run_stream(spark, bootstrap_servers=servers, topic="t", table=str(warehouse / "events"),
                   schema_ddl=SCHEMA, checkpoint=str(warehouse / "ck"), available_now=True,
                   kafka_timeout_s=2)
    assert list(warehouse.iterdir()) == []


def test_schema_mismatch_is_a_clear_error_before_anything_is_written(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    from ingest.spark.job import ensure_tables, table_layout

    produce(kafka_broker, topic, 5)
    ensure_tables(str(warehouse / "events"), table_layout("id INT, value STRING", None))
    before = sorted(p.name for p in warehouse.rglob("*"))
    with pytest.raises(SchemaMismatchError) as info:
        stream(spark, kafka_broker, topic, warehouse)
    assert "has columns (id INT, value STRING) but --schema gives (id BIGINT" in str(info.value)
    assert sorted(p.name for p in warehouse.rglob("*")) == before
