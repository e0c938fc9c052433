"""Kafka lag: each topic partition's readable end on the broker (for a `read_committed`
reader the last stable offset, so commit markers and an open transaction's records are not
lag) against the offset a table has committed (the end of the last offset range its sink
progress recorded).

Used by the streaming job's metrics (`ingest_kafka_lag_records`) and by `ingest status
--bootstrap-servers`. Knows Kafka (through the source's `KafkaClient`), not the metastore:
the committed offsets come in as a plain mapping.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ingest.errors import ConfigError
from ingest.kafka.connection import KafkaConnection
from ingest.kafka.options import KafkaSourceOptions
from ingest.kafka.read import KafkaClient
from ingest.txn import TopicPartitionKey


@dataclass(frozen=True)
class PartitionLag:
    """One topic partition: what the table committed against what the broker holds.

    Attributes:
        topic, partition: the Kafka topic partition.
        committed_offset: the next offset the table would read (the end of its last committed
            range), or None when no committed transaction read this partition.
        earliest_offset: the broker's first offset still held.
        latest_offset: the end a reader of the connection's isolation level can read to (the
            last stable offset for `read_committed`, the default; else the high watermark).
    """

    topic: str
    partition: int
    committed_offset: int | None
    earliest_offset: int
    latest_offset: int

    @property
    def lag_records(self) -> int:
        """Records on the broker the table has not committed (from the earliest offset
        still held when the partition was never read)."""
        start = self.earliest_offset if self.committed_offset is None else self.committed_offset
        return max(self.latest_offset - start, 0)


class LagProbe:
    """Asks the broker for the latest offsets of topics, again and again (one consumer,
    serialised by a lock: a metrics scrape and a status call may come from any thread).
    With `learns_topics`, a call naming a topic the probe does not know yet (a pattern's new
    topic) adds it, and the consumer is opened again for the larger set."""

    def __init__(self, connection: KafkaConnection, topics: Sequence[str] = (), *,
                 timeout_s: float, learns_topics: bool = False, reached: bool = False) -> None:
        """Nothing is opened until the first call. `reached`: the broker answered this
        connection before (a running stream's probe, first asked after a micro-batch was
        planned): a broker restart at its first call is waited out until `timeout_s`, not
        taken for a wrong address after `clients.UNREACHABLE_S`.

        Raises:
            ConfigError: no topics (unless it learns them), or a timeout that is not a
                positive number.
        """
        if not topics and not learns_topics:
            raise ConfigError("Kafka lag needs at least one topic")
        if timeout_s <= 0:
            raise ConfigError(f"A Kafka timeout must be positive, got {timeout_s:g} s")
        self.connection, self.timeout_s = connection, timeout_s
        self.learns_topics, self.reached = learns_topics, reached
        self._topics: set[str] = set(topics)
        self._client: KafkaClient | None = None
        self._lock = threading.Lock()

    def _client_for(self, topics: set[str]) -> KafkaClient:
        """The consumer, opened again if `topics` adds to a learning probe's (holding the
        lock)."""
        if self.learns_topics and not topics <= self._topics:
            self._topics |= topics
            self._close()
        if self._client is None:
            if not self._topics:
                raise ConfigError("Kafka lag needs at least one topic")
            self._client = KafkaClient(KafkaSourceOptions.for_lookups(
                self.connection, sorted(self._topics), timeout_s=self.timeout_s),
                reached=self.reached)
        return self._client

    def lag(self, committed: Mapping[TopicPartitionKey, int]) -> list[PartitionLag]:
        """Every partition of the probe's topics (learning, with those `committed` names),
        sorted, with its committed and latest offsets.

        Args:
            committed: the next offset to read of each topic partition the table committed.

        Raises:
            ConfigError: a topic does not exist, or no topic is known.
            IngestError: the broker cannot be reached in time.
        """
        with self._lock:
            client = self._client_for({t for t, _ in committed})
            marks = client.watermarks(client.partitions())
        return [PartitionLag(t, p, committed.get((t, p)), low, high)
                for (t, p), (low, high) in sorted(marks.items())]

    def earliest(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Each partition's earliest offset still on the broker (its log start offset).

        Raises:
            IngestError: the broker cannot be reached in time.
        """
        with self._lock:
            client = self._client_for({t for t, _ in tps})
            return client.log_starts(tps)  # one ListOffsets look-up for them all

    def close(self) -> None:
        """Close the consumer (a later call opens a new one)."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def kafka_lag(connection: KafkaConnection, topics: Sequence[str],
              committed: Mapping[TopicPartitionKey, int], *,
              timeout_s: float) -> list[PartitionLag]:
    """Once: the lag of every partition of `topics` against `committed` (see `LagProbe.lag`).

    Raises:
        ConfigError: a topic does not exist.
        IngestError: the broker cannot be reached in time.
    """
    probe = LagProbe(connection, topics, timeout_s=timeout_s)
    try:
        return probe.lag(committed)
    finally:
        probe.close()


__all__ = ["LagProbe", "PartitionLag", "kafka_lag"]
