"""Spark read benchmark: the "hive-acid" source (snapshot, merge, deletes applied) against
`spark.read.orc` of the same bucket files (raw ACID events, every event column: no snapshot,
no deletes).

Builds a bucketed table with the table layer (several loads, then a delete), starts one
local[2] SparkSession, warms both paths up, then times full scans of every row column
(`format("noop")` writes, so nothing is collected to the driver), interleaved. Besides wall
time it reports the CPU seconds of the whole process tree (driver, JVM, Python workers) per
scan and the load average, since on a shared machine the wall-time ratio also measures how
the scheduler treats one JVM thread per task against a JVM thread and a Python worker.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingest.bench._common import report, sample_rows
from ingest.bench._cpu import tree_cpu_s


def build_table(location: str, *, rows: int, loads: int, buckets: int,
                delete_fraction: float) -> int:
    """`loads` committed loads of `rows` rows in total, then one delete; returns visible rows."""
    from ingest.table import create_table, delete, load

    create_table(location, "id BIGINT, user_id BIGINT, ts TIMESTAMP, event STRING, "
                 "page STRING, amount DOUBLE", buckets=buckets, bucketed_by=["id"])
    data = sample_rows(rows)
    step = -(-rows // loads)
    for start in range(0, rows, step):
        load(location, data.slice(start, step))
    if delete_fraction <= 0:
        return rows
    # Ids spread over every load and bucket (the WHERE language has no modulo: an IN list).
    every = max(round(1 / delete_fraction), 1)
    ids = ", ".join(str(i) for i in range(0, rows, every))
    return rows - delete(location, f"id IN ({ids})").rows_deleted


def timed_interleaved(cases: dict[str, Callable[[], Any]], *, repeats: int
                      ) -> dict[str, tuple[list[float], list[float]]]:
    """Each case's wall seconds and process-tree CPU seconds over `repeats` rounds of every
    case once (CPU read outside the timed span; an empty list where /proc is missing)."""
    out: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            cpu_before = tree_cpu_s()
            start = time.perf_counter()
            fn()
            out[name][0].append(time.perf_counter() - start)
            cpu_after = tree_cpu_s()
            if cpu_before is not None and cpu_after is not None:
                out[name][1].append(cpu_after - cpu_before)
    return out


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m ingest.bench spark-read")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--loads", type=int, default=5, help="transactions (delta directories)")
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--delete-fraction", type=float, default=0.01)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support")
    import fsspec
    from pyspark.sql import SparkSession

    from ingest.orc import read_tail
    from ingest.spark import register

    fs = fsspec.filesystem("file")

    tmp = Path(tempfile.mkdtemp(prefix="ingest-bench-spark-read-"))
    location = str(tmp / "events")
    spark: Any = None
    try:
        visible = build_table(location, rows=args.rows, loads=args.loads, buckets=args.buckets,
                              delete_fraction=args.delete_fraction)
        files = sorted(str(p) for p in Path(location).glob("delta_*/bucket_*")
                       if not p.name.endswith("_flush_length"))
        # ORC Java takes a reader schema that is not the whole ACID event struct for the row
        # schema and wraps it in one (Hive ACID files, ours or Hive's): a pruned read, or
        # count(), of these files fails in Spark. So the baseline reads every event column.
        spark = (SparkSession.builder.master("local[2]").appName("ingest-bench-spark-read")
                 .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark, filter_pushdown=False)

        def acid() -> None:
            spark.read.format("hive-acid").load(location).write.format("noop") \
                .mode("overwrite").save()

        def plain_orc() -> None:
            spark.read.orc(files).write.format("noop").mode("overwrite").save()

        got = spark.read.format("hive-acid").load(location).count()
        # From the file tails: a column-less scan of ACID files fails in Spark (see below).
        events = sum(read_tail(fs, f, fs.size(f)).number_of_rows for f in files)
        assert got == visible, f"hive-acid returned {got} rows, expected {visible}"
        tasks = spark.read.format("hive-acid").load(location).rdd.getNumPartitions()
        load_before = os.getloadavg()[0]
        for _ in range(2):  # warm-up: JIT, Python workers, imports (the second JIT-compiles)
            acid()
            plain_orc()
        timed = timed_interleaved({"acid": acid, "orc": plain_orc}, repeats=args.repeats)
        (acid_all, acid_cpu), (orc_all, orc_cpu) = timed.values()
        acid_s, orc_s = statistics.median(acid_all), statistics.median(orc_all)
        load_after = os.getloadavg()[0]
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"rows={args.rows:,} visible={visible:,} events={events:,} files={len(files)} "
          f"(+ delete delta) buckets={args.buckets} tasks={tasks} master=local[2]",
          file=sys.stderr)
    print(f"hive-acid source : median {acid_s:.2f} s  runs {[round(t, 2) for t in acid_all]}"
          f"  CPU s {[round(t, 2) for t in acid_cpu]}")
    print(f"spark.read.orc   : median {orc_s:.2f} s  runs {[round(t, 2) for t in orc_all]}"
          f"  CPU s {[round(t, 2) for t in orc_cpu]}")
    cpu = ({} if not (acid_cpu and orc_cpu) else {
        "ingest_cpu_s": round(statistics.median(acid_cpu), 3),
        "baseline_cpu_s": round(statistics.median(orc_cpu), 3),
        "cpu_ratio": round(statistics.median(orc_cpu) / statistics.median(acid_cpu), 3)})
    report(
        "spark-read",
        rows=visible,
        events=events,
        tasks=tasks,
        ingest_rows_per_s=round(events / acid_s),
        baseline_rows_per_s=round(events / orc_s),
        ratio=round(orc_s / acid_s, 3),
        **cpu,
        load_average=[round(load_before, 1), round(load_after, 1)],
    )
