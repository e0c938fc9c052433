"""The "hive-acid" source reads with the columns of the snapshot it pins (docs/format.md §25),
and returns exactly the columns Spark was given when the DataFrame was made, whatever ALTER
ran between `load()` and the query."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import ingest
from ingest.spark import register
from ingest.table.write import create_table
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")]


def _names(df: Any) -> list[str]:
    return [f.name for f in df.schema.fields]


def test_a_dataframe_made_before_add_columns_reads_its_columns_one_after_the_new_ones(
        spark: Any, tmp_path: Path) -> None:
    register(spark, filter_pushdown=False)
    location = str(tmp_path / "wh" / "t")
    create_table(location, "id BIGINT, value STRING")
    t = ingest.open_table(location)
    t.load(pa.table({"id": [1, 2], "value": ["a", "b"]}))
    with Metastore.open(default_metastore_url(location), read_only=True) as store:
        before = store.snapshot(location).to_hive_string()
    planned_before = spark.read.format("hive-acid").load(location)  # Spark's schema: 2 columns
    pinned_before = spark.read.format("hive-acid").option("snapshot", before).load(location)

    t.alter(add_columns="note STRING")
    t.load(pa.table({"id": [3], "value": ["c"], "note": ["n"]}))

    # Made before the change, queried after: Spark's two columns, every row of the snapshot
    # the query pins (the new row too), never a column Spark was not told of.
    assert _names(planned_before) == ["id", "value"]
    assert sorted(tuple(r) for r in planned_before.collect()) == [(1, "a"), (2, "b"), (3, "c")]
    # A snapshot taken before the change reads the columns of that snapshot.
    assert _names(pinned_before) == ["id", "value"]
    assert sorted(tuple(r) for r in pinned_before.collect()) == [(1, "a"), (2, "b")]
    again = spark.read.format("hive-acid").option("snapshot", before).load(location)
    assert _names(again) == ["id", "value"]
    assert sorted(tuple(r) for r in again.collect()) == [(1, "a"), (2, "b")]

    after = spark.read.format("hive-acid").load(location)
    assert _names(after) == ["id", "value", "note"]
    assert sorted(tuple(r) for r in after.collect()) == [
        (1, "a", None), (2, "b", None), (3, "c", "n")]
    assert sorted(r.id for r in after.where("note IS NULL").collect()) == [1, 2]


def test_a_column_widened_after_the_dataframe_was_made_is_a_clear_error(
        spark: Any, tmp_path: Path) -> None:
    from pyspark.errors import PySparkException

    register(spark, filter_pushdown=False)
    location = str(tmp_path / "wh" / "w")
    create_table(location, "id INT, value STRING")
    t = ingest.open_table(location)
    t.load(pa.table({"id": pa.array([1], pa.int32()), "value": ["a"]}))
    df = spark.read.format("hive-acid").load(location)
    t.alter(change_columns=["id BIGINT"])
    t.load(pa.table({"id": [2**40], "value": ["b"]}))
    # Spark was told INT: a BIGINT value must not come back cut to 32 bits.
    with pytest.raises(PySparkException, match="SchemaMismatchError.*id"):
        df.collect()
    assert sorted(tuple(r) for r in spark.read.format("hive-acid").load(location).collect()) == [
        (1, "a"), (2**40, "b")]
