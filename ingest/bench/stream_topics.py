"""`python -m ingest.bench stream --topics N`: N topics into N tables through one stream against
the same records into one table, in the same run (issue 34, "Scale").

The many-table case is one streaming query over N topics (`--topic-partitions` partitions
each, `--rows` / N records each) through `ManyTableSink`, routed by topic with a table
template (the tables made before the clock starts, as the one table is). The one-table case
is one topic of `--partitions` partitions holding the same `--rows` records (N topics cannot
route into one table) through the single-table sink (`AcidSink`). Both run the same Kafka
source with the same `--max-offsets-per-trigger` (Trigger.AvailableNow), so each reads its
records in several micro-batches; the runs alternate (`--repeats`), after a warm-up of each.

Reported: the records a second of each and their ratio (the goal: N tables at >= 0.8 of one table's
throughput), the median metastore commit of a micro-batch of each, the median time the sink
spends on the driver per micro-batch (planning, publishing and the commit: the sink's time
less its Spark jobs') and its Spark actions per micro-batch, the same source reading the
same micro-batches into Spark's "noop" format in each case (`read_ratio`: the ceiling the
source leaves the sinks' ratio), and the driver's memory with N tables: peak RSS of this
(the driver's Python) process and of its JVM during the run, and the Python heap's allocated
blocks after it (`sys.getallocatedblocks`, cheap). Before Spark starts, the start-up check of
the N topics through one client against a client a topic (`topic_check_ms`,
`topic_check_each_ms`).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from ingest.bench.stream import _Broker, _fill_topic
from ingest.bench.support import PeakRss, report

T = TypeVar("T")
SCHEMA = "id BIGINT, value STRING, ts TIMESTAMP, dt STRING"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m ingest.bench stream --topics N")
    parser.add_argument("--topics", type=int, required=True, help="topics (and tables)")
    parser.add_argument("--rows", type=int, default=200_000, help="records in all")
    parser.add_argument("--partitions", type=int, default=2,
                        help="partitions of the one-table case's topic")
    parser.add_argument("--topic-partitions", type=int, default=1,
                        help="partitions of each of the N topics")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None,
                        help="records per micro-batch (default: --rows / 5)")
    parser.add_argument("--flush-rows", type=int, default=100_000)
    parser.add_argument("--file-layout", default="partition", choices=("partition", "task"))
    parser.add_argument("--warmup-rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each, order alternated")
    parser.add_argument("--broker", default="tansu", choices=("tansu", "apache"))
    parser.add_argument("--pack-records", type=int, default=None,
                        help="the N topics' Python source packs partitions of fewer records "
                             "into one read task, up to this many a task (default: what "
                             "`ingest stream` of several topics uses; 0: a task each)")
    args = parser.parse_args(argv)
    if args.pack_records is None:
        from ingest.spark.many_job import PACK_RECORDS_PER_TASK

        args.pack_records = PACK_RECORDS_PER_TASK
    if args.topics < 1:
        parser.error("--topics must be at least 1")
    per_topic = args.rows // args.topics
    if per_topic <= args.topic_partitions or args.rows <= args.partitions:
        parser.error("--rows too small: each topic partition needs records")
    if args.max_offsets_per_trigger is None:
        args.max_offsets_per_trigger = max(1, args.rows // 5)
    return args


def _sink_options(args: argparse.Namespace) -> Any:
    from ingest.spark.options import SinkOptions

    return SinkOptions(flush_rows=args.flush_rows, file_layout=args.file_layout)


def _timed_query(frame: Any, sink: Any, warehouse: Path) -> tuple[float, list[Any]]:
    """Run `frame` through `sink` until the topics' records are read (availableNow): the
    seconds until the query ended, and the sink's reports."""
    started = time.perf_counter()
    try:
        query = (frame.writeStream.foreachBatch(sink)
                 .option("checkpointLocation", str(warehouse / "_checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        seconds = time.perf_counter() - started
    finally:
        sink.close()
    return seconds, list(sink.reports)


def _many(spark: Any, kafka: Any, topics: list[str], warehouse: Path, args: argparse.Namespace,
          max_offsets: int | None) -> tuple[float, list[Any]]:
    """One many-table run: seconds until the query ended, and the sink's reports."""
    from ingest.records import Routed
    from ingest.records.routing import RoutingRules, TableTemplate, TopicSelection
    from ingest.spark.job import ensure_tables, table_layout
    from ingest.spark.kafka import kafka_dataframe
    from ingest.spark.many_job import ensure_anchor
    from ingest.spark.sink import ManyTableSink
    from ingest.table import open_table
    from ingest.txn import default_metastore_url

    warehouse.mkdir(parents=True)
    anchor_at = str(warehouse / "_unrouted")
    url = default_metastore_url(anchor_at)
    ensure_anchor(anchor_at, metastore_url=url, storage_options={})
    layout = table_layout(SCHEMA, None)
    rules = RoutingRules(TopicSelection(topics=tuple(topics)), {},
                         TableTemplate.parse(f"{warehouse}/{{topic}}", placeholder="topic"))
    for topic in topics:  # made before the clock starts, as the one table is
        found = rules.table_of(topic)
        assert isinstance(found, Routed)
        ensure_tables(found.location, layout, metastore_url=url)
    sink = ManyTableSink(rules, open_table(anchor_at).ref, sink_id=f"_unrouted@{warehouse}",
                         options=_sink_options(args),
                         create=lambda location: ensure_tables(location, layout,
                                                               metastore_url=url))
    frame = kafka_dataframe(spark, connection=kafka, topic=topics,
                            max_offsets_per_trigger=max_offsets,
                            pack_records_per_task=args.pack_records,
                            pack_into_tasks=spark.sparkContext.defaultParallelism)
    return _timed_query(frame, sink, warehouse)


def _one(spark: Any, kafka: Any, topic: str, warehouse: Path, args: argparse.Namespace,
         max_offsets: int | None) -> tuple[float, list[Any]]:
    """One single-table run: seconds until the query ended, and the sink's reports."""
    from ingest.spark.job import ensure_tables, table_layout
    from ingest.spark.kafka import kafka_dataframe
    from ingest.spark.sink import AcidSink
    from ingest.table import open_table

    warehouse.mkdir(parents=True)
    location = str(warehouse / topic)
    ensure_tables(location, table_layout(SCHEMA, None))
    sink = AcidSink(open_table(location).ref, sink_id=f"{topic}@{warehouse}",
                    options=_sink_options(args))
    frame = kafka_dataframe(spark, connection=kafka, topic=topic,
                            max_offsets_per_trigger=max_offsets)
    return _timed_query(frame, sink, warehouse)


def _read(spark: Any, kafka: Any, topics: list[str], checkpoint: Path, *,
          max_offsets: int | None, pack_records: int = 0) -> float:
    """Seconds the same Kafka source takes to read the topics, in the same micro-batches,
    into Spark's "noop" format: the source's share of each case, no sink."""
    from ingest.spark.kafka import kafka_dataframe

    def drop(batch_df: Any, batch_id: int) -> None:
        batch_df.write.format("noop").mode("overwrite").save()

    frame = kafka_dataframe(spark, connection=kafka, topic=topics,
                            max_offsets_per_trigger=max_offsets,
                            pack_records_per_task=pack_records,
                            pack_into_tasks=spark.sparkContext.defaultParallelism)
    started = time.perf_counter()
    query = (frame.writeStream.foreachBatch(drop).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return time.perf_counter() - started


def _attempts(run_once: Callable[[Path], T], where: Path, tries: int = 3) -> T:
    """`run_once(warehouse)`, again in a fresh warehouse when Spark could not start a Python
    worker in time (a loaded machine): the benchmark times the sinks, not a worker's start."""
    for attempt in range(tries):
        try:
            return run_once(where.with_name(f"{where.name}_{attempt}"))
        except Exception as e:
            if "failed to connect back" not in str(e) or attempt == tries - 1:
                raise
            print(f"  a Python worker did not start in time; {where.name} again",
                  file=sys.stderr)
    raise AssertionError("unreachable")


def _median_ms(values: list[float]) -> float:
    return round(1000 * statistics.median(values), 1) if values else 0.0


def _topic_checks(kafka: Any, topics: list[str], repeats: int) -> tuple[list[float], list[float]]:
    """Seconds the start-up check of the N topics takes (`check_kafka`: one client asks for
    all of them, as `ingest stream` and the job do) and, alternating with it, the same check
    one topic at a time (a client each, as the stream did before)."""
    from ingest.spark import check_kafka

    together: list[float] = []
    each: list[float] = []
    for _ in range(max(repeats, 3)):
        started = time.perf_counter()
        check_kafka(kafka, *topics, timeout_s=60)
        together.append(time.perf_counter() - started)
        started = time.perf_counter()
        for topic in topics:
            check_kafka(kafka, topic, timeout_s=60)
        each.append(time.perf_counter() - started)
    return together, each


def run(argv: list[str]) -> None:
    args = parse_args(argv)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    import warnings

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support")
    from pyspark.sql import SparkSession

    n = args.topics
    per_topic = args.rows // n
    total = per_topic * n  # the same records in both cases
    names = [f"bench.t{i:03d}" for i in range(n)]  # Debezium-like: dots become _ in names
    # The warm-up (JIT, Python workers, imports) needs every path, not every table.
    warm_names = [f"warm.t{i:03d}" for i in range(min(n, 5))]
    tmp = Path(tempfile.mkdtemp(prefix="ingest-bench-topics-"))
    broker = _Broker(args.broker, tmp, None)
    kafka = broker.plain
    spark = None
    runs: dict[str, list[float]] = {"one": [], "many": [], "read_one": [], "read_many": []}
    reports: dict[str, list[Any]] = {"one": [], "many": []}
    peaks: list[PeakRss] = []
    heap_blocks: list[int] = []
    try:
        started = time.perf_counter()
        _fill_topic(kafka, "one", total, args.partitions)
        warm_each = max(args.warmup_rows // len(warm_names), args.topic_partitions + 1)
        _fill_topic(kafka, "warm_one", warm_each * len(warm_names), args.partitions)
        for topic in names:
            _fill_topic(kafka, topic, per_topic, args.topic_partitions)
        for warm in warm_names:
            _fill_topic(kafka, warm, warm_each, args.topic_partitions)
        print(f"produced {total:,} records into 1 topic and into {n} topics in "
              f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
        checks_together, checks_each = _topic_checks(kafka, names, args.repeats)
        spark = (SparkSession.builder.master("local[2]").appName("ingest-bench-topics")
                 .config("spark.ui.enabled", "false").config("spark.driver.memory", "3g")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        # Warm-up of both paths (JIT, Python workers, imports), one micro-batch each.
        _attempts(lambda at: _one(spark, kafka, "warm_one", at, args, None), tmp / "warm_one")
        _attempts(lambda at: _many(spark, kafka, warm_names, at, args, None),
                  tmp / "warm_many")
        max_offsets = args.max_offsets_per_trigger
        for i in range(args.repeats):
            order = ("one", "many") if i % 2 == 0 else ("many", "one")
            for case in order:
                if case == "one":
                    seconds, done = _attempts(
                        lambda at: _one(spark, kafka, "one", at, args, max_offsets),
                        tmp / f"one{i}")
                    rows = sum(r.rows for r in done if not r.skipped)
                else:
                    with PeakRss() as peak:
                        seconds, done = _attempts(
                            lambda at: _many(spark, kafka, names, at, args, max_offsets),
                            tmp / f"many{i}")
                    peaks.append(peak)
                    heap_blocks.append(sys.getallocatedblocks())
                    rows = sum(t.rows for r in done if not r.skipped for t in r.tables.values())
                    touched = {name for r in done for name in r.tables}
                    assert len(touched) == n, f"{len(touched)} of {n} tables written"
                assert rows == total, f"{case}: ingested {rows} of {total}"
                runs[case].append(seconds)
                read = partial(_read, spark, kafka, ["one"] if case == "one" else names,
                               max_offsets=max_offsets,
                               pack_records=0 if case == "one" else args.pack_records)
                runs[f"read_{case}"].append(_attempts(read, tmp / f"read_{case}{i}"))
                reports[case].extend(r for r in done if not r.skipped)
                print(f"  {case} run {i}: {seconds:.2f} s, {len(done)} micro-batches",
                      file=sys.stderr)
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    one_s, many_s = statistics.median(runs["one"]), statistics.median(runs["many"])
    one_rate, many_rate = total / one_s, total / many_s
    ratio = round(many_rate / one_rate, 3)
    read_one_s, read_many_s = (statistics.median(runs["read_one"]),
                               statistics.median(runs["read_many"]))
    read_ratio = round(read_one_s / read_many_s, 3)
    many_reports = reports["many"]
    driver_ms = _median_ms([r.seconds - r.tasks_seconds for r in many_reports])
    one_driver_ms = _median_ms([r.seconds - r.commit_seconds for r in reports["one"]])
    figures = {
        "topics": n, "rows": total, "records_per_topic": per_topic,
        "topic_partitions": args.topic_partitions, "one_topic_partitions": args.partitions,
        "max_offsets_per_trigger": args.max_offsets_per_trigger,
        "file_layout": args.file_layout, "repeats": args.repeats,
        "pack_records": args.pack_records,
        "one_table_seconds": [round(t, 3) for t in runs["one"]],
        "many_tables_seconds": [round(t, 3) for t in runs["many"]],
        "one_table_records_per_s": round(one_rate), "many_tables_records_per_s": round(many_rate),
        "micro_batches_one": len(reports["one"]) // args.repeats,
        "micro_batches_many": len(many_reports) // args.repeats,
        "one_table_commit_ms": _median_ms([r.commit_seconds for r in reports["one"]]),
        "many_tables_commit_ms": _median_ms([r.commit_seconds for r in many_reports]),
        "one_table_batch_ms": _median_ms([r.seconds for r in reports["one"]]),
        "many_tables_batch_ms": _median_ms([r.seconds for r in many_reports]),
        "many_tables_driver_ms": driver_ms,
        "many_tables_tables_per_batch": statistics.median(len(r.tables) for r in many_reports),
        "many_tables_spark_actions_per_batch": statistics.median(
            r.spark_actions for r in many_reports),
        "peak_rss_driver_python_mb": round(max(p.python_mb for p in peaks)),
        "peak_rss_driver_jvm_mb": round(max(p.jvm_mb for p in peaks)),
        "peak_rss_scoped": all(p.scoped for p in peaks),
        "python_heap_blocks": max(heap_blocks),
        "read_one_seconds": round(read_one_s, 3), "read_many_seconds": round(read_many_s, 3),
        "read_ratio": read_ratio,
        "topic_check_ms": _median_ms(checks_together),
        "topic_check_each_ms": _median_ms(checks_each),
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(f"{total:,} records: one topic ({args.partitions} partitions) into one table vs "
          f"{n} topics ({args.topic_partitions} partition(s) each, {per_topic:,} records each) "
          f"into {n} tables; {args.max_offsets_per_trigger:,} records per micro-batch, "
          f"--file-layout {args.file_layout}, the {n} topics read packed up to "
          f"{args.pack_records:,} records a task (more, to about a task a core, in a larger "
          "micro-batch), master=local[2]")
    print(f"one table: median {one_s:.2f} s  {one_rate:,.0f} records/s  runs "
          f"{figures['one_table_seconds']}; {figures['micro_batches_one']} micro-batches, "
          f"median {figures['one_table_batch_ms']:g} ms each, commit "
          f"{figures['one_table_commit_ms']:g} ms (the sink less its commit: "
          f"{one_driver_ms:g} ms)")
    print(f"{n} tables: median {many_s:.2f} s  {many_rate:,.0f} records/s  runs "
          f"{figures['many_tables_seconds']}; {figures['micro_batches_many']} micro-batches "
          f"of {figures['many_tables_tables_per_batch']:g} tables, median "
          f"{figures['many_tables_batch_ms']:g} ms each, commit "
          f"{figures['many_tables_commit_ms']:g} ms, driver (planning + publishing + commit) "
          f"{driver_ms:g} ms, {figures['many_tables_spark_actions_per_batch']:g} Spark "
          f"actions")
    print(f"ratio {n} tables / one table: {ratio:.3f} (goal >= 0.8)")
    print(f"the Kafka source alone, same micro-batches, into noop: one topic median "
          f"{read_one_s:.2f} s, {n} topics {read_many_s:.2f} s; ratio {read_ratio:.3f} (the "
          f"ceiling of the {n}-table ratio the source leaves)")
    print(f"checking the {n} topics at start: {figures['topic_check_ms']:g} ms through one "
          f"client, {figures['topic_check_each_ms']:g} ms with a client a topic (medians)")
    print(f"driver memory with {n} tables: peak RSS Python "
          f"{figures['peak_rss_driver_python_mb']:,} MiB, JVM "
          f"{figures['peak_rss_driver_jvm_mb']:,} MiB; Python heap "
          f"{figures['python_heap_blocks']:,} allocated blocks")
    report("stream", **figures, ingest_rows_per_s=figures["many_tables_records_per_s"],
           baseline_rows_per_s=figures["one_table_records_per_s"], ratio=ratio,
           goal_met=ratio >= 0.8)


if __name__ == "__main__":
    run(sys.argv[1:])
