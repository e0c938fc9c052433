"""ManyTableSink on a real SparkSession (docs/many-tables.md, issue 34 step 3): one
micro-batch of several topics written into their tables in one transaction, the anchor
carrying the progress row; replays skipped; a failure commits none of the tables.

Micro-batches are static DataFrames with the Kafka source's columns, handed to the sink as
foreachBatch would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support import kafka_rows

from ingest.acid.read.reader import read_table
from ingest.errors import BadRecordError, ConfigError, IngestError
from ingest.records.routing import RoutingRules, TableTemplate, TopicSelection
from ingest.spark.job import ensure_tables, table_layout
from ingest.spark.options import SinkOptions
from ingest.spark.sink import ManyTableSink
from ingest.spark.sink.deadletter import DEAD_LETTER_DDL
from ingest.spark.sink.many.sink import HOLDER_PROPERTY
from ingest.table import open_table
from ingest.table.write import create_table
from ingest.txn import Metastore, OffsetRange, default_metastore_url

SCHEMA = "id BIGINT, name STRING"
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")


def record(i: int) -> bytes:
    return json.dumps({"id": i, "name": f"n{i}"}).encode()


def topic_rows(topic: str, ids: range, *, partition: int = 0, start: int = 0
               ) -> list[tuple[str, int, int, bytes | None]]:
    return [(topic, partition, start + n, record(i)) for n, i in enumerate(ids)]


def anchor_at(warehouse: Path) -> Any:
    location = str(warehouse / "_unrouted")
    create_table(location, DEAD_LETTER_DDL, name="default._unrouted")
    return open_table(location).ref


def make_sink(warehouse: Path, topics: tuple[str, ...], *, routes: dict[str, str] | None = None,
              create: bool = True, **options: Any) -> ManyTableSink:
    layout = table_layout(SCHEMA, None)
    rules = RoutingRules(TopicSelection(topics=topics), routes or {},
                         TableTemplate.parse(str(warehouse / "{topic}"), placeholder="topic"))
    return ManyTableSink(rules, anchor_at(warehouse), sink_id="many@ckpt",
                         options=SinkOptions(**options),
                         create=(lambda loc: ensure_tables(loc, layout)) if create else None)


def committed(location: str) -> pa.Table:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    return read_table(location, snapshot)


def ids(location: str) -> list[int]:
    return sorted(committed(location).column("id").to_pylist())


@pytest.mark.spark
@pytest.mark.slow
def test_a_micro_batch_of_two_topics_commits_both_tables_in_one_transaction(
        spark: Any, warehouse: Path) -> None:
    orders, payments = str(warehouse / "orders"), str(warehouse / "payments")
    df0 = kafka_rows(spark, topic_rows("orders", range(10))
                     + topic_rows("payments", range(100, 104))
                     + [("payments", 1, 0, b"not json")])
    df1 = kafka_rows(spark, topic_rows("orders", range(10, 15), start=10))
    with make_sink(warehouse, ("orders", "payments")) as sink:
        sink(df0, 0)
        sink(df1, 1)
        sink(df0, 0)  # a replay: skipped whole
        url = sink.metastore_url
    assert [r.skipped for r in sink.reports] == [False, False, True]
    first, second = sink.reports[0], sink.reports[1]
    assert set(first.tables) == {"default.orders", "default.payments"}
    assert set(second.tables) == {"default.orders"}  # payments untouched by batch 1
    assert ids(orders) == list(range(15))
    assert ids(payments) == list(range(100, 104))
    assert first.tables["default.payments"].dead_letters == 1
    bad = committed(str(warehouse / "payments__dead_letter"))
    assert bad.column("value").to_pylist() == [b"not json"]
    with Metastore.open(url) as store:
        anchor = store.get_table(str(warehouse / "_unrouted"))
        # One transaction: the anchor's write id and both tables' share it.
        infos = {i.table: i.txn_id for i in store.transactions(states=("committed",))
                 if i.txn_id == store.transactions(anchor)[0].txn_id}
        assert set(infos) == {"default._unrouted", "default.orders", "default.payments",
                              "default.orders__dead_letter", "default.payments__dead_letter"}
        assert store.committed_write_id("many@ckpt", 0, table=anchor.name) == \
            first.anchor_write_id
        assert store.committed_write_id("many@ckpt", 1, table=anchor.name) == \
            second.anchor_write_id
        # The anchor holds every topic's ranges; each table its own topics'.
        assert sorted(r for _, r in store.offset_ranges(anchor)) == [
            OffsetRange("orders", 0, 0, 10), OffsetRange("orders", 0, 10, 15),
            OffsetRange("payments", 0, 0, 4), OffsetRange("payments", 1, 0, 1)]
        assert sorted(r for _, r in store.offset_ranges("default.payments")) == [
            OffsetRange("payments", 0, 0, 4), OffsetRange("payments", 1, 0, 1)]
        assert sorted(r for _, r in store.offset_ranges("default.orders")) == [
            OffsetRange("orders", 0, 0, 10), OffsetRange("orders", 0, 10, 15)]


@pytest.mark.spark
@pytest.mark.slow
def test_a_failure_in_one_table_commits_none_of_them(spark: Any, warehouse: Path) -> None:
    """--on-bad-record fail: a bad record of the second table aborts the transaction; the
    first table's files, already written, are removed and nothing is committed."""
    df = kafka_rows(spark, topic_rows("orders", range(5)) + [("payments", 0, 0, b"{")])
    with make_sink(warehouse, ("orders", "payments"), on_bad_record="fail") as sink, \
            pytest.raises(IngestError, match="Cannot parse Kafka record payments-0 offset 0"):
        sink(df, 0)
    assert committed(str(warehouse / "orders")).num_rows == 0
    assert not list((warehouse / "orders").rglob("bucket_*"))
    with Metastore.open(default_metastore_url(str(warehouse / "orders"))) as store:
        assert store.committed_write_id("many@ckpt", 0, table="default._unrouted") is None
        assert store.offset_ranges("default._unrouted") == []


@pytest.mark.spark
@pytest.mark.slow
def test_routed_tables_must_exist_without_create(spark: Any, warehouse: Path) -> None:
    df = kafka_rows(spark, topic_rows("orders", range(3)))
    with make_sink(warehouse, ("orders",), create=False) as sink, \
            pytest.raises(ConfigError, match="Cannot route to .*orders: no such table"):
        sink(df, 0)


def test_options_not_built_for_several_tables_are_refused(warehouse: Path) -> None:
    rules = RoutingRules(TopicSelection(topics=("orders",)), {"orders": str(warehouse / "o")})
    anchor = anchor_at(warehouse)
    for options in ({"txns_per_delta": 2}, {"value_format": "avro", "avro_schema": "x.avsc"}):
        with pytest.raises(ConfigError, match="cannot use .* yet"):
            ManyTableSink(rules, anchor, sink_id="s", options=SinkOptions(**options))


@pytest.mark.spark
@pytest.mark.slow
def test_a_restart_aborts_the_killed_transaction_in_every_table_and_cleans_its_files(
        spark: Any, warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run killed after its tasks wrote every table and before the commit (its abort never
    ran) leaves one open transaction; the next run of the stream aborts it in all the tables
    it wrote, removes its delta directories, and writes the micro-batch once."""
    df = kafka_rows(spark, topic_rows("orders", range(6)) + topic_rows("payments", range(3))
                    + [("payments", 1, 0, b"bad")])
    killed = make_sink(warehouse, ("orders", "payments"))

    def kill(*_: Any, **__: Any) -> None:
        raise RuntimeError("killed before the commit")

    monkeypatch.setattr(killed, "_abort", lambda *_: None)  # a killed process aborts nothing
    with killed, pytest.raises(RuntimeError, match="killed"):
        killed._open()
        monkeypatch.setattr(killed._store, "commit", kill)
        killed(df, 0)
    left = sorted(p.relative_to(warehouse).parts[0] for p in warehouse.rglob("delta_*"))
    assert left == ["orders", "payments", "payments__dead_letter"]  # written, not committed
    with Metastore.open(default_metastore_url(str(warehouse / "orders"))) as store:
        opened = {i.table: i.txn_id for i in store.transactions(states=("open",))}
    assert set(opened) == {"default._unrouted", "default.orders", "default.payments",
                           "default.orders__dead_letter", "default.payments__dead_letter"}
    with ManyTableSink(killed.rules, killed.anchor_ref, sink_id="many@ckpt",
                       create=killed.create) as again:
        again(df, 0)
    assert not again.reports[0].skipped
    assert ids(str(warehouse / "orders")) == list(range(6))
    assert ids(str(warehouse / "payments")) == list(range(3))
    assert committed(str(warehouse / "payments__dead_letter")).num_rows == 1
    txn_id = next(iter(opened.values()))
    with Metastore.open(default_metastore_url(str(warehouse / "orders"))) as store:
        states = {i.table: i.state for i in store.transactions() if i.txn_id == txn_id}
        assert store.transactions(states=("open",)) == []
    assert states == {name: "aborted" for name in opened}
    # Only the committed transaction's directories are left.
    with Metastore.open(default_metastore_url(str(warehouse / "orders"))) as store:
        for table in ("orders", "payments", "payments__dead_letter"):
            deltas = list((warehouse / table).glob("delta_*"))
            assert len(deltas) == 1, table
            write_id = int(deltas[0].name.split("_")[1])
            assert store.snapshot(f"default.{table}").is_valid(write_id), table


@pytest.mark.spark
@pytest.mark.slow
def test_records_of_a_topic_routed_nowhere_go_to_the_anchor_in_the_same_transaction(
        spark: Any, warehouse: Path) -> None:
    """--topic-pattern with routes only: a matching topic without a route routes nowhere;
    its records are the anchor's dead letters, with the reason, committed with the batch."""
    orders = str(warehouse / "orders")
    ensure_tables(orders, table_layout(SCHEMA, None))
    rules = RoutingRules(TopicSelection(pattern="orders|misc.*"), {"orders": orders})
    df = kafka_rows(spark, topic_rows("orders", range(4)) + topic_rows("misc1", range(3))
                    + topic_rows("misc1", range(2), partition=1, start=7))
    with ManyTableSink(rules, anchor_at(warehouse), sink_id="many@ckpt") as sink:
        sink(df, 0)
        url = sink.metastore_url
    report = sink.reports[0]
    assert set(report.tables) == {"default.orders"}
    assert report.unrouted_records == 5
    assert ids(orders) == [0, 1, 2, 3]
    dead = committed(str(warehouse / "_unrouted")).sort_by([("partition", "ascending"),
                                                             ("offset", "ascending")])
    assert dead.column("topic").to_pylist() == ["misc1"] * 5
    assert [(p, o) for p, o in zip(dead.column("partition").to_pylist(),
                                    dead.column("offset").to_pylist(), strict=True)] == [
        (0, 0), (0, 1), (0, 2), (1, 7), (1, 8)]
    assert set(dead.column("error").to_pylist()) == {
        "topic 'misc1' has no --route and there is no --table-template"}
    with Metastore.open(url) as store:
        anchor_id = store.committed_write_id("many@ckpt", 0, table="default._unrouted")
        assert anchor_id == report.anchor_write_id
        # The anchor holds every topic's ranges, the routed table only its own.
        assert sorted(r for _, r in store.offset_ranges("default._unrouted")) == [
            OffsetRange("misc1", 0, 0, 3), OffsetRange("misc1", 1, 7, 9),
            OffsetRange("orders", 0, 0, 4)]
        assert [r for _, r in store.offset_ranges("default.orders")] == [
            OffsetRange("orders", 0, 0, 4)]


@pytest.mark.spark
@pytest.mark.slow
def test_a_micro_batch_planned_below_the_streams_committed_end_is_refused(
        spark: Any, warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The anchor's offsets are the stream's position: a plan from below them (a re-created
    topic) is refused before anything is written."""
    from ingest.spark.sink.many import sink as many

    df = kafka_rows(spark, topic_rows("orders", range(5)))
    with make_sink(warehouse, ("orders", "payments")) as sink:
        sink(df, 0)
        monkeypatch.setattr(many, "planned_ranges", lambda _: [
            OffsetRange("orders", 0, 2, 7), OffsetRange("payments", 0, 0, 3)])
        with pytest.raises(IngestError, match=r"orders-0 .*offset 2, below offset 5"):
            sink(kafka_rows(spark, topic_rows("orders", range(5), start=2)), 1)
    assert ids(str(warehouse / "orders")) == list(range(5))
    assert not (warehouse / "payments").exists()


def change(i: int, table: Any) -> bytes:
    """A Debezium-like envelope's routing field, beside the row's fields."""
    return json.dumps({"id": i, "name": f"n{i}", "source": {"table": table}}).encode()


@pytest.mark.spark
@pytest.mark.slow
def test_routing_by_field_writes_each_records_table_in_one_transaction(
        spark: Any, warehouse: Path) -> None:
    """--route-field source.table: one topic feeds several tables, created on first use by
    the template; records without a string field go to the anchor with the reason; the
    tables get no offset ranges of their own (the anchor has them all)."""
    layout = table_layout(SCHEMA, None)
    rules = RoutingRules(TopicSelection(topics=("cdc",)), {},
                         TableTemplate.parse(str(warehouse / "{field}"), placeholder="field"),
                         field_path=("source", "table"))
    values = ([change(i, "ORDERS") for i in range(4)] + [change(i, "inv.items") for i in range(3)]
              + [change(9, None), json.dumps({"id": 10}).encode(), b"not json"])
    df = kafka_rows(spark, [("cdc", 0, n, v) for n, v in enumerate(values)])
    with ManyTableSink(rules, anchor_at(warehouse), sink_id="many@ckpt",
                       options=SinkOptions(on_new_field="ignore"),
                       create=lambda loc: ensure_tables(loc, layout)) as sink:
        sink(df, 0)
        sink(df, 0)
        url = sink.metastore_url
    first = sink.reports[0]
    assert sink.reports[1].skipped
    assert set(first.tables) == {"default.orders", "default.inv_items"}
    assert ids(str(warehouse / "orders")) == [0, 1, 2, 3]
    assert ids(str(warehouse / "inv_items")) == [0, 1, 2]
    assert first.unrouted_records == 3
    dead = committed(str(warehouse / "_unrouted")).sort_by("offset")
    assert dead.column("offset").to_pylist() == [7, 8, 9]
    assert dead.column("error").to_pylist() == [
        "--route-field source.table is null",
        "--route-field source.table: the value has no field source",
        "--route-field source.table: the value is not a JSON object"]
    with Metastore.open(url) as store:
        assert [r for _, r in store.offset_ranges("default._unrouted")] == [
            OffsetRange("cdc", 0, 0, 10)]
        assert store.offset_ranges("default.orders") == []
        assert store.offset_ranges("default.inv_items") == []
        write_ids = {i.table for i in store.transactions(states=("committed",))
                     if i.txn_id == store.transactions("default._unrouted")[0].txn_id}
    assert write_ids == {"default._unrouted", "default.orders", "default.orders__dead_letter",
                         "default.inv_items", "default.inv_items__dead_letter"}


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("fail", [True, False])
def test_offsets_kafka_removed_before_the_stream_committed_them(
        spark: Any, warehouse: Path, monkeypatch: pytest.MonkeyPatch, fail: bool) -> None:
    """Measured against the anchor's committed ends: fail_on_data_loss stops before anything
    is written, naming the range; otherwise the ranges committed start after the loss."""
    from ingest.spark.sink.many import sink as many

    with make_sink(warehouse, ("orders", "payments")) as sink:
        sink(kafka_rows(spark, topic_rows("orders", range(5))), 0)
        sink.earliest_fn = lambda keys: {("orders", 0): 8, ("payments", 0): 0}
        sink.fail_on_data_loss = fail
        monkeypatch.setattr(many, "planned_ranges", lambda _: [
            OffsetRange("orders", 0, 5, 12), OffsetRange("payments", 0, 0, 3)])
        df = kafka_rows(spark, topic_rows("orders", range(8, 12), start=8)
                        + topic_rows("payments", range(3)))
        if fail:
            with pytest.raises(IngestError, match=r"data loss .* orders-0 offsets \[5, 8\)"):
                sink(df, 1)
        else:
            sink(df, 1)
        url = sink.metastore_url
    with Metastore.open(url) as store:
        anchor = sorted(r for _, r in store.offset_ranges("default._unrouted"))
    if fail:
        assert ids(str(warehouse / "orders")) == list(range(5))
        assert anchor == [OffsetRange("orders", 0, 0, 5)]
        return
    assert sink.reports[1].lost == (OffsetRange("orders", 0, 5, 8),)
    assert ids(str(warehouse / "orders")) == [0, 1, 2, 3, 4, 8, 9, 10, 11]
    assert anchor == [OffsetRange("orders", 0, 0, 5), OffsetRange("orders", 0, 8, 12),
                      OffsetRange("payments", 0, 0, 3)]


@pytest.mark.spark
@pytest.mark.slow
def test_one_transaction_across_the_tables_on_postgresql(
        spark: Any, warehouse: Path, pg_url: str) -> None:
    """The same micro-batch on a PostgreSQL metastore: both tables, their dead letters and
    the anchor's progress row commit in one transaction; a replay is skipped."""
    layout = table_layout(SCHEMA, None)
    anchor_location = str(warehouse / "_unrouted")
    create_table(anchor_location, DEAD_LETTER_DDL, name="default._unrouted", metastore=pg_url)
    rules = RoutingRules(TopicSelection(topics=("orders", "payments")), {},
                         TableTemplate.parse(str(warehouse / "{topic}"), placeholder="topic"))
    df = kafka_rows(spark, topic_rows("orders", range(6)) + topic_rows("payments", range(2))
                    + [("payments", 0, 2, b"[]")])
    with ManyTableSink(rules, open_table(anchor_location, metastore=pg_url).ref,
                       sink_id="many@ckpt",
                       create=lambda loc: ensure_tables(loc, layout, metastore_url=pg_url)
                       ) as sink:
        sink(df, 0)
        sink(df, 0)
    assert [r.skipped for r in sink.reports] == [False, True]
    with Metastore.open(pg_url) as store:
        def rows(location: str) -> pa.Table:
            return read_table(location, store.snapshot(location))

        assert sorted(rows(str(warehouse / "orders")).column("id").to_pylist()) == list(range(6))
        assert sorted(rows(str(warehouse / "payments")).column("id").to_pylist()) == [0, 1]
        assert rows(str(warehouse / "payments__dead_letter")).num_rows == 1
        txn = store.transactions("default._unrouted")[0].txn_id
        assert {i.table for i in store.transactions(states=("committed",))
                if i.txn_id == txn} == {
            "default._unrouted", "default.orders", "default.payments",
            "default.orders__dead_letter", "default.payments__dead_letter"}
        assert store.committed_write_id("many@ckpt", 0, table="default._unrouted") == \
            sink.reports[0].anchor_write_id
        assert sorted(r for _, r in store.offset_ranges("default.payments")) == [
            OffsetRange("payments", 0, 0, 3)]
        assert sorted(r for _, r in store.offset_ranges("default._unrouted")) == [
            OffsetRange("orders", 0, 0, 6), OffsetRange("payments", 0, 0, 3)]


@pytest.mark.spark
@pytest.mark.slow
def test_the_topic_holding_a_template_table_keeps_it_after_a_restart(
        spark: Any, warehouse: Path) -> None:
    """Topics 'a.b' and 'a_b' (a pattern picks both) meet on table a_b: the one that created
    it holds it, also for a new run of the stream that sees both in its first micro-batch."""
    rules = RoutingRules(TopicSelection(pattern="a[._]b"), {},
                         TableTemplate.parse(str(warehouse / "{topic}"), placeholder="topic"))
    layout = table_layout(SCHEMA, None)
    anchor = anchor_at(warehouse)

    def sink() -> ManyTableSink:
        return ManyTableSink(rules, anchor, sink_id="many@ckpt",
                             create=lambda loc: ensure_tables(loc, layout))

    with sink() as first:
        first(kafka_rows(spark, topic_rows("a.b", range(3))), 0)
    with sink() as again:
        again(kafka_rows(spark, topic_rows("a.b", range(3, 5), start=3)
                         + topic_rows("a_b", range(100, 102))), 1)
    assert ids(str(warehouse / "a_b")) == [0, 1, 2, 3, 4]
    dead = committed(str(warehouse / "_unrouted"))
    assert dead.column("topic").to_pylist() == ["a_b", "a_b"]
    assert set(dead.column("error").to_pylist()) == {
        "topic 'a_b' routes to table " + repr(str(warehouse / "a_b")) + ", which topic 'a.b' "
        "holds (table name a_b; --table-template makes the same name of both)"}


@pytest.mark.spark
def test_a_bad_record_under_on_bad_record_fail_stops_with_its_own_error_and_commits_nothing(
        spark: Any, warehouse: Path) -> None:
    """The stream stops on the micro-batch with `BadRecordError` naming it, and no table of
    the micro-batch is committed (the anchor holds no progress, no transaction committed)."""
    df = kafka_rows(spark, topic_rows("orders", range(3)) + [("payments", 0, 0, b"not json")])
    with make_sink(warehouse, ("orders", "payments"), on_bad_record="fail") as sink:
        with pytest.raises(BadRecordError, match="micro-batch 0") as raised:
            sink(df, 0)
    assert sink.failure is raised.value
    with Metastore.open(default_metastore_url(str(warehouse / "orders"))) as store:
        assert store.offset_ranges("default._unrouted") == []
        assert all(t.state != "committed" for t in store.transactions("default._unrouted"))


@pytest.mark.spark
def test_a_bucketed_table_is_written_apart_and_the_others_in_one_pass(
        spark: Any, warehouse: Path) -> None:
    """A table whose rows need a shuffle (bucketed) is written from its own filter of the
    micro-batch while the other tables still share one Spark job (before, one bucketed table
    sent every table down the per-table path); every table gets exactly its rows in the one
    transaction."""
    bucketed = str(warehouse / "payments")
    create_table(bucketed, SCHEMA, buckets=2, bucketed_by=["id"])
    ensure_tables(bucketed, table_layout(SCHEMA, None))  # its dead-letter table
    topics = ("orders", "payments", "refunds", "users")
    df = kafka_rows(spark, [row for n, t in enumerate(topics)
                            for row in topic_rows(t, range(100 * n, 100 * n + 4))])
    with make_sink(warehouse, topics) as sink:
        sink(df, 0)
    report = sink.reports[0]
    for n, t in enumerate(topics):
        assert ids(str(warehouse / t)) == list(range(100 * n, 100 * n + 4))
    assert len({p.parent for p in (warehouse / "payments").rglob("bucket_*")}) == 1
    assert {p.name for p in (warehouse / "payments").rglob("bucket_*")} <= {
        "bucket_00000", "bucket_00001"}
    # three tables in one job, the bucketed one in its own (one or two jobs): not four or more
    assert report.spark_actions <= 3


@pytest.mark.spark
@pytest.mark.slow
def test_a_keys_table_problem_routes_it_nowhere_and_two_spellings_of_a_route_are_one_table(
        spark: Any, warehouse: Path) -> None:
    """A key whose table cannot be made (its name taken by a table elsewhere, or a table
    there with other columns) routes nowhere with the reason, while the micro-batch commits
    (before, it failed on every restart); routes `wh/t` and `wh/t/` write one table."""
    create_table(str(warehouse / "ORDERS"), SCHEMA)  # default.orders, at another location
    create_table(str(warehouse / "typed"), "id STRING")
    sink = make_sink(warehouse, ("orders", "typed", "t1", "t2", "fine"),
                     routes={"t1": str(warehouse / "t"), "t2": str(warehouse / "t") + "/"})
    rows = (topic_rows("orders", range(2)) + topic_rows("typed", range(2))
            + topic_rows("t1", range(3)) + topic_rows("t2", range(3, 5))
            + topic_rows("fine", range(10, 12)))
    with sink:
        sink(kafka_rows(spark, rows), 0)
    report = sink.reports[-1]
    assert set(report.tables) == {"default.t", "default.fine"}
    assert ids(str(warehouse / "t")) == [0, 1, 2, 3, 4]
    assert ids(str(warehouse / "fine")) == [10, 11]
    assert sorted(report.unrouted) == ["orders", "typed"]
    assert report.unrouted["orders"].startswith(
        f"topic 'orders' cannot use table 'file://{warehouse}/orders': ")
    assert "default.orders" in report.unrouted["orders"]
    assert "it has columns (id STRING)" in report.unrouted["typed"]
    dead = committed(str(warehouse / "_unrouted"))
    assert sorted(dead.column("topic").to_pylist()) == ["orders", "orders", "typed", "typed"]


@pytest.mark.spark
@pytest.mark.slow
def test_route_field_holders_are_kept_in_the_table_across_a_restart(
        spark: Any, warehouse: Path) -> None:
    """By field, 'A.b' creates table a_b and is recorded as its holder (a table property),
    so a new run of the stream seeing only 'a_b' routes it nowhere instead of sharing."""
    layout = table_layout(SCHEMA, None)
    rules = RoutingRules(TopicSelection(topics=("cdc",)), {},
                         TableTemplate.parse(str(warehouse / "{field}"), placeholder="field"),
                         field_path=("source", "table"))
    anchor = anchor_at(warehouse)

    def sink() -> ManyTableSink:
        return ManyTableSink(rules, anchor, sink_id="many@ckpt",
                             options=SinkOptions(on_new_field="ignore"),
                             create=lambda loc: ensure_tables(loc, layout))

    with sink() as first:
        first(kafka_rows(spark, [("cdc", 0, n, change(n, "A.b")) for n in range(3)]), 0)
        url = first.metastore_url
    with Metastore.open(url) as store:
        assert store.get_table("default.a_b").properties[HOLDER_PROPERTY] == "A.b"
    with sink() as again:
        again(kafka_rows(spark, [("cdc", 0, n, change(n, "a_b")) for n in range(3, 5)]), 1)
    assert ids(str(warehouse / "a_b")) == [0, 1, 2]
    assert again.reports[-1].unrouted == {"a_b": (
        f"--route-field value 'a_b' routes to table {str(warehouse / 'a_b')!r}, which "
        "--route-field value 'A.b' holds (table name a_b; --table-template makes the same "
        "name of both)")}


@pytest.mark.spark
@pytest.mark.slow
def test_new_tables_per_micro_batch_are_capped(spark: Any, warehouse: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """--max-new-tables-per-batch 1: of two new topics one gets its table, the other's
    records route nowhere (logged once) and its table comes in the next micro-batch. A topic
    whose table cannot be made (no columns: first by name) takes no place in the cap."""
    from ingest.errors import TableNotFoundError

    layout = table_layout(SCHEMA, None)
    rules = RoutingRules(TopicSelection(topics=("a", "x", "y")), {},
                         TableTemplate.parse(str(warehouse / "{topic}"), placeholder="topic"))

    def create(location: str) -> Any:
        if location.endswith("/a"):
            raise TableNotFoundError(f"no columns for {location}", table=location)
        return ensure_tables(location, layout)

    with ManyTableSink(rules, anchor_at(warehouse), sink_id="many@ckpt",
                       create=create, max_new_tables=1) as sink:
        sink(kafka_rows(spark, topic_rows("a", range(2)) + topic_rows("x", range(2))
                        + topic_rows("y", range(2))), 0)
        sink(kafka_rows(spark, topic_rows("y", range(2, 4), start=2)), 1)
    first, second = sink.reports
    assert set(first.tables) == {"default.x"} and sorted(first.unrouted) == ["a", "y"]
    assert "no columns for" in first.unrouted["a"]
    assert "(--max-new-tables-per-batch)" in first.unrouted["y"]
    assert set(second.tables) == {"default.y"} and not second.unrouted
    assert ids(str(warehouse / "y")) == [2, 3]
    assert sum("max-new-tables-per-batch" in r.getMessage() for r in caplog.records) == 1
