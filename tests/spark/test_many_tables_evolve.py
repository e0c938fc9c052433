"""--on-new-field per table in a stream of several tables (docs/many-tables.md): under evolve,
each table whose records held new top-level fields gains their columns (only its own), the
micro-batch's one transaction is aborted in every table and written again once, the anchor
never evolving; dead-letter applies per table. First ManyTableSink in local Spark (static
micro-batches handed over as foreachBatch would), a keyed table too, then `python -m ingest
stream` on a real broker, killed at `sink.after_evolve` and restarted."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kafka_server import ApacheKafka, apache_kafka  # noqa: F401 - the fixture
from support import job_env, kafka_rows

from ingest.acid.read.reader import read_table
from ingest.records.routing import RoutingRules, TableTemplate, TopicSelection, table_name_for
from ingest.spark.job import ensure_tables, key_bucket_columns, table_layout
from ingest.spark.options import SinkOptions
from ingest.spark.sink import ManyTableSink
from ingest.spark.sink.deadletter import DEAD_LETTER_DDL
from ingest.table import open_table
from ingest.table.write import create_table
from ingest.txn import Metastore, OffsetRange, default_metastore_url

SCHEMA = "id BIGINT, name STRING"
ROOT = Path(__file__).resolve().parent.parent.parent
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")

Row = tuple[str, int, int, bytes | None]


def values(topic: str, start: int, rows: list[dict[str, Any]]) -> list[Row]:
    return [(topic, 0, start + n, json.dumps(r).encode()) for n, r in enumerate(rows)]


def committed(location: str) -> pa.Table:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    return read_table(location, snapshot)


def by_id(location: str) -> list[dict[str, Any]]:
    return sorted(committed(location).to_pylist(), key=lambda r: r["id"])


def columns(location: str) -> list[str]:
    with Metastore.open(default_metastore_url(location)) as store:
        return store.get_table(location).row_schema.names


def sink_of(warehouse: Path, routes: dict[str, str], topics: tuple[str, ...] | str, *,
            template: bool = False, **options: Any) -> ManyTableSink:
    """A sink of these topics (a pattern when a string) into these routes (and the
    template `warehouse/{topic}`), creating tables from SCHEMA."""
    layout = table_layout(SCHEMA, None)
    anchor = str(warehouse / "_unrouted")
    create_table(anchor, DEAD_LETTER_DDL, name="default._unrouted")

    def create(location: str, key: tuple[str, ...] = ()) -> Any:
        by = key_bucket_columns(layout, key)
        return ensure_tables(location, layout, buckets=2 if by else 0, bucketed_by=by)

    selection = TopicSelection(pattern=topics) if isinstance(topics, str) else \
        TopicSelection(topics=topics)
    rules = RoutingRules(selection, routes, TableTemplate.parse(
        str(warehouse / "{topic}"), placeholder="topic") if template else None)
    return ManyTableSink(rules, open_table(anchor).ref, sink_id="many@ckpt",
                         options=SinkOptions(**options), create=create)


@pytest.mark.spark
@pytest.mark.slow
def test_evolve_adds_each_tables_own_new_columns_and_writes_the_micro_batch_again_once(
        spark: Any, warehouse: Path) -> None:
    orders, payments = str(warehouse / "orders"), str(warehouse / "payments")
    anchor = str(warehouse / "_unrouted")
    # Micro-batch 0: orders' records carry `color`, payments' nothing new; `stray` routes
    # nowhere and its record's new field must not touch the anchor.
    df0 = kafka_rows(spark, values("orders", 0, [
        {"id": 1, "name": "a"}, {"id": 2, "name": "b", "color": "red"},
        {"id": 3, "name": "c", "color": "blue"}])
        + values("payments", 0, [{"id": 10, "name": "p"}, {"id": 11, "name": "q"}])
        + values("stray", 0, [{"id": 99, "name": "s", "extra": 1}]))
    # Micro-batch 1: now payments' records carry `tags` (typed by --evolve-type) and `color`;
    # orders' keep `color`, which it has.
    df1 = kafka_rows(spark, values("orders", 3, [{"id": 4, "name": "d", "color": "green"}])
                     + values("payments", 2, [{"id": 12, "name": "r", "tags": ["x", "y"],
                                               "color": "pink"}]))
    with sink_of(warehouse, {"orders": orders, "payments": payments},
                 "orders|payments|stray", on_new_field="evolve",
                 evolve_types=("tags=ARRAY<STRING>",)) as sink:
        sink(df0, 0)
        assert columns(orders) == ["id", "name", "color"]
        assert columns(payments) == ["id", "name"]  # its records held no new field
        sink(df1, 1)
        sink(df1, 1)  # a replay: skipped whole
        url = sink.metastore_url
    first, second, replay = sink.reports
    assert replay.skipped and not first.skipped and not second.skipped
    assert first.tables["default.orders"].added_columns == ("color STRING",)
    assert first.tables["default.payments"].added_columns == ()
    assert "default.orders: " in first.line() and "added columns color STRING" in first.line()
    assert first.tables["default.orders"].rows == 3 and first.unrouted_records == 1
    assert second.tables["default.payments"].added_columns == ("color STRING",
                                                               "tags ARRAY<STRING>")
    assert second.tables["default.orders"].added_columns == ()
    assert columns(orders) == ["id", "name", "color"]  # payments' fields are not orders'
    assert columns(payments) == ["id", "name", "color", "tags"]
    assert columns(anchor) == columns(str(warehouse / "orders__dead_letter"))  # not evolved
    assert by_id(orders) == [
        {"id": 1, "name": "a", "color": None}, {"id": 2, "name": "b", "color": "red"},
        {"id": 3, "name": "c", "color": "blue"}, {"id": 4, "name": "d", "color": "green"}]
    assert by_id(payments) == [
        {"id": 10, "name": "p", "color": None, "tags": None},
        {"id": 11, "name": "q", "color": None, "tags": None},
        {"id": 12, "name": "r", "color": "pink", "tags": ["x", "y"]}]
    assert committed(anchor).column("topic").to_pylist() == ["stray"]
    with Metastore.open(url) as store:
        # Each micro-batch: one aborted round (every table's files removed), then one
        # committed transaction holding the anchor's and each touched table's write id.
        data = {name: [i for i in store.transactions(name) if not i.is_schema_change]
                for name in ("default._unrouted", "default.orders", "default.payments")}
        anchor_txns = [i.txn_id for i in data["default._unrouted"] if i.state == "committed"]
        assert len(anchor_txns) == 2
        assert [i.state for i in data["default._unrouted"]] == [
            "aborted", "committed", "aborted", "committed"]
        for name in ("default.orders", "default.payments"):
            assert [i.txn_id for i in data[name] if i.state == "committed"] == anchor_txns
            kept = {i.write_id for i in data[name] if i.state == "committed"}
            assert {int(p.name.split("_")[1]) for p in (warehouse / name.split(".")[1]).iterdir()
                    if p.name.startswith("delta_")} == kept  # the aborted rounds' files went
        assert store.committed_write_id("many@ckpt", 1, table="default._unrouted") == \
            second.anchor_write_id
        assert sorted(r for _, r in store.offset_ranges("default._unrouted")) == [
            OffsetRange("orders", 0, 0, 3), OffsetRange("orders", 0, 3, 4),
            OffsetRange("payments", 0, 0, 2), OffsetRange("payments", 0, 2, 3),
            OffsetRange("stray", 0, 0, 1)]
        assert sorted(r for _, r in store.offset_ranges("default.payments")) == [
            OffsetRange("payments", 0, 0, 2), OffsetRange("payments", 0, 2, 3)]


@pytest.mark.spark
@pytest.mark.slow
def test_dead_letter_applies_per_table_and_a_keyed_table_evolves(
        spark: Any, warehouse: Path) -> None:
    """dead-letter: only the record with the new field goes to its table's dead-letter table.
    evolve in --mode upsert: the keyed table gains the column, the aborted round's delete
    delta is removed, and the rewrite upserts over the earlier rows."""
    a, b = str(warehouse / "a"), str(warehouse / "b")
    df = kafka_rows(spark, values("a", 0, [{"id": 1, "name": "x"},
                                           {"id": 2, "name": "y", "color": "red"}])
                    + values("b", 0, [{"id": 5, "name": "z"}]))
    with sink_of(warehouse, {}, ("a", "b"), template=True, on_new_field="dead-letter") as sink:
        sink(df, 0)
    assert [r["id"] for r in by_id(a)] == [1] and [r["id"] for r in by_id(b)] == [5]
    dead = committed(str(warehouse / "a__dead_letter")).to_pylist()
    assert [json.loads(r["value"])["id"] for r in dead] == [2]
    assert "color" in dead[0]["error"]
    assert committed(str(warehouse / "b__dead_letter")).num_rows == 0

    keyed = warehouse / "keyed"
    keyed.mkdir()
    k = str(keyed / "k")
    with sink_of(keyed, {"k": k}, ("k",), mode="upsert", key="id",
                 on_new_field="evolve") as sink:
        sink(kafka_rows(spark, values("k", 0, [{"id": 1, "name": "x"}, {"id": 2, "name": "y"}])),
             0)
        sink(kafka_rows(spark, values("k", 2, [{"id": 2, "name": "y2", "n": 7},
                                               {"id": 3, "name": "w"}])), 1)
    assert sink.reports[1].tables["default.k"].added_columns == ("n BIGINT",)
    assert by_id(k) == [{"id": 1, "name": "x", "n": None}, {"id": 2, "name": "y2", "n": 7},
                        {"id": 3, "name": "w", "n": None}]
    with Metastore.open(default_metastore_url(k)) as store:
        kept = {i.write_id for i in store.transactions("default.k")
                if i.state == "committed" and not i.is_schema_change}
    written = {int(p.name.split("_")[-2]) for p in Path(k).iterdir()
               if p.name.startswith(("delta_", "delete_delta_"))}
    assert written == kept  # nothing of the aborted round is left


@pytest.mark.spark
@pytest.mark.slow
def test_routed_by_field_each_table_evolves_by_its_own_records(
        spark: Any, warehouse: Path) -> None:
    """--route-field source.table: one topic feeds both tables; `source` is a new field of
    every record (an object: a STRING column holding its JSON), `color` only of orders'."""
    layout = table_layout(SCHEMA, None)
    anchor = str(warehouse / "_unrouted")
    create_table(anchor, DEAD_LETTER_DDL, name="default._unrouted")
    rules = RoutingRules(TopicSelection(topics=("cdc",)), {},
                         TableTemplate.parse(str(warehouse / "{field}"), placeholder="field"),
                         field_path=("source", "table"))
    rows = ([{"id": i, "name": f"o{i}", "source": {"table": "orders"}, "color": "red"}
             for i in range(3)]
            + [{"id": i, "name": f"i{i}", "source": {"table": "items"}} for i in range(2)]
            + [{"id": 9, "name": "nowhere", "shape": "round"}])
    with ManyTableSink(rules, open_table(anchor).ref, sink_id="many@ckpt",
                       options=SinkOptions(on_new_field="evolve"),
                       create=lambda loc: ensure_tables(loc, layout)) as sink:
        sink(kafka_rows(spark, values("cdc", 0, rows)), 0)
    report = sink.reports[0]
    assert report.tables["default.orders"].added_columns == ("color STRING", "source STRING")
    assert report.tables["default.items"].added_columns == ("source STRING",)
    assert report.unrouted_records == 1
    assert by_id(str(warehouse / "items")) == [
        {"id": i, "name": f"i{i}", "source": '{"table":"items"}'} for i in range(2)]
    assert [(r["id"], r["color"]) for r in by_id(str(warehouse / "orders"))] == [
        (0, "red"), (1, "red"), (2, "red")]
    assert "shape" not in columns(anchor)


def _produce(kafka: ApacheKafka, topic: str, rows: list[dict[str, Any]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({**kafka.client_config(), "linger.ms": 0})
    for row in rows:
        producer.produce(topic, value=json.dumps(row).encode(), partition=0)
    assert producer.flush(30) == 0, f"records of {topic} not delivered"


def _stream(kafka: ApacheKafka, topics: str, warehouse: Path, *, crash_at: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    env = job_env()
    if crash_at is not None:
        env["INGEST_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers", kafka.plaintext,
         "--topic", topics, "--table-template", f"{warehouse}/{{topic}}",
         "--unrouted-table", str(warehouse / "_unrouted"), "--schema", "id BIGINT, name STRING",
         "--checkpoint", str(warehouse / "ck"), "--starting-offsets", "earliest",
         "--available-now", "--compact", "off", "--clean", "off", "--json",
         "--on-new-field", "evolve", "--evolve-type", "tags=ARRAY<STRING>"],
        env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_ingest_stream_evolves_each_table_across_a_kill_after_evolving_and_restarts(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    tag = uuid.uuid4().hex[:8]
    a, b = f"a{tag}", f"b{tag}"
    for topic in (a, b):
        apache_kafka.create_topic(topic, partitions=1)
    warehouse = tmp_path / "wh"
    table_a, table_b = (str(warehouse / table_name_for(t)) for t in (a, b))
    _produce(apache_kafka, a, [{"id": i, "name": f"n{i}", **({"color": f"c{i}"} if i % 2 else {})}
                               for i in range(6)])
    _produce(apache_kafka, b, [{"id": i, "name": f"n{i}"} for i in range(100, 104)])

    # Killed once a's column is added: nothing of the micro-batch is committed.
    killed = _stream(apache_kafka, f"{a},{b}", warehouse, crash_at="sink.after_evolve")
    assert killed.returncode != 0 and "added columns `color` STRING" in killed.stderr, \
        killed.stderr[-4000:]
    assert columns(table_a) == ["id", "name", "color"] and columns(table_b) == ["id", "name"]
    assert committed(table_a).num_rows == 0 and committed(table_b).num_rows == 0

    # The restart finds a evolved (its --schema plus an added column is accepted) and writes
    # the micro-batch once, the new field in its column.
    first = _stream(apache_kafka, f"{a},{b}", warehouse)
    assert first.returncode == 0, first.stderr[-4000:]
    assert "added columns" not in first.stderr
    assert by_id(table_a) == [{"id": i, "name": f"n{i}", "color": f"c{i}" if i % 2 else None}
                              for i in range(6)]
    assert by_id(table_b) == [{"id": i, "name": f"n{i}"} for i in range(100, 104)]

    # Later records of b carry a new field of their own: b evolves too, a does not.
    _produce(apache_kafka, b, [{"id": 104, "name": "n104", "tags": ["t"]}])
    _produce(apache_kafka, a, [{"id": 6, "name": "n6", "color": "c6"}])
    second = _stream(apache_kafka, f"{a},{b}", warehouse)
    assert second.returncode == 0, second.stderr[-4000:]
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    assert summary["rows"] == 2
    assert columns(table_a) == ["id", "name", "color"]
    assert columns(table_b) == ["id", "name", "tags"]
    assert by_id(table_b)[-1] == {"id": 104, "name": "n104", "tags": ["t"]}
    assert [r["id"] for r in by_id(table_a)] == list(range(7))
    assert [r["id"] for r in by_id(table_b)] == list(range(100, 105))
    with Metastore.open(default_metastore_url(table_a)) as store:
        assert store.transactions(states=("open",)) == []


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_an_evolve_type_that_does_not_fit_a_found_table_stops_the_stream_naming_it(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    """A table the stream finds with a column `tags STRING` (an earlier run added it) and
    `--evolve-type tags=ARRAY<STRING>`: refused at the table's first use, nothing written."""
    topic = f"t{uuid.uuid4().hex[:8]}"
    apache_kafka.create_topic(topic, partitions=1)
    warehouse = tmp_path / "wh"
    location = str(warehouse / table_name_for(topic))
    ensure_tables(location, table_layout("id BIGINT, name STRING, tags STRING", None))
    _produce(apache_kafka, topic, [{"id": 1, "name": "a"}])
    done = _stream(apache_kafka, topic, warehouse)
    assert done.returncode != 0
    assert (f"--evolve-type tags=ARRAY<STRING>: default.{table_name_for(topic)} already has "
            "column tags STRING") in done.stderr, done.stderr[-4000:]
    assert committed(location).num_rows == 0
