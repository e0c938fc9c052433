"""Read Hive ACID tables from Spark: the "hive-acid" source of Spark's Python Data Source API.

`register(spark)`, then `spark.read.format("hive-acid").load(path)` reads one snapshot of the
table with deletes applied (options `snapshot`, `columns`, `where`), and
`spark.readStream.format("hive-acid").load(path)` emits the rows of newly committed write ids
(`_datasource_stream`). Planning is in `_datasource_plan`, the executors' read in
`_datasource_read`, filter pushdown in `_datasource_filters` (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from ingest.acid import ValidWriteIdList
from ingest.spark._datasource_filters import to_condition
from ingest.spark._datasource_plan import (
    SourceOptions,
    arrow_schema,
    open_metastore,
    output_schema,
    table_of,
)
from ingest.spark._datasource_read import read_task
from ingest.spark._datasource_setup import ReadSetup, TaskPartition, spark_arrow_schema
from ingest.spark._datasource_stream import HiveAcidStreamReader
from ingest.table import check_snapshot_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SOURCE_NAME = "hive-acid"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


class HiveAcidReader(DataSourceReader):
    """Batch reads: one snapshot taken here, on the driver, when Spark first plans the
    DataFrame (Spark keeps the planned tasks for the DataFrame's later queries)."""

    def __init__(self, options: SourceOptions) -> None:
        """Open the table's metastore read-only and take the snapshot (or use `snapshot`).

        Raises:
            TableNotFoundError: no metastore lists a table at or above the path.
            ConfigError: `columns` names an unknown column, `where` does not parse, or
                `snapshot` is another table's.
            MetastoreError: the metastore cannot be read.
        """
        with open_metastore(options) as (store, defn):
            if options.snapshot is not None:
                check_snapshot_table(options.snapshot, defn.name, where=f"table {defn.name}")
            self.setup = ReadSetup(options, defn)
            snapshot = (options.snapshot if options.snapshot is not None
                        else store.snapshot(defn).to_hive_string())
            # Taken with the snapshot: which compactors' `_vT` outputs count as committed.
            self.visible_txn = store.compactor_visibility(defn)
        self.snapshot = snapshot

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:  # noqa: N802 - Spark's
        """Keep the filters an Arrow expression answers exactly; return the rest to Spark."""
        schema = arrow_schema(self.setup.defn)
        for f in filters:
            condition = to_condition(f, schema)
            if condition is None:
                yield f
            else:
                self.setup.conditions.append(condition)

    def partitions(self) -> list[InputPartition]:
        groups = self.setup.groups(ValidWriteIdList.from_hive_string(self.snapshot),
                                   visible_txn=self.visible_txn)
        return self.setup.input_partitions(self.setup.task(self.snapshot), groups)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, TaskPartition)
        return read_task(partition.task)


class HiveAcidReaderNoPushdown(HiveAcidReader):
    """The reader when Spark's Python filter pushdown is off: `where` and `columns` only."""

    pushFilters = DataSourceReader.pushFilters  # Spark refuses an override with pushdown off


class HiveAcidDataSource(DataSource):
    """`spark.read.format("hive-acid")` and `spark.readStream.format("hive-acid")`."""

    pushdown = True

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        options = SourceOptions.parse(self.options)
        return spark_arrow_schema(output_schema(table_of(options), options.columns))[0]

    def reader(self, schema: StructType) -> DataSourceReader:
        options = SourceOptions.parse(self.options)
        return (HiveAcidReader if self.pushdown else HiveAcidReaderNoPushdown)(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return HiveAcidStreamReader(SourceOptions.parse(self.options))


class HiveAcidDataSourceNoPushdown(HiveAcidDataSource):
    """The same source with a reader that accepts no filters from Spark."""

    pushdown = False


def register(spark: SparkSession, *, filter_pushdown: bool = False) -> None:
    """Register the "hive-acid" source with this session (again: replaces the earlier one).

    Args:
        spark: the session.
        filter_pushdown: let Spark push filters on integer, string, boolean, date and
            decimal columns into the reader (partition pruning, rows dropped before they
            reach Spark); this sets `spark.sql.python.filterPushdown.enabled=true` for the
            session, which Spark requires of a reader that accepts filters. Off by default:
            Spark 4.3 keeps the reader of a DataFrame's last pushdown for its later queries
            that push no filter, so `df.where(f).count()` then `df.count()` returns the
            filtered count. Safe when every query starts from a new `load()`.
    """
    if filter_pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")
        spark.dataSource.register(HiveAcidDataSource)
    else:
        spark.dataSource.register(HiveAcidDataSourceNoPushdown)


__all__ = ["SOURCE_NAME", "HiveAcidDataSource", "HiveAcidReader", "register"]
