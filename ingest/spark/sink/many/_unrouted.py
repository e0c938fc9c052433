"""The part of a many-table write task (`_tasks`) writing the records that route to no table
into the stream's anchor (its dead-letter table), each with its reason (docs/many-tables.md,
"Routing nowhere").

Runs on executors like `_tasks.write_task`, with the same attempt safety (staging names, or
a first attempt's exclusive final names on object stores); it never talks to the metastore.
"""

from __future__ import annotations

import pyarrow as pa

from ingest.spark.sink._results import (
    OffsetsRead,
    TaskResult,
    merge_offsets,
    offsets_read,
)
from ingest.spark.sink._tasks import DEAD_LETTER_SCHEMA, TaskPlan, _TaskWriter


class UnroutedWrite:
    """The anchor's part of a write task: records routed nowhere, as its dead letters."""

    def __init__(self, plan: TaskPlan) -> None:
        self.writer = _TaskWriter.in_task(plan)
        self.read: list[OffsetsRead] = []

    def add(self, rows: pa.Table | pa.RecordBatch) -> None:
        """Write rows of the Kafka columns and `error` (the reason)."""
        self.read += offsets_read(rows.column("topic"), rows.column("partition"),
                                  rows.column("offset"))
        table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
        self.writer.write_dead(table.select(DEAD_LETTER_SCHEMA.names).cast(DEAD_LETTER_SCHEMA))

    def finish(self) -> list[TaskResult]:
        return [*self.writer.finish(), *merge_offsets(self.read)]

    def abandon(self) -> None:
        self.writer.abandon()


__all__ = ["UnroutedWrite"]
