"""`python -m ingest.bench spark-read` runs end to end on a small table and ends with its JSON
line (as tests/test_bench.py checks the other benchmarks; this one starts Spark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_spark_read_benchmark_prints_its_figures_as_a_json_last_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ingest.bench", "spark-read", "--rows", "20000", "--loads", "2",
         "--repeats", "1"], capture_output=True, text=True, timeout=600, check=False,
        cwd=Path(__file__).resolve().parents[2])  # the repository root: not installed
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["benchmark"] == "spark-read"
    # 1 % of the rows deleted: the reader applied the delete delta, the baseline did not.
    assert (figures["rows"], figures["events"]) == (19_800, 20_000)
    assert figures["ingest_rows_per_s"] > 0 and figures["baseline_rows_per_s"] > 0
    assert figures["ratio"] == pytest.approx(
        figures["ingest_rows_per_s"] / figures["baseline_rows_per_s"], rel=0.01)
    # Two tasks of two buckets each for local[2]: four buckets packed evenly, not 2 + 1 + 1.
    assert figures["tasks"] == 2
    # CPU seconds of the process tree (JVM and Python workers) per scan, from /proc.
    assert figures["ingest_cpu_s"] > 0 and figures["baseline_cpu_s"] > 0
    assert figures["cpu_ratio"] == pytest.approx(
        figures["baseline_cpu_s"] / figures["ingest_cpu_s"], rel=0.01)
    assert len(figures["load_average"]) == 2
    # The floor source (the same batches from worker memory) ran in the same rounds, and
    # pyarrow decoded every event of the same files. A Python worker Spark starts afresh
    # during the timed runs reads a partition's batches once (counted).
    assert figures["floor_seconds"] > 0 and figures["floor_cpu_s"] > 0
    assert figures["floor_ratio"] == pytest.approx(
        figures["floor_rows_per_s"] * 20_000 / 19_800 / figures["baseline_rows_per_s"],
        rel=0.01)
    assert 0 <= figures["floor_loads_in_timed_runs"] <= figures["tasks"]
    assert figures["decode_cpu_s"] > 0
    assert figures["floor_plus_decode_cpu_s"] == pytest.approx(
        figures["floor_cpu_s"] + figures["decode_cpu_s"], abs=0.002)
    assert figures["ceiling_below_goal"] == (
        figures["floor_ratio"] < 1.0
        or figures["floor_plus_decode_cpu_s"] > figures["baseline_cpu_s"])
