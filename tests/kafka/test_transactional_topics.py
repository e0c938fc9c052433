"""Transactional topics on Apache Kafka read exactly, by a model, for both Kafka sources
(`--kafka-source python`, ours over confluent-kafka, and `jvm`, Spark's spark-sql-kafka-0-10).

A seeded random sequence of steps runs against a 3-partition topic on the real Apache Kafka
4.1.1 broker of tests/kafka_server.py: two transactional producers begin, produce into, commit
and abort transactions (flushed first, so aborted records and their markers really sit in the
log), a plain producer writes between and behind them, and the job (jobs/kafka_to_acid.py,
`--available-now`, a few micro-batches per run) either runs to its end or is killed with
SIGKILL: at a crash point of the sink's driver (before its commit, inside the metastore's
commit), or, its whole process group, as soon as Spark has written a new micro-batch's offsets
to the checkpoint. Every run starts from the same checkpoint. The model is what a
read_committed consumer sees: plain records and committed transactions' records, in each
partition below its last stable offset (the first record of a transaction still open there);
the test waits for the broker's last stable offsets to be the model's before each run.

What the tests prove, after every run, finished or killed:
- the table is exactly a read_committed prefix of the topic: its committed offset ranges tile
  [0, end) of each partition with neither gap nor overlap (commit markers and aborted records
  lie inside the planned ranges), and its rows are the model's records below those ends, each
  once: never an aborted record, never an open transaction's, nothing twice after a replay;
- after a finished run the ends are the broker's last stable offsets at its start: an open
  transaction's records, and every record behind them in their partitions (plain ones too),
  wait, and appear after the transaction ends, never lost; the last run, with no transaction
  open, leaves the table equal to the whole model;
- a finished run exits 0 with no data-loss error or warning (markers and aborted records are
  not lost records), `ingest verify` finds no problem and `ingest status --json` measures lag
  to the last stable offset (0, with the high watermark beyond it while a transaction is
  open) and lists nothing skipped;
- every run ends within JOB_TIMEOUT_S (the bound); a killed micro-batch's write id is left
  open, then aborted by the restart.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from external import spark_kafka_jars
from kafka_server import ApacheKafka

from ingest.acid import read_table
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.crash]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"
PARTITIONS = 3
PRODUCERS = ("A", "B")  # two transactional ids: their transactions interleave in a partition
ROUNDS = 4  # job runs per source: two of them killed, the last one with no transaction open
JOB_TIMEOUT_S = 300  # the bound on every run of the job (about 20-60 s on a busy machine)
KAFKA_WAIT_S = 60
# Longer than any test: the broker must never abort a transaction the model holds open
# (librdkafka's default, 60 s, is shorter than two job runs on a busy machine).
TRANSACTION_TIMEOUT_MS = 900_000  # the broker's transaction.max.timeout.ms
DRIVER_CRASH_POINTS = ("sink.before_commit", "metastore.during_commit")
SIGKILL = "sigkill"  # the test kills the job's whole process group itself
# Per source: the seed (chosen among those whose plan also kills while a transaction is open
# and commits one behind another still open) and --txns-per-delta (3: transaction batches of
# three write ids sharing a delta directory, whose unused ids a kill leaves open).
CASES = {"python": (24, 3), "jvm": (1795897, 1)}


# ---------------------------------------------------------------------- the steps
@dataclass(frozen=True)
class Step:
    """One step: begin, produce (producer None: the plain producer), commit, abort, run, kill."""

    kind: str
    producer: str | None = None
    partitions: tuple[int, ...] = ()
    mode: str | None = None  # kill: a crash point or SIGKILL

    def __str__(self) -> str:
        return " ".join(str(x) for x in (self.kind, self.producer or "", self.partitions or "",
                                         self.mode or "") if x != "")


def plan_steps(rng: random.Random) -> list[Step]:
    """ROUNDS rounds of 1-3 random producer actions, each ending with a job run. Whatever the
    seed, the rounds include a run while a transaction holds records in a partition with plain
    records behind them, an aborted transaction with records, one kill at a driver crash point
    and one SIGKILL of the whole job; the last run comes after every transaction ended."""
    steps: list[Step] = []
    holding: dict[str, set[int]] = {}  # open transaction -> partitions holding its records
    kills = rng.sample(range(ROUNDS - 1), 2)
    modes = dict(zip(kills, [rng.choice(DRIVER_CRASH_POINTS), SIGKILL], strict=True))
    open_round = rng.choice([r for r in range(ROUNDS - 1) if r not in kills])
    abort_round = rng.randrange(ROUNDS)

    def partitions(count: int) -> tuple[int, ...]:
        return tuple(rng.randrange(PARTITIONS) for _ in range(count))

    def in_txn(producer: str, parts: tuple[int, ...]) -> None:
        if producer not in holding:
            steps.append(Step("begin", producer))
            holding[producer] = set()
        steps.append(Step("produce", producer, parts))
        holding[producer].update(parts)

    def end(producer: str, kind: str) -> None:
        steps.append(Step(kind, producer))
        del holding[producer]

    for r in range(ROUNDS):
        for _ in range(rng.randint(1, 3)):
            action = rng.choice(("txn", "txn", "plain", "end"))
            if action == "end" and holding:
                end(rng.choice(sorted(holding)), rng.choice(("commit", "commit", "abort")))
            elif action == "plain":
                steps.append(Step("produce", None, partitions(rng.randint(1, 4))))
            else:
                producer = rng.choice(PRODUCERS)
                in_txn(producer, partitions(rng.randint(1, 4)))
                fate = rng.random()  # else the transaction stays open into the next steps
                if fate < 0.4:
                    end(producer, "commit")
                elif fate < 0.7:
                    end(producer, "abort")
        if r == abort_round:
            producer = rng.choice(PRODUCERS)
            in_txn(producer, partitions(rng.randint(2, 4)))
            end(producer, "abort")
        if r == open_round:
            # The case: a transaction holds records in partition p when the job runs,
            # and plain records follow them there; all of them wait for the transaction's end.
            producer, p = rng.choice(PRODUCERS), rng.randrange(PARTITIONS)
            in_txn(producer, (p, *partitions(rng.randint(0, 2))))
            steps.append(Step("produce", None, (p, p, *partitions(rng.randint(0, 2)))))
        if r in modes:
            # A killed run needs a micro-batch to kill: new records a partition can read now.
            while len(set().union(*holding.values())) == PARTITIONS:
                end(rng.choice(sorted(holding)), rng.choice(("commit", "abort")))
            free = [p for p in range(PARTITIONS) if p not in set().union(*holding.values())]
            steps.append(Step("produce", None, (rng.choice(free), *partitions(rng.randint(0, 2)))))
        if r == ROUNDS - 1:
            for producer in sorted(holding):
                end(producer, rng.choice(("commit", "abort")))
        steps.append(Step("kill", mode=modes[r]) if r in modes else Step("run"))
    return steps


# ---------------------------------------------------------------------- the model
@dataclass
class Txn:
    producer: str
    state: str = "open"  # open, committed, aborted


@dataclass
class Record:
    id: int
    partition: int
    offset: int
    txn: Txn | None  # None: a plain record

    @property
    def readable(self) -> bool:
        """Whether a read_committed consumer returns it once the partition's last stable
        offset is past it."""
        return self.txn is None or self.txn.state == "committed"


@dataclass
class Model:
    records: list[Record] = field(default_factory=list)

    def stable_offsets(self) -> dict[int, int]:
        """The last stable offset of each partition an open transaction holds: its first
        record there (the others end at their high watermark)."""
        out: dict[int, int] = {}
        for r in self.records:
            if r.txn is not None and r.txn.state == "open":
                out[r.partition] = min(out.get(r.partition, r.offset), r.offset)
        return out

    def below(self, ends: dict[int, int]) -> list[int]:
        """The ids a read_committed reader of [0, ends[p]) of each partition returns, sorted."""
        return sorted(r.id for r in self.records
                      if r.readable and r.offset < ends.get(r.partition, 0))


# ---------------------------------------------------------------------- processes
def _group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs (zombies do not)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _end_group(pgid: int) -> None:
    """SIGKILL what is left of a job's process group and wait until it is gone, so no
    process of a run still writes when the next one starts."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + KAFKA_WAIT_S
    while _group_alive(pgid):
        assert time.monotonic() < deadline, f"processes of group {pgid} outlive SIGKILL"
        time.sleep(0.05)


def _batch_files(directory: Path) -> set[str]:
    """The micro-batch ids Spark's offset log holds (its files appear whole: renamed)."""
    if not directory.is_dir():
        return set()
    return {p.name for p in directory.iterdir() if p.name.isdigit()}


class Scenario:
    """The topic, its producers, the model, and the job over one table and checkpoint."""

    def __init__(self, kafka: ApacheKafka, topic: str, warehouse: Path, source: str,
                 rng: random.Random, txns_per_delta: int) -> None:
        from confluent_kafka import Producer

        self.kafka, self.topic, self.warehouse, self.source = kafka, topic, warehouse, source
        self.table = warehouse / "events"
        self.checkpoint = warehouse / "checkpoint"
        self.jars = spark_kafka_jars() if source == "jvm" else None
        # Small micro-batches: their ends fall on records, markers and aborted records alike.
        self.max_offsets = rng.randint(6, 12)
        self.txns_per_delta = txns_per_delta
        kafka.create_topic(topic, partitions=PARTITIONS)
        config = kafka.client_config("PLAINTEXT")
        self.plain: Any = Producer({**config, "linger.ms": 0})
        self.producers = {name: Producer({**config, "linger.ms": 0,
                                          "transactional.id": f"{topic}-{name}",
                                          "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS})
                          for name in PRODUCERS}
        for producer in self.producers.values():
            producer.init_transactions(KAFKA_WAIT_S)
        self.admin: Any = kafka.admin()
        self.model = Model()
        self.open: dict[str, Txn] = {}
        self.runs = 0
        self.last_ids: list[int] = []
        self.left_open: set[int] = set()  # write ids of micro-batches killed before commit
        self.journal: list[str] = [f"source={source} max_offsets={self.max_offsets} "
                                   f"txns_per_delta={self.txns_per_delta}"]

    def close(self) -> None:
        """Abort what is still open: a failed test must not hold a transaction on the broker."""
        for name, txn in list(self.open.items()):
            try:
                self.producers[name].abort_transaction(KAFKA_WAIT_S)
            except Exception as e:  # noqa: BLE001 - cleanup after a failure already reported
                print(f"aborting {name}'s transaction {txn}: {e}")
        self.open.clear()
        # Drop the clients now (librdkafka closes them), not when the broker is gone.
        self.producers.clear()
        self.plain = self.admin = None

    def context(self) -> str:
        return "steps so far:\n  " + "\n  ".join(self.journal[-40:])

    # ------------------------------------------------------------ producing
    def apply(self, step: Step) -> None:
        self.journal.append(str(step))
        if step.kind == "begin":
            assert step.producer is not None
            self.producers[step.producer].begin_transaction()
            self.open[step.producer] = Txn(step.producer)
        elif step.kind == "produce":
            self._produce(step.producer, step.partitions)
        elif step.kind in ("commit", "abort"):
            assert step.producer is not None
            producer = self.producers[step.producer]
            if step.kind == "commit":
                producer.commit_transaction(KAFKA_WAIT_S)
                self.open.pop(step.producer).state = "committed"
            else:
                producer.abort_transaction(KAFKA_WAIT_S)
                self.open.pop(step.producer).state = "aborted"
        elif step.kind == "run":
            self.run_job(kill=None)
        else:
            self.run_job(kill=step.mode)

    def _produce(self, name: str | None, partitions: tuple[int, ...]) -> None:
        """Produce one record per partition listed and wait for every offset (flushed: an
        aborted transaction's records are in the log, not dropped from librdkafka's queue)."""
        producer = self.plain if name is None else self.producers[name]
        txn = None if name is None else self.open[name]
        offsets: dict[int, int] = {}
        errors: list[Any] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                offsets[json.loads(msg.value())["id"]] = msg.offset()

        ids: dict[int, int] = {}  # id -> partition
        for p in partitions:
            rid = len(self.model.records) + len(ids)
            ids[rid] = p
            value = json.dumps({"id": rid, "value": f"v{rid}"}).encode()
            producer.produce(self.topic, value=value, partition=p, on_delivery=delivered)
        assert producer.flush(KAFKA_WAIT_S) == 0, f"records of {name or 'plain'} not delivered"
        assert not errors and sorted(offsets) == sorted(ids), (errors, offsets, ids)
        for rid, p in ids.items():
            self.model.records.append(Record(rid, p, offsets[rid], txn))
        self.journal[-1] += f" -> ids {sorted(ids)} at offsets {[offsets[i] for i in sorted(ids)]}"

    def broker_offsets(self) -> tuple[dict[int, int], dict[int, int]]:
        """(last stable offset, high watermark) of each partition, as the broker lists them."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        request = {TopicPartition(self.topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
        out = []
        for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
            futures = self.admin.list_offsets(request, isolation_level=level,
                                              request_timeout=KAFKA_WAIT_S)
            out.append({tp.partition: f.result().offset for tp, f in futures.items()})
        return out[0], out[1]

    def settle(self) -> tuple[dict[int, int], dict[int, int]]:
        """Wait until the broker's last stable offsets are the model's (transaction markers
        are written after commit_transaction returns); returns them with the high watermarks."""
        want = self.model.stable_offsets()
        deadline = time.monotonic() + KAFKA_WAIT_S
        while True:
            stable, high = self.broker_offsets()
            if stable == {p: want.get(p, high[p]) for p in range(PARTITIONS)}:
                return stable, high
            assert time.monotonic() < deadline, (
                f"the broker's last stable offsets {stable} (high watermarks {high}) never "
                f"became the model's {want}; {self.context()}")
            time.sleep(0.1)

    # ------------------------------------------------------------ the job
    def run_job(self, kill: str | None) -> None:
        stable, high = self.settle()
        self.runs += 1
        self.journal[-1] += f" (last stable offsets {stable}, high watermarks {high})"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("INGEST_CRASH") and k != "PYSPARK_SUBMIT_ARGS"}
        env["PYTHONPATH"] = str(ROOT)
        if self.jars:
            env["PYSPARK_SUBMIT_ARGS"] = f"--jars {','.join(self.jars)} pyspark-shell"
        if kill in DRIVER_CRASH_POINTS:
            env["INGEST_CRASH_AT"] = kill  # the run's first micro-batch to commit dies there
        log_path = self.warehouse / f"run-{self.runs}.log"
        offsets_dir = self.checkpoint / "offsets"
        planned_before = _batch_files(offsets_dir)
        started = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, str(JOB), "--bootstrap-servers", self.kafka.plaintext,
                 "--topic", self.topic, "--table", str(self.table),
                 "--schema", "id BIGINT, value STRING", "--checkpoint", str(self.checkpoint),
                 "--available-now", "--max-offsets-per-trigger", str(self.max_offsets),
                 "--txns-per-delta", str(self.txns_per_delta), "--kafka-source", self.source,
                 "--compact", "off", "--clean", "off"],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)  # its own group: a SIGKILL takes Spark's JVM too
        try:
            if kill == SIGKILL:
                # Killed once Spark has written a new micro-batch's offsets (its plan) to the
                # checkpoint: the restart must replay exactly that range.
                while _batch_files(offsets_dir) == planned_before:
                    assert proc.poll() is None, (
                        f"the job ended ({proc.returncode}) before planning a micro-batch to "
                        f"kill:\n{log_path.read_text()[-3000:]}\n{self.context()}")
                    assert time.monotonic() - started < JOB_TIMEOUT_S, "no micro-batch planned"
                    time.sleep(0.05)
                os.killpg(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=max(JOB_TIMEOUT_S - (time.monotonic() - started), 1))
            except subprocess.TimeoutExpired:
                pytest.fail(f"run {self.runs} did not end within {JOB_TIMEOUT_S} s:\n"
                            f"{log_path.read_text()[-3000:]}\n{self.context()}")
        finally:
            _end_group(proc.pid)
        output = log_path.read_text()
        seconds = time.monotonic() - started
        self.journal[-1] += f" -> exit {proc.returncode} in {seconds:.0f} s"
        if kill is None:
            assert proc.returncode == 0, f"{output[-4000:]}\n{self.context()}"
            # Markers and aborted records are no lost records: neither error nor warning.
            assert "data loss" not in output.lower(), f"{output[-4000:]}\n{self.context()}"
        else:
            assert proc.returncode == -signal.SIGKILL, f"{output[-4000:]}\n{self.context()}"
        self.check(stable, kill)

    # ------------------------------------------------------------ the checks
    def check(self, stable: dict[int, int], kill: str | None) -> None:
        """The table is a read_committed prefix of the topic; the whole of what was stable
        when the run began, if it finished."""
        location = str(self.table)
        with Metastore.open(default_metastore_url(location)) as store:
            snapshot = store.snapshot(location)
            ranges = store.offset_ranges(location)
            states = store.write_id_states(location)
        rows = read_table(location, snapshot)
        ids = rows.column("id").to_pylist() if rows.num_rows else []  # none: no columns
        by_partition: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        for write_id, r in ranges:
            assert r.topic == self.topic and states[write_id] == "committed", (write_id, r)
            if r.until_offset > r.from_offset:
                by_partition[r.partition].append((r.from_offset, r.until_offset, write_id))
        ends: dict[int, int] = {}
        for p, parts in sorted(by_partition.items()):
            parts.sort()
            # From the first offset on, each range where the one before ended: markers and
            # aborted records are inside the ranges, not gaps; nothing is read twice.
            joined = all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))
            assert parts[0][0] == 0 and joined, f"partition {p}: {parts}; {self.context()}"
            assert len({w for _, _, w in parts}) == len(parts), parts
            ends[p] = parts[-1][1]
        where = f"run {self.runs} ({kill or 'finished'}); {self.context()}"
        left_open = {w for w, s in states.items() if s == "open"}
        if kill is None:
            # The whole of what a read_committed reader could read when the run began.
            assert ends == {p: o for p, o in stable.items() if o > 0}, (ends, stable, where)
            # The killed micro-batches' transactions: aborted by the restart.
            assert not left_open and all(states[w] == "aborted" for w in self.left_open), (
                states, self.left_open, where)
        else:
            assert all(ends[p] <= stable[p] for p in ends), (ends, stable, where)
            if kill in DRIVER_CRASH_POINTS:
                # The killed micro-batch's write id: open, its rows invisible (with the unused
                # rest of its transaction batch, --txns-per-delta write ids in all).
                assert 1 <= len(left_open) <= self.txns_per_delta, (states, where)
            self.left_open |= left_open
        duplicates = [i for i, n in Counter(ids).items() if n > 1]
        assert not duplicates, f"ids {duplicates} twice; {where}"
        expected = self.model.below(ends)
        assert sorted(ids) == expected, (
            f"table minus model: {sorted(set(ids) - set(expected))}, model minus table: "
            f"{sorted(set(expected) - set(ids))}; {where}")
        self.last_ids = sorted(ids)
        self.journal[-1] += f" -> table {len(ids)} rows, ends {ends}"

    def cli(self, *args: str) -> Any:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-m", "ingest", *args], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, f"ingest {args}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
        return json.loads(done.stdout)

    def verify(self) -> None:
        report = self.cli("verify", str(self.table), "--json")
        assert report["ok"] and not report["problems"], report

    def status(self, stable: dict[int, int]) -> None:
        """`ingest status --json`: lag measured to the last stable offset, nothing skipped."""
        stream = self.cli("status", str(self.table), "--bootstrap-servers", self.kafka.plaintext,
                          "--json")["stream"]
        seen = {e["partition"]: (e["committed_offset"], e["latest_offset"], e["lag_records"])
                for e in stream["partitions"]}
        assert seen == {p: (o or None, o, 0) for p, o in stable.items()}, (seen, stable)
        assert stream["lag_records"] == 0 and stream["skipped"] == [], stream


@pytest.mark.parametrize("source", ["python", "jvm"])
def test_transactional_topic_is_read_exactly_by_a_model_across_kills(
        apache_kafka: ApacheKafka, topic: str, warehouse: Path,
        source: str) -> None:
    seed, txns_per_delta = CASES[source]
    rng = random.Random(seed)
    steps = plan_steps(rng)
    scenario = Scenario(apache_kafka, topic, warehouse, source, rng, txns_per_delta)
    checked_open = False
    try:
        for step in steps:
            scenario.apply(step)
            if step.kind != "run":
                continue
            scenario.verify()
            stable, high = scenario.broker_offsets()
            waiting = [r for r in scenario.model.records
                       if r.offset >= stable[r.partition] and r.readable]
            if not checked_open and waiting:
                # Once, the case: readable records (plain, or of a transaction that
                # committed after the open one began) wait behind an open transaction; the
                # status's lag is 0 all the same.
                assert any(stable[p] < high[p] for p in range(PARTITIONS)), (stable, high)
                scenario.status(stable)
                checked_open = True
        assert checked_open, (f"seed {seed} never ran a micro-batch behind an open "
                              f"transaction; {scenario.context()}")
        assert not scenario.open and scenario.model.stable_offsets() == {}
        # The last run: every record any read_committed reader will ever see, once.
        assert scenario.last_ids == scenario.model.below({p: 1 << 62 for p in range(PARTITIONS)})
        scenario.status(scenario.broker_offsets()[0])
        assert any(r.txn is not None and r.txn.state == "aborted" for r in scenario.model.records)
        print(scenario.context())
    finally:
        scenario.close()
