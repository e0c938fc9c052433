"""Issue 19 §6 items 3 and 8: the "hive-acid" source refuses option keys it does not read
(a misspelt `wher` would silently read every row) and a snapshot of another table, while
the keys Spark itself passes (`path`) and `storage_option.<key>` keep working."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from ingest.errors import ConfigError
from ingest.spark import register
from ingest.spark.source._plan import SourceOptions
from ingest.table import open_table
from ingest.table.write import create_table, load

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")]


@pytest.fixture(scope="module")
def acid_spark(spark: Any) -> Any:
    register(spark, filter_pushdown=False)
    return spark


@pytest.fixture
def table(tmp_path: Path) -> str:
    location = str(tmp_path / "wh" / "events")
    create_table(location, "id BIGINT, value STRING")
    load(open_table(location),
         pa.table({"id": pa.array([1, 2, 3], pa.int64()), "value": ["a", "b", "c"]}))
    return location


@pytest.mark.parametrize("key,value,meant", [("wher", "id > 1", "where"),
                                             ("colums", "id", "columns"),
                                             ("maxPartitionByte", "10", "maxPartitionBytes")])
def test_a_misspelt_option_is_refused_naming_the_closest(
        acid_spark: Any, table: str, key: str, value: str, meant: str) -> None:
    reader = acid_spark.read.format("hive-acid").option(key, value)
    key = key.lower()  # Spark hands a source its option keys in lower case
    with pytest.raises(Exception, match=f"Unknown option '{key}' of the hive-acid source; "
                                        f"did you mean '{meant}'\\?"):
        reader.load(table).collect()
    stream = acid_spark.readStream.format("hive-acid").option(key, value)
    with pytest.raises(Exception, match=f"Unknown option '{key}' of the hive-acid source"):
        stream.load(table).writeStream.format("memory").queryName(f"q_{key}").trigger(
            availableNow=True).start().awaitTermination(60)


def test_an_unknown_option_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        SourceOptions.parse({"path": "/t", "zzz": "1"})
    assert info.value.message == "Unknown option 'zzz' of the hive-acid source"
    assert info.value.hint == ("its options are path, metastore, snapshot, columns, where, "
                               "maxPartitionBytes, minPartitions, maxWriteIdsPerTrigger, "
                               "storage_options and storage_option.<key>")


def test_known_options_any_case_path_and_storage_options_still_read(acid_spark: Any,
                                                                    table: str) -> None:
    df = (acid_spark.read.format("hive-acid").option("path", table).option("WHERE", "id > 1")
          .option("Columns", "id").option("storage_option.anon", "false").load())
    assert sorted(r.id for r in df.collect()) == [2, 3]
    assert acid_spark.read.format("hive-acid").load(table).count() == 3


def test_several_paths_are_refused(acid_spark: Any, table: str) -> None:
    with pytest.raises(Exception, match="The hive-acid source reads one table: give one "
                                        "location, not several"):
        acid_spark.read.format("hive-acid").load([table, table]).collect()


def test_a_snapshot_of_another_table_is_refused(acid_spark: Any, table: str) -> None:
    with pytest.raises(Exception, match="Cannot read table default.events with snapshot "
                                        "'default.other:1::': it is a write-id list of table "
                                        "default.other, not of default.events"):
        acid_spark.read.format("hive-acid").option("snapshot", "default.other:1::").load(
            table).collect()
    df = acid_spark.read.format("hive-acid").option("snapshot", "default.events:1::")
    assert df.load(table).count() == 3
