"""The "hive-acid" Spark source reads a table whose columns changed (docs/format.md §25) as
`ingest cat` does: rows loaded before an added column read it as null, widened values widened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import ingest
from ingest.spark import register
from ingest.table.write import create_table

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")]


def test_the_spark_source_reads_old_rows_under_the_new_columns(spark: Any,
                                                               tmp_path: Path) -> None:
    register(spark, filter_pushdown=False)
    location = str(tmp_path / "wh" / "events")
    create_table(location, "id INT, f FLOAT, value STRING", partitioned_by=["dt"])
    t = ingest.open_table(location)
    t.load(pa.table({"id": pa.array([1, 2], pa.int32()), "f": pa.array([0.5, 1.5], pa.float32()),
                     "value": ["a", "b"], "dt": ["x", "y"]}))
    t.alter(add_columns="note STRING", change_columns=["id BIGINT", "f DOUBLE"])
    t.load(pa.table({"id": [2**40], "f": [0.1], "value": ["c"], "note": ["n"], "dt": ["x"]}))
    df = spark.read.format("hive-acid").load(location)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("id", "bigint"), ("f", "double"), ("value", "string"), ("note", "string"),
        ("dt", "string")]
    got = sorted((r.asDict() for r in df.collect()), key=lambda r: r["id"])
    ours = sorted(ingest.open_table(location).to_arrow().to_pylist(), key=lambda r: r["id"])
    assert got == ours == [
        {"id": 1, "f": 0.5, "value": "a", "note": None, "dt": "x"},
        {"id": 2, "f": 1.5, "value": "b", "note": None, "dt": "y"},
        {"id": 2**40, "f": 0.1, "value": "c", "note": "n", "dt": "x"}]
    assert sorted(r.id for r in df.where("note IS NULL").collect()) == [1, 2]
