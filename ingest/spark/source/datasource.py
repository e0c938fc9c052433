"""Read Hive ACID tables from Spark: the "hive-acid" source of Spark's Python Data Source API.

`register(spark)`, then `spark.read.format("hive-acid").load(path)` reads one snapshot of the
table with deletes applied (options `snapshot`, `columns`, `where`), and
`spark.readStream.format("hive-acid").load(path)` emits the rows of newly committed write ids
(`_stream.py`). Both plan from the metastore's read view with the one read planner
(`_setup.py`, options and packing in `_plan.py`); the executors' read is in
`_read.py`, their renewal of the read's lease in `_lease.py`, filter pushdown
in `_filters.py` (docs/architecture.md).
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
from ingest.spark.source._filters import to_condition
from ingest.spark.source._plan import (
    SourceOptions,
    arrow_schema,
    open_metastore,
    output_schema,
    snapshot_definition,
    table_of,
)
from ingest.spark.source._read import read_task
from ingest.spark.source._setup import ReadSetup, TaskPartition, spark_arrow_schema
from ingest.spark.source._stream import HiveAcidStreamReader

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SOURCE_NAME = "hive-acid"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


class HiveAcidReader(DataSourceReader):
    """Batch reads: planned on the driver when Spark first plans the DataFrame (Spark keeps
    the planned tasks for the DataFrame's later queries), from one read view of the table.

    Lease: Spark plans in a Python process of its own that ends once `partitions` returns, and
    tells no Python code when the query ends. So the planner registers the lease (heartbeated
    while it plans) and leaves it registered; each task renews it when it starts and while it
    reads, and it lapses after the transaction time-out once no task reads
    (docs/invariants.md, 7).
    """

    def __init__(self, options: SourceOptions, schema: StructType | None = None) -> None:
        """Open the table's metastore read-only and check the options against the table.

        Args:
            options: the source's options.
            schema: the schema Spark was given when the DataFrame was made: the columns the
                tasks return, read from the snapshot the plan pins (docs/format.md §25).

        Raises:
            TableNotFoundError: no metastore lists a table at or above the path.
            ConfigError: `columns` names an unknown column, `where` does not parse, or
                `snapshot` is another table's.
            MetastoreError: the metastore cannot be read.
        """
        with open_metastore(options) as (store, defn):
            # A given snapshot reads with its own columns, which `schema()` gave Spark too.
            self.setup = ReadSetup(options, snapshot_definition(store, defn, options.snapshot),
                                   metastore_url=store.url, schema=schema)
        self.snapshot = (None if options.snapshot is None
                         else ValidWriteIdList.from_hive_string(options.snapshot))

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
        """Take the read view (its lease left registered for the tasks) and plan the read.

        Raises:
            CorruptFileError: a committed file is missing, emptied, cut or its tail changed.
            See `ReadSetup.planned` for the rest.
        """
        with self.setup.planned(snapshot=self.snapshot, keep_lease=True) as parts:
            return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, TaskPartition):
            return iter(())  # Spark's one placeholder partition of a read with no tasks
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
        return (HiveAcidReader if self.pushdown else HiveAcidReaderNoPushdown)(options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return HiveAcidStreamReader(SourceOptions.parse(self.options), schema)


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
