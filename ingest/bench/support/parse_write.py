"""The ceiling of any streaming job that must parse and write: the sink's own write task
(`ingest.spark.sink.write_task`: the JSON parse, routing to table partitions and the
ACID ORC bucket writer) run on records already in memory, in this process, on one core.

No Kafka, no Spark, no shuffle and no commit: what is left is the work no job can skip. Its
time against a bare Kafka consumer's drain of the same records says whether a job that keeps
up with the broker can exist on this machine at all.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from ingest.acid.format import format_delta, parse_schema

# Spark hands mapInArrow this many rows a batch (spark.sql.execution.arrow.maxRecordsPerBatch).
BATCH_ROWS = 10_000

KAFKA_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()),
                          ("topic", pa.string()), ("partition", pa.int32()),
                          ("offset", pa.int64())])


def kafka_batches(values: Iterable[bytes], keys: Iterable[bytes], *, topic: str,
                  partitions: int) -> list[pa.RecordBatch]:
    """Records as the sink's tasks get them from the Kafka source (key, value, topic,
    partition, offset), round-robin over `partitions`, in batches of BATCH_ROWS."""
    value_list, key_list = list(values), list(keys)
    n = len(value_list)
    table = pa.table({
        "key": pa.array(key_list, pa.binary()), "value": pa.array(value_list, pa.binary()),
        "topic": pa.array([topic] * n, pa.string()),
        "partition": pa.array([i % partitions for i in range(n)], pa.int32()),
        "offset": pa.array([i // partitions for i in range(n)], pa.int64()),
    }, schema=KAFKA_SCHEMA)
    return table.to_batches(max_chunksize=BATCH_ROWS)


def parse_and_write(batches: list[pa.RecordBatch], *, schema_ddl: str,
                    partition_column: str | None, compression: str,
                    flush_rows: int) -> tuple[float, float, int]:
    """Run the sink's write task over `batches` here, into a fresh directory (then removed).

    Args:
        batches: Kafka rows (KAFKA_SCHEMA), JSON values.
        schema_ddl: the table's row columns.
        partition_column: a JSON field the table is partitioned by (not a row column), or None.
        compression: the ORC codec.
        flush_rows: rows per intermediate footer, as the job's --flush-rows.

    Returns:
        Wall seconds, CPU seconds of this process (every thread), rows written.

    Raises:
        RuntimeError: the task wrote fewer rows than it was given (a record failed to parse).
    """
    from ingest.spark.options import SinkOptions
    from ingest.spark.sink import (
        DeltaTarget,
        FileWritten,
        TaskPlan,
        task_results_from_arrow,
        write_task,
    )

    row_schema = parse_schema(schema_ddl)
    parse_fields = list(row_schema) + ([pa.field(partition_column, pa.string())]
                                       if partition_column else [])
    tmp = Path(tempfile.mkdtemp(prefix="ingest-bench-parse-write-"))
    delta = format_delta(1, 1, 0)
    plan = TaskPlan(
        target=DeltaTarget(str(tmp / "table"), 1, delta, compression),
        dead_letter=DeltaTarget(str(tmp / "dead_letter"), 1, delta, compression),
        row_schema=row_schema, parse_schema=pa.schema(parse_fields),
        partition_column=partition_column,
        partition_from="field" if partition_column else "none",
        bucket_columns=(), bucket_count=0, append=False, close_files=False,
        # Fields outside the schema (dt, unpartitioned) are dropped, as the bench's job does.
        options=SinkOptions(flush_rows=flush_rows, on_new_field="ignore"))
    try:
        cpu_started, started = time.process_time(), time.perf_counter()
        out = list(write_task(plan, iter(batches)))
        seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results = [r for batch in out for r in task_results_from_arrow(batch)]
    written = sum(r.rows for r in results if isinstance(r, FileWritten) and r.target == "table")
    given = sum(b.num_rows for b in batches)
    if written != given:
        raise RuntimeError(f"the write task wrote {written} of {given} rows: {results[:3]}")
    return seconds, cpu_s, written


__all__ = ["BATCH_ROWS", "kafka_batches", "parse_and_write"]
