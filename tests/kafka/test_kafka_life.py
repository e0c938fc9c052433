"""Kafka's life under a stream, on a real Apache Kafka 4.1.1 broker (tests/kafka_server.py)
and real Spark, each event once:

* Retention removes records the table has not committed (the admin client's DeleteRecords
  moves the log start offset, exactly as retention does, without waiting for its thread).
  Both sources (ours and Spark's JVM source): by default the run fails (exit 3) naming every
  lost topic-partition range, and writes nothing, not even a transaction; with
  `--fail-on-data-loss false` it goes on with a warning per range, the table holds every
  surviving record once, `ingest status --json` shows the ranges under `stream.skipped`,
  `ingest verify` names them as gaps, and (ours, scraped over HTTP)
  `ingest_kafka_lost_offsets_total` counts them per partition.
* Partitions added to the topic while the stream runs (both sources) are read from their
  first offset, and the micro-batches after that go on reading them.
* A compacted topic with tombstones in `--mode upsert` (both sources): compaction really runs
  between two runs (the test waits until the broker removed superseded records the second
  run reads past), so the second run reads offset ranges with holes; the table equals the
  model of last-value-per-key, tombstones delete rows the earlier run committed, and the
  holes are neither skipped ranges (`ingest status`) nor problems (`ingest verify`).
* The broker restarted mid-stream (ours; Spark's source has Kafka's Java client): the stream
  waits the restart out (retriable errors retried within --kafka-timeout-s), stays up, and
  ends with every record once.
* The topic deleted and created again under the same name with fewer records (both): the
  offsets went below the table's, and the next run is refused naming the partition and
  "deleted and created again", with the table unchanged; under a running JVM source (which
  plans on from the new end), the first micro-batch reading the new topic stops the stream.

Ours runs in this process on the session's Spark (run_stream, and `ingest stream` through
its real entry point for exit codes and messages). Spark's JVM source needs its jars on the
driver's classpath (scripts/fetch-servers.sh sparkkafka): its available-now runs are `ingest
stream` commands run by one Python process with one Spark JVM for the module (CLI_DRIVER),
each with its own exit code, stdout and stderr; its long-running stream is `ingest stream` in
a process of its own, stopped with Ctrl-C. Without Kafka 4.1.1 or the jars the tests skip
(fail under INGEST_REQUIRE_ALL=1).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewPartitions
from external import free_port, spark_kafka_jars
from kafka_server import ApacheKafka
from prometheus_client.parser import text_string_to_metric_families
from support import run_cli

from ingest.acid.read.reader import read_table
from ingest.errors import IngestError, TableNotFoundError
from ingest.spark.job import RunningStream, run_stream
from ingest.txn import Metastore, MetastoreError, default_metastore_url

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")]

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = "id BIGINT, value STRING"
TABLE = "default.events"  # the name of a table at <warehouse>/events
WAIT_S = 180  # a generous deadline for anything a busy machine may take long to do

# `ingest stream` commands, one JSON argv per stdin line, each answered by one JSON line
# {code, stdout, stderr} on stdout, all in this one process: the first builds the Spark
# session (with PYSPARK_SUBMIT_ARGS's jars), the others reuse it.
CLI_DRIVER = r"""
import contextlib, io, json, sys
from ingest.cli import main as cli

for line in sys.stdin:
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(json.loads(line))
        except SystemExit as e:
            code = 0 if e.code is None else e.code
    print(json.dumps({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}),
          flush=True)
"""

Cli = Callable[[list[str]], tuple[int, str, str]]


def jvm_env() -> dict[str, str]:
    """The environment of a Python process whose Spark has Spark's Kafka source."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("INGEST_CRASH") and k != "PYSPARK_SUBMIT_ARGS"}
    env.update(PYTHONPATH=str(ROOT),
               PYSPARK_SUBMIT_ARGS=f"--jars {','.join(spark_kafka_jars())} pyspark-shell")
    return env


class JvmCli:
    """`ingest stream` (or any command) run by CLI_DRIVER, in one Spark JVM holding Spark's
    Kafka source; the driver's own stderr (Spark's log) goes to `log`."""

    def __init__(self, log: Path) -> None:
        self.log = log
        with log.open("wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", CLI_DRIVER], env=jvm_env(),
                                         text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(argv) + "\n")
        self.proc.stdin.flush()
        try:
            answer = json.loads(self.lines.get(timeout=300))
        except queue.Empty:
            pytest.fail(f"`ingest {argv[0]}` did not end in 300 s:\n"
                        f"{self.log.read_text(errors='replace')[-4000:]}")
        return int(answer["code"]), answer["stdout"], answer["stderr"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def fresh_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def produce(servers: str, topic: str, records: Iterable[tuple[int, bytes | None, bytes | None]]
            ) -> None:
    """(partition, key, value) records, each partition's in the given order (idempotent: no
    retry reorders them), all delivered."""
    failures: list[Any] = []
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True,
                         "linger.ms": 5})
    for partition, key, value in records:
        producer.produce(topic, value=value, key=key, partition=partition,
                         on_delivery=lambda err, _msg: failures.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(WAIT_S) == 0, f"records of {topic} not delivered"
    assert not failures, failures


def event(i: int, value: str | None = None) -> bytes:
    return json.dumps({"id": i, "value": value or f"v{i}"}).encode()


def produce_ids(servers: str, topic: str, ids: Iterable[int], partitions: int) -> None:
    """Event `i` to partition i % partitions: with ids produced in order from 0, event i is
    at offset i // partitions there."""
    produce(servers, topic, ((i % partitions, None, event(i)) for i in ids))


def committed_ids(location: str) -> list[int]:
    """The ids of the table's committed snapshot, sorted (a duplicate stays); none while a
    starting job has not created the table yet."""
    try:
        with Metastore.open(default_metastore_url(location), read_only=True) as store:
            snapshot = store.snapshot(location)
    except (MetastoreError, TableNotFoundError):
        return []
    table = read_table(location, snapshot)
    return sorted(table.column("id").to_pylist()) if table.num_rows else []  # no files: no columns


def table_state(location: str) -> tuple[dict[int, str], dict[int, list[tuple[str, int, int, int]]]]:
    """Write ids and their states, and each write id's recorded Kafka offset ranges."""
    with Metastore.open(default_metastore_url(location)) as store:
        states = store.write_id_states(location)
        ranges: dict[int, list[tuple[str, int, int, int]]] = {}
        for write_id, r in store.offset_ranges(location):
            ranges.setdefault(write_id, []).append(
                (r.topic, r.partition, r.from_offset, r.until_offset))
    return states, {w: sorted(rs) for w, rs in ranges.items()}


def wait_for(what: str, condition: Callable[[], bool], *, timeout_s: float = WAIT_S,
             alive: Callable[[], None] | None = None) -> None:
    """Poll `condition` until it holds; `alive` raises when waiting is pointless."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if alive is not None:
            alive()
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout_s:g} s")
        time.sleep(0.2)


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the metrics endpoint, by (sample name, labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as reply:
        text = reply.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def stream_args(servers: str, topic: str, warehouse: Path, *extra: str) -> list[str]:
    """`ingest stream` into <warehouse>/events, what the topic holds now."""
    return ["stream", "--bootstrap-servers", servers, "--topic", topic,
            "--table", str(warehouse / "events"), "--schema", SCHEMA,
            "--checkpoint", str(warehouse / "checkpoint"), "--available-now",
            "--compact", "off", "--clean", "off", "--json", "--quiet", *extra]


class LiveStream:
    """A stream of one micro-batch a second, running until stopped: ours in this process on
    the session's Spark (run_stream), Spark's as `ingest stream` in a process of its own."""

    def __init__(self, source: str, spark: Any, servers: str, topic: str, warehouse: Path,
                 **flags: Any) -> None:
        self.log = warehouse.parent / "stream.log"
        self.running: RunningStream | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        if source == "python":
            running = run_stream(spark, **stream_flags(servers, topic, warehouse, trigger="1",
                                                       **flags), wait=False)
            assert isinstance(running, RunningStream)
            self.running = running
            return
        args = [a for a in stream_args(servers, topic, warehouse) if a != "--available-now"]
        for name, value in flags.items():
            args += [f"--{name.replace('_', '-')}", str(value)]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ingest", *args, "--trigger", "1", "--kafka-source",
                 "jvm"], env=jvm_env(), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)

    def alive(self) -> None:
        """Fails the test when the stream ended (it never should by itself)."""
        if self.running is not None:
            query = self.running.query
            assert query.isActive, self.running.sink.failure or query.exception()
        else:
            assert self.proc is not None
            assert self.proc.poll() is None, (f"the stream ended ({self.proc.returncode}):\n"
                                              f"{self.log.read_text(errors='replace')[-4000:]}")

    def running_now(self) -> bool:
        """Whether the stream still runs (it may end by itself on an error)."""
        if self.running is not None:
            return bool(self.running.query.isActive)
        assert self.proc is not None
        return self.proc.poll() is None

    def stop_if_running(self) -> None:
        """Stop the stream if it still runs (a test's cleanup after it ended by itself)."""
        if self.running is not None:
            with contextlib.suppress(Exception):  # it failed: the test has its error
                self.running.stop()
            return
        if self.proc is not None and self.proc.poll() is not None:
            with contextlib.suppress(ProcessLookupError):  # the Spark JVM, if it lingers
                os.killpg(self.proc.pid, signal.SIGKILL)
            return
        self.stop()

    def stop(self) -> None:
        """Stop it as an operator would: Ctrl-C for the command (exit 130, interrupted)."""
        if self.running is not None:
            self.running.stop()
            return
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)
        try:
            code = self.proc.wait(timeout=120)
        finally:
            with contextlib.suppress(ProcessLookupError):  # the Spark JVM, if it lingers
                os.killpg(self.proc.pid, signal.SIGKILL)
        assert code == 130, self.log.read_text(errors="replace")[-4000:]


def stream_flags(servers: str, topic: str, warehouse: Path, **flags: Any) -> dict[str, Any]:
    """run_stream's flags for the stream stream_args describes."""
    return {"bootstrap_servers": servers, "topic": topic, "table": str(warehouse / "events"),
            "schema_ddl": SCHEMA, "checkpoint": str(warehouse / "checkpoint"),
            "compact": "off", "clean": "off", **flags}


def delete_records(kafka: ApacheKafka, topic: str, before: dict[int, int]) -> None:
    """Remove every record below `before[p]` of each partition p, as retention would: the
    broker's log start offset moves there."""
    admin = kafka.admin()  # kept: its futures die with it
    futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in before.items()],
                                   request_timeout=60)
    for tp, future in futures.items():
        assert future.result(timeout=WAIT_S).low_watermark == before[tp.partition]


@pytest.fixture(scope="module")
def jvm_cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JvmCli]:
    """One CLI_DRIVER (one Spark JVM with Spark's Kafka source) for the module's tests."""
    driver = JvmCli(tmp_path_factory.mktemp("jvm-cli") / "driver.log")
    try:
        yield driver
    finally:
        driver.close()


@pytest.fixture
def our_cli(spark: Any, capsys: pytest.CaptureFixture[str]) -> Iterator[Cli]:
    """`ingest ARGS` through its real entry point in this process: `ingest stream` on the
    session's Spark (whose log level it sets to ERROR, WARN again afterwards)."""
    yield lambda argv: run_cli(argv, capsys)
    spark.sparkContext.setLogLevel("WARN")


@pytest.fixture(params=["python", "jvm"])
def cli(request: pytest.FixtureRequest) -> tuple[str, Cli, Any]:
    """(source, a runner of `ingest ARGS` whose Spark has that source, the session's Spark
    for ours): this process's own CLI on the session's Spark for ours, CLI_DRIVER's Spark JVM
    with the jars for Spark's."""
    if request.param == "jvm":
        return "jvm", request.getfixturevalue("jvm_cli"), None
    return "python", request.getfixturevalue("our_cli"), request.getfixturevalue("spark")


def test_records_removed_before_the_table_read_them_fail_the_run_or_are_skipped_and_counted(
        apache_kafka: ApacheKafka, cli: tuple[str, Cli, Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    kafka, (source, ingest, spark) = apache_kafka, cli
    servers, topic, warehouse = kafka.plaintext, fresh_topic("retention"), tmp_path / "wh"
    location, partitions = str(warehouse / "events"), 3
    kafka.create_topic(topic, partitions=partitions)
    args = [*stream_args(servers, topic, warehouse), "--kafka-source", source]

    produce_ids(servers, topic, range(30), partitions)  # offsets 0..9 of each partition
    code, out, err = ingest(args)
    assert code == 0, err[-4000:]
    assert json.loads(out)["rows"] == 30
    assert committed_ids(location) == list(range(30))

    # Offsets 10..19 of each partition arrive; before the stream reads them, partition 0
    # loses [10, 16) and partition 1 [10, 13) (with records the table holds below 10,
    # which are no loss); partition 2 keeps all of them.
    produce_ids(servers, topic, range(30, 60), partitions)
    delete_records(kafka, topic, {0: 16, 1: 13})
    lost = {i for i in range(30, 60) if (i % 3, i // 3) in
            {(0, o) for o in range(10, 16)} | {(1, o) for o in range(10, 13)}}
    assert len(lost) == 9
    before = table_state(location)
    files = sorted(p.relative_to(warehouse) for p in warehouse.rglob("*") if "delta_" in str(p))

    code, out, err = ingest(args)
    assert (code, out) == (3, ""), err[-4000:]
    error = json.loads(err.strip().splitlines()[-1])["error"]
    assert error["type"] == "IngestError"
    assert error["message"] == (
        f"Kafka data loss before micro-batch 1 of {TABLE}: {topic}-0 offsets [10, 16) (6); "
        f"{topic}-1 offsets [10, 13) (3) were removed from Kafka (retention) before the table "
        "committed them; nothing of the micro-batch was written"), error
    assert error["hint"].startswith("to go on without them, restart with --fail-on-data-loss "
                                    "false"), error
    # Nothing written: no transaction was even opened, no file made.
    assert table_state(location) == before
    assert before[0] == {1: "committed"}
    assert sorted(p.relative_to(warehouse) for p in warehouse.rglob("*")
                  if "delta_" in str(p)) == files
    assert committed_ids(location) == list(range(30))

    # --fail-on-data-loss false: the survivors once, the lost ranges warned about, recorded
    # as gaps and (for ours, scraped from the running job's endpoint) counted.
    survivors = sorted(set(range(60)) - lost)
    warnings = [f"Kafka data loss: {topic}-0 offsets [10, 16) were removed before {TABLE} "
                "committed them; skipped (--fail-on-data-loss false)",
                f"Kafka data loss: {topic}-1 offsets [10, 13) were removed before {TABLE} "
                "committed them; skipped (--fail-on-data-loss false)"]
    if source == "jvm":
        code, out, err = ingest([*args, "--fail-on-data-loss", "false"])
        assert code == 0, err[-4000:]
        assert json.loads(out)["rows"] == 21
        assert all(w in err for w in warnings), err[-4000:]
    else:
        port = free_port()
        running = run_stream(spark, **stream_flags(
            servers, topic, warehouse, available_now=True, fail_on_data_loss="false",
            metrics_port=port), wait=False)
        assert isinstance(running, RunningStream)
        try:
            assert running.await_termination(timeout_s=WAIT_S), "the stream did not finish"
            samples = scrape(port)  # the query ended; the driver still serves
        finally:
            summary = running.stop()
        assert summary.rows == 21
        counted = {dict(labels)["partition"]: v for (name, labels), v in samples.items()
                   if name == "ingest_kafka_lost_offsets_total"
                   and dict(labels)["topic"] == topic and dict(labels)["table"] == TABLE}
        assert counted == {"0": 6, "1": 3}, counted
        logged = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert all(w in logged for w in warnings), logged
    assert committed_ids(location) == survivors

    states, ranges = table_state(location)
    assert states == {1: "committed", 2: "committed"}
    assert ranges[2] == [(topic, 0, 16, 20), (topic, 1, 13, 20), (topic, 2, 10, 20)]
    status = json.loads(run_cli(["status", location, "--bootstrap-servers", servers, "--json"],
                                capsys)[1])["stream"]
    assert status["skipped"] == [
        {"topic": topic, "partition": 0, "from_offset": 10, "until_offset": 16},
        {"topic": topic, "partition": 1, "from_offset": 10, "until_offset": 13}]
    assert status["lag_records"] == 0
    # `ingest verify` names the same ranges as records skipped (exit 1: problems found).
    code, out, err = run_cli(["verify", location, "--json"], capsys)
    problems = json.loads(out)["problems"]
    assert code == 1, err
    assert sorted((p["kind"], p["message"].split(" are ")[0]) for p in problems) == [
        ("offset-gap", f"Kafka {topic}[0] offsets 10..16"),
        ("offset-gap", f"Kafka {topic}[1] offsets 10..13")], problems


@pytest.mark.parametrize("source", ["python", "jvm"])
def test_partitions_added_while_the_stream_runs_are_read_from_their_first_offset(
        apache_kafka: ApacheKafka, request: pytest.FixtureRequest, tmp_path: Path,
        source: str) -> None:
    kafka = apache_kafka
    servers, topic, warehouse = kafka.plaintext, fresh_topic("grow"), tmp_path / "wh"
    location = str(warehouse / "events")
    kafka.create_topic(topic, partitions=2)
    spark = request.getfixturevalue("spark") if source == "python" else None
    stream = LiveStream(source, spark, servers, topic, warehouse, kafka_timeout_s=60)

    def step(ids: range, partitions: int) -> None:
        """Produce `ids` (event i to partition i % partitions) and wait for their commit:
        a micro-batch of their own."""
        produce(servers, topic, ((i % partitions, None, event(i)) for i in ids))
        wait_for(f"records up to {ids[-1]} committed",
                 lambda: len(committed_ids(location)) >= ids[-1] + 1, alive=stream.alive)

    try:
        # Two micro-batches on two partitions: every client of the stream has asked the
        # broker about the topic (the second batch's loss check too) before it grows.
        step(range(20), 2)
        step(range(20, 30), 2)
        admin = kafka.admin()
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(timeout=WAIT_S)

        def four_led() -> bool:
            parts = admin.list_topics(topic, timeout=30).topics[topic].partitions
            return len(parts) == 4 and all(p.leader >= 0 for p in parts.values())

        wait_for("4 partitions with leaders", four_led)
        # A micro-batch reading the new partitions from offset 0, then one that reads on
        # from what the table committed of them.
        step(range(30, 70), 4)
        step(range(70, 110), 4)
        stream.alive()
    finally:
        stream.stop()
    assert committed_ids(location) == list(range(110)), "every record exactly once"
    # Per partition, the committed ranges tile [0, end): the new ones were read from 0.
    states, ranges = table_state(location)
    assert set(states.values()) == {"committed"}
    tiles: dict[int, list[tuple[int, int]]] = {}
    for rs in ranges.values():
        for _, partition, start, until in rs:
            tiles.setdefault(partition, []).append((start, until))
    assert sorted(tiles) == [0, 1, 2, 3]
    for partition, spans in tiles.items():
        spans.sort()
        end = 35 if partition < 2 else 20  # 10 + 5 + 10 + 10 in the old ones, 10 + 10 new
        assert spans[0][0] == 0 and spans[-1][1] == end, (partition, spans)
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False)), (partition, spans)


def held_offsets(servers: str, topic: str, partition: int) -> tuple[list[int], int]:
    """The offsets of the records a partition holds now, and its end (high watermark)."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": fresh_topic("probe"),
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        consumer.assign([TopicPartition(topic, partition, 0)])
        offsets: list[int] = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                if message.offset() >= high:
                    return offsets, high
                continue
            offsets.append(message.offset())
        pytest.fail(f"{topic}-{partition} not read to its end {high} in {WAIT_S} s")
    finally:
        consumer.close()


def test_a_compacted_topic_with_tombstones_upserts_to_the_model_across_compaction_holes(
        apache_kafka: ApacheKafka, cli: tuple[str, Cli, Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    kafka, (source, ingest, _) = apache_kafka, cli
    servers, topic, warehouse = kafka.plaintext, fresh_topic("compacted"), tmp_path / "wh"
    location = str(warehouse / "events")
    # Segments roll after 100 ms and any dirt is worth cleaning; the broker's cleaner looks
    # every 500 ms (scripts/kafka.sh). Tombstones stay a day (delete.retention.ms).
    kafka.create_topic(topic, partitions=2, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"})
    model: dict[int, str] = {}

    def send(changes: list[tuple[int, str | None]]) -> None:
        """Upserts (id, value) and tombstones (id, None), keyed by the key columns' JSON
        object, each id in partition id % 2 so that a key's changes keep their order."""
        for i, value in changes:
            if value is None:
                model.pop(i, None)
            else:
                model[i] = value
        produce(servers, topic, ((i % 2, json.dumps({"id": i}).encode(),
                                  None if v is None else event(i, v)) for i, v in changes))

    def stream() -> dict[str, int]:
        code, out, err = ingest([*stream_args(servers, topic, warehouse), "--mode", "upsert",
                                 "--key", "id", "--buckets", "2",
                                 "--max-offsets-per-trigger", "8", "--kafka-source", source])
        assert code == 0, err[-4000:]
        return json.loads(out)  # type: ignore[no-any-return]

    def rows() -> dict[int, str]:
        with Metastore.open(default_metastore_url(location)) as store:
            snapshot = store.snapshot(location)
        table = read_table(location, snapshot).to_pylist()
        assert len({r["id"] for r in table}) == len(table), "a key held twice"
        return {r["id"]: r["value"] for r in table}

    send([(i, f"a{i}") for i in range(20)])  # offsets 0..9 of each partition
    assert stream()["rows"] == 20
    assert rows() == model

    # Updates, tombstones of rows the table holds (some just updated), a tombstone of a key
    # never seen, a key deleted and inserted again, a key inserted and deleted in this run.
    send([(i, f"b{i}") for i in range(10)] + [(i, None) for i in [*range(5), *range(10, 15)]]
         + [(100, None), (2, "c2")] + [(i, f"a{i}") for i in range(20, 24)] + [(22, None)])
    # The cleaner compacts closed segments only: a change of keys 998 and 999 now and then
    # rolls each partition's segment, until both have lost superseded records that the
    # next run reads past (offsets from 10).
    deadline, round_ = time.monotonic() + WAIT_S, 0
    while True:
        round_ += 1
        send([(998, f"seal{round_}"), (999, f"seal{round_}")])
        held = {p: held_offsets(servers, topic, p) for p in (0, 1)}
        if all(len([o for o in offsets if o >= 10]) < high - 10
               for offsets, high in held.values()):
            break
        assert time.monotonic() < deadline, f"{topic} not compacted in {WAIT_S} s: {held}"
        time.sleep(0.3)  # the poll's pace; a segment rolls once older than segment.ms
    ends = {p: high for p, (_, high) in held.items()}

    assert stream()["batches"] >= 2
    assert rows() == model
    assert sorted(model) == [2, *range(5, 10), *range(15, 22), 23, 998, 999]
    # The holes are read, not skipped: each partition's committed ranges tile [0, end).
    _, ranges = table_state(location)
    for partition in (0, 1):
        spans = sorted((s, u) for rs in ranges.values() for _, p, s, u in rs if p == partition)
        assert spans[0][0] == 0 and spans[-1][1] == ends[partition], spans
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    status = json.loads(run_cli(["status", location, "--bootstrap-servers", servers, "--json"],
                                capsys)[1])["stream"]
    assert status["skipped"] == [] and status["lag_records"] == 0, status
    code, out, err = run_cli(["verify", location, "--json"], capsys)
    assert code == 0 and json.loads(out)["problems"] == [], out + err


def test_a_broker_restart_mid_stream_is_waited_out_and_every_record_lands_once(
        own_apache_kafka: ApacheKafka, spark: Any, tmp_path: Path) -> None:
    kafka = own_apache_kafka
    servers, topic, warehouse = kafka.plaintext, fresh_topic("restart"), tmp_path / "wh"
    location = str(warehouse / "events")
    kafka.create_topic(topic, partitions=2)
    produce_ids(servers, topic, range(40), 2)
    # The bound on retrying: a restart on a busy machine takes tens of seconds.
    running = run_stream(spark, **stream_flags(servers, topic, warehouse, trigger="1",
                                               max_offsets_per_trigger=10,
                                               kafka_timeout_s=120), wait=False)
    assert isinstance(running, RunningStream)

    def alive() -> None:
        assert running.query.isActive, running.sink.failure or running.query.exception()

    try:
        wait_for("a first micro-batch committed", lambda: committed_ids(location) != [],
                 alive=alive)
        kafka.restart()  # same ports, data and credentials
        alive()
        produce_ids(servers, topic, range(40, 80), 2)
        wait_for("all 80 records committed", lambda: len(committed_ids(location)) >= 80,
                 alive=alive)
        alive()
    finally:
        summary = running.stop()
    assert committed_ids(location) == list(range(80)), "every record exactly once"
    assert summary.rows == 80
    states, ranges = table_state(location)
    assert set(states.values()) == {"committed"}
    for partition in (0, 1):
        spans = sorted((s, u) for rs in ranges.values() for _, p, s, u in rs if p == partition)
        assert spans[0][0] == 0 and spans[-1][1] == 40, spans
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False)), spans


def recreate_topic(kafka: ApacheKafka, topic: str, partitions: int) -> None:
    """Delete `topic` and create it again, empty, once the broker lets the name be used."""
    admin = kafka.admin()
    admin.delete_topics([topic], operation_timeout=60)[topic].result(timeout=WAIT_S)
    wait_for(f"{topic} gone", lambda: topic not in admin.list_topics(timeout=30).topics)

    def created() -> bool:
        try:
            kafka.create_topic(topic, partitions=partitions)
        except Exception as e:  # noqa: BLE001 - still being deleted: TOPIC_ALREADY_EXISTS
            if "TOPIC_ALREADY_EXISTS" not in str(e) and "marked for deletion" not in str(e):
                raise
            return False
        return True

    wait_for(f"{topic} created again", created)


def test_a_topic_deleted_and_created_again_is_refused_naming_it(
        apache_kafka: ApacheKafka, cli: tuple[str, Cli, Any], tmp_path: Path) -> None:
    """Both sources, at the start of a run: Spark's JVM source, given failOnDataLoss=false by
    the job (the sink judges loss), would plan nothing for a partition whose end went below
    its start and then read on from the new end, the records below it never read."""
    kafka, (source, ingest, _) = apache_kafka, cli
    servers, topic, warehouse = kafka.plaintext, fresh_topic("recreated"), tmp_path / "wh"
    location = str(warehouse / "events")
    kafka.create_topic(topic, partitions=2)
    produce_ids(servers, topic, range(30), 2)  # offsets 0..14 of each partition
    args = [*stream_args(servers, topic, warehouse), "--kafka-source", source]
    code, out, err = ingest(args)
    assert code == 0, err[-4000:]
    assert committed_ids(location) == list(range(30))
    before = table_state(location)

    recreate_topic(kafka, topic, 2)
    produce_ids(servers, topic, range(100, 110), 2)  # offsets 0..4: below the table's 15

    code, out, err = ingest(args)
    assert (code, out) == (3, ""), err[-4000:]
    error = json.loads(err.strip().splitlines()[-1])["error"]
    assert error["type"] == "IngestError", error
    assert (f"Kafka partition {topic}-0 on {servers} now ends at offset 5, below offset 15 "
            f"table {TABLE} already committed: topic '{topic}' was deleted and created again "
            "(or truncated)") in error["message"], error
    assert "into a new table" in error["hint"], error
    assert table_state(location) == before, "nothing written"
    assert committed_ids(location) == list(range(30))


@pytest.mark.parametrize("source", ["python", "jvm"])
def test_a_topic_deleted_and_created_again_under_a_running_stream_stops_it_naming_it(
        apache_kafka: ApacheKafka, request: pytest.FixtureRequest, tmp_path: Path,
        source: str) -> None:
    """Ours refuses in its source's planning, and the stream's caller gets that error as
    itself (not inside Spark's trace). Spark's JVM source (failOnDataLoss=false) plans nothing
    for a partition whose end went below its start, then reads on from the new end: the sink
    sees a micro-batch starting below what the table committed and stops the stream before
    writing it."""
    kafka = apache_kafka
    servers, topic, warehouse = kafka.plaintext, fresh_topic("recreated-live"), tmp_path / "wh"
    location = str(warehouse / "events")
    kafka.create_topic(topic, partitions=1)
    spark = request.getfixturevalue("spark") if source == "python" else None
    stream = LiveStream(source, spark, servers, topic, warehouse, kafka_timeout_s=60)
    try:
        produce_ids(servers, topic, range(20), 1)
        wait_for("20 records committed", lambda: len(committed_ids(location)) == 20,
                 alive=stream.alive)
        before = table_state(location)
        recreate_topic(kafka, topic, 1)
        produce_ids(servers, topic, range(100, 105), 1)  # offsets 0..4, below the table's 20

        def more_until_it_ends() -> bool:
            # Spark's source makes a micro-batch of each record, planned from the new end on.
            if source == "jvm":
                produce_ids(servers, topic, [200], 1)
            return not stream.running_now()

        wait_for("the stream to stop", more_until_it_ends)
        if source == "python":
            assert stream.running is not None
            with pytest.raises(IngestError) as caught:
                stream.running.await_termination(WAIT_S)
            message = str(caught.value)
            # At 0 or 5: the source may plan before or after the new records arrive. Or it
            # planned between the delete and the create (a loaded machine widens that gap):
            # stopping there, naming the topic, is as right.
            missing = f"Kafka topic '{topic}' does not exist on {servers}"
            recreated = bool(re.match(
                f"The stream into {TABLE} failed: Kafka partition {topic}-0 on "
                f"{re.escape(servers)} now ends at offset [05], below offset 20 this stream "
                "already read", message))
            assert missing in message or recreated, message
        else:
            assert stream.proc is not None and stream.proc.returncode == 3, \
                stream.log.read_text(errors="replace")[-4000:]
            message = stream.log.read_text(errors="replace")
            assert f"Kafka partition {topic}-0 micro-batch " in message, message[-4000:]
            assert f", below offset 20 table {TABLE} already committed" in message, \
                message[-4000:]
            recreated = True
        if recreated:
            assert (f"topic '{topic}' was deleted and created again (or truncated)"
                    in message), message[-4000:]
    finally:
        stream.stop_if_running()
    # The micro-batch Spark planned nothing for (its range below the new end dropped) may
    # commit an empty transaction; no record of the new topic and no range of it lands.
    assert table_state(location)[1] == before[1], "no offset range of the new topic"
    assert committed_ids(location) == list(range(20))
