"""produce_events and sample_events against a real broker (tansu)."""

from __future__ import annotations

import json
import socket
import time
import uuid
from typing import Any

import pytest

from ingest.errors import ConfigError, IngestError
from ingest.kafka.produce import encode_event, ensure_topic, produce_events, sample_events


def _consume_all(servers: str, topic: str, partitions: int, count: int) -> list[Any]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        deadline = time.monotonic() + 20
        while len(out) < count and time.monotonic() < deadline:
            out.extend(m for m in consumer.consume(count, timeout=0.5) if m.error() is None)
        return out
    finally:
        consumer.close()


def test_sample_events_are_deterministic_and_resumable() -> None:
    ten = list(sample_events(10))
    assert ten == list(sample_events(10))
    assert ten[5:] == list(sample_events(5, start_id=5))
    assert ten != list(sample_events(10, seed=1))
    assert [e["id"] for e in ten] == list(range(10))
    assert ten[0]["ts"] == "2026-11-21T10:00:00Z" and ten[0]["dt"] == "2026-11-21"
    assert ten[1]["ts"] == "2026-11-21T10:10:00Z"
    assert list(sample_events(1, start_id=84))[0]["dt"] == "2026-11-22"
    assert set(ten[0]) == {"id", "value", "ts", "dt"}


def test_encode_event() -> None:
    assert encode_event(b"\x00raw") == b"\x00raw"
    assert encode_event("é") == "é".encode()
    assert encode_event({"id": 1, "v": "x"}) == b'{"id":1,"v":"x"}'
    with pytest.raises(ConfigError, match="expected bytes, str or dict"):
        encode_event(3)  # type: ignore[arg-type]


@pytest.mark.kafka
def test_produce_events_creates_topic_and_delivers_everything(
        kafka_broker: str, topic: str) -> None:
    events: list[Any] = [*sample_events(20), "plain text", b"\xffbytes"]
    written = produce_events(kafka_broker, topic, events=events, partitions=3,
                             key_fn=lambda e: str(e["id"]) if isinstance(e, dict) else None)
    assert written == 22
    records = _consume_all(kafka_broker, topic, 3, 22)
    assert len(records) == 22
    assert {r.partition() for r in records} <= {0, 1, 2}
    values = {r.value() for r in records}
    assert b"plain text" in values and b"\xffbytes" in values
    dicts = [json.loads(r.value()) for r in records if r.key() is not None]
    assert sorted(d["id"] for d in dicts) == list(range(20))
    assert all(r.key() == str(json.loads(r.value())["id"]).encode()
               for r in records if r.key() is not None)
    # Creating again is a no-op.
    assert ensure_topic(kafka_broker, topic, partitions=3) is False


@pytest.mark.kafka
def test_produce_events_to_unreachable_broker_fails_quickly() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(IngestError,
                       match=f"on Kafka at 127.0.0.1:{port}: no broker answered within 1 s"):
        produce_events(f"127.0.0.1:{port}", "t", events=sample_events(1), timeout_s=1.0)
    assert time.monotonic() - started < 10
