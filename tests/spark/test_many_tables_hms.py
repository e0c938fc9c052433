"""ManyTableSink on a Hive Metastore 4 (docs/many-tables.md, "Hive Metastore"): one HMS
transaction with a write id per table, the progress row under the anchor's; a replay skipped;
a micro-batch killed before its commit is written once by the restart, and its transaction's
write ids stay invalid in every table. (As for the single-table sink, the HMS does not say an
open transaction's agent, so the restart cannot tell the stream's own: the killed transaction
stays open until `ingest recover` or the metastore's timeout aborts it; tests/hms.)"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hms_server import Server
from support import kafka_rows

from ingest.acid.read.reader import read_table
from ingest.records.routing import RoutingRules, TableTemplate, TopicSelection
from ingest.spark.options import SinkOptions
from ingest.spark.sink import ManyTableSink
from ingest.spark.sink.deadletter import DEAD_LETTER_DDL, dead_letter_location, dead_letter_name
from ingest.table import open_table
from ingest.table.write import create_table
from ingest.txn import Metastore, OffsetRange, TableDefinition, Transaction

pytestmark = [pytest.mark.hms, pytest.mark.java, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.filterwarnings(
                  "ignore:PySpark does not yet fully support:FutureWarning")]


def test_one_hms_transaction_across_the_tables(spark: Any, hms4: Server, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    tag = uuid.uuid4().hex[:6]
    uri, warehouse = hms4.uri, tmp_path / "wh"
    a, b = f"o{tag}", f"p{tag}"
    # Hive 4 keeps managed tables inside their database's managed location: the stream's
    # tables go into the anchor's database, made with the warehouse as its location.
    db = f"db{tag}"
    anchor_location = str(warehouse / f"u{tag}")
    create_table(anchor_location, DEAD_LETTER_DDL, name=f"{db}.u{tag}", metastore=uri)

    def create(location: str) -> tuple[TableDefinition, TableDefinition]:
        name = f"{db}.{Path(location).name}"
        return (create_table(location, "id BIGINT, name STRING", name=name, metastore=uri),
                create_table(dead_letter_location(location), DEAD_LETTER_DDL,
                             name=dead_letter_name(name), metastore=uri))
    rules = RoutingRules(TopicSelection(topics=(a, b)), {},
                         TableTemplate.parse(str(warehouse / "{topic}"), placeholder="topic"))

    def sink() -> ManyTableSink:
        return ManyTableSink(rules, open_table(anchor_location, metastore=uri).ref,
                             sink_id=f"many{tag}",
                             create=create)

    def value(i: int) -> bytes:
        return json.dumps({"id": i, "name": f"n{i}"}).encode()

    df0 = kafka_rows(spark, [(a, 0, i, value(i)) for i in range(5)]
                + [(b, 0, i, value(100 + i)) for i in range(3)])
    df1 = kafka_rows(spark, [(a, 0, 5 + i, value(5 + i)) for i in range(4)]
                + [(b, 0, 3, value(103))])
    first = sink()
    with first:
        first(df0, 0)
        first(df0, 0)
        # Batch 1 is killed after its tasks wrote both tables: nothing aborts it.
        monkeypatch.setattr(first, "_abort", lambda *_: None)
        monkeypatch.setattr(first._store, "commit", lambda *_, **__: (_ for _ in ()).throw(
            RuntimeError("killed")))
        with pytest.raises(RuntimeError, match="killed"):
            first(df1, 1)
    assert [r.skipped for r in first.reports] == [False, True]
    with sink() as again:
        again(df1, 1)
    with Metastore.open(uri) as store:
        anchor = store.get_table(anchor_location)
        assert store.committed_write_id(f"many{tag}", 0, table=anchor.name) == \
            first.reports[0].anchor_write_id
        assert store.committed_write_id(f"many{tag}", 1, table=anchor.name) == \
            again.reports[0].anchor_write_id
        for topic, expected in ((a, list(range(9))), (b, [100, 101, 102, 103])):
            location = str(warehouse / topic)
            table = read_table(location, store.snapshot(location))
            assert sorted(table.column("id").to_pylist()) == expected
            assert sorted(r for _, r in store.offset_ranges(location)) == sorted(
                r for _, r in store.offset_ranges(anchor) if r.topic == topic)
            # The killed transaction's write id: open, so never read.
            killed = [i for i in store.transactions(location, states=("open",))]
            assert len(killed) == 1 and not store.snapshot(location).is_valid(
                killed[0].write_id)
        assert sorted(r for _, r in store.offset_ranges(anchor)) == [
            OffsetRange(a, 0, 0, 5), OffsetRange(a, 0, 5, 9),
            OffsetRange(b, 0, 0, 3), OffsetRange(b, 0, 3, 4)]
        # It holds a write id on the anchor too: the same transaction across the tables.
        open_ids = {i.txn_id for i in store.transactions(states=("open",))}
        assert open_ids == {killed[0].txn_id}
        info = store.transactions(anchor, states=("open",))[0]
        store.abort(Transaction(info.txn_id, info.table, info.write_id, info.opened_at,
                                info.agent), reason="test: the killed micro-batch")


def test_keyed_tables_upsert_in_one_hms_transaction(spark: Any, hms4: Server,
                                                    tmp_path: Path) -> None:
    """--mode upsert on the HMS: each keyed table (bucketed by its own key) gets its read
    view and its partitions registered as UPDATE (`table_updated`) in the one transaction."""
    tag = uuid.uuid4().hex[:6]
    uri, warehouse = hms4.uri, tmp_path / "wh"
    a, b = f"o{tag}", f"p{tag}"
    db = f"db{tag}"
    anchor_location = str(warehouse / f"u{tag}")
    create_table(anchor_location, DEAD_LETTER_DDL, name=f"{db}.u{tag}", metastore=uri)

    def create(location: str, key: tuple[str, ...]) -> tuple[TableDefinition, TableDefinition]:
        name = f"{db}.{Path(location).name}"
        return (create_table(location, "id BIGINT, name STRING", name=name, metastore=uri,
                             buckets=2, bucketed_by=key),
                create_table(dead_letter_location(location), DEAD_LETTER_DDL,
                             name=dead_letter_name(name), metastore=uri))
    rules = RoutingRules(TopicSelection(topics=(a, b)), {},
                         TableTemplate.parse(str(warehouse / "{topic}"), placeholder="topic"))

    def value(i: int, name: str) -> bytes:
        return json.dumps({"id": i, "name": name}).encode()

    with ManyTableSink(rules, open_table(anchor_location, metastore=uri).ref,
                       sink_id=f"many{tag}", create=create,
                       options=SinkOptions(mode="upsert", route_keys=(f"{a}=id", f"{b}=name"))
                       ) as sink:
        sink(kafka_rows(spark, [(a, 0, i, value(i, f"n{i}")) for i in range(4)]
                   + [(b, 0, i, value(i, f"k{i % 2}")) for i in range(4)]), 0)
        sink(kafka_rows(spark, [(a, 0, 4, value(1, "x")), (a, 0, 5, value(9, "y"))]
                   + [(b, 0, 4, value(7, "k0"))]), 1)
    with Metastore.open(uri) as store:
        rows = {t: sorted((r["id"], r["name"]) for r in read_table(
            str(warehouse / t), store.snapshot(str(warehouse / t))).to_pylist()) for t in (a, b)}
        assert store.transactions(str(warehouse / a), states=("open",)) == []
    assert rows[a] == [(0, "n0"), (1, "x"), (2, "n2"), (3, "n3"), (9, "y")]
    assert rows[b] == [(3, "k1"), (7, "k0")]
