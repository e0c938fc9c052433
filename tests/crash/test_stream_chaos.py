"""Chaos on a live topic: records keep arriving while the streaming job is SIGKILLed (its whole
process group: driver JVM, Python workers) at random moments and restarted, each time without
any clean-up by hand. At the end every record produced is in the table exactly once, no
transaction is left open and `ingest verify` finds nothing wrong.

Runs with the table on an S3 server (moto) and the metastore in PostgreSQL, where a
multi-host deployment keeps them; the local case is the same code (tests/spark/test_stream_kill.py).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from s3_server import Bucket

from ingest.kafka.produce import produce_events, sample_events
from ingest.table import open_table
from ingest.txn import Metastore

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.crash, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"
BURST = 25  # records a burst, one burst every ~0.5 s for as long as the kills go on
KILLS = 3


@dataclass
class Target:
    """Where the table and the metastore live, and the options every command needs."""

    location: str
    metastore: str
    storage_options: dict[str, str] = field(default_factory=dict)

    def option_args(self) -> list[str]:
        args = ["--metastore", self.metastore]
        for key, value in self.storage_options.items():
            args += ["--storage-option", f"{key}={value}"]
        return args


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INGEST_CRASH", "FSSPEC_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _start_job(servers: str, topic: str, target: Target, checkpoint: Path, log: Path, *,
               available_now: bool) -> subprocess.Popen[bytes]:
    args = [sys.executable, str(JOB), "--bootstrap-servers", servers, "--topic", topic,
            "--table", target.location, "--schema", "id BIGINT, value STRING",
            "--checkpoint", str(checkpoint), "--max-offsets-per-trigger", "100",
            "--trigger", "1", "--compact", "off", "--on-new-field", "ignore",  # ts, dt dropped
            *target.option_args()]
    if available_now:
        args.append("--available-now")
    with log.open("ab") as out:
        return subprocess.Popen(args, env=_env(), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _committed(target: Target) -> int:
    """Committed write ids of the table (0 while the table does not exist yet)."""
    try:
        with Metastore.open(target.metastore, create=False, read_only=True) as store:
            states = store.write_id_states(target.location)
    except Exception:  # noqa: BLE001 - the first job has not created the table yet
        return 0
    return sum(1 for s in states.values() if s == "committed")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


class LiveProducer(threading.Thread):
    """Produces bursts of events until stopped, so every run of the job has records arriving
    while it is killed; `produced` counts them (ids 0..produced-1)."""

    def __init__(self, servers: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.servers, self.topic = servers, topic
        self.stop = threading.Event()
        self.produced = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                produce_events(self.servers, self.topic,
                               events=sample_events(BURST, start_id=self.produced),
                               partitions=2, create_topic=self.produced == 0,
                               key_fn=lambda e: str(e["id"]))  # type: ignore[index]
                self.produced += BURST
                self.stop.wait(0.5)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


def run_chaos(kafka_broker: str, topic: str, target: Target, work: Path) -> None:
    rng = random.Random(os.environ.get("INGEST_CHAOS_SEED", "14"))
    checkpoint, log = work / "checkpoint", work / "job.log"
    producer = LiveProducer(kafka_broker, topic)
    producer.start()
    try:
        for kill in range(KILLS):
            before = _committed(target)
            proc = _start_job(kafka_broker, topic, target, checkpoint, log, available_now=False)
            deadline = time.monotonic() + 120
            # Kill after this run has committed something, at a random moment of a later batch.
            while _committed(target) <= before:
                assert proc.poll() is None, f"job {kill} exited early:\n{log.read_text()[-4000:]}"
                assert time.monotonic() < deadline, f"no commit:\n{log.read_text()[-4000:]}"
                time.sleep(0.2)
            time.sleep(rng.uniform(0.0, 2.5))
            _kill_group(proc)
    finally:
        producer.stop.set()
        producer.join(timeout=60)
    assert producer.error is None, producer.error
    records = producer.produced
    assert records >= 4 * BURST

    final = _start_job(kafka_broker, topic, target, checkpoint, log, available_now=True)
    assert final.wait(timeout=240) == 0, log.read_text()[-4000:]

    table = open_table(target.location, metastore=target.metastore,
                       storage_options=target.storage_options or None)
    ids = sorted(table.to_arrow(columns=["id"]).column("id").to_pylist())
    assert len(ids) == len(set(ids)), "a record was written twice"
    assert ids == list(range(records)), "a record was lost"
    with Metastore.open(target.metastore, create=False, read_only=True) as store:
        states = store.write_id_states(target.location)
    assert "open" not in states.values()
    assert list(states.values()).count("committed") > KILLS

    verified = subprocess.run(
        [sys.executable, "-m", "ingest", "verify", target.location, "--json",
         *target.option_args()[2:]], env={**_env(), "INGEST_METASTORE": target.metastore},
        capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["problems"] == []


def test_table_on_s3_with_a_postgresql_metastore_survives_sigkills_on_a_live_topic(
        kafka_broker: str, topic: str, tmp_path: Path, s3: Bucket, pg_url: str) -> None:
    target = Target(f"{s3.url}/wh/events", pg_url,
                    {k: str(v) for k, v in s3.options.items()})
    run_chaos(kafka_broker, topic, target, tmp_path)
