"""ManyTableSink in a keyed mode (--mode upsert) on a real SparkSession: each table keyed by
its routing key's --route-key, written apart on a read view inside the micro-batch's one
transaction; a table without a key routes nowhere; a failure in one table aborts them all and
removes the keyed table's delete delta too (docs/many-tables.md).

Micro-batches are static DataFrames with the Kafka source's columns, handed to the sink as
foreachBatch would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import kafka_rows

from ingest.acid.read.reader import read_table
from ingest.errors import IngestError
from ingest.records.routing import RoutingRules, TableTemplate, TopicSelection
from ingest.spark.job import ensure_tables, key_bucket_columns, table_layout
from ingest.spark.options import SinkOptions
from ingest.spark.sink import ManyTableSink
from ingest.spark.sink.deadletter import DEAD_LETTER_DDL
from ingest.table import open_table
from ingest.table.write import create_table
from ingest.txn import Metastore, default_metastore_url

SCHEMA = "id BIGINT, name STRING"
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")

Row = tuple[str, int, int, bytes | None]


def values(topic: str, start: int, rows: list[dict[str, Any]]) -> list[Row]:
    return [(topic, 0, start + n, json.dumps(r).encode()) for n, r in enumerate(rows)]


def rows_of(location: str) -> list[tuple[int, str]]:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    return sorted((r["id"], r["name"]) for r in read_table(location, snapshot).to_pylist())


def delete_deltas(location: str) -> list[str]:
    return sorted(p.name for p in Path(location).iterdir() if p.name.startswith("delete_delta"))


@pytest.mark.spark
@pytest.mark.slow
def test_keyed_tables_commit_in_the_one_transaction_and_abort_together(
        spark: Any, warehouse: Path) -> None:
    layout = table_layout(SCHEMA, None)
    rules = RoutingRules(TopicSelection(topics=("a", "b", "c")), {},
                         TableTemplate.parse(str(warehouse / "{topic}"), placeholder="topic"))
    anchor = str(warehouse / "_unrouted")
    create_table(anchor, DEAD_LETTER_DDL, name="default._unrouted")
    made: dict[str, tuple[str, ...]] = {}

    def create(location: str, key: tuple[str, ...] = ()) -> Any:
        made[location.removeprefix("file://")] = key
        by = key_bucket_columns(layout, key)
        return ensure_tables(location, layout, buckets=2 if by else 0, bucketed_by=by)

    a, b = str(warehouse / "a"), str(warehouse / "b")
    # No --key: "c" has no --route-key, so its table is never made and its records route
    # nowhere, the micro-batch committing the others.
    with ManyTableSink(rules, open_table(anchor).ref, sink_id="many@ckpt", create=create,
                       options=SinkOptions(mode="upsert", route_keys=("a=id", "b=name"),
                                           on_new_field="fail")) as sink:
        sink(kafka_rows(spark, values("a", 0, [{"id": i, "name": f"n{i}"} for i in range(5)])
                        + values("b", 0, [{"id": i, "name": f"k{i % 3}"} for i in range(6)])
                        + values("c", 0, [{"id": 1, "name": "x"}] * 2)), 0)
        assert made == {a: ("id",), b: ("name",)}
        first = sink.reports[-1]
        assert set(first.tables) == {"default.a", "default.b"} and first.unrouted_records == 2
        assert "needs the key of table" in first.unrouted["c"]
        assert rows_of(a) == [(i, f"n{i}") for i in range(5)]
        assert rows_of(b) == [(3, "k0"), (4, "k1"), (5, "k2")]  # last wins per name

        # Updates in both tables, one transaction: b keyed by name, a by id.
        sink(kafka_rows(spark, values("a", 5, [{"id": 1, "name": "x"}, {"id": 2, "name": "y"}])
                        + values("b", 6, [{"id": 10, "name": "k0"}])), 1)
        assert rows_of(a) == [(0, "n0"), (1, "x"), (2, "y"), (3, "n3"), (4, "n4")]
        assert rows_of(b) == [(4, "k1"), (5, "k2"), (10, "k0")]
        kept = delete_deltas(a)
        assert kept  # the updates' delete events

        # A new field in b fails the micro-batch (--on-new-field fail) after a wrote its delete
        # delta: nothing commits, and a's new delete delta is removed with the rest.
        with pytest.raises(IngestError, match="extra"):
            sink(kafka_rows(spark, values("a", 7, [{"id": 3, "name": "z"}])
                            + values("b", 7, [{"id": 9, "name": "k9", "extra": 1}])), 2)
        assert delete_deltas(a) == kept
        assert rows_of(a) == [(0, "n0"), (1, "x"), (2, "y"), (3, "n3"), (4, "n4")]
        with Metastore.open(sink.metastore_url) as store:
            assert store.committed_write_id("many@ckpt", 2, table="default._unrouted") is None
            assert store.transactions("default.a", states=("open",)) == []

        sink(kafka_rows(spark, values("a", 7, [{"id": 3, "name": "z"}])
                        + values("b", 7, [{"id": 11, "name": "k1"}])), 2)
    assert rows_of(a) == [(0, "n0"), (1, "x"), (2, "y"), (3, "z"), (4, "n4")]
    assert rows_of(b) == [(5, "k2"), (10, "k0"), (11, "k1")]
