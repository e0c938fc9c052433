"""A stream of several Kafka topics into several tables through `ManyTableSink`, for
tests/spark/test_many_tables_stream.py, run as its own process (Spark's JVM source needs its
jars on the class path when the session starts).

Usage: many_tables_job.py SERVERS SOURCE TOPICS WAREHOUSE OUT_DIR

Reads the comma-separated TOPICS from their earliest offsets with `kafka_dataframe` (SOURCE
python or jvm) and writes each topic's records to WAREHOUSE/<topic> (created on first use,
columns `id BIGINT, name STRING`), the anchor being WAREHOUSE/_unrouted (which must exist),
until OUT_DIR/stop exists; then OUT_DIR/actions.json lists each micro-batch's Spark actions.
The Python source packs small topic partitions into shared read tasks, as `ingest stream` of
several topics does.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main() -> None:
    servers, source, topics, warehouse, out = sys.argv[1:6]
    from pyspark.sql import SparkSession

    from ingest.kafka import KafkaConnection
    from ingest.records.routing import RoutingRules, TableTemplate, TopicSelection
    from ingest.spark.job import ensure_tables, table_layout
    from ingest.spark.kafka import kafka_dataframe
    from ingest.spark.many_job import PACK_RECORDS_PER_TASK
    from ingest.spark.sink import ManyTableSink
    from ingest.table import open_table

    spark = (SparkSession.builder.master("local[2]").appName("many-tables")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    names = tuple(topics.split(","))
    frame = kafka_dataframe(spark, connection=KafkaConnection(servers),
                            source=source,  # type: ignore[arg-type]
                            starting_offsets="earliest", timeout_s=30, topic=list(names),
                            pack_records_per_task=PACK_RECORDS_PER_TASK)
    layout = table_layout("id BIGINT, name STRING", None)
    rules = RoutingRules(TopicSelection(topics=names), {},
                         TableTemplate.parse(f"{warehouse}/{{topic}}", placeholder="topic"))
    sink = ManyTableSink(rules, open_table(f"{warehouse}/_unrouted").ref,
                         sink_id=f"_unrouted@{out}/checkpoint",
                         create=lambda location: ensure_tables(location, layout))
    query = (frame.writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(Path(out) / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    try:
        while not (Path(out) / "stop").exists():
            if query.exception() is not None:
                raise SystemExit(f"query failed: {query.exception()}")
            time.sleep(0.1)
    finally:
        query.stop()
        (Path(out) / "actions.json").write_text(json.dumps(
            [r.spark_actions for r in sink.reports if not r.skipped]))
        sink.close()
        spark.stop()


if __name__ == "__main__":
    main()
