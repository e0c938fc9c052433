"""ManyTableSink's checks of the routed tables (docs/many-tables.md, "Before merging"), on a
real SparkSession: a table whose columns another process changed while a micro-batch was
written aborts the whole transaction (as `AcidSink`'s commit); a routed table found with other
columns than the stream's --schema is refused at its first use, before anything commits.

Micro-batches are static DataFrames with the Kafka source's columns, as foreachBatch hands
them (tests/spark/test_many_tables_sink.py's helpers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from spark.test_many_tables_sink import (
    SCHEMA,
    committed,
    ids,
    kafka_rows,
    make_sink,
    topic_rows,
)

from ingest.errors import CommitConflictError, SchemaMismatchError
from ingest.spark.job import ensure_tables, table_layout
from ingest.spark.sink import ManyTableSink
from ingest.spark.sink.deadletter import DEAD_LETTER_DDL
from ingest.table.write import create_table
from ingest.txn import Metastore, default_metastore_url

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")


@pytest.mark.spark
@pytest.mark.slow
def test_a_table_whose_columns_changed_meanwhile_aborts_the_whole_micro_batch(
        spark: Any, warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the tasks and the commit, another process gives `payments` a column of
    another name (a Hive Metastore's lost alter race leaves that): the files, written with
    'name', would read under 'other'; the commit is refused and neither table commits."""
    orders, payments = str(warehouse / "orders"), str(warehouse / "payments")
    df = kafka_rows(spark, topic_rows("orders", range(5)) + topic_rows("payments", range(3)))
    renamed = pa.schema([("id", pa.int64()), ("other", pa.string())])

    def alter(name: str) -> None:
        assert name == "sink.before_commit"
        with Metastore.open(default_metastore_url(payments)) as store:
            current = store.get_table(payments).row_schema
            store.alter_columns(payments, renamed, expected=current)

    monkeypatch.setattr("ingest.spark.sink.many.sink.crash_point", alter)
    with make_sink(warehouse, ("orders", "payments")) as sink, \
            pytest.raises(CommitConflictError) as caught:
        sink(df, 0)
    message = caught.value.message
    assert "Cannot commit the micro-batch 0 to table default.payments" in message
    assert "column 2 is 'name' in the files but 'other' in the table" in message
    assert committed(orders).num_rows == 0 and committed(payments).num_rows == 0
    assert not list(warehouse.rglob("bucket_*")), "every table's files are removed"
    with Metastore.open(default_metastore_url(orders)) as store:
        assert store.committed_write_id("many@ckpt", 0, table="default._unrouted") is None
        assert store.transactions(states=("open",)) == []


@pytest.mark.spark
@pytest.mark.slow
def test_a_found_routed_table_with_other_columns_is_refused_before_anything_commits(
        spark: Any, warehouse: Path) -> None:
    """`orders` exists with a column --schema does not have: the micro-batch touching it is
    refused naming the table and both column lists; `payments`, in the same micro-batch, is
    not committed either, and a later micro-batch of `payments` alone still commits."""
    orders, payments = str(warehouse / "orders"), str(warehouse / "payments")
    create_table(orders, "id BIGINT, note STRING", name="default.orders")
    create_table(f"{orders}__dead_letter", DEAD_LETTER_DDL, name="default.orders__dead_letter")
    layout = table_layout(SCHEMA, None)
    df = kafka_rows(spark, topic_rows("orders", range(4)) + topic_rows("payments", range(2)))
    with make_sink(warehouse, ("orders", "payments")) as made:
        pass

    def check(table: Any, dead: Any) -> None:
        ensure_tables(table.location, layout)  # found: checked against --schema

    with ManyTableSink(made.rules, made.anchor_ref, sink_id="many@ckpt", create=made.create,
                       check=check) as sink:
        with pytest.raises(SchemaMismatchError) as caught:
            sink(df, 0)
        assert ("Cannot stream into table default.orders at" in caught.value.message
                and "it has columns (id BIGINT, note STRING) but --schema gives "
                    "(id BIGINT, name STRING)" in caught.value.message)
        assert committed(orders).num_rows == 0 and committed(payments).num_rows == 0
        with Metastore.open(default_metastore_url(orders)) as store:
            assert store.committed_write_id("many@ckpt", 0, table="default._unrouted") is None
            assert store.transactions(states=("open",)) == []
        sink(kafka_rows(spark, topic_rows("payments", range(2))), 0)
    assert ids(payments) == [0, 1]


def test_the_claim_reads_new_tables_together_and_known_ones_never_again(
        warehouse: Path) -> None:
    """On the driver alone: a stream's first micro-batch reads the tables of its keys (and
    their dead-letter tables) in one metastore call, not a few look-ups a table, and creates
    a missing one; the next micro-batch reads none of them."""
    for topic in ("a", "b", "c"):
        ensure_tables(str(warehouse / topic), table_layout(SCHEMA, None))
    sink = make_sink(warehouse, ("a", "b", "c", "d"))
    with sink:
        store = sink._open()
        calls: list[str] = []
        for method in ("find_table", "get_table", "find_tables", "offset_ranges"):
            real = getattr(store, method)
            setattr(store, method, lambda *a, _m=method, _r=real, **k: (calls.append(_m),
                                                                         _r(*a, **k))[1])
        touched, unrouted = sink._claim(store, 0, ["a", "b", "c", "d"])
        first = list(calls)
        assert [t.table.name for t in touched] == [f"default.{t}" for t in "abcd"]
        assert unrouted == {}
        # One read of the four tables and their dead-letter tables; the three made without a
        # holder property look for one in their offsets; "d" is looked up once more before
        # it is created (get_table, through its find_table).
        assert first == ["find_tables", *["offset_ranges"] * 3, "get_table", "find_table"]
        calls.clear()
        again, _ = sink._claim(store, 1, ["a", "b", "c", "d"])
        assert [t.table for t in again] == [t.table for t in touched]
        assert calls == []
