"""spark-submit entry: stream a Kafka topic into a Hive ACID table (see ingest.spark.job).

  spark-submit jobs/kafka_to_acid.py --bootstrap-servers 127.0.0.1:9092 --topic events \
      --table /wh/events --schema "id BIGINT, value STRING, ts TIMESTAMP" --checkpoint /ck/events
  (Avro values: add --value-format avro --schema-registry http://registry:8081, or
  --avro-schema events.avsc for plain Avro binary. A table per topic: --topic a,b or
  --topic-pattern REGEX with --table-template '/wh/{topic}' --unrouted-table /wh/_unrouted.)
"""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    from ingest.errors import ConfigError, IngestError
    from ingest.spark import StreamOptions, add_arguments, check_transaction_batches
    from ingest.txn import default_metastore_url

    p = argparse.ArgumentParser(prog="kafka_to_acid", description=__doc__.splitlines()[0])
    add_arguments(p)  # the same flags as `ingest stream`, from StreamOptions
    p.add_argument("--master", default=None, help="default local[2] outside spark-submit")
    flags = vars(p.parse_args(argv))
    master = flags.pop("master")
    try:
        options = StreamOptions.from_flags(flags)
        if options.many_tables:  # a table per route (docs/many-tables.md)
            from ingest.spark import check_many_options

            check_many_options(options)
        else:
            url = options.metastore or default_metastore_url(options.table_root)
            check_transaction_batches(options.table_root, url, options.sink.txns_per_delta)
    except ConfigError as e:  # before Spark starts
        print(f"Error: {e}", file=sys.stderr)
        return 2
    from ingest.spark import job_session, run_many_stream, run_stream

    spark = job_session(f"kafka_to_acid {options.topic or options.topic_pattern}", master,
                        log_format=options.log_format)
    try:
        summary = (run_many_stream(spark, options) if options.many_tables
                   else run_stream(spark, options))
    except IngestError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ConfigError) else 3
    finally:
        spark.stop()
    # A log record, so --log-format json renders it as JSON too.
    logging.getLogger("ingest.spark.job").info("%s", summary.line())  # type: ignore[union-attr]
    return 0


if __name__ == "__main__":
    sys.exit(main())
