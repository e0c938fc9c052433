"""The Spark `hive-acid` source in the damage matrix: committed data cut,
emptied, removed or with a changed tail fails the query naming the damage, never rows missing.

The tables and damage kinds are `tests/table/test_damage_every_reader.py`'s: six 500-row loads
over two partitions, one committed bucket file, its directory or its partition damaged. The
source plans from the metastore's read view like every other reader, so the planner refuses
the damage on the driver; a file removed after planning fails the task that opens it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from table.test_damage_every_reader import (
    DAMAGE,
    LOADS,
    ROWS,
    delta_of,
    files_on_disk,
    make_table,
)

from ingest.spark import register
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")]

Capsys = pytest.CaptureFixture[str]


@pytest.fixture(scope="module")
def acid_spark(spark: Any) -> Any:
    register(spark, filter_pushdown=False)
    return spark


def registered_readers(table: Path) -> int:
    with Metastore.open(default_metastore_url(str(table)), read_only=True) as store:
        return len(store.live_readers(str(table), timeout_s=3600))


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_committed_data_fails_the_query_naming_it(
        acid_spark: Any, tmp_path: Path, capsys: Capsys, damage: str) -> None:
    table = make_table(tmp_path, capsys)
    damaged = DAMAGE[damage](table)
    before = files_on_disk(table)
    for action in ("count", "collect"):
        df = acid_spark.read.format("hive-acid").load(str(table))
        with pytest.raises(Exception) as failed:
            getattr(df, action)()
        assert str(damaged) in str(failed.value), (action, str(failed.value)[-2000:])
        assert "CorruptFileError" in str(failed.value)
    assert files_on_disk(table) == before, "a failed read changed the table"
    # The lease of a read whose planning failed is ended at once, not left to lapse.
    assert registered_readers(table) == 0


def test_an_intact_table_counts_exactly_and_a_file_removed_after_planning_fails_its_task(
        acid_spark: Any, tmp_path: Path, capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys)
    assert acid_spark.read.format("hive-acid").load(str(table)).count() == LOADS * ROWS
    ids = sorted(r.id for r in acid_spark.read.format("hive-acid").option("columns", "id")
                 .load(str(table)).collect())
    assert ids == list(range(LOADS * ROWS))
    planned = acid_spark.read.format("hive-acid").load(str(table))
    assert planned.rdd.getNumPartitions() >= 1  # planned now; Spark keeps these tasks
    removed = delta_of(table, 2) / "bucket_00000"
    removed.unlink()
    with pytest.raises(Exception) as failed:
        planned.count()
    assert str(removed) in str(failed.value), str(failed.value)[-2000:]
