"""`ingest stream`: run the Kafka -> ACID streaming job in this process (ingest.spark.job)."""

from __future__ import annotations

import json
import logging
import os
import sys

import click

from ingest.cli._output import progress


@click.command(
    "stream",
    epilog="""\b
Examples:
  ingest stream --bootstrap-servers 127.0.0.1:9092 --topic events --table ./wh/events \\
      --schema "id BIGINT, value STRING, ts TIMESTAMP" --partition-by dt \\
      --checkpoint ./ck/events --available-now
  ingest stream ... --trigger 30s --txns-per-delta 10""",
)
@click.option("--bootstrap-servers", required=True, metavar="HOST:PORT",
              help="Kafka brokers, comma-separated.")
@click.option("--topic", required=True, help="Topic to read.")
@click.option("--table", required=True, metavar="PATH", help="Table root (path or URL).")
@click.option("--schema", "schema_ddl", required=True, metavar="DDL",
              help='Hive columns of the JSON records, e.g. "id BIGINT, value STRING".')
@click.option("--checkpoint", required=True, metavar="DIR",
              help="Spark checkpoint directory (Kafka offsets live there).")
@click.option("--trigger", default="60", show_default=True,
              help="Seconds between micro-batches (60, 30s, 2min).")
@click.option("--available-now", is_flag=True,
              help="Process what the topic holds now, then stop.")
@click.option("--starting-offsets", default="earliest", show_default=True,
              help="earliest, latest, or Spark's JSON offsets.")
@click.option("--partition-by", default=None, metavar="EXPR",
              help="\"dt\" (a JSON field) or Spark SQL giving a dt column.")
@click.option("--txns-per-delta", type=click.IntRange(min=1), default=1, show_default=True,
              help="Micro-batches per delta directory (>1: local/HDFS only).")
@click.option("--flush-rows", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Rows per intermediate footer and side-file entry.")
@click.option("--on-bad-record", type=click.Choice(["dead-letter", "fail"]),
              default="dead-letter", show_default=True,
              help="Unparsable records: to <table>__dead_letter, or stop the query.")
@click.option("--max-offsets-per-trigger", type=click.IntRange(min=1), default=None,
              help="Cap on records per micro-batch.")
@click.option("--kafka-timeout-s", type=click.FloatRange(min=0, min_open=True), default=30.0,
              show_default=True, help="Bound on reaching the broker and on reads.")
@click.option("--master", default="local[2]", show_default=True, help="Spark master.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No per-batch lines on stderr.")
def command(bootstrap_servers: str, topic: str, table: str, schema_ddl: str, checkpoint: str,
            trigger: str, available_now: bool, starting_offsets: str, partition_by: str | None,
            txns_per_delta: int, flush_rows: int, on_bad_record: str,
            max_offsets_per_trigger: int | None, kafka_timeout_s: float, master: str,
            as_json: bool,
            quiet: bool) -> None:
    """Stream a Kafka topic of JSON records into a Hive ACID table, exactly once.

    Creates the table (and <table>__dead_letter) when missing and writes one transaction per
    micro-batch. The broker, the topic and an existing table's schema are checked before
    anything is written.
    """
    from ingest.spark.job import (
        StreamSummary,
        check_kafka,
        run_stream,
        stream_trigger,
        table_layout,
    )

    interval, now = stream_trigger(trigger)
    table_layout(schema_ddl, partition_by)  # bad --schema / --partition-by: exit 2 at once
    check_kafka(bootstrap_servers, topic, timeout_s=kafka_timeout_s)  # before starting Spark
    if not quiet:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        for name in ("ingest.spark.sink", "ingest.spark.job"):
            logging.getLogger(name).addHandler(handler)
            logging.getLogger(name).setLevel(logging.INFO)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName(f"ingest stream {topic}")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    summary = run_stream(
        spark, bootstrap_servers=bootstrap_servers, topic=topic, table=table,
        schema_ddl=schema_ddl, checkpoint=checkpoint, trigger_interval_s=interval,
        available_now=available_now or now, starting_offsets=starting_offsets,
        partition_expression=partition_by, txns_per_delta=txns_per_delta,
        flush_rows=flush_rows, on_bad_record=on_bad_record,  # type: ignore[arg-type]
        max_offsets_per_trigger=max_offsets_per_trigger, kafka_timeout_s=kafka_timeout_s)
    assert isinstance(summary, StreamSummary)  # wait=True
    if as_json:
        click.echo(json.dumps({
            "table": summary.table, "batches": summary.batches, "skipped": summary.skipped,
            "rows": summary.rows, "dead_letters": summary.dead_letters, "files": summary.files,
            "bytes": summary.bytes, "seconds": round(summary.seconds, 3)}))
    progress(summary.line(), quiet=quiet)
