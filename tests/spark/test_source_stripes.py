"""The hive-acid source skips stripes by their statistics, as the Table API does, for the
`where` option and for filters Spark pushes; the exact filter still decides every row and
deletes still apply."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import LessThan

import ingest
from ingest.acid.read.merge import ScanCounts
from ingest.spark import register
from ingest.spark.source._read import read_task
from ingest.spark.source.datasource import HiveAcidDataSource
from ingest.table import open_table
from ingest.table.write import create_table, delete, load

LOADS, ROWS = 6, 100
WHERE = "id < 100"


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Six loads of ascending ids (a file, and a stripe, each), then a delete in the first."""
    location = str(tmp_path_factory.mktemp("stripes") / "events")
    create_table(location, "id BIGINT, value STRING")
    for k in range(LOADS):
        ids = range(k * ROWS, (k + 1) * ROWS)
        load(open_table(location), pa.table({"id": pa.array(list(ids), pa.int64()),
                                             "value": [f"v{i}" for i in ids]}))
    assert delete(open_table(location), "id IN (5, 150)").rows_deleted == 2
    return location


def read_in_process(options: dict[str, str], pushed: list[Any] | None = None
                    ) -> tuple[list[int], ScanCounts]:
    """The source's planning and its tasks' reads, run here instead of in Spark's workers."""
    source = HiveAcidDataSource(options)
    reader = source.reader(source.schema())
    if pushed is not None:
        assert list(reader.pushFilters(pushed)) == []  # all taken by the reader
    counts = ScanCounts()
    ids = [i for p in reader.partitions() for b in read_task(p.task, counts=counts)  # type: ignore[attr-defined]
           for i in b.column("id").to_pylist()]
    return sorted(ids), counts


def expected_ids(location: str) -> list[int]:
    scan = ingest.open_table(location).scan(where=WHERE)
    ids = sorted(scan.to_arrow().column("id").to_pylist())
    assert scan.stats is not None and scan.stats.stripes_skipped == LOADS - 1
    return ids


@pytest.mark.parametrize("how", ["where", "pushed"])
def test_a_selective_condition_skips_stripes_and_returns_the_same_rows(table: str, how: str
                                                                       ) -> None:
    expected = expected_ids(table)
    assert expected == [i for i in range(ROWS) if i != 5]
    if how == "where":
        got, counts = read_in_process({"path": table, "where": WHERE})
    else:
        got, counts = read_in_process({"path": table}, [LessThan(("id",), 100)])
    assert got == expected
    assert (counts.files, counts.stripes, counts.stripes_skipped) == (LOADS, LOADS, LOADS - 1)
    everything, counts = read_in_process({"path": table})
    assert len(everything) == LOADS * ROWS - 2 and counts.stripes_skipped == 0


@pytest.mark.spark
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")
def test_spark_returns_the_same_rows_with_and_without_skipping(spark: Any, table: str) -> None:
    register(spark, filter_pushdown=False)
    got = sorted(r.id for r in spark.read.format("hive-acid").option("where", WHERE)
                 .load(table).collect())
    everything = spark.read.format("hive-acid").load(table)
    assert got == sorted(r.id for r in everything.where(WHERE).collect()) == expected_ids(table)
