"""Model-based test of the keyed stream (`--mode upsert|cdc`, docs/format.md §24) through the
real broker and real Spark: random batches of images, Debezium events and tombstones, with
duplicate keys and out-of-order versions, produced to explicit Kafka partitions so that one
key's events move between partitions; each batch is one run of the stream (one micro-batch),
then minor and major compactions. After every step the table equals the dict model of
tests/upsert_model.py with the stream's input order — (partition, offset) within a
micro-batch — read by our reader and by Hive 2.3's two readers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import upsert_model as M
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import ingest
from ingest.kafka.produce import ensure_topic
from ingest.spark.job import StreamSummary, run_stream

pytestmark = [pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support:FutureWarning")]

SCHEMA = "id BIGINT, value STRING, v BIGINT"
PARTITIONS = 2
PHASES = (Phase.explicit, Phase.generate)  # no shrinking: each example runs Spark

# One record: (Kafka partition, id, value or None for a tombstone) and the Event it means.
Record = tuple[int, int, Any]




@st.composite
def upsert_record(draw: st.DrawFn) -> tuple[Record, Any]:
    """--mode upsert: a value is the key's new row; a tombstone deletes the record key's."""
    partition = draw(st.integers(0, PARTITIONS - 1))
    row = draw(M.rows(False))
    if draw(st.integers(0, 3)) == 0:
        return (partition, row["id"], None), M.Event((row["id"],), None, None, 3)
    return (partition, row["id"], row), M.Event((row["id"],), row, row["v"], 0)


@st.composite
def cdc_record(draw: st.DrawFn) -> tuple[Record, Any]:
    """--mode cdc: a Debezium envelope (or a tombstone), as the batch test draws them; the
    `{key, value}` record form becomes the Kafka record's own key and value."""
    partition = draw(st.integers(0, PARTITIONS - 1))
    record, event = draw(M.change(False))
    if isinstance(record, dict) and set(record) == {"key", "value"}:
        record = record["value"]
    return (partition, event.key[0], record), event


@st.composite
def stream_scenarios(draw: st.DrawFn) -> tuple[str, str | None, list[list[Any]]]:
    """A mode, an order, and one or two micro-batches of 6 to 14 records over 6 keys."""
    mode = draw(st.sampled_from(["upsert", "cdc"]))
    order_by = draw(st.sampled_from([None, "v"]))
    records = upsert_record() if mode == "upsert" else cdc_record()
    batches = draw(st.lists(st.lists(records, min_size=6, max_size=14), min_size=1,
                            max_size=2))
    return mode, order_by, batches


def produce_at(servers: str, topic: str, records: list[Record]) -> None:
    """Each record to its own partition, keyed by the JSON object of its id."""
    from confluent_kafka import Producer

    ensure_topic(servers, topic, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": False,
                         "linger.ms": 0})
    failures: list[str] = []
    for partition, key, value in records:
        producer.produce(topic, key=json.dumps({"id": key}).encode(),
                         value=None if value is None else json.dumps(value).encode(),
                         partition=partition,
                         on_delivery=lambda err, _: failures.append(str(err)) if err else None)
        producer.flush(10)  # one at a time: offsets follow the list within each partition
    assert not failures, failures


def stream_order(batch: list[tuple[Record, Any]]) -> list[Any]:
    """The events in the stream's input order: by Kafka partition, then offset."""
    return [e for (p, _, _), e in sorted(batch, key=lambda r: r[0][0])]  # stable sort


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.java
@pytest.mark.slow
def test_keyed_streams_match_a_dict_model(spark: Any, kafka_broker: str,
                                          tmp_path: Path) -> None:
    """Five examples (hypothesis's first is its simplest); each costs a Spark run per
    micro-batch, ~5 s. The derandomized examples cover both modes with and without order."""
    copies: list[Any] = []
    examples = iter(range(1_000_000))
    seen: set[tuple[str, str | None]] = set()

    @settings(max_examples=5, deadline=None, derandomize=True, database=None, phases=PHASES,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(stream_scenarios())
    def check(scenario: tuple[str, str | None, list[list[Any]]]) -> None:
        mode, order_by, batches = scenario
        seen.add((mode, order_by))
        n = next(examples)
        workdir = tmp_path / f"example{n}"
        location = str(workdir / "t")
        topic = f"model-{mode}-{order_by}-{n}"
        model = M.Model(order_by, False)
        for i, batch in enumerate(batches):
            produce_at(kafka_broker, topic, [r for r, _ in batch])
            summary = run_stream(
                spark, bootstrap_servers=kafka_broker, topic=topic, table=location,
                schema_ddl=SCHEMA, checkpoint=str(workdir / "ck"), available_now=True,
                kafka_timeout_s=10, compact="off", clean="off", buckets=2, mode=mode,
                key="id", order_by=order_by)
            assert isinstance(summary, StreamSummary)
            assert (summary.batches, summary.dead_letters) == (1, 0), summary
            model.apply(stream_order(batch))
            copies.append(snapshot(workdir, location, model, f"batch {i + 1} of {scenario!r}"))
        table = ingest.open_table(location)
        for kind in ("minor", "major"):
            table.compact(kind)
            copies.append(snapshot(workdir, location, model, f"{kind} of {scenario!r}"))

    check()
    assert len(seen) == 4, seen  # the examples cover every mode and order
    M.hive_check(copies)


def snapshot(workdir: Path, location: str, model: Any, step: str) -> Any:
    """Check our reader against the model; a copy of the table for Hive's readers."""
    table = ingest.open_table(location)
    assert M.by_key(table.to_arrow().to_pylist(), False) == model.rows, step
    copy = workdir / f"copy{len(list(workdir.glob('copy*')))}"
    shutil.copytree(location, copy)
    return M.Copy(copy, False, table.snapshot().to_hive_string(), dict(model.rows), step)
