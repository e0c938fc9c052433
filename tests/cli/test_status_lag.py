"""`ingest status --bootstrap-servers`: a streamed table's committed Kafka offsets against the
real broker's latest (tansu), without the job: the offsets come from commits recorded as the
sink records them (sink progress and offset ranges in one metastore commit)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support import SIMPLE_SCHEMA, ok_json
from support import run_cli as _run

from ingest.kafka import KafkaConnection, kafka_lag, produce_events, sample_events
from ingest.txn import Metastore, OffsetRange, SinkProgress, TableDefinition, default_metastore_url

pytestmark = [pytest.mark.kafka]


def _streamed_table(root: Path, topic: str, committed: dict[int, tuple[int, int]]) -> None:
    """A table whose two commits read `committed[p]` = (first batch's end, second's end)."""
    root.mkdir(parents=True)
    with Metastore.open(default_metastore_url(str(root))) as store:
        store.create_table(TableDefinition("events", str(root), SIMPLE_SCHEMA))
        for batch in (0, 1):
            txn = store.open_transaction("events", agent="test")
            store.commit(txn, sink=SinkProgress("events@ck", batch), offsets=[
                OffsetRange(topic, p, 0 if batch == 0 else ends[0], ends[batch])
                for p, ends in committed.items()])


def test_status_shows_committed_offsets_latest_offsets_and_lag(
        kafka_broker: str, topic: str, warehouse: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    produce_events(kafka_broker, topic, events=sample_events(60), partitions=3,
                   key_fn=lambda e: str(e["id"]))  # type: ignore[index]
    latest = {x.partition: x.latest_offset
              for x in kafka_lag(KafkaConnection(kafka_broker), [topic], {}, timeout_s=10)}
    assert sum(latest.values()) == 60 and all(n >= 4 for n in latest.values())
    root = warehouse / "events"
    # Partition 0 committed all but 3 records, partition 1 all, partition 2 never read.
    _streamed_table(root, topic, {0: (1, latest[0] - 3), 1: (2, latest[1])})
    before = time.time()

    doc = ok_json(["status", str(root), "--bootstrap-servers", kafka_broker], capsys)
    stream = doc["stream"]
    assert stream["lag_records"] == 3 + latest[2]
    assert stream["last_write_id"] == 2
    assert 0 <= stream["last_commit_age_s"] < 60 and stream["last_commit_at"] <= before
    assert stream["partitions"] == [
        {"topic": topic, "partition": 0, "committed_offset": latest[0] - 3,
         "latest_offset": latest[0], "lag_records": 3},
        {"topic": topic, "partition": 1, "committed_offset": latest[1],
         "latest_offset": latest[1], "lag_records": 0},
        {"topic": topic, "partition": 2, "committed_offset": None,
         "latest_offset": latest[2], "lag_records": latest[2]}]

    code, out, err = _run(["status", str(root), "--bootstrap-servers", kafka_broker], capsys)
    assert code == 0, err
    assert "Kafka progress: last commit write id 2" in out
    assert f"Kafka lag: {3 + latest[2]:,} records" in out

    # Without a broker: the committed offsets and the age, no lag.
    doc = ok_json(["status", str(root)], capsys)
    assert [(p["partition"], p["committed_offset"], p["lag_records"])
            for p in doc["stream"]["partitions"]] == [(0, latest[0] - 3, None),
                                                      (1, latest[1], None)]
    assert doc["stream"]["lag_records"] is None


def test_lag_of_a_table_never_streamed_is_a_usage_error(
        kafka_broker: str, warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = warehouse / "plain"
    root.mkdir(parents=True)
    with Metastore.open(default_metastore_url(str(root))) as store:
        store.create_table(TableDefinition("plain", str(root), SIMPLE_SCHEMA))
    assert ok_json(["status", str(root)], capsys)["stream"] is None
    code, out, err = _run(["status", str(root), "--bootstrap-servers", kafka_broker, "--json"],
                          capsys)
    assert code == 2 and out == ""
    error = json.loads(err)["error"]
    assert "Cannot show the Kafka lag of default.plain: no commit" in error["message"]
    assert "leave out --bootstrap-servers" in error["hint"]
