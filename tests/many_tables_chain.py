"""A many-table stream's crash-point chain through `python -m ingest stream` (issue 34,
docs/many-tables.md): topics of 1-3 partitions (one named the Debezium way) selected by a
pattern into a table each, the job SIGKILLed at armed crash points one run after the other,
then run clean. Shared by tests/crash (SQLite, PostgreSQL) and tests/hms (Hive Metastore 4).

`check_tables` is the check after every kill: each table holds exactly the records of the
Kafka ranges its committed write ids name (at most once), and those write ids are the anchor's
micro-batches, one to one (no micro-batch committed in one table and not in another).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from kafka_server import ApacheKafka
from support import job_env

from ingest.acid.read.reader import read_table
from ingest.records.routing import table_name_for
from ingest.spark.sink.deadletter import dead_letter_location
from ingest.txn import Metastore, OffsetRange

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = "id BIGINT, name STRING"


@dataclass(frozen=True)
class Topic:
    """One topic of the stream: record i (id `base + i`) sits in partition i % partitions at
    offset i // partitions, so a committed range names the ids it holds."""

    name: str
    partitions: int
    base: int
    records: int

    def ids(self, ranges: Sequence[OffsetRange]) -> list[int]:
        return sorted(self.base + o * self.partitions + r.partition
                      for r in ranges for o in range(r.from_offset, r.until_offset))

    @property
    def all_ids(self) -> list[int]:
        return [self.base + i for i in range(self.records)]


def make_topics(kafka: ApacheKafka, tag: str, count: int, records: int) -> list[Topic]:
    """`count` topics matching `pattern(tag)`, 1-3 partitions each, the first one named as
    Debezium names a source table's topic (`.` in the name); each gets `records` records."""
    from confluent_kafka import Producer

    names = [f"m{tag}.public.orders", *(f"m{tag}-t{k:02d}" for k in range(1, count))]
    topics = [Topic(n, 1 + k % 3, 1000 * (k + 1), records) for k, n in enumerate(names)]
    producer = Producer({**kafka.client_config(), "linger.ms": 0})
    for topic in topics:
        kafka.create_topic(topic.name, partitions=topic.partitions)
        for i in range(records):
            producer.produce(topic.name, partition=i % topic.partitions, value=json.dumps(
                {"id": topic.base + i, "name": f"{topic.name}:{i}"}).encode())
    assert producer.flush(30) == 0, "records not delivered"
    return topics


def pattern(tag: str) -> str:
    return rf"m{tag}[.-].*"


@dataclass
class Chain:
    """One stream (a checkpoint, an anchor, a table per topic) run again and again."""

    kafka: ApacheKafka
    tag: str
    topics: list[Topic]
    warehouse: Path
    metastore: str | None = None  # None: the SQLite metastore beside the tables
    max_offsets: int = 40
    extra: tuple[str, ...] = ()  # more `ingest stream` options (e.g. a keyed mode)

    @property
    def anchor(self) -> str:
        return str(self.warehouse / "_unrouted")

    def location(self, topic: Topic) -> str:
        return str(self.warehouse / table_name_for(topic.name))

    def run(self, crash_at: str | None = None, skip: int = 0
            ) -> subprocess.CompletedProcess[str]:
        env = job_env()
        if crash_at:
            env.update(INGEST_CRASH_AT=crash_at, INGEST_CRASH_SKIP=str(skip),
                       INGEST_CRASH_COUNTER=str(self.counter(crash_at)))
        return subprocess.run(
            [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers",
             self.kafka.plaintext, "--topic-pattern", pattern(self.tag), "--table-template",
             f"{self.warehouse}/{{topic}}", "--unrouted-table", self.anchor,
             "--schema", SCHEMA, "--checkpoint", str(self.warehouse / "checkpoint"),
             "--starting-offsets", "earliest", "--available-now",
             "--max-offsets-per-trigger", str(self.max_offsets), "--compact", "off",
             "--clean", "off", "--json", "--quiet",
             *(["--metastore", self.metastore] if self.metastore else []), *self.extra],
            env=env, capture_output=True, text=True, timeout=1800, cwd=ROOT, check=False)

    def counter(self, point: str) -> Path:
        return self.warehouse.parent / f"crash-counter-{point}"

    def crash(self, point: str, skip: int) -> None:
        """Run armed at a driver's `point` (its first `skip` hits pass): the job (the driver,
        `python -m ingest stream` itself) must die there by SIGKILL."""
        done = self.run(point, skip)
        assert done.returncode == -9, f"{point} never killed the job: {done.stderr[-4000:]}"
        if skip:
            hits = self.counter(point).stat().st_size
            assert hits > skip, f"only {hits} hits of {point}: the crash never fired"

    def url(self) -> str:
        from ingest.txn import default_metastore_url

        return self.metastore or default_metastore_url(self.anchor)


def kill_at_each(chain: Chain, points: Sequence[tuple[str, int]]) -> int:
    """Kill the chain's job at each (point, skip) in turn, checking the tables after every
    kill; return the records committed at the end, asserted mid-stream (some, not all)."""
    committed = 0
    for point, skip in points:
        chain.crash(point, skip)
        found = check_tables(chain, complete=False)
        now = sum(len(ids) for ids in found.values())
        assert now >= committed, "a kill lost committed records"
        committed = now
    total = sum(t.records for t in chain.topics)
    assert 0 < committed < total, "the kills came mid-stream"
    return committed


def check_tables(chain: Chain, *, complete: bool) -> dict[str, list[int]]:
    """Assert at most once (exactly once when `complete`) per table and the same micro-batches
    committed in every table; return each table's ids by location."""
    found: dict[str, list[int]] = {}
    with Metastore.open(chain.url()) as store:
        batches: dict[int, list[OffsetRange]] = {}
        for write_id, r in store.offset_ranges(chain.anchor):
            batches.setdefault(write_id, []).append(r)
        anchor_committed = {w for w, s in store.write_id_states(chain.anchor).items()
                            if s == "committed"}
        assert set(batches) == anchor_committed, "every committed micro-batch has its row"
        tiles: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for rs in batches.values():
            for r in rs:
                tiles.setdefault((r.topic, r.partition), []).append(
                    (r.from_offset, r.until_offset))
        for tp, spans in tiles.items():  # the micro-batches tile each partition from 0
            spans.sort()
            assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in pairwise(spans)), \
                (tp, spans)
        sql = not chain.url().startswith("thrift:")
        anchor_txns: set[int] = set()
        if sql:
            anchor_name = store.get_table(chain.anchor).name
            anchor_txns = {i.txn_id for i in store.transactions(
                anchor_name, states=("committed",))}
        for topic in chain.topics:
            location = chain.location(topic)
            theirs = sorted(sorted(r for r in rs if r.topic == topic.name
                                   and r.until_offset > r.from_offset)
                            for rs in batches.values())
            theirs = [rs for rs in theirs if rs]
            if store.find_table(location) is None:
                assert not theirs, f"{topic.name}: committed in the anchor, no table"
                found[location] = []
                continue
            mine: dict[int, list[OffsetRange]] = {}
            for write_id, r in store.offset_ranges(location):
                mine.setdefault(write_id, []).append(r)
            states = store.write_id_states(location)
            committed = {w for w, s in states.items() if s == "committed"}
            assert set(mine) == committed, f"{topic.name}: a committed write id without ranges"
            assert sorted(sorted(rs) for rs in mine.values()) == theirs, \
                f"{topic.name}: its micro-batches are not the anchor's"
            dead_states = store.write_id_states(dead_letter_location(location))
            assert len([w for w, s in dead_states.items() if s == "committed"]) == \
                len(committed), f"{topic.name}: its dead-letter table's commits differ"
            if sql:
                txns = {i.txn_id for i in store.transactions(location, states=("committed",))}
                assert txns <= anchor_txns and len(txns) == len(committed), topic.name
            snapshot = store.snapshot(location)
            table = read_table(location, snapshot)
            ids = sorted(table.column("id").to_pylist()) if table.num_rows else []
            assert ids == topic.ids([r for rs in mine.values() for r in rs]), \
                f"{topic.name}: not exactly the records of its committed ranges"
            if complete:
                assert ids == topic.all_ids, f"{topic.name}: not every record exactly once"
            found[location] = ids
    return found
