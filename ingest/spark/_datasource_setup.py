"""What the batch and streaming readers of the "hive-acid" source share: the table, its
output schema in Spark's and Arrow's terms, the `where` condition, and turning bucket groups
into input partitions. Runs on the driver; what it builds pickles to the executors.
"""

from __future__ import annotations

from dataclasses import replace

import fsspec
import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from ingest.acid import ValidWriteIdList, storage
from ingest.acid.predicate import parse_predicate
from ingest.acid.state import VisibleTxn
from ingest.spark._datasource_filters import Condition, conjunction
from ingest.spark._datasource_plan import (
    BucketGroup,
    ReadTask,
    SourceOptions,
    arrow_schema,
    bucket_groups,
    output_schema,
    pack,
)
from ingest.txn import TableDefinition


class TaskPartition(InputPartition):
    """One Spark task: a `ReadTask` (bucket groups of the snapshot)."""

    def __init__(self, task: ReadTask) -> None:
        super().__init__(len(task.groups))
        self.task = task


def spark_arrow_schema(schema: pa.Schema) -> tuple[StructType, pa.Schema]:
    """The Spark schema of the table's Arrow columns, and the Arrow types Spark takes for it
    (Hive's TIMESTAMP, a date-time without zone, is Spark's TIMESTAMP_NTZ)."""
    spark_schema = from_arrow_schema(schema)
    return spark_schema, to_arrow_schema(spark_schema, timezone="UTC")


class ReadSetup:
    """What both readers share: options, the table, its schema, the `where` condition."""

    def __init__(self, options: SourceOptions, defn: TableDefinition) -> None:
        self.options = options
        self.defn = defn
        self.output = output_schema(defn, options.columns)
        self.conditions: list[Condition] = []
        if options.where is not None:
            predicate = parse_predicate(options.where, arrow_schema(defn), option="where")
            self.conditions.append(Condition(predicate.expression, predicate.columns))

    def task(self, snapshot: str, *, write_ids: tuple[int, int] | None = None) -> ReadTask:
        """A task template: everything but the bucket groups; `write_ids` (after, up to]
        keeps only rows those write ids inserted (streaming)."""
        needed = list(self.output.names)
        for c in self.conditions:
            needed += [n for n in c.columns if n not in needed]
        fs, _ = _table_fs(self.defn)
        return ReadTask(fs, snapshot, self.defn.row_schema, tuple(self.defn.partition_columns),
                        tuple(needed), spark_arrow_schema(self.output)[1],
                        conjunction(self.conditions), write_ids)

    def groups(self, snapshot: ValidWriteIdList, *, write_ids: tuple[int, int] | None = None,
               visible_txn: VisibleTxn | None = None) -> list[BucketGroup]:
        """The snapshot's bucket groups under the path the source was given (`visible_txn`:
        the metastore's committed compactor transactions, for `_vT` directories)."""
        fs, _ = _table_fs(self.defn)
        path = str(storage.url_to_fs(self.options.path)[1]).rstrip("/")
        return bucket_groups(fs, path, snapshot, self.conditions, self.defn.partition_columns,
                             write_ids=write_ids, visible_txn=visible_txn)

    def input_partitions(self, template: ReadTask, groups: list[BucketGroup]
                         ) -> list[InputPartition]:
        """The groups packed into tasks, each a copy of `template` with its groups."""
        return [TaskPartition(replace(template, groups=g)) for g in pack(
            groups, max_partition_bytes=self.options.max_partition_bytes,
            min_partitions=self.options.min_partitions)]


def _table_fs(defn: TableDefinition) -> tuple[fsspec.AbstractFileSystem, str]:
    fs, root = storage.url_to_fs(defn.location)
    return fs, str(root).rstrip("/")


__all__ = ["ReadSetup", "TaskPartition", "spark_arrow_schema"]
