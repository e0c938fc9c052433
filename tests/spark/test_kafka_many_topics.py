"""Several topics in one stream (docs/many-tables.md, issue 34): both Kafka sources, ours
("ingest-kafka") and Spark's JVM one, given a topic list or a pattern, against a real Apache
Kafka broker. Two topics are read together exactly once; with a pattern, a topic created after
the stream started is read from its first record (whatever `startingOffsets` said), and
Kafka's `__` topics never, even when the pattern matches their name, nor a topic whose name
only contains a match."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from external import spark_kafka_jars
from kafka_server import ApacheKafka, apache_kafka  # noqa: F401 - the fixture
from support import job_env, wait_until

from ingest.errors import ConfigError
from ingest.kafka import KafkaSourceOptions, jvm_pattern
from ingest.kafka.options import pattern_matches

ROOT = Path(__file__).resolve().parent.parent.parent
JOB = Path(__file__).with_name("many_topics_job.py")
WAIT_S = 240


# -- no broker needed -------------------------------------------------------------------------

def test_pattern_option_parses_and_selects_whole_names_never_internal_topics() -> None:
    opts = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:1",
                                     "subscribePattern": r"shop\..*"})
    assert (opts.topics, opts.pattern) == ((), r"shop\..*")
    assert opts.selects("shop.orders") and not opts.selects("xshop.orders")
    assert not opts.selects("shop")
    assert pattern_matches(".*orders", "orders") and not pattern_matches(".*orders", "__orders")
    listed = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a,b"})
    assert listed.selects("b") and not listed.selects("c") and listed.pattern is None
    # Java's regex syntax has the lookahead that keeps `__` topics out of Spark's source too.
    # Spark's source finds its pattern anywhere in a name: anchored, it selects whole names.
    assert jvm_pattern("a.*") == "^(?!__)(?:a.*)$"


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "a", "subscribePattern": "a.*"}, "topic names), not both"),
    ({}, "needs option 'subscribe'"),
    ({"subscribePattern": "a("}, "is not a regular expression"),
    ({"subscribePattern": ".*"}, "matches the empty name"),
    ({"subscribePattern": "a.*", "startingOffsets": '{"b":{"0":1}}'},
     "names topics ['b'] that 'subscribePattern' 'a.*' does not select"),
    ({"assign": "{}", "subscribe": "a"}, "does not support option 'assign'"),
])
def test_bad_topic_options_are_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:1", **options})
    assert message in str(info.value)


def test_small_ranges_share_read_tasks_up_to_the_packing_limit_big_ones_read_alone() -> None:
    from ingest.spark.kafka.source import pack_ranges
    from ingest.txn import OffsetRange

    ranges = [OffsetRange("a", 0, 0, 400), OffsetRange("a", 1, 10, 20_010),
              OffsetRange("b", 0, 5, 605), OffsetRange("c", 0, 0, 1)]
    # At most 1,000 records a task: a-0 and b-0 fill one, c-0 starts the next.
    assert pack_ranges(ranges, 1_000) == [[ranges[1]], [ranges[0], ranges[2]], [ranges[3]]]
    assert pack_ranges(ranges, 0) == [[r] for r in ranges]  # a task per partition
    packed = pack_ranges(ranges, 100_000)
    assert packed == [ranges] and sum(len(t) for t in packed) == len(ranges)
    opts = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a",
                                     "packRecordsPerTask": "5000"})
    assert opts.pack_records == 5000
    with pytest.raises(ConfigError, match="'packRecordsPerTask' must be a whole number"):
        KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a",
                                  "packRecordsPerTask": "-1"})


def test_a_large_micro_batch_of_small_ranges_is_packed_into_about_a_task_a_core() -> None:
    from ingest.spark.kafka.source import pack_limit, pack_ranges
    from ingest.txn import OffsetRange

    # 50 topics of 10,000 records: packed up to 10,000 they would take 50 tasks.
    ranges = [OffsetRange(f"t{k:02d}", 0, 0, 10_000) for k in range(50)]
    assert pack_limit(ranges, 10_000, 0) == 10_000
    assert len(pack_ranges(ranges, pack_limit(ranges, 10_000, 0))) == 50
    limit = pack_limit(ranges, 10_000, 2)
    assert limit == 250_000
    tasks = pack_ranges(ranges, limit)
    assert len(tasks) == 2 and [r for t in tasks for r in t] == ranges
    # A small micro-batch keeps the floor: never packs of fewer records than it.
    small = [OffsetRange(f"s{k}", 0, 0, 1_000) for k in range(3)]
    assert pack_limit(small, 10_000, 2) == 10_000 and pack_ranges(small, 10_000) == [small]
    assert pack_limit([], 10_000, 8) == 10_000
    opts = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a",
                                     "packRecordsPerTask": "5000", "packIntoTasks": "4"})
    assert (opts.pack_records, opts.pack_tasks) == (5000, 4)
    with pytest.raises(ConfigError, match="'packIntoTasks' must be a whole number"):
        KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "a",
                                  "packIntoTasks": "x"})


# -- a real broker and Spark, each source in a process of its own ------------------------------

class Job:
    """many_topics_job.py running in the background, its records read back."""

    def __init__(self, kafka: ApacheKafka, source: str, kind: str, what: str,
                 out: Path) -> None:
        env = job_env()
        if source == "jvm":
            env["PYSPARK_SUBMIT_ARGS"] = f"--jars {','.join(spark_kafka_jars())} pyspark-shell"
        self.out = out
        self.log = (out / "job.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(JOB), kafka.plaintext, source, kind, what, str(out)],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_until("the stream's start offsets", self._ready, timeout_s=WAIT_S)

    def _alive(self) -> bool:
        if self.proc.poll() is not None:
            pytest.fail(f"the job ended ({self.proc.returncode}): "
                        f"{(self.out / 'job.log').read_text()[-3000:]}")
        return True

    def _ready(self) -> bool:
        return self._alive() and (self.out / "ready").exists()

    def records(self) -> list[tuple[str, int, int, str]]:
        path = self.out / "records.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [tuple(json.loads(x)) for x in lines  # type: ignore[misc]
                if x.endswith("]") and json.loads(x)[0] != "batch"]

    def wait_for(self, what: str, count: int) -> list[tuple[str, int, int, str]]:
        wait_until(what, lambda: self._alive() and len(self.records()) >= count,
                   timeout_s=WAIT_S, interval_s=0.2)
        return self.records()

    def stop(self) -> None:
        (self.out / "stop").write_text("")
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture
def jobs() -> Iterator[list[Job]]:
    started: list[Job] = []
    yield started
    for job in started:
        job.stop()


def _produce(kafka: ApacheKafka, topic: str, values: list[str], partitions: int) -> None:
    """Produce `values` round-robin over the partitions, each delivered before returning."""
    from confluent_kafka import Producer

    producer = Producer({**kafka.client_config(), "linger.ms": 0})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions)
    assert producer.flush(30) == 0, f"records of {topic} not delivered"


def _exactly(records: list[tuple[str, int, int, str]], produced: dict[str, list[str]]) -> None:
    """Every produced value once and nothing else; each partition's offsets read from 0 on
    without a gap (each record is one offset: no transactions here)."""
    seen = Counter((t, v) for t, _, _, v in records)
    assert seen == Counter((t, v) for t, vs in produced.items() for v in vs)
    offsets: dict[tuple[str, int], list[int]] = {}
    for t, p, o, _ in records:
        offsets.setdefault((t, p), []).append(o)
    for tp, os_ in offsets.items():
        assert sorted(os_) == list(range(len(os_))), tp


SOURCES = [pytest.param("python", id="python"), pytest.param("jvm", id="jvm")]


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES)
def test_two_topics_are_read_together_exactly_once(
        apache_kafka: ApacheKafka, source: str, tmp_path: Path,  # noqa: F811 - the fixture
        jobs: list[Job]) -> None:
    tag = uuid.uuid4().hex[:8]
    a, b = f"orders-{tag}", f"payments-{tag}"
    apache_kafka.create_topic(a, partitions=2)
    apache_kafka.create_topic(b, partitions=1)
    _produce(apache_kafka, a, ["before"], 2)  # before the start ("latest"): never read
    job = Job(apache_kafka, source, "topics", f"{a},{b}", tmp_path)
    jobs.append(job)
    produced = {a: [f"a{i}" for i in range(40)], b: [f"b{i}" for i in range(25)]}
    _produce(apache_kafka, a, produced[a][:20], 2)
    _produce(apache_kafka, b, produced[b], 1)
    job.wait_for("the first records of both topics", 45)
    _produce(apache_kafka, a, produced[a][20:], 2)  # the next micro-batches go on from there
    records = job.wait_for("every record of both topics", 65)
    job.stop()
    assert {(t, p) for t, p, _, _ in records} == {(a, 0), (a, 1), (b, 0)}
    # "before" sat at offset 0 of a's first partition: read from 1 on there.
    _exactly([(t, p, o - (t == a and p == 0), v) for t, p, o, v in job.records()], produced)


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES)
def test_a_topic_created_after_the_start_is_read_from_its_first_record(
        apache_kafka: ApacheKafka, source: str, tmp_path: Path,  # noqa: F811 - the fixture
        jobs: list[Job]) -> None:
    tag = uuid.uuid4().hex[:8]
    first, later, internal = f"shop.{tag}.orders", f"shop.{tag}.refunds", f"__shop.{tag}.x"
    inside = f"old.shop.{tag}.x"  # the pattern is in its name, but not the whole name
    apache_kafka.create_topic(first, partitions=2)
    apache_kafka.create_topic(internal, partitions=1)
    apache_kafka.create_topic(inside, partitions=1)
    job = Job(apache_kafka, source, "pattern", rf"(__)?shop\.{tag}\..*", tmp_path)
    jobs.append(job)
    produced = {first: [f"o{i}" for i in range(10)]}
    _produce(apache_kafka, first, produced[first], 2)
    job.wait_for("the first topic's records", 10)
    # Created now, filled before the stream lists it again: every record from offset 0.
    apache_kafka.create_topic(later, partitions=3)
    produced[later] = [f"r{i}" for i in range(30)]
    _produce(apache_kafka, later, produced[later], 3)
    _produce(apache_kafka, internal, ["internal"], 1)
    _produce(apache_kafka, inside, ["inside"], 1)
    job.wait_for("the new topic's records", 40)
    _produce(apache_kafka, first, ["o10"], 2)  # one more batch after the new topic's
    produced[first].append("o10")
    job.wait_for("the last record", 41)
    job.stop()
    _exactly(job.records(), produced)
