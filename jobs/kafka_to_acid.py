"""spark-submit entry: stream a Kafka topic into a Hive ACID table (see ingest.spark.job).

  spark-submit jobs/kafka_to_acid.py --bootstrap-servers 127.0.0.1:9092 --topic events \
      --table /wh/events --schema "id BIGINT, value STRING, ts TIMESTAMP" --checkpoint /ck/events
"""

from __future__ import annotations

import argparse
import logging
import os
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka_to_acid", description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--table", required=True, help="table root, path or URL")
    p.add_argument("--schema", required=True, help='Hive columns, "id BIGINT, value STRING"')
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--trigger", default="60", help="seconds between micro-batches (60, 30s, 2min)")
    p.add_argument("--available-now", action="store_true", help="process what is there, stop")
    p.add_argument("--starting-offsets", default="earliest")
    p.add_argument("--partition-by", default=None, help='"dt" or a Spark SQL expression')
    p.add_argument("--txns-per-delta", type=int, default=1)
    p.add_argument("--flush-rows", type=int, default=100_000)
    p.add_argument("--on-bad-record", choices=["dead-letter", "fail"], default="dead-letter")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None)
    p.add_argument("--kafka-timeout-s", type=float, default=30.0)
    p.add_argument("--master", default=None, help="default local[2] outside spark-submit")
    args = p.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    from pyspark.sql import SparkSession

    from ingest.errors import ConfigError, IngestError
    from ingest.spark.job import run_stream, stream_trigger

    builder = SparkSession.builder.appName(f"kafka_to_acid {args.topic}")
    if args.master or "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit
        builder = builder.master(args.master or "local[2]").config("spark.ui.enabled", "false")
    spark = builder.getOrCreate()
    try:
        interval, now = stream_trigger(args.trigger)
        summary = run_stream(
            spark, bootstrap_servers=args.bootstrap_servers, topic=args.topic, table=args.table,
            schema_ddl=args.schema, checkpoint=args.checkpoint, trigger_interval_s=interval,
            available_now=args.available_now or now, starting_offsets=args.starting_offsets,
            partition_expression=args.partition_by, txns_per_delta=args.txns_per_delta,
            flush_rows=args.flush_rows, on_bad_record=args.on_bad_record,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            kafka_timeout_s=args.kafka_timeout_s)
    except IngestError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ConfigError) else 3
    finally:
        spark.stop()
    print(summary.line(), file=sys.stderr)  # type: ignore[union-attr]
    return 0


if __name__ == "__main__":
    sys.exit(main())
