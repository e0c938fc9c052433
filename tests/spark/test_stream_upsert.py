"""The stream's --mode upsert and cdc through the real broker and real Spark: after several
micro-batches the table equals a dict of key -> row (our reader and Hive 2.3's), out-of-order
events with --order-by, bad records dead-lettered, a kill between micro-batches then a
restart exactly once, and the refusals made before Kafka or Spark start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from external import free_port, require
from support import run_cli

import ingest
from ingest.acid.read.reader import read_table
from ingest.errors import CommitConflictError, ConfigError
from ingest.kafka.produce import produce_events
from ingest.spark.job import StreamSummary, run_stream
from ingest.spark.sink import dead_letter_location
from ingest.table.write import create_table
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support:FutureWarning")]

SCHEMA = "id BIGINT, value STRING, v BIGINT"
ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"


def _key(event: Any) -> str:
    """The Kafka record key: a JSON object of the key columns (how a tombstone names its key)."""
    return json.dumps({"id": event[0]})


def produce(servers: str, topic: str, events: list[tuple[int, Any]], *,
            partitions: int = 2) -> None:
    """(id, value or None) pairs, each keyed by its id's JSON object, so one key's events
    share a Kafka partition and keep their order."""
    keys = iter([_key(e) for e in events])
    # produce_events asks the key of each value right after taking it, in order.
    produce_events(servers, topic, events=[v for _, v in events],
                   key_fn=lambda _: next(keys), partitions=partitions)


def committed(location: str) -> Any:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    return read_table(location, snapshot)


def rows_by_key(location: str) -> dict[int, dict[str, Any]]:
    """Our reader's rows by id; a key held twice fails (a double insert)."""
    rows = committed(location).to_pylist()
    by_key = {r["id"]: r for r in rows}
    assert len(by_key) == len(rows), sorted(r["id"] for r in rows)
    return by_key


def hive_rows(location: str) -> dict[int, dict[str, Any]]:
    """Hive 2.3's merged read (OrcRawRecordMerger, and OrcInputFormat's query path)."""
    from compat import javatools

    ok, why = javatools.available()
    require(ok, f"Java and pyspark's jars for the Hive tools ({why})")
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location).to_hive_string()
    root = location.removeprefix("file://")
    out: list[dict[str, dict[str, Any]]] = []
    for reader in ("raw_merger", "input_format"):
        [result] = javatools.hive_merged_read_many(
            [(root, snapshot)], columns="id,value,v", columns_types="bigint:string:bigint",
            reader=reader)
        rows = [r["row"] for r in result["rows"]]
        by_key = {r["id"]: r for r in rows}
        assert len(by_key) == len(rows), reader
        out.append(by_key)
    assert out[0] == out[1]
    return out[0]


def stream(spark: Any, servers: str, topic: str, warehouse: Path, **options: Any
           ) -> StreamSummary:
    summary = run_stream(spark, bootstrap_servers=servers, topic=topic,
                         table=str(warehouse / "t"), schema_ddl=SCHEMA,
                         checkpoint=str(warehouse / "ck"), available_now=True,
                         kafka_timeout_s=10, compact="off", clean="off", buckets=4, **options)
    assert isinstance(summary, StreamSummary)
    return summary


def upsert_events() -> tuple[list[tuple[int, Any]], dict[int, dict[str, Any]]]:
    """Inserts of 0..29, updates, tombstones, an update that changes nothing, and a re-insert
    after a delete; and the dict they leave."""
    events: list[tuple[int, Any]] = [(i, {"id": i, "value": f"v{i}", "v": 1}) for i in range(30)]
    events += [(i, {"id": i, "value": f"u{i}", "v": 2}) for i in range(0, 30, 3)]
    events += [(i, None) for i in range(1, 30, 5)]  # tombstones delete 1, 6, 11, ...
    events += [(4, {"id": 4, "value": "v4", "v": 1})]  # equal to the stored row: nothing
    events += [(6, {"id": 6, "value": "back", "v": 3}), (3, {"id": 3, "value": "again", "v": 3})]
    model: dict[int, dict[str, Any]] = {}
    for key, value in events:
        if value is None:
            model.pop(key, None)
        else:
            model[key] = value
    return events, model


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.java
@pytest.mark.slow
def test_upsert_stream_ends_equal_to_the_dict_and_dead_letters_bad_records(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    events, model = upsert_events()
    produce(kafka_broker, topic, events)
    # Bad records: no key column, a tombstone without a record key, not JSON.
    produce_events(kafka_broker, topic, events=[{"value": "no id", "v": 1}, None, b"{broken"],
                   partitions=2)
    summary = stream(spark, kafka_broker, topic, warehouse, mode="upsert", key="id",
                     max_offsets_per_trigger=20)
    assert summary.batches >= 3 and summary.dead_letters == 3
    location = str(warehouse / "t")
    assert rows_by_key(location) == model
    assert hive_rows(location) == model
    dead = committed(dead_letter_location(location)).to_pylist()
    by_value = {r["value"]: r["error"] for r in dead}
    assert len(dead) == 3
    assert by_value[None] == "a tombstone (null value) without a record key names no row"
    assert by_value[b'{"value":"no id","v":1}'] == "key column 'id' is null or missing"
    assert by_value[b"{broken"].startswith("JSON parse error")
    # Split-update on disk: delete_delta and delta of the same write ids, committed together.
    names = {p.name for p in Path(location).iterdir()}
    deletes = {n.removeprefix("delete_") for n in names if n.startswith("delete_delta_")}
    assert deletes and deletes <= names
    with Metastore.open(default_metastore_url(location)) as store:
        assert set(store.write_id_states(location).values()) == {"committed"}

    # A second run appends more changes to the same table: only the touched keys change.
    more = [(2, {"id": 2, "value": "later", "v": 5}), (2, None), (40, {"id": 40, "value": "n",
                                                                      "v": 1})]
    produce(kafka_broker, topic, more)
    model.pop(2)
    model[40] = {"id": 40, "value": "n", "v": 1}
    again = stream(spark, kafka_broker, topic, warehouse, mode="upsert", key="id")
    assert again.skipped == 0 and again.dead_letters == 0
    assert rows_by_key(location) == model


def envelope(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
             ts_ms: int = 0) -> dict[str, Any]:
    return {"before": before, "after": after, "op": op, "ts_ms": ts_ms,
            "source": {"connector": "postgresql", "table": "t"}}


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.java
@pytest.mark.slow
def test_cdc_stream_with_order_by_applies_out_of_order_events_by_their_version(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    row = lambda i, v, s: {"id": i, "value": s, "v": v}  # noqa: E731
    events: list[tuple[int, Any]] = [(i, envelope("r", None, row(i, 1, f"snap{i}")))
                                     for i in range(12)]
    events += [
        (0, envelope("u", row(0, 1, "snap0"), row(0, 3, "three"))),
        (0, envelope("u", row(0, 1, "snap0"), row(0, 2, "two"))),  # older: loses
        (1, envelope("u", None, row(1, 5, "five"))),
        (1, envelope("d", row(1, 5, "five"), None)),  # same version: d wins (c<r<u<d)
        (2, {"schema": {}, "payload": envelope("u", None, row(2, 4, "wrapped"))}),
        (3, envelope("c", None, row(3, 0, "stale"))),  # older than the stored v=1: skipped
        (20, envelope("c", None, row(20, 1, "new"))),
        (5, envelope("d", row(5, 9, "x"), None)),
        (5, envelope("u", None, row(5, 2, "late"))),  # older than the delete
        (6, None),  # tombstone: deletes 6
        (7, envelope("x", None, row(7, 9, "unknown op"))),  # bad: unknown op
        (8, {"before": None, "after": row(8, 9, "no op")}),  # bad: no op
        (9, envelope("t", None, None)),  # bad: a truncate
    ]
    events += [(0, envelope("u", row(0, 3, "three"), row(0, 2, "two again")))]  # stale, later
    model = {i: row(i, 1, f"snap{i}") for i in range(12)}
    model[0] = row(0, 3, "three")
    del model[1]
    model[2] = row(2, 4, "wrapped")
    model[20] = row(20, 1, "new")
    del model[5], model[6]
    produce(kafka_broker, topic, events, partitions=1)
    summary = stream(spark, kafka_broker, topic, warehouse, mode="cdc", key="id",
                     order_by="v", max_offsets_per_trigger=7)
    assert summary.batches >= 4 and summary.dead_letters == 3
    stale = sum(r.changes.stale for r in summary.reports if r.changes is not None)
    assert stale >= 2  # id 3 and the last event of id 0 met a newer stored row
    location = str(warehouse / "t")
    assert rows_by_key(location) == model
    assert hive_rows(location) == model
    reasons = sorted(r["error"] for r in committed(dead_letter_location(location)).to_pylist())
    assert reasons == [
        "op 't' is a truncate, which --mode cdc does not apply; expected c, r, u or d",
        "op 'x' is not a Debezium op; expected c, r, u or d",
        "the Debezium envelope has no 'op' (fields: after, before)"]


def run_job(servers: str, topic: str, warehouse: Path, *, crash_skip: int | None = None
            ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_CRASH")}
    if crash_skip is not None:
        env.update(INGEST_CRASH_AT="sink.before_commit", INGEST_CRASH_SKIP=str(crash_skip),
                   INGEST_CRASH_COUNTER=str(warehouse / "crash-counter"))
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, str(JOB), "--bootstrap-servers", servers, "--topic", topic,
         "--table", str(warehouse / "t"), "--schema", SCHEMA, "--checkpoint",
         str(warehouse / "ck"), "--available-now", "--max-offsets-per-trigger", "20",
         "--mode", "upsert", "--key", "id", "--buckets", "4", "--compact", "off",
         "--clean", "off"],
        env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.crash
@pytest.mark.slow
def test_a_kill_between_micro_batches_then_a_restart_is_exactly_once(
        kafka_broker: str, topic: str, warehouse: Path) -> None:
    # Batch 0 inserts 0..19; batch 1 updates and deletes some of them (one partition: the
    # batches are offsets 0-19 and 20-39).
    events: list[tuple[int, Any]] = [(i, {"id": i, "value": f"v{i}", "v": 1}) for i in range(20)]
    events += [(i, {"id": i, "value": f"u{i}", "v": 2}) for i in range(0, 20, 2)]
    events += [(i, None) for i in range(1, 20, 2)]
    produce(kafka_broker, topic, events, partitions=1)
    location = str(warehouse / "t")

    crashed = run_job(kafka_broker, topic, warehouse, crash_skip=1)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    first = {i: {"id": i, "value": f"v{i}", "v": 1} for i in range(20)}
    assert rows_by_key(location) == first  # batch 1's files are written, not committed
    with Metastore.open(default_metastore_url(location)) as store:
        states = store.write_id_states(location)
    open_ids = [w for w, st in states.items() if st == "open"]
    assert len(open_ids) == 1
    dead = Path(location) / f"delete_delta_{open_ids[0]:07d}_{open_ids[0]:07d}_0000"
    assert dead.is_dir()

    restarted = run_job(kafka_broker, topic, warehouse)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    expected = {i: {"id": i, "value": f"u{i}", "v": 2} for i in range(0, 20, 2)}
    assert rows_by_key(location) == expected
    with Metastore.open(default_metastore_url(location)) as store:
        states = store.write_id_states(location)
        deletes = sum(f.rows for path, f in store.committed_files(location).items()
                      if path.startswith("delete_delta_"))
    assert sorted(states.values()) == ["aborted", "committed", "committed"]
    assert deletes == 20  # ten updated, ten deleted: each live row deleted once
    assert not dead.exists()  # the restart's repair removed the dead attempt's delete events


@pytest.mark.spark
def test_keyed_streams_are_refused_before_kafka_when_keys_could_not_be_found(
        spark: Any, warehouse: Path) -> None:
    servers = f"127.0.0.1:{free_port()}"  # nothing listens: Kafka is never reached
    location = str(warehouse / "t")
    base = dict(bootstrap_servers=servers, topic="t", table=location, schema_ddl=SCHEMA,
                checkpoint=str(warehouse / "ck"), available_now=True, kafka_timeout_s=2)
    create_table(location, SCHEMA)  # not bucketed
    with pytest.raises(ConfigError, match="the table is not bucketed"):
        run_stream(spark, mode="upsert", key="id", **base)
    with pytest.raises(ConfigError, match="--partition-by .* computes the partition"):
        run_stream(spark, mode="cdc", key="id", partition_by="cast(v as string)",
                   **{**base, "table": str(warehouse / "u"), "schema_ddl": SCHEMA})
    create_table(str(warehouse / "p"), SCHEMA, partitioned_by=["dt"], buckets=2,
                 bucketed_by=["id"])
    with pytest.raises(ConfigError, match=r"partition columns \['dt'\] are not in the key"):
        run_stream(spark, mode="upsert", key="id", **{**base, "table": str(warehouse / "p"),
                                                      "partition_by": "dt"})
    assert not (warehouse / "ck").exists()
    assert not list(Path(location).rglob("delta_*"))


def test_cli_refuses_a_keyed_stream_before_starting_spark(
        warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = str(warehouse / "t")
    create_table(location, SCHEMA, buckets=2, bucketed_by=["value"])
    args = ["stream", "--bootstrap-servers", f"127.0.0.1:{free_port()}", "--topic", "t",
            "--table", location, "--schema", SCHEMA, "--checkpoint", str(warehouse / "ck")]
    code, out, err = run_cli([*args, "--mode", "upsert"], capsys)
    assert (code, out) == (2, "")
    assert "--mode upsert needs --key" in err and "Hint: e.g. --mode upsert --key id" in err
    code, out, err = run_cli([*args, "--mode", "cdc", "--key", "id"], capsys)
    assert (code, out) == (2, ""), err
    assert "bucketed by ['value'], and ['value'] are not in the key ['id']" in err


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.java
@pytest.mark.slow
def test_a_micro_batch_that_loses_a_write_write_conflict_fails_and_its_replay_converges(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    """docs/format.md §24, docs/invariants.md 8.7: a batch upsert of the same keys opens
    after the micro-batch's transaction and commits while its tasks run; the micro-batch's
    commit then loses (CommitConflictError, its transaction aborted, nothing of it
    visible) and the query fails. Restarted, Spark replays the batch id from its
    checkpointed offsets, the sink writes it again over the winner's rows, and the table
    ends equal to the model: the stream's images, applied last."""
    location = str(warehouse / "t")
    create_table(location, SCHEMA, buckets=4, bucketed_by=["id"])
    table = ingest.open_table(location)
    table.load(pa.table({"id": pa.array(range(10), pa.int64()), "value": ["seed"] * 10,
                         "v": pa.array([1] * 10, pa.int64())}))
    produce(kafka_broker, topic,
            [(i, {"id": i, "value": f"s{i}", "v": 2}) for i in range(10)])
    outcome: list[Any] = []

    def interfere() -> None:
        with Metastore.open(default_metastore_url(location)) as store:
            deadline = time.monotonic() + 180
            while not any(":ingest-stream:" in i.agent
                          for i in store.transactions(location, states=["open"])):
                if time.monotonic() > deadline:
                    outcome.append("the micro-batch never opened a transaction")
                    return
                time.sleep(0.02)
        outcome.append(table.upsert(
            pa.table({"id": pa.array(range(10), pa.int64()), "value": ["batch"] * 10,
                      "v": pa.array([3] * 10, pa.int64())}), key=["id"]))

    writer = threading.Thread(target=interfere)
    writer.start()
    with pytest.raises(CommitConflictError, match="write-write conflict") as e:
        stream(spark, kafka_broker, topic, warehouse, mode="upsert", key="id")
    writer.join()
    assert outcome and not isinstance(outcome[0], str), outcome
    assert outcome[0].write_id is not None
    assert "it is aborted" in str(e.value)
    assert {k: r["value"] for k, r in rows_by_key(location).items()} == {
        i: "batch" for i in range(10)}
    with Metastore.open(default_metastore_url(location)) as store:
        states = sorted(store.write_id_states(location).items())
    assert [s for _, s in states] == ["committed", "aborted", "committed"]  # load, stream, upsert

    again = stream(spark, kafka_broker, topic, warehouse, mode="upsert", key="id")
    assert (again.batches, again.skipped) == (1, 0)
    assert rows_by_key(location) == {i: {"id": i, "value": f"s{i}", "v": 2} for i in range(10)}


def test_a_streamed_debezium_event_reads_epoch_timestamps_by_its_schema() -> None:
    # issue 32: --mode cdc takes what `apply_changes` takes (docs/format.md §24).
    from ingest.spark.sink._keyed import classify

    ts = {"field": "ts", "type": "int64", "name": "io.debezium.time.MicroTimestamp"}
    row = {"type": "struct", "fields": [{"field": "id", "type": "int64"}, ts]}
    schema = {"type": "struct", "fields": [{**row, "field": "before"}, {**row, "field": "after"}]}
    value = json.dumps({"schema": schema, "payload": {
        "op": "u", "before": None, "after": {"id": 7, "ts": 1700000000000001}}}).encode()
    image, deletes, _, reason = classify("cdc", None, value)
    assert (deletes, reason) == (False, None)
    assert json.loads(image or b"") == {"id": 7, "ts": "2023-11-14 22:13:20.000001000"}
