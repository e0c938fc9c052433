"""Test job: stream ACID table A into ACID table B (the hive-acid source, then the ACID sink).

    python tests/spark/acid_chain_job.py SOURCE TARGET CHECKPOINT

Rows become JSON values in Kafka's columns, as the sink parses them; the target is created
like `ingest stream --partition-by dt` creates its table. Run in a subprocess so a test can
SIGKILL it at a crash point (ingest.faults) and start it again from the same checkpoint.
"""

from __future__ import annotations

import logging
import os
import sys


def main(source: str, target: str, checkpoint: str) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from ingest.spark import AcidSink, SinkOptions, ensure_tables, register
    from ingest.spark.job import table_layout
    from ingest.table import open_table
    from ingest.table.maintain import recover_table_with_metastore
    from ingest.txn import normalize_location

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    try:
        register(spark)
        layout = table_layout("id BIGINT, value STRING, ts TIMESTAMP, dt STRING", "dt")
        table, _ = ensure_tables(target, layout)
        recover_table_with_metastore(open_table(table.location))
        sink = AcidSink(open_table(table.location),
                        sink_id=f"{table.name}@{normalize_location(checkpoint)}",
                        options=SinkOptions(), row_schema=layout.row_schema,
                        partition_columns=("dt",))
        rows = (spark.readStream.format("hive-acid").option("maxWriteIdsPerTrigger", "1")
                .load(source))
        as_kafka = rows.select(
            F.lit(None).cast("binary").alias("key"),
            F.to_json(F.struct(*[F.col(c) for c in rows.columns])).cast("binary").alias("value"),
            F.lit(source).alias("topic"), F.lit(0).alias("partition"),
            F.lit(0).cast("long").alias("offset"))
        query = (as_kafka.writeStream.foreachBatch(sink).trigger(availableNow=True)
                 .option("checkpointLocation", checkpoint).start())
        try:
            query.awaitTermination()
        finally:
            sink.close()
        batches = [r for r in sink.reports if not r.skipped]
        print(f"chain done: {len(batches)} batches, {sum(r.rows for r in batches)} rows",
              file=sys.stderr)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
