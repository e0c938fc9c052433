"""Write events to a Kafka topic with confluent-kafka, and make deterministic sample events.

For tests, demos and `ingest produce`; the streaming job only reads. Knows Kafka, not ORC or ACID.
"""

from __future__ import annotations

import json
import random
import string
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from ingest.errors import ConfigError, IngestError
from ingest.kafka import clients
from ingest.kafka.connection import KafkaConnection

Event = bytes | str | dict[str, Any] | None
_E = TypeVar("_E", bound=Event)  # the events' own type, which key_fn is given
KeyFn = Callable[[_E], bytes | str | None]

SAMPLE_EPOCH = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)
SAMPLE_STEP = timedelta(minutes=10)  # 144 events per day, so samples span several `dt` values
PROGRESS_EVERY = 10_000



def sample_events(count: int, *, start_id: int = 0, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Yield `count` deterministic events with ids start_id, start_id+1, ...

    Event `id` is the same whatever `start_id` the run began at, so
    `sample_events(5, start_id=5)` equals the tail of `sample_events(10)`:
    {"id": 1, "value": "k3v...", "ts": "2026-11-21T10:10:00Z", "dt": "2026-11-21"}.
    `ts` advances 10 minutes per id from 2026-11-21T10:00:00Z.
    """
    if count < 0:
        raise ConfigError(f"Sample count must be >= 0, got {count}.")
    for event_id in range(start_id, start_id + count):
        rng = random.Random(f"{seed}:{event_id}")
        ts = SAMPLE_EPOCH + SAMPLE_STEP * event_id
        yield {
            "id": event_id,
            "value": "".join(rng.choices(string.ascii_lowercase + string.digits,
                                         k=rng.randint(8, 24))),
            "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "dt": ts.strftime("%Y-%m-%d"),
        }


def encode_event(event: Event) -> bytes | None:
    """bytes as they are, str as UTF-8, dict as compact JSON (UTF-8), None as no value."""
    if event is None:  # a tombstone: a record without a value
        return None
    if isinstance(event, bytes):
        return event
    if isinstance(event, str):
        return event.encode("utf-8")
    if isinstance(event, dict):
        return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raise ConfigError(f"Cannot produce an event of type {type(event).__name__}; "
                      f"expected bytes, str or dict.")


def ensure_topic(connection: KafkaConnection | str, topic: str, *, partitions: int = 1,
                 timeout_s: float = 30.0) -> bool:
    """Create `topic` with `partitions` partitions unless it exists; return True if created.

    Raises:
        ConfigError: partitions < 1.
        KafkaConnectError: the broker refuses this client (authentication, TLS) or does not
            answer.
        IngestError: the broker cannot be reached or refuses to create the topic.
    """
    from confluent_kafka import KafkaError, KafkaException

    # confluent-kafka's admin package re-exports NewTopic without marking it so for mypy.
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    if partitions < 1:
        raise ConfigError(f"A topic needs at least 1 partition, got {partitions}.")
    connection = _connection(connection)
    client = clients.admin(connection, logger_name=f"{__name__}.librdkafka")
    meta = client.wait("get metadata", lambda t: client.handle.list_topics(timeout=t),
                       timeout_s=timeout_s)
    if topic in meta.topics and meta.topics[topic].error is None:
        return False
    futures = client.handle.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        request_timeout=timeout_s, operation_timeout=timeout_s)
    try:
        futures[topic].result(timeout=timeout_s)
    except KafkaException as e:
        if e.args and e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise IngestError(f"Cannot create Kafka topic '{topic}' on "
                          f"{connection.bootstrap_servers}: {e}",
                          hint="create it with kafka-topics.sh, or let the principal CREATE "
                               "topics") from None
    return True


def _connection(connection: KafkaConnection | str) -> KafkaConnection:
    """A plaintext connection from bare bootstrap servers (tests, demos)."""
    return connection if isinstance(connection, KafkaConnection) else KafkaConnection(connection)


def produce_events(
    connection: KafkaConnection | str,
    topic: str,
    *,
    events: Iterable[_E],
    key_fn: KeyFn[_E] | None = None,
    create_topic: bool = True,
    partitions: int = 1,
    timeout_s: float = 30.0,
    on_progress: Callable[[int], None] | None = None,
) -> int:
    """Produce every event to `topic`, wait for all delivery reports, return how many were written.

    Args:
        connection: the brokers and client settings (bare "host:port[,host:port]": plaintext).
        topic: the topic; created with `partitions` partitions first if `create_topic`.
        events: bytes, str (UTF-8) or dict (compact JSON) values; None: a tombstone.
        key_fn: the record key for an event (str as UTF-8), or None for no key.
        create_topic: create the topic if it does not exist.
        partitions: partitions of a topic created here (an existing topic is left as it is).
        timeout_s: bound on reaching the broker and on each record's delivery.
        on_progress: called with the running count every PROGRESS_EVERY delivered records.

    Raises:
        ConfigError: an event or key of an unsupported type, or partitions < 1.
        KafkaConnectError: the broker refuses this client or does not answer.
        IngestError: the broker cannot be reached, or some records were not delivered.
    """
    from confluent_kafka import KafkaException

    connection = _connection(connection)
    if create_topic:
        ensure_topic(connection, topic, partitions=partitions, timeout_s=timeout_s)
    client = clients.producer(connection, logger_name=f"{__name__}.librdkafka",
                              **{"message.timeout.ms": int(timeout_s * 1000),
                                 "socket.connection.setup.timeout.ms": int(timeout_s * 1000),
                                 "enable.idempotence": False, "linger.ms": 5})
    producer = client.handle
    delivered = 0
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal delivered
        if err is not None:
            failures.append(str(err))
            return
        delivered += 1
        if on_progress is not None and delivered % PROGRESS_EVERY == 0:
            on_progress(delivered)

    sent = 0
    for event in events:
        value = encode_event(event)
        key = key_fn(event) if key_fn is not None else None
        if isinstance(key, str):
            key = key.encode("utf-8")
        elif key is not None and not isinstance(key, bytes):
            raise ConfigError(f"key_fn must return bytes, str or None, got {type(key).__name__}.")
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.1)
                client.check()
            except KafkaException as e:
                raise IngestError(f"Cannot produce to Kafka topic '{topic}' on "
                                  f"{connection.bootstrap_servers}: {e}") from e
        sent += 1
        producer.poll(0)
    deadline = time.monotonic() + timeout_s + 5
    while producer.flush(1.0) > 0:
        client.check()  # a refused connection ends the wait at once, with its cause
        if time.monotonic() > deadline:
            break
    undelivered = sent - delivered - len(failures)
    if failures or undelivered:
        first = f"; first error: {failures[0]}" if failures else ""
        raise IngestError(
            f"Produced {delivered} of {sent} records to Kafka topic '{topic}' on "
            f"{connection.bootstrap_servers}: {len(failures)} failed, {undelivered} "
            f"unconfirmed{first}.",
            hint="check the broker; records already delivered stay in the topic")
    return delivered


__all__ = ["encode_event", "ensure_topic", "produce_events", "sample_events"]
