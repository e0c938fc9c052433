"""Issue 20's first acceptance item, end to end: the streaming job (a real Kafka-protocol broker,
real Spark, `python jobs/kafka_to_acid.py` in a process of its own) writes into a table of a
Hive Metastore (4.0.1, and 3.1.3) with its default maintenance (`--compact auto --clean
auto`: a driver thread compacting what Hive's initiator policy asks for and cleaning after
it), and at each checkpoint Trino's SELECT and Hive 4's own readers (row by row and
vectorized) return exactly the rows `ingest cat` returns, which are exactly the records
produced minus those deleted:
after appends, after `ingest delete`, after the stream's major compaction, after its minor
compaction (both with their inputs still on disk: an older open transaction holds the
cleaner back), and after the stream's cleaner removed those inputs.

The table's thresholds make the stream's initiator decide at known points: more than 4 deltas
with no base ask for a major compaction, more than 4 deltas over a base for a minor one
(delta bytes never reach the major threshold), and the cleaner's retention is 0 s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hms.hive4 import read_rows, read_rows_vectorized
from hms_server import Server, trino_query
from support import ok_json, run_cli

from ingest.acid.format import parse_directory
from ingest.kafka.produce import produce_events, sample_events
from ingest.txn import Metastore, hms

pytestmark = [pytest.mark.hms, pytest.mark.kafka, pytest.mark.spark, pytest.mark.trino,
              pytest.mark.java, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"
SCHEMA = "id BIGINT, value STRING"
PROPERTIES = {
    "compactorthreshold.hive.compactor.delta.num.threshold": "4",
    "compactorthreshold.hive.compactor.delta.pct.threshold": "1000",
    "ingest.cleaner.retention.seconds": "0",
}
Rows = list[tuple[int, str]]


def _produce(servers: str, topic: str, start: int, count: int, produced: dict[int, str]) -> None:
    events = list(sample_events(count, start_id=start))
    produce_events(servers, topic, events=events, partitions=2,
                   key_fn=lambda e: str(e["id"]))  # type: ignore[index]
    produced.update({int(e["id"]): str(e["value"]) for e in events})


def _wait(what: str, done: Callable[[], bool], job: subprocess.Popen[str], log: Path,
          timeout_s: float = 240) -> None:
    """Poll `done` until it holds; fail with the job's log if the job died or time ran out."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert job.poll() is None, f"the job stopped while waiting for {what}:\n" \
                                   f"{log.read_text()[-4000:]}"
        assert time.monotonic() < deadline, f"no {what} after {timeout_s:.0f} s:\n" \
                                            f"{log.read_text()[-4000:]}"
        time.sleep(0.5)


def _streamed(uri: str, name: str) -> int:
    """Records the stream committed so far (its offset ranges, committed with the rows)."""
    with Metastore.open(uri) as store:
        return sum(r.until_offset - r.from_offset for _, r in store.offset_ranges(name))


def _compactions(uri: str, name: str) -> list[tuple[str, str]]:
    with Metastore.open(uri) as store:
        return [(c.kind, c.state) for c in store.compactions(name)]


def _minor_output(name: str) -> bool:
    """A minor compaction's insert delta: one range of several write ids (each micro-batch's
    delta holds one)."""
    parsed = parse_directory(name)
    return (parsed is not None and parsed.kind == "delta"
            and parsed.min_write_id < parsed.max_write_id)


def _directories(location: str, uri: str, capsys: pytest.CaptureFixture[str]
                 ) -> dict[str, str]:
    """`ingest status`: each directory of the (unpartitioned) table -> its status."""
    status = ok_json(["status", location, "--metastore", uri], capsys)
    (partition,) = status["partitions"]
    return {d["name"]: d["status"] for d in partition["directories"]}


def _check(name: str, location: str, uri: str, trino: Server, want: Rows,
           capsys: pytest.CaptureFixture[str]) -> None:
    """`ingest cat`, Trino, and Hive 4's row and vectorized readers all read exactly `want`."""
    code, out, err = run_cli(["cat", location, "--row-id", "--metastore", uri, "--json"],
                             capsys)
    assert code == 0, err
    cat = [json.loads(line) for line in out.splitlines()]
    assert sorted((r["id"], r["value"]) for r in cat) == want, "ingest cat"
    assert [(int(r[0]), str(r[1])) for r in trino_query(
        trino, f"SELECT id, value FROM {name} ORDER BY id")] == want, "Trino"
    with hms.connect(uri) as conn:
        hive = read_rows(conn, name)
        vectorized = read_rows_vectorized(conn, name)
    assert sorted((r["id"], r["value"]) for r in hive) == want, "Hive 4's row reader"
    # The same ROW__IDs as ours, whatever compaction rewrote.
    assert sorted((r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"],
                   r["id"]) for r in hive) == sorted(
        (r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"], r["id"])
        for r in cat), "ROW__IDs"
    assert sorted((r["id"], r["value"]) for r in vectorized) == want, "Hive 4's vectorized reader"


@contextmanager
def _stream(servers: str, topic: str, warehouse: Path, uri: str) -> Iterator[
        tuple[subprocess.Popen[str], Path]]:
    """The job with its default maintenance, until the block ends (then SIGINT, as a user's
    Ctrl-C); yields the process and its log."""
    log = warehouse / "job.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_CRASH")}
    env["PYTHONPATH"] = str(ROOT)
    with open(log, "w") as out:
        job = subprocess.Popen(
            [sys.executable, str(JOB), "--bootstrap-servers", servers, "--topic", topic,
             "--table", str(warehouse / "events"), "--schema", SCHEMA,
             "--checkpoint", str(warehouse / "checkpoint"), "--metastore", uri,
             "--trigger", "1", "--max-offsets-per-trigger", "20",
             "--maintenance-interval-s", "0", "--on-new-field", "ignore"],  # ts, dt dropped
            env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            yield job, log
        finally:
            if job.poll() is None:
                job.send_signal(signal.SIGINT)
                try:
                    job.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    job.kill()
                    job.wait()


@pytest.mark.parametrize("version", ["4", "3"], ids=["hive4", "hive3"])
def test_the_stream_with_its_maintenance_reads_exactly_the_committed_rows_everywhere(
        kafka_broker: str, topic: str, warehouse: Path, version: str,
        request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]) -> None:
    """Hive 4.0.1 (`_vT` output, Hive's compaction queue) and Hive 3.1.3 (Hive 3 names, the
    history in a table parameter); Hive 4's readers take their snapshot from either."""
    server: Server = request.getfixturevalue(f"hms{version}")
    trino: Server = request.getfixturevalue(f"trino_on_hms{version}")
    uri = server.uri
    location = str(warehouse / "events")
    name = f"e2e_{uuid.uuid4().hex[:10]}.events"
    ok_json(["create", location, "--name", name, "--schema", SCHEMA, "--metastore", uri,
             *(a for k, v in PROPERTIES.items() for a in ("--property", f"{k}={v}"))], capsys)
    produced: dict[int, str] = {}

    def want() -> Rows:
        return sorted(produced.items())

    def check(what: str) -> None:
        try:
            _check(name, location, uri, trino, want(), capsys)
        except AssertionError as e:
            raise AssertionError(f"at the checkpoint {what}: {e}") from e

    def all_streamed() -> bool:
        return _streamed(uri, name) == len(produced) + len(deleted)

    deleted: dict[int, str] = {}
    with _stream(kafka_broker, topic, warehouse, uri) as (job, log):
        # 1. Appends: two or three micro-batches, a delta each; too few to compact.
        _produce(kafka_broker, topic, 0, 40, produced)
        _wait("40 records committed", all_streamed, job, log)
        assert _compactions(uri, name) == []
        check("after appends")

        # 2. `ingest delete` beside the running stream: a delete delta of its own.
        ok_json(["delete", location, "--where", "id < 10 OR id = 25", "--metastore", uri],
                capsys)
        deleted.update({i: produced.pop(i) for i in [*range(10), 25]})
        check("after ingest delete")

        # An older transaction (a Hive or Trino query, say) stays open from here on: the
        # cleaner must keep every compaction's inputs until it ends.
        with hms.connect(uri) as conn:
            (older,) = hms.open_txns(conn, 1)
        with hms.Heartbeater(uri, older):
            # 3. More deltas than the threshold and no base: the stream compacts (major).
            _produce(kafka_broker, topic, 40, 40, produced)
            _wait("a major compaction", lambda: ("major", "ready for cleaning")
                  in _compactions(uri, name) and all_streamed(), job, log)
            dirs = _directories(location, uri, capsys)
            (base,) = [d for d, s in dirs.items() if d.startswith("base_")]
            assert ("_v" in base) == (version == "4") and dirs[base] == "chosen", dirs
            assert any(s == "obsolete" and d.startswith("delete_delta_")
                       for d, s in dirs.items()), dirs
            check("after the stream's major compaction")

            # 4. Over the base, more deltas than the threshold: a minor compaction.
            _produce(kafka_broker, topic, 80, 120, produced)
            _wait("a minor compaction", lambda: ("minor", "ready for cleaning")
                  in _compactions(uri, name) and all_streamed(), job, log)
            dirs = _directories(location, uri, capsys)
            (minor,) = [d for d in dirs if _minor_output(d)]
            assert dirs[minor] == "chosen" and sum(s == "obsolete" for s in dirs.values()) > 5
            check("after the stream's minor compaction")
            with hms.connect(uri) as conn:
                hms.abort_txn(conn, older)

        # 5. The older transaction gone, the stream's next run cleans.
        _produce(kafka_broker, topic, 200, 10, produced)
        _wait("the cleaner", lambda: all_streamed() and all(
            s == "succeeded" for _, s in _compactions(uri, name)), job, log)
        dirs = _directories(location, uri, capsys)
        assert "obsolete" not in dirs.values() and base in dirs and minor in dirs, dirs
        check("after cleaning")
        assert job.poll() is None, log.read_text()[-4000:]
    text = log.read_text()
    assert "Maintenance: " not in text, [line for line in text.splitlines()
                                         if "Maintenance: " in line]
    assert sorted(_compactions(uri, name)) == [("major", "succeeded"), ("minor", "succeeded")]
