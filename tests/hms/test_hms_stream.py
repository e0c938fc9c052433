"""The streaming job over a Hive Metastore (`--metastore thrift://`), with a real Kafka-protocol
broker and real Spark: every record exactly once across restarts, crash points and a killed
metastore; the stream and `ingest load` writing one table side by side (docs/invariants.md, 4);
the stream into a table Hive's way registered, with records that go to the dead-letter table.

The job runs as `python jobs/kafka_to_acid.py` in a subprocess (crash points kill it there);
the tables are created first with `ingest create --name <new db>.events` (or registered as
Hive's CREATE TABLE does), so that Hive 4 keeps them in their database's managed location.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from hms_server import HMS_SH, TXN_TIMEOUT_S, Server, _script_env
from support import assert_each_offset_once

from ingest.acid import read_table
from ingest.kafka.produce import produce_events, sample_events
from ingest.txn import Metastore

pytestmark = [pytest.mark.hms, pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"
SCHEMA = "id BIGINT, value STRING"


def _env(crash_at: str | None = None, skip: int = 0, counter: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_CRASH")}
    env["PYTHONPATH"] = str(ROOT)
    if crash_at:
        env.update(INGEST_CRASH_AT=crash_at, INGEST_CRASH_SKIP=str(skip),
                   INGEST_CRASH_COUNTER=counter)
    return env


def _cli(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "ingest", *args, "--json"], env=_env(),
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout) if done.stdout.strip() else {}


def _create(uri: str, warehouse: Path) -> tuple[str, str]:
    """`ingest create` of the stream's table in a new database; (location, db.table)."""
    location = str(warehouse / "events")
    name = f"s_{uuid.uuid4().hex[:10]}.events"
    _cli("create", location, "--name", name, "--schema", SCHEMA, "--metastore", uri)
    return location, name


def _job_args(servers: str, topic: str, warehouse: Path, uri: str, *extra: str,
              table: str | None = None) -> list[str]:
    return [sys.executable, str(JOB), "--bootstrap-servers", servers, "--topic", topic,
            "--table", table or str(warehouse / "events"), "--schema", SCHEMA,
            "--checkpoint", str(warehouse / "checkpoint"), "--metastore", uri,
            "--max-offsets-per-trigger", "50", "--compact", "off", "--clean", "off",
            "--on-new-field", "ignore", *extra]  # sample events' ts and dt are dropped


def _job(servers: str, topic: str, warehouse: Path, uri: str, *extra: str,
         crash_at: str | None = None, skip: int = 0,
         table: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _job_args(servers, topic, warehouse, uri, "--available-now", *extra, table=table),
        env=_env(crash_at, skip, str(warehouse / "crash-counter")), capture_output=True,
        text=True, timeout=300, check=False)


def _sink(name: str, warehouse: Path) -> str:
    """The job's sink id: `<db.table>@<checkpoint URL>`."""
    return f"{name}@{(warehouse / 'checkpoint').as_uri()}"


def _ids(uri: str, location: str) -> list[int]:
    with Metastore.open(uri) as store:
        snapshot = store.snapshot(location)
    table = read_table(location, snapshot)
    return sorted(table.column("id").to_pylist())


def _produce(servers: str, topic: str, start: int, count: int) -> None:
    events = sample_events(count, start_id=start)
    produce_events(servers, topic, events=events, partitions=2,
                   key_fn=lambda e: str(e["id"]))  # type: ignore[index]


def test_every_record_exactly_once_across_a_restart(
        kafka_broker: str, topic: str, warehouse: Path, metastore: Server) -> None:
    uri = metastore.uri
    location, name = _create(uri, warehouse)
    _produce(kafka_broker, topic, 0, 120)
    first = _job(kafka_broker, topic, warehouse, uri)
    assert first.returncode == 0, first.stderr[-3000:]
    assert _ids(uri, location) == list(range(120))

    _produce(kafka_broker, topic, 120, 80)
    again = _job(kafka_broker, topic, warehouse, uri)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _ids(uri, location) == list(range(200)), "every record exactly once"

    with Metastore.open(uri) as store:
        last = store.last_committed_batch(_sink(name, warehouse), table=name)
        ranges = store.offset_ranges(name)
        states = store.write_id_states(name)
    assert last is not None and last >= 4  # 200 records, 50 per micro-batch
    assert sorted(w for w, s in states.items() if s == "committed") == sorted(
        {w for w, _ in ranges})
    covered = sorted((r.partition, r.from_offset, r.until_offset) for _, r in ranges)
    for p in (0, 1):
        mine = [(a, b) for q, a, b in covered if q == p]
        contiguous = all(x[1] == y[0] for x, y in zip(mine, mine[1:], strict=False))
        assert mine[0][0] == 0 and contiguous, mine
    assert sum(b - a for _, a, b in covered) == 200, "offsets recorded once each"


def _wait_aborted(uri: str, name: str, write_id: int) -> None:
    """Until the server's reaper aborts the silent transaction (its hive.txn.timeout)."""
    deadline = time.monotonic() + TXN_TIMEOUT_S * 5
    with Metastore.open(uri) as store:
        while store.write_id_states(name)[write_id] == "open":
            assert time.monotonic() < deadline, f"write id {write_id} was never aborted"
            time.sleep(1)
        assert store.write_id_states(name)[write_id] == "aborted"


# The writer points fire in Spark's Python workers (an executor dying mid-write: the driver
# lives on, aborts the micro-batch's transaction itself and stops the query), the others in
# the driver: before the commit, and inside it after the progress row is written (the dead
# job's transaction stays open until `ingest recover` or the metastore's own timeout aborts
# it). Skips put the crash after a committed micro-batch of that run; writer.after_stripes's
# ninth hit is in the driver, which writes the hidden side tables' files itself, so the dead
# job leaves a file with stripes and no footer and its transaction open for `ingest recover`
# (it comes first, on the fresh table and topic it was counted on). The driver's points run on
# Hive 3.1 too (its commit ignores the key/value Hive 4 could carry: the progress table is what
# holds); the writer's points do not depend on the metastore's version (tests/crash has them
# on the SQLite store). Each point is one link of a chain on one table and topic: the job
# restarted after a crash is armed with the next point, so each restart is also the recovery
# of the crash before it, and a clean run ends the chain: N+1 runs for N points.
_CHAINS = {
    "4": [("writer.after_stripes", 8, "recover"), ("writer.after_footer", 4, "the job"),
          ("writer.after_side_file", 4, "the job"), ("sink.before_commit", 1, "recover"),
          ("metastore.during_commit", 1, "timeout")],
    "3": [("sink.before_commit", 1, "recover"), ("metastore.during_commit", 1, "recover")],
}
# Uncommitted records before each armed run, as a fresh table had them: three micro-batches.
_LINK_RECORDS = 150


def _exactly_once_so_far(uri: str, name: str, location: str, produced: int) -> int:
    """The committed rows are the records of the committed offset ranges, each once, the
    ranges contiguous from offset 0 in each partition; their number."""
    with Metastore.open(uri) as store:
        ranges = store.offset_ranges(name)
    ids = _ids(uri, location)
    assert_each_offset_once(ids, ranges, produced)
    return len(ids)


@pytest.mark.parametrize("version", ["4", "3"], ids=["hive4", "hive3"])
def test_crash_point_then_restart_is_exactly_once(
        kafka_broker: str, topic: str, warehouse: Path, request: pytest.FixtureRequest,
        version: str) -> None:
    uri = request.getfixturevalue(f"hms{version}").uri
    location, name = _create(uri, warehouse)
    produced, rows, dead_ids = 0, 0, []
    seen: set[int] = set()
    for point, skip, aborted_by in _CHAINS[version]:
        more = _LINK_RECORDS - (produced - rows)  # what the last crash left counts
        if more > 0:
            _produce(kafka_broker, topic, produced, more)
            produced += more
        (warehouse / "crash-counter").unlink(missing_ok=True)
        crashed = _job(kafka_broker, topic, warehouse, uri, "--flush-rows", "20",
                       crash_at=point, skip=skip)
        assert crashed.returncode != 0, f"the armed crash point {point} must stop the job"
        hits = (warehouse / "crash-counter").stat().st_size
        assert hits > skip, f"only {hits} hits of {point}: the crash never fired"
        with Metastore.open(uri) as store:
            states = store.write_id_states(name)
        new = {w: s for w, s in states.items() if w not in seen}
        seen |= set(states)
        committed = [w for w, s in new.items() if s == "committed"]
        assert committed, f"{point}: the crash came after a committed micro-batch"
        dead = [w for w, s in new.items() if s != "committed"]
        assert len(dead) == 1 and len(new) == len(committed) + 1, (point, new)
        dead_ids.append(dead[0])
        # Left open by a dead job; the server's reaper aborts it once hive.txn.timeout (20 s)
        # passed since its last heartbeat, which a loaded machine may already have let happen.
        assert new[dead[0]] in (("aborted",) if aborted_by == "the job"
                                else ("open", "aborted")), (point, new)
        # The run recovered the crash before it and lost nothing it committed.
        now = _exactly_once_so_far(uri, name, location, produced)
        assert now > rows, f"{point}: the restarted job committed nothing"
        rows = now
        if aborted_by == "recover":
            report = _cli("recover", location, "--metastore", uri, "--txn-timeout-s", "0")
            assert report, report
            with Metastore.open(uri) as store:
                assert store.write_id_states(name)[dead[0]] == "aborted", point
        elif aborted_by == "timeout":
            _wait_aborted(uri, name, dead[0])

    restarted = _job(kafka_broker, topic, warehouse, uri)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert _ids(uri, location) == list(range(produced)), "every record exactly once"
    assert _exactly_once_so_far(uri, name, location, produced) == produced
    with Metastore.open(uri) as store:
        ranges = store.offset_ranges(name)
    assert not set(dead_ids) & {w for w, _ in ranges}, "no dead write id holds offsets"


def test_the_metastore_killed_mid_stream_stops_the_job_and_a_restart_is_exactly_once(
        kafka_broker: str, topic: str, warehouse: Path) -> None:
    """kill -9 of the Hive Metastore while the job runs micro-batches: the job retries for a
    bounded time, then stops with an error naming the metastore; with the metastore back
    (same database, same port), the restarted job goes on exactly once."""
    from hms_server import hms_server

    records = 600
    with hms_server("4") as server:
        uri = server.uri
        location, name = _create(uri, warehouse)
        _produce(kafka_broker, topic, 0, records)
        job = subprocess.Popen(
            _job_args(kafka_broker, topic, warehouse, uri, "--trigger", "1",
                      "--max-offsets-per-trigger", "20"),
            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 240
            with Metastore.open(uri) as store:
                while (store.last_committed_batch(_sink(name, warehouse)) or -1) < 1:
                    assert job.poll() is None, job.communicate()[1][-3000:]
                    assert time.monotonic() < deadline, "no micro-batch committed"
                    time.sleep(0.5)
            os.killpg(int((server.directory / "pid").read_text()), signal.SIGKILL)
            killed_at = time.monotonic()
            _, err = job.communicate(timeout=240)
            stopped_after = time.monotonic() - killed_at
        finally:
            if job.poll() is None:
                job.kill()
                job.communicate()
        assert job.returncode == 3, err[-3000:]
        last = [line for line in err.splitlines() if line.startswith("Error: ")][-1]
        # Lost between calls (reconnects exhausted) or inside one (a call cut off): either
        # way the job stops naming the metastore.
        assert last.startswith(f"Error: Lost the Hive Metastore at {uri}"), last
        assert ("attempts to reconnect over 15 s failed" in last
                or " during " in last), last  # a cut-off write is not retried
        assert stopped_after < 150, f"the job took {stopped_after:.0f} s to stop"

        port = uri.rsplit(":", 1)[1]
        restarted = subprocess.run(["bash", str(HMS_SH), "start", "--version", "4", "--dir",
                                    str(server.directory), "--port", port],
                                   capture_output=True, text=True, timeout=300,
                                   env=_script_env(), check=False)
        assert restarted.returncode == 0, restarted.stderr[-3000:]
        again = _job(kafka_broker, topic, warehouse, uri)
        assert again.returncode == 0, again.stderr[-3000:]
        assert _ids(uri, location) == list(range(records)), "every record exactly once"


def test_the_stream_and_a_load_get_distinct_write_ids_and_both_commit(
        kafka_broker: str, topic: str, warehouse: Path, metastore: Server) -> None:
    """`ingest load`'s write is open on the table while the stream runs: the stream's
    micro-batches take write ids above it, and the load commits afterwards; then a second
    load through the CLI. Every row of both writers, exactly once."""
    import pyarrow as pa

    from ingest.table.core._definition import table_compression
    from ingest.table.core._open import table_fs
    from ingest.table.core._written import commit, writing

    uri = metastore.uri
    location, name = _create(uri, warehouse)
    _produce(kafka_broker, topic, 0, 100)
    with Metastore.open(uri) as store:
        defn = store.get_table(name)
        with writing(store, defn, table_fs(defn)[0], agent="host:1:ingest-load") as (txn, w):
            directory = f"{location}/delta_{txn.write_id:07d}_{txn.write_id:07d}_0000"
            w.make_directory(location, directory)
            rows = pa.table({"id": [1000, 1001], "value": ["l0", "l1"]}, schema=defn.row_schema)
            w.write_bucket(directory, 0, rows, row_schema=defn.row_schema,
                           write_id=txn.write_id, compression=table_compression(defn))
        streamed = _job(kafka_broker, topic, warehouse, uri)
        assert streamed.returncode == 0, streamed.stderr[-3000:]
        assert store.write_id_states(name)[txn.write_id] == "open"
        commit(store, txn, w)
        ranges = store.offset_ranges(name)
    stream_ids = {w for w, _ in ranges}
    assert txn.write_id not in stream_ids and min(stream_ids) > txn.write_id
    src = warehouse / "more.jsonl"
    src.write_text("".join(json.dumps({"id": i, "value": f"m{i}"}) + "\n"
                           for i in range(2000, 2003)))
    _cli("load", location, "--input", str(src), "--metastore", uri)
    with Metastore.open(uri) as store:
        states = store.write_id_states(name)
    assert set(states.values()) == {"committed"}, states
    assert len(states) == len(stream_ids) + 2
    assert _ids(uri, location) == [*range(100), 1000, 1001, 2000, 2001, 2002]


# Records the parser refuses, each with the reason the dead-letter table must hold.
_BAD = {
    7: (b"not json", "JSON parse error: Invalid value."),
    19: (b"null", "the record value is not a JSON object (it starts with 'null')"),
    30: (b'{"id":"x","value":"a"}',
         'field \'id\': the JSON string "x" does not fit column id BIGINT (a type conflict)'),
    44: (b'{"id":44,"value":"\xff"}', "the record value is not UTF-8: b'\\xff' at byte 18"),
    58: (b"[1,2]", "the record value is not a JSON object (it starts with '[1,2]')"),
}


@pytest.mark.trino
def test_the_stream_writes_a_table_hive_registered_with_its_dead_letters(
        kafka_broker: str, topic: str, warehouse: Path, hms4: Server,
        trino_on_hms4: Server, tmp_path: Path) -> None:
    """The stream into a table registered as Hive's CREATE TABLE ... STORED AS ORC
    TBLPROPERTIES ('transactional'='true') registers it, which Trino wrote first, with records
    that do not parse among the good ones: the good rows read back exactly through our reader
    and Trino, and `<db.t>__dead_letter`, which the job registered in the HMS beside it, holds
    exactly the bad records with their reasons."""
    from hms_server import register_hive_acid_table, trino_query

    from ingest.txn import hms

    uri = hms4.uri
    name, where = register_hive_acid_table(uri, tmp_path, [("id", "bigint"),
                                                           ("value", "string")])
    trino_query(trino_on_hms4, f"INSERT INTO {name} VALUES (1000, 'trino')")
    events: list[object] = [{"id": i, "value": f"v{i}"} for i in range(60)]
    for offset, (raw, _) in _BAD.items():
        events[offset] = raw  # one partition: a record's position is its offset
    produce_events(kafka_broker, topic, events=events, partitions=1)

    done = _job(kafka_broker, topic, warehouse, uri, table=where)
    assert done.returncode == 0, done.stderr[-3000:]
    good = {i: f"v{i}" for i in range(60) if i not in _BAD} | {1000: "trino"}
    with Metastore.open(uri) as store:
        rows = read_table(where, store.snapshot(where))
        dead_where = store.get_table(f"{name}__dead_letter").location
        dead = read_table(dead_where, store.snapshot(dead_where))
    assert dict(zip(rows.column("id").to_pylist(), rows.column("value").to_pylist(),
                    strict=True)) == good and rows.num_rows == len(good)
    assert trino_query(trino_on_hms4, f"SELECT id, value FROM {name} ORDER BY id") == [
        [i, v] for i, v in sorted(good.items())]

    letters = sorted(dead.to_pylist(), key=lambda r: r["offset"])
    assert [(r["offset"], r["value"], r["error"], r["topic"], r["partition"], r["key"])
            for r in letters] == [(o, raw, why, topic, 0, None)
                                  for o, (raw, why) in _BAD.items()]
    assert trino_query(trino_on_hms4, f'SELECT "offset", error FROM "{name.split(".")[0]}".'
                       f'"t__dead_letter" ORDER BY 1') == [
        [r["offset"], r["error"]] for r in letters]

    with hms.connect(uri) as conn:
        registered = hms.get_table(conn, f"{name}__dead_letter")
    assert registered.full_acid_problem() is None
    assert registered.location == dead_where.replace("file://", "file:")
    assert [c.name for c in registered.columns] == [
        "key", "value", "topic", "partition", "offset", "error"]
