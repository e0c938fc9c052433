"""The driver's side of one table's write tasks, shared by the single-table and the
many-table sinks: the plan sent to the tasks (`table_plan`, with the codec `table_codec`)
and the manifest entries made of what they report back (`committed_files`,
docs/format.md §20); a keyed table's (--mode upsert|cdc) tasks run on a read view taken
inside the micro-batch's transaction (`run_keyed_tasks`) and its commit declares the
buckets it wrote (`keyed_write_set`, docs/format.md §24)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from ingest.acid import parse_codec
from ingest.acid.format import CommittedFile
from ingest.io import storage
from ingest.spark.options import SinkOptions
from ingest.spark.sink._batch import run_tasks
from ingest.spark.sink._results import FileWritten, TaskResult, WriteTarget
from ingest.spark.sink._tasks import DeltaTarget, TaskPlan
from ingest.table.core import write_set
from ingest.txn import Metastore, TableDefinition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def table_codec(table: TableDefinition, override: str | None = None) -> str:
    """The ORC compression to write `table` with: `override`, else its `orc.compress`."""
    return parse_codec(override or table.properties.get("orc.compress", "zlib"),
                       where=f"Cannot write to {table.name}: ORC compression ",
                       hint="fix the table property orc.compress")


def table_plan(table: TableDefinition, dead: TableDefinition, *,
               target: tuple[int, str], dead_letter: tuple[int, str],
               codecs: tuple[str, str], options: SinkOptions,
               storage_options: Mapping[str, Any],
               partition_expression: str | None) -> TaskPlan:
    """The append-mode plan of one table and its dead-letter table; `target` and
    `dead_letter` are each (write id, delta directory). A table partitioned by a plain
    field parses it from the record; by a Spark SQL expression, it is computed before the
    write stage (`partition_from="column"`)."""
    pcol = table.partition_columns[0] if table.partition_columns else None
    parse_fields = list(table.row_schema)
    partition_from: Literal["field", "column", "none"] = "none"
    if pcol is not None and partition_expression is None:
        partition_from = "field"
        parse_fields.append(pa.field(pcol, pa.string()))
    elif pcol is not None:
        partition_from = "column"
    return TaskPlan(
        target=DeltaTarget(table.location, target[0], target[1], codecs[0]),
        dead_letter=DeltaTarget(dead.location, dead_letter[0], dead_letter[1], codecs[1]),
        row_schema=table.row_schema, parse_schema=pa.schema(parse_fields),
        partition_column=pcol, partition_from=partition_from,
        bucket_columns=tuple(table.bucket_columns), bucket_count=table.bucket_count,
        append=False, close_files=False, options=options,
        storage_options=dict(storage_options))


def committed_files(targets: Mapping[WriteTarget, tuple[TableDefinition, int]],
                    results: Sequence[TaskResult]) -> dict[str, list[CommittedFile]]:
    """The manifest entries, by table name, of the files the tasks reported; `targets` gives
    each target's table and write id. Task paths start with the root each table's location
    names (as in `_tasks.py`)."""
    roots = {target: storage.path_of(table.location) + "/"
             for target, (table, _) in targets.items()}
    out: dict[str, list[CommittedFile]] = {table.name: [] for table, _ in targets.values()}
    for r in results:
        if not isinstance(r, FileWritten) or r.tail_hash is None or r.events is None:
            continue
        table, write_id = targets[r.target]
        out[table.name].append(CommittedFile(r.path.removeprefix(roots[r.target]), write_id,
                                             r.length, r.tail_hash, r.events))
    return out


def run_keyed_tasks(store: Metastore, batch_df: DataFrame, plan: TaskPlan, *,
                    agent: str) -> list[TaskResult]:
    """Run a keyed plan's tasks (`plan.table` set, --mode upsert|cdc) on a read view of
    its table taken now, after the micro-batch's transaction opened, so every commit before
    it is seen; leased, so the cleaner keeps what the tasks read (docs/format.md §24)."""
    assert plan.table is not None
    with store.read_view(plan.table, agent=agent) as view:
        return run_tasks(batch_df, replace(plan, view=view), partition_expression=None)


def keyed_write_set(entries: Iterable[CommittedFile]) -> dict[str, set[int]]:
    """The partitions and buckets a keyed table's files of one micro-batch are in, declared
    at commit: a concurrent keyed writer of the same buckets that committed first makes the
    commit fail."""
    return write_set(e.path for e in entries)
