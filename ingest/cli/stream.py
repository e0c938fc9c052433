"""`ingest stream`: run the Kafka -> ACID streaming job in this process (ingest.spark.job).

The stream's flags are generated from `ingest.spark.options.StreamOptions`, as are those of
`jobs/kafka_to_acid.py`; only --master, --json and --quiet are this command's own.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ingest.cli._output import progress
from ingest.io import storage
from ingest.spark import OptionSpec, StreamOptions, option_specs
from ingest.txn import default_metastore_url

F = TypeVar("F", bound=Callable[..., Any])


def _click_option(spec: OptionSpec) -> Callable[[F], F]:
    if spec.type is bool:
        return click.option(spec.flag, spec.name, is_flag=True, default=spec.default,
                            help=spec.help)
    if spec.multiple:
        return click.option(spec.flag, spec.name, multiple=True, default=(),
                            metavar=spec.metavar, help=spec.help)
    kind: click.ParamType[Any] = click.STRING
    if spec.choices:
        kind = click.Choice(list(spec.choices))
    elif spec.type is int:
        kind = click.INT if spec.minimum is None else click.IntRange(min=int(spec.minimum))
    elif spec.type is float:
        kind = click.FLOAT if spec.minimum is None else click.FloatRange(
            min=spec.minimum, min_open=spec.minimum_open)
    return click.option(spec.flag, spec.name, type=kind, required=spec.required,
                        default=spec.default, show_default=True, metavar=spec.metavar,
                        help=spec.help)


def _stream_options(command: F) -> F:
    for spec in reversed(option_specs(StreamOptions)):
        command = _click_option(spec)(command)
    return command


@click.command(
    "stream",
    epilog="""\b
Examples:
  ingest stream --bootstrap-servers 127.0.0.1:9092 --topic events --table ./wh/events \\
      --schema "id BIGINT, value STRING, ts TIMESTAMP" --partition-by dt \\
      --checkpoint ./ck/events --available-now
  ingest stream ... --trigger 30s --txns-per-delta 10
  ingest stream ... --mode cdc --key id --order-by updated_at
  ingest stream ... --on-new-field evolve --evolve-type tags=ARRAY<STRING>""",
)
@_stream_options
@click.option("--master", default="local[2]", show_default=True, help="Spark master.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No per-batch lines on stderr.")
def command(master: str, as_json: bool, quiet: bool, **flags: Any) -> None:
    """Stream a Kafka topic of JSON (or Avro) records into a Hive ACID table, exactly once.

    Creates the table (and <table>__dead_letter) when missing and writes one transaction per
    micro-batch. The broker, the topic and an existing table's schema are checked before
    anything is written.
    """
    from ingest.spark import (
        ManyStreamSummary,
        StreamSummary,
        check_kafka,
        check_many_options,
        check_sink_progress,
        check_stream_key,
        check_transaction_batches,
        run_many_stream,
        run_stream,
        table_layout,
        with_avro_columns,
    )

    options = StreamOptions.from_flags(flags)  # a bad --trigger: exit 2 at once
    if options.many_tables:  # a table per route: the same checks before Spark starts
        check_many_options(options)
        assert options.routing is not None  # many_tables
        check_kafka(options.connection, *options.routing.selection.topics,
                    timeout_s=options.kafka_timeout_s)  # before starting Spark
    else:
        options = with_avro_columns(options)  # no --schema with Avro values: the writers'
        assert options.schema_ddl is not None
        table_layout(options.schema_ddl, options.partition_by)  # bad --schema/--partition-by
        for location in (options.table_root, options.checkpoint):
            storage.check_url(location)  # an unknown scheme or a missing backend too
        url = options.metastore or default_metastore_url(options.table_root)
        if options.metastore is not None:
            check_sink_progress(options.metastore)  # before starting Spark
        check_transaction_batches(options.table_root, url, options.sink.txns_per_delta)
        check_stream_key(options, table_layout(options.schema_ddl, options.partition_by), url)
        check_kafka(options.connection, options.topic_name,
                    timeout_s=options.kafka_timeout_s)  # before starting Spark
    if not quiet:  # one line per micro-batch, as sentences or JSON (--log-format)
        from ingest.spark import configure_stream_logging

        configure_stream_logging(options.log_format)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from ingest.spark import REDACTION_REGEX, krb5_java_options

    topics = options.topic or options.topic_pattern
    builder = (SparkSession.builder.master(master).appName(f"ingest stream {topics}")
               .config("spark.ui.enabled", "false")
               .config("spark.redaction.regex", REDACTION_REGEX)
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in krb5_java_options(os.environ).items():  # Java ignores KRB5_CONFIG
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    summary = (run_many_stream(spark, options) if options.many_tables
               else run_stream(spark, options))
    assert isinstance(summary, StreamSummary)  # wait=True
    if as_json:
        out: dict[str, Any] = {
            "table": summary.table, "batches": summary.batches, "skipped": summary.skipped,
            "rows": summary.rows, "dead_letters": summary.dead_letters,
            "tombstones": summary.tombstones, "files": summary.files,
            "bytes": summary.bytes, "seconds": round(summary.seconds, 3)}
        if isinstance(summary, ManyStreamSummary):  # rows per table, lag per topic
            out.update({"tables": dict(summary.tables), "lag_by_topic": summary.lag_by_topic})
        click.echo(json.dumps(out))
    if options.log_format == "json" and not quiet:  # a JSON line like the job's others
        logging.getLogger("ingest.spark.job").info("%s", summary.line())
    else:
        progress(summary.line(), quiet=quiet)
