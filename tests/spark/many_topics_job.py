"""A stream of several Kafka topics for tests/spark/test_kafka_many_topics.py, run as its own
process (Spark's JVM source needs its jars on the class path when the session starts).

Usage: many_topics_job.py SERVERS SOURCE (topics|pattern) WHAT OUT_DIR

Reads with `kafka_dataframe` (SOURCE python or jvm; `topics` a comma-separated list, or a
`pattern`) from the latest offsets (OUT_DIR/ready appears once they are fixed), and appends
each micro-batch's records to OUT_DIR/records.jsonl as [topic, partition, offset, value]
lines, then a line ["batch", id] once the batch is written, until OUT_DIR/stop exists.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def main() -> None:
    servers, source, kind, what, out = sys.argv[1:6]
    from pyspark.sql import SparkSession

    from ingest.kafka import KafkaConnection
    from ingest.spark.kafka import kafka_dataframe

    spark = (SparkSession.builder.master("local[2]").appName("many-topics")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    chosen: dict[str, Any] = ({"topic": what} if kind == "topics" else {"topic_pattern": what})
    frame = kafka_dataframe(spark, connection=KafkaConnection(servers),
                            source=source,  # type: ignore[arg-type]
                            starting_offsets="latest", timeout_s=30, **chosen)
    records = Path(out) / "records.jsonl"

    def write(df: Any, batch_id: int) -> None:
        rows = df.select("topic", "partition", "offset", "value").collect()
        with records.open("a") as f:
            for r in rows:
                f.write(json.dumps([r.topic, r.partition, r.offset,
                                    bytes(r.value).decode()]) + "\n")
            f.write(json.dumps(["batch", batch_id]) + "\n")
            f.flush()
            os.fsync(f.fileno())

    query = (frame.writeStream.foreachBatch(write)
             .option("checkpointLocation", str(Path(out) / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    ready = Path(out) / "ready"
    try:
        while not (Path(out) / "stop").exists():
            # After the first trigger the start ("latest") is fixed: records from now on count.
            if not ready.exists() and query.lastProgress is not None:
                ready.write_text("")
            if query.exception() is not None:
                raise SystemExit(f"query failed: {query.exception()}")
            time.sleep(0.1)
    finally:
        query.stop()
        spark.stop()


if __name__ == "__main__":
    main()
