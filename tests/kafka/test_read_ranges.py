"""One read task's ranges read together by one consumer (`ingest.kafka.ranges.read_ranges`,
what the `ingest-kafka` source's packed tasks run), against the real Apache Kafka 4.1.1 broker
of tests/kafka_server.py with a transactional producer: ranges ending in a commit marker, in
aborted records and their abort marker, before a partition's end, and a partition named twice.

What the tests prove: every range yields exactly the read_committed records in it, in offset
order, in batches of one partition each; records past a range's end are never taken; one
consumer is made for the whole task; an empty task makes none; a range that cannot be read to
its end fails naming that partition and its planned range.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_server import ApacheKafka

from ingest.errors import IngestError
from ingest.kafka import KafkaClient, KafkaSourceOptions, ranges
from ingest.txn import OffsetRange

pytestmark = [pytest.mark.kafka]

KAFKA_WAIT_S = 60


def _options(kafka: ApacheKafka, topics: list[str], timeout_ms: int = 30_000
             ) -> KafkaSourceOptions:
    return KafkaSourceOptions.parse({"kafka.bootstrap.servers": kafka.plaintext,
                                     "subscribe": ",".join(topics),
                                     "kafka.timeout.ms": str(timeout_ms)})


class _Log:
    """Produces into a topic's partitions, plainly or in transactions, and keeps what a
    read_committed reader sees: partition -> [(offset, value)]."""

    def __init__(self, kafka: ApacheKafka, topic: str) -> None:
        from confluent_kafka import Producer

        config = kafka.client_config("PLAINTEXT")
        self.topic = topic
        self.plain: Any = Producer({**config, "linger.ms": 0})
        self.txn: Any = Producer({**config, "linger.ms": 0, "transactional.id": f"{topic}-t"})
        self.txn.init_transactions(KAFKA_WAIT_S)
        self.visible: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        self.aborted: dict[int, list[int]] = defaultdict(list)  # partition -> offsets
        self.count = 0

    def _send(self, producer: Any, partition: int, n: int) -> list[tuple[int, bytes]]:
        sent: list[tuple[int, bytes]] = []
        errors: list[Any] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                sent.append((msg.offset(), msg.value()))

        for _ in range(n):
            self.count += 1
            producer.produce(self.topic, value=f"{self.topic}-{self.count}".encode(),
                             partition=partition, on_delivery=delivered)
        # Flushed: an aborted transaction's records are in the log, not dropped unsent.
        assert producer.flush(KAFKA_WAIT_S) == 0 and not errors, errors
        return sorted(sent)

    def plain_records(self, partition: int, n: int) -> None:
        self.visible[partition] += self._send(self.plain, partition, n)

    def transaction(self, partition: int, n: int, *, commit: bool) -> None:
        self.txn.begin_transaction()
        sent = self._send(self.txn, partition, n)
        if commit:
            self.txn.commit_transaction(KAFKA_WAIT_S)
            self.visible[partition] += sent
        else:
            self.txn.abort_transaction(KAFKA_WAIT_S)
            self.aborted[partition] += [offset for offset, _ in sent]


def _wait_for_ends(options: KafkaSourceOptions, ends: dict[tuple[str, int], int]) -> None:
    """Wait until a read_committed reader's end of each partition is `ends`' (the markers
    are written after the producer's commit or abort returns)."""
    client = KafkaClient(options)
    try:
        deadline = time.monotonic() + KAFKA_WAIT_S
        while True:
            marks = client.watermarks(sorted(ends))
            if {tp: m[1] for tp, m in marks.items()} == ends:
                return
            assert time.monotonic() < deadline, (marks, ends)
            time.sleep(0.1)
    finally:
        client.close()


@pytest.fixture
def consumers_made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the consumers `read_ranges` makes."""
    made: list[int] = []
    original = ranges.make_consumer

    def counting(*args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(ranges, "make_consumer", counting)
    return made


def _by_partition(batches: Iterator[Any]) -> dict[tuple[str, int], list[list[Any]]]:
    """partition -> its batches' (offset, value) lists, checking each batch holds one
    partition's records in offset order."""
    out: dict[tuple[str, int], list[list[Any]]] = defaultdict(list)
    for batch in batches:
        assert batch.schema == ranges.ARROW_SCHEMA
        rows = batch.to_pydict()
        keys = set(zip(rows["topic"], rows["partition"], strict=True))
        assert len(keys) == 1, f"a batch holds several partitions: {keys}"
        assert rows["offset"] == sorted(set(rows["offset"])), rows["offset"]
        out[keys.pop()].append(list(zip(rows["offset"], rows["value"], strict=True)))
    return out


def test_one_consumer_reads_a_packed_tasks_ranges_ending_in_markers_and_aborted_records(
        apache_kafka: ApacheKafka, consumers_made: list[int]) -> None:
    apache_kafka.create_topic("rr-commit", partitions=1)
    apache_kafka.create_topic("rr-abort", partitions=2)
    commit, abort = _Log(apache_kafka, "rr-commit"), _Log(apache_kafka, "rr-abort")
    # rr-commit-0: 10 plain records, 3 committed in a transaction, its commit marker last.
    commit.plain_records(0, 10)
    commit.transaction(0, 3, commit=True)
    # rr-abort-0: an aborted transaction, plain records, another aborted one last.
    abort.transaction(0, 3, commit=False)
    abort.plain_records(0, 5)
    abort.transaction(0, 3, commit=False)
    # rr-abort-1: plain records; the range stops before the partition's end.
    abort.plain_records(1, 10)
    options = _options(apache_kafka, ["rr-commit", "rr-abort"])
    # Each transaction ends in a marker, one offset past its last record.
    ends = {("rr-commit", 0): commit.visible[0][-1][0] + 2,
            ("rr-abort", 0): abort.aborted[0][-1] + 2, ("rr-abort", 1): 10}
    assert len(abort.aborted[0]) == 6 and abort.aborted[0][-1] > abort.visible[0][-1][0]
    _wait_for_ends(options, ends)

    task = [OffsetRange("rr-commit", 0, 0, ends[("rr-commit", 0)]),
            OffsetRange("rr-abort", 0, 0, ends[("rr-abort", 0)]),
            OffsetRange("rr-abort", 1, 2, 7)]
    read = _by_partition(ranges.read_ranges(options, task))

    assert consumers_made == [1]
    assert [v for batch in read[("rr-commit", 0)] for v in batch] == commit.visible[0]
    assert [v for batch in read[("rr-abort", 0)] for v in batch] == abort.visible[0]
    assert [v for batch in read[("rr-abort", 1)] for v in batch] == abort.visible[1][2:7]
    assert set(read) == set(ends)

    # Each range read alone (`read_range`, the one-range case) gives the same records.
    for r in task:
        alone = _by_partition(ranges.read_range(options, r))
        assert alone == {(r.topic, r.partition): read[(r.topic, r.partition)]}

    # A partition named twice is read range by range, still by one consumer.
    consumers_made.clear()
    split = _by_partition(ranges.read_ranges(options, [
        OffsetRange("rr-commit", 0, 0, 11), OffsetRange("rr-abort", 1, 0, 10),
        OffsetRange("rr-commit", 0, 11, ends[("rr-commit", 0)])]))
    assert consumers_made == [1]
    assert split[("rr-commit", 0)] == [commit.visible[0][:11], commit.visible[0][11:]]
    assert [v for batch in split[("rr-abort", 1)] for v in batch] == abort.visible[1]

    consumers_made.clear()
    assert list(ranges.read_ranges(options, [OffsetRange("rr-commit", 0, 5, 5)])) == []
    assert consumers_made == []


def test_a_range_that_cannot_be_read_to_its_end_is_named(apache_kafka: ApacheKafka) -> None:
    apache_kafka.create_topic("rr-short", partitions=1)
    apache_kafka.create_topic("rr-full", partitions=1)
    _Log(apache_kafka, "rr-short").plain_records(0, 3)
    _Log(apache_kafka, "rr-full").plain_records(0, 3)
    options = _options(apache_kafka, ["rr-short", "rr-full"], timeout_ms=3_000)
    task = [OffsetRange("rr-full", 0, 0, 3), OffsetRange("rr-short", 0, 0, 10)]
    read: list[Any] = []
    with pytest.raises(IngestError) as failed:
        for batch in ranges.read_ranges(options, task):
            read.append(batch)
    message = str(failed.value)
    assert (f"Kafka partition rr-short-0 on {apache_kafka.plaintext} (planned [0, 10)) "
            f"at offset 3") in message, message
    assert "rr-full" not in message
    # The range that was read whole was handed on before the other one failed.
    assert [b.column("offset").to_pylist() for b in read] == [[0, 1, 2]]
