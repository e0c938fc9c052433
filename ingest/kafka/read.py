"""The confluent-kafka side of the "ingest-kafka" source (ingest/spark/kafka/source.py).

The driver's metadata and watermark look-ups and the cap on offsets per micro-batch
(maxOffsetsPerTrigger); the executors' read of offset ranges into Arrow batches is
`ingest.kafka.ranges`'. It knows Kafka and the source's options, not Spark's reader
protocol, ORC or ACID.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from ingest.errors import ConfigError, IngestError
from ingest.kafka import clients
from ingest.kafka.connection import KafkaConnection
from ingest.kafka.options import KafkaSourceOptions, Offsets, describe
from ingest.kafka.ranges import LOGGER_NAME
from ingest.txn import TopicPartitionKey

Watermarks = dict[TopicPartitionKey, tuple[int, int]]
_T = TypeVar("_T")
# More subscribed topics than this are looked up in one metadata request for all topics (a
# request per topic costs a round trip each); fewer keep the small per-topic requests.
TOPICS_LISTED_ONE_BY_ONE = 3


class KafkaClient:
    """Metadata and offset look-ups for the driver, with bounded waits and our errors."""

    def __init__(self, options: KafkaSourceOptions, *, reached: bool = False) -> None:
        """`reached`: the broker answered this connection before (a running stream's
        look-ups): a broker restart is waited out from the first call (`clients.Client`)."""
        self.options = options
        # Small fetches: the driver only confirms where each partition ends.
        small: dict[str, Any] = {"fetch.wait.max.ms": 10, "max.partition.fetch.bytes": 1024,
                                 "enable.partition.eof": True}
        self.client = clients.consumer(options.connection, reached=reached,
                                       logger_name=f"{LOGGER_NAME}.librdkafka", **small)
        self._admin: clients.Client | None = None

    @property
    def consumer(self) -> Any:
        """The consumer's librdkafka handle (a new one after `Client.renew`)."""
        return self.client.handle

    def close(self) -> None:
        self.client.close()
        self._admin = None  # an AdminClient has no close; dropping it stops its threads

    @property
    def read_committed(self) -> bool:
        level = dict(self.options.connection.settings).get("isolation.level", "read_committed")
        return level.strip().lower() == "read_committed"

    def partitions(self) -> list[TopicPartitionKey]:
        """Every partition of the subscribed topics; with a pattern, of the topics it selects
        now (a topic whose metadata is not ready yet, one just created, waits for the next call).

        Raises:
            ConfigError: a topic does not exist.
            KafkaConnectError: the broker refuses this client (authentication, TLS, ACL) or
                does not answer.
            IngestError: the broker cannot be reached in time.
        """

        def metadata(topic: str | None) -> Any:
            return self.client.wait(
                f"get metadata for topic '{topic}'" if topic is not None
                else "list topics",
                lambda t: self.consumer.list_topics(topic=topic, timeout=t),
                timeout_s=self.options.timeout_s)

        out: list[TopicPartitionKey] = []
        if self.options.pattern is not None:
            listed = metadata(None).topics
            for topic in sorted(t for t in listed if self.options.selects(t)):
                tmeta = listed[topic]
                if tmeta.error is None and tmeta.partitions:
                    out.extend((topic, p) for p in sorted(tmeta.partitions))
            return out
        listed = ({} if len(self.options.topics) <= TOPICS_LISTED_ONE_BY_ONE
                  else metadata(None).topics)
        for topic in self.options.topics:
            tmeta = listed.get(topic)
            if tmeta is None or tmeta.error is not None or not tmeta.partitions:
                # Not in the list (missing, not ours to see, just created) or in error: the
                # topic's own request says why, or finds it ready.
                tmeta = metadata(topic).topics.get(topic)
            out.extend((topic, p) for p in topic_partitions(self.options.connection, topic,
                                                            tmeta))
        return out

    def broker_watermarks(self, tps: Sequence[TopicPartitionKey]) -> Watermarks:
        """Each partition's (log start, high watermark) as the broker reports them, asking
        again for the metadata of a partition added since this client last did: two
        ListOffsets look-ups for all the partitions, sent together.

        Raises:
            IngestError: the broker cannot be reached in time.
        """
        low, high = self._list_offsets(tps, "list offsets", earliest=True, latest=True)
        return {tp: (low[tp], high[tp]) for tp in tps}

    def log_starts(self, tps: Sequence[TopicPartitionKey]) -> Offsets:
        """Each partition's log start offset (its earliest), in one ListOffsets look-up.

        Raises:
            IngestError: the broker cannot be reached in time.
        """
        (low,) = self._list_offsets(tps, "list offsets", earliest=True)
        return low

    def watermarks(self, tps: Sequence[TopicPartitionKey]) -> Watermarks:
        """(earliest, end) of each partition: end is the offset a reader of the connection's
        isolation level can read up to, for `read_committed` the last stable offset (an open
        transaction's first record; ListOffsets at that isolation level).

        The end is confirmed with one fetch there: the fetch ends at what this consumer can
        read (tansu 0.6 answers ListOffsets(latest) with the base offset of the last record
        batch + 1, which would hide the rest of the batch).
        """
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        if not tps:
            return {}
        if self.read_committed:  # the three look-ups sent together
            low, high, stable = self._list_offsets(tps, "list offsets", earliest=True,
                                                   latest=True, stable=True)
            listed = {tp: (low[tp], high[tp]) for tp in tps}
            marks = {tp: (low[tp], min(high[tp], stable[tp])) for tp in tps}
        else:
            listed = marks = self.broker_watermarks(tps)
        # A partition whose listed end is its high watermark may have more (tansu); one whose
        # end is an open transaction's start stops there.
        confirm = {tp for tp in tps if not self.read_committed or marks[tp][1] == listed[tp][1]}
        if not confirm:
            return marks
        self.consumer.assign([TopicPartition(t, p, max(marks[(t, p)])) for t, p in confirm])
        pending = set(confirm)
        deadline = time.monotonic() + self.options.timeout_s
        renew_at = time.monotonic() + clients.UNREACHABLE_S
        try:
            while pending:
                if time.monotonic() >= renew_at:
                    # No end in sight: this consumer may never reach a broker again after a
                    # restart (Client.renew); a new one fetches the partitions left.
                    self.consumer.unassign()
                    self.client.renew()
                    self.consumer.assign([TopicPartition(t, p, max(marks[(t, p)]))
                                          for t, p in sorted(pending)])
                    renew_at = time.monotonic() + clients.UNREACHABLE_S
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise IngestError(
                        f"Cannot fetch the end offsets of {sorted(map(describe, pending))} "
                        f"from Kafka at {self.options.bootstrap_servers} within "
                        f"{self.options.timeout_s:g} s",
                        hint="check that the broker is running, or raise --kafka-timeout-s")
                msg = self.consumer.poll(min(remaining, 0.5))
                self.client.check()
                if msg is None:
                    continue
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    if clients.is_retriable(err):
                        continue
                    raise IngestError(f"Cannot fetch the end offsets from Kafka at "
                                      f"{self.options.bootstrap_servers}: "
                                      f"{err.str()}") from KafkaException(err)
                topic, partition = msg.topic(), msg.partition()
                if topic is None or partition is None:  # never in pending
                    continue
                tp = (topic, partition)
                if tp in pending and err is not None:  # the end this consumer can read
                    pending.discard(tp)
                    eof = cast(int, msg.offset())
                    marks[tp] = (marks[tp][0], max(marks[tp][1], eof))
        finally:
            self.consumer.unassign()
        return marks

    def _list_offsets(self, tps: Sequence[TopicPartitionKey], what: str, *,
                      earliest: bool = False, latest: bool = False,
                      stable: bool = False) -> list[Offsets]:
        """ListOffsets of every partition, by the AdminClient: the log start offsets
        (`earliest`), the high watermarks (`latest`), the last stable offsets (`stable`,
        isolation level read_committed), in that order, each one request a broker sent
        together with the others."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        if self._admin is None:
            # Made on first use: the consumer's answers count for it (one connection).
            self._admin = clients.admin(self.options.connection, reached=self.client.answered,
                                        logger_name=f"{LOGGER_NAME}.librdkafka")
        admin = self._admin
        uncommitted, committed = IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED
        asked = [(spec(), level) for wanted, spec, level in (
            (earliest, OffsetSpec.earliest, uncommitted), (latest, OffsetSpec.latest, uncommitted),
            (stable, OffsetSpec.latest, committed)) if wanted]

        def ask(timeout: float) -> list[Offsets]:
            sent = [admin.handle.list_offsets(
                {TopicPartition(t, p): spec for t, p in tps}, isolation_level=level,
                request_timeout=max(timeout, 1.0)) for spec, level in asked]
            return [{(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
                    for futures in sent]

        return admin.wait(what, refreshing_metadata(admin, tps, ask),
                          timeout_s=self.options.timeout_s)


def refreshing_metadata(client: clients.Client, tps: Sequence[TopicPartitionKey],
                        call: Callable[[float], _T]) -> Callable[[float], _T]:
    """`call` (a slice of `Client.wait`, a look-up sent to the partitions' leaders) that,
    when the client's metadata of `tps` is stale, asks the broker for their topics' metadata
    and hands `wait` the error as retriable, so the next slice asks again with leaders and
    partitions up to date.

    librdkafka refreshes a client's metadata only every topic.metadata.refresh.interval.ms
    (5 min): until then a partition added to a topic is unknown to it (_UNKNOWN_PARTITION),
    and after a broker restart an AdminClient's ListOffsets keeps failing with
    FENCED_LEADER_EPOCH (its leader epochs are the old ones) or finds no leader (_NOENT).
    """
    from confluent_kafka import KafkaError, KafkaException

    stale = {KafkaError._UNKNOWN_PARTITION, KafkaError._NOENT, KafkaError.FENCED_LEADER_EPOCH,
             KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.NOT_LEADER_FOR_PARTITION,
             KafkaError.LEADER_NOT_AVAILABLE}

    def attempt(timeout: float) -> _T:
        try:
            return call(timeout)
        except KafkaException as e:
            error = e.args[0] if e.args else None
            if not isinstance(error, KafkaError) or error.code() not in stale:
                raise
            for topic in sorted({t for t, _ in tps}):
                client.handle.list_topics(topic=topic, timeout=max(timeout, 1.0))
            raise KafkaException(KafkaError(error.code(), error.str(), retriable=True)) from e

    return attempt


def topic_partitions(connection: KafkaConnection, topic: str, tmeta: Any) -> list[int]:
    """The partitions of a topic's metadata, or the reason there are none.

    Raises:
        ConfigError: the topic does not exist.
        KafkaConnectError: the principal may not see the topic (ACL).
        IngestError: another metadata error.
    """
    from confluent_kafka import KafkaError

    code = tmeta.error.code() if tmeta is not None and tmeta.error is not None else None
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        raise clients.KafkaConnectError(
            f"Kafka at {connection.bootstrap_servers} does not let this client's principal "
            f"see topic '{topic}' (TOPIC_AUTHORIZATION_FAILED)",
            hint="grant the principal DESCRIBE and READ on the topic (kafka-acls.sh), or "
                 "check sasl.username")
    if tmeta is None or code == KafkaError.UNKNOWN_TOPIC_OR_PART or not tmeta.partitions:
        raise ConfigError(
            f"Kafka topic '{topic}' does not exist on {connection.bootstrap_servers}.",
            hint=f"create it (ingest produce --topic {topic} ...) or fix the topic name")
    if code is not None:
        raise IngestError(f"Cannot get metadata for Kafka topic '{topic}' on "
                          f"{connection.bootstrap_servers}: {tmeta.error}")
    return sorted(tmeta.partitions)


def rate_limit(start: Offsets, end: Offsets, max_rows: int) -> Offsets:
    """Cap end so that at most max_rows offsets are planned, shared in proportion to backlog."""
    backlog = {tp: end[tp] - start[tp] for tp in sorted(end) if end[tp] > start[tp]}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(end)
    share = {tp: max_rows * n // total for tp, n in backlog.items()}
    left = max_rows - sum(share.values())
    for tp in sorted(backlog, key=lambda tp: (share[tp] - backlog[tp], tp)):
        if left == 0:
            break
        if share[tp] < backlog[tp]:
            share[tp] += 1
            left -= 1
    return {tp: start[tp] + share.get(tp, 0) for tp in end}
