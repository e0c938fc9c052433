"""The Spark task writing a many-table stream's records that route to no table into the
stream's anchor (its dead-letter table), each with its reason (docs/many-tables.md,
"Routing nowhere").

Runs on executors like `_tasks.write_task`, with the same attempt safety (staging names, or
a first attempt's exclusive final names on object stores); it never talks to the metastore.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from ingest.spark.sink._results import OffsetsRead, merge_offsets, offsets_read, to_arrow
from ingest.spark.sink._tasks import DEAD_LETTER_SCHEMA, TaskPlan, _TaskWriter

UNROUTED_DDL = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                "error STRING")


def unrouted_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]
                  ) -> Iterator[pa.RecordBatch]:
    """Write every record of the input (the Kafka columns and `error`, the reason) as a dead
    letter of `plan.dead_letter`; yields one RESULT_SCHEMA batch (the file, the offsets
    read)."""
    writer = _TaskWriter.in_task(plan)
    read: list[OffsetsRead] = []
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            read += offsets_read(batch.column("topic"), batch.column("partition"),
                                 batch.column("offset"))
            writer.write_dead(pa.Table.from_batches([batch]).select(
                DEAD_LETTER_SCHEMA.names).cast(DEAD_LETTER_SCHEMA))
        results = writer.finish()
    except BaseException:
        writer.abandon()
        raise
    yield to_arrow([*results, *merge_offsets(read)])


__all__ = ["UNROUTED_DDL", "unrouted_task"]
