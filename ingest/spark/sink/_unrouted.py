"""The Spark task writing a many-table stream's records that route to no table into the
stream's anchor (its dead-letter table), each with the reason of its topic
(docs/many-tables.md, "Routing nowhere").

Runs on executors like `_tasks.write_task`, with the same attempt safety (staging names, or
a first attempt's exclusive final names on object stores); it never talks to the metastore.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pyarrow as pa

from ingest.spark.sink._results import OffsetsRead, merge_offsets, offsets_read, to_arrow
from ingest.spark.sink._tasks import DEAD_LETTER_SCHEMA, TaskPlan, _TaskWriter


def unrouted_task(plan: TaskPlan, reasons: Mapping[str, str],
                  batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Write every record of the input (Kafka columns) as a dead letter of `plan.dead_letter`
    with `reasons[topic]` as its error; yields one RESULT_SCHEMA batch (the file, the
    offsets read)."""
    writer = _TaskWriter.in_task(plan)
    read: list[OffsetsRead] = []
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            topics = batch.column("topic")
            read += offsets_read(topics, batch.column("partition"), batch.column("offset"))
            errors = pa.array([reasons.get(t, "routes to no table")
                               for t in topics.to_pylist()], pa.string())
            writer.write_dead(pa.table({
                "key": batch.column("key"), "value": batch.column("value"), "topic": topics,
                "partition": batch.column("partition"), "offset": batch.column("offset"),
                "error": errors}, schema=DEAD_LETTER_SCHEMA))
        results = writer.finish()
    except BaseException:
        writer.abandon()
        raise
    yield to_arrow([*results, *merge_offsets(read)])


__all__ = ["unrouted_task"]
