"""Committing a table's Kafka offsets to a consumer group (`--commit-offsets-to-group`).

After each table commit the job hands its offsets here; a thread on the driver commits the
newest ones to the group with confluent-kafka, so the broker's own lag tools
(`kafka-consumer-groups.sh --describe`, Burrow, exporters) see the stream. The table's sink
progress stays the source of truth: a failed group commit is logged and counted, never
raised into a micro-batch, and the next commit carries the newer offsets anyway.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ingest.errors import ConfigError, IngestError
from ingest.kafka import clients
from ingest.kafka.connection import KafkaConnection
from ingest.txn import TopicPartitionKey

log = logging.getLogger(__name__)


class GroupCommitter:
    """Commits offsets to one consumer group from a daemon thread, newest first.

    Usage::

        committer = GroupCommitter(KafkaConnection("broker:9092"), "ingest-events", timeout_s=10)
        committer.submit({("events", 0): 120, ("events", 1): 97})   # after a table commit
        committer.close()      # commits what is pending (bounded), then stops

    The group is committed to as a standalone consumer (no subscription, no rebalance): a
    group with active members of its own refuses the commit, which is counted as a failure.
    """

    def __init__(self, connection: KafkaConnection, group: str, *, timeout_s: float,
                 on_result: Callable[[bool], None] | None = None) -> None:
        """Nothing is opened until the first commit.

        Args:
            connection: the brokers and the client settings.
            group: the consumer group id.
            timeout_s: bound on reaching the broker for one commit.
            on_result: called after each commit with whether it succeeded (metrics).

        Raises:
            ConfigError: an empty group id.
        """
        if not group.strip():
            raise ConfigError("--commit-offsets-to-group needs a consumer group id, got ''",
                              hint="e.g. --commit-offsets-to-group ingest-events")
        self.connection = connection
        self.group = group
        self.timeout_s = timeout_s
        self.on_result = on_result
        self.commits = 0
        self.failures = 0
        self._pending: dict[TopicPartitionKey, int] = {}
        self._cond = threading.Condition()
        self._busy = False
        self._closed = False
        self._consumer: clients.Client | None = None
        self._thread = threading.Thread(target=self._loop, name=f"ingest-group-{group}",
                                        daemon=True)
        self._thread.start()

    def submit(self, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Queue the next offsets to read of some topic partitions (newer ones win); never
        blocks on the broker."""
        if not offsets:
            return
        with self._cond:
            for key, offset in offsets.items():
                self._pending[key] = max(offset, self._pending.get(key, offset))
            self._cond.notify_all()

    def flush(self, timeout_s: float) -> bool:
        """Wait until nothing is pending or being committed; False after `timeout_s`."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy,
                                       timeout=timeout_s)

    def close(self, *, timeout_s: float | None = None) -> None:
        """Commit what is pending (waiting at most `timeout_s`, default the commit timeout),
        then stop the thread and close the consumer."""
        if not self.flush(self.timeout_s if timeout_s is None else timeout_s):
            log.warning("Kafka consumer group %s: offsets still pending at shutdown were not "
                        "committed; the table keeps them", self.group)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(self.timeout_s + 5)
        if self._consumer is not None and not self._thread.is_alive():
            self._consumer.close()
            self._consumer = None

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._closed)
                if self._closed:
                    return
                batch, self._pending = self._pending, {}
                self._busy = True
            ok = self._commit(batch)
            with self._cond:
                self._busy = False
                self._cond.notify_all()
            if self.on_result is not None:
                self.on_result(ok)

    def _commit(self, offsets: Mapping[TopicPartitionKey, int]) -> bool:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            if self._consumer is None:
                ms = max(1, int(self.timeout_s * 1000))
                timeouts: dict[str, Any] = {"socket.timeout.ms": ms,
                                            "session.timeout.ms": max(ms, 6000)}
                self._consumer = clients.consumer(self.connection, group_id=self.group,
                                                  **timeouts)
            consumer = self._consumer
            done = consumer.wait(
                f"commit offsets to consumer group {self.group}",
                lambda _: consumer.handle.commit(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())],
                    asynchronous=False), timeout_s=self.timeout_s)
            errors = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in done or []
                      if tp.error is not None]
            if errors:
                raise KafkaException(errors[0])
        except (KafkaException, IngestError) as e:  # the table holds the offsets; the group
            self.failures += 1                        # is a copy
            log.warning("Cannot commit offsets %s to Kafka consumer group %s on %s: %s (the "
                        "table's own offsets are unaffected; the next commit retries)",
                        _describe(offsets), self.group, self.connection.bootstrap_servers, e)
            return False
        self.commits += 1
        return True


def _describe(offsets: Mapping[TopicPartitionKey, int]) -> str:
    return ", ".join(f"{t}-{p}={o}" for (t, p), o in sorted(offsets.items()))


def group_offsets(connection: KafkaConnection, group: str, topics: list[str], *,
                  timeout_s: float) -> dict[TopicPartitionKey, int]:
    """The offsets `group` committed for every partition of `topics` (partitions it never
    committed left out).

    Raises:
        KafkaConnectError: the broker refuses this client or does not answer.
        IngestError: the broker cannot be reached in time.
    """
    from confluent_kafka import TopicPartition

    client = clients.consumer(connection, group_id=group)
    consumer = client.handle
    try:
        meta = client.wait("get metadata", lambda t: consumer.list_topics(timeout=t),
                           timeout_s=timeout_s)
        parts = []
        for topic in topics:
            found = meta.topics.get(topic)
            parts += [TopicPartition(topic, p) for p in sorted(found.partitions)] if found else []
        committed = client.wait(f"read the offsets of consumer group {group}",
                                lambda t: consumer.committed(parts, timeout=max(t, 1.0)),
                                timeout_s=timeout_s)
    finally:
        client.close()
    return {(tp.topic, tp.partition): tp.offset for tp in committed if tp.offset >= 0}


__all__ = ["GroupCommitter", "group_offsets"]
