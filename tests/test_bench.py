"""Benchmarks run end to end on small inputs and end with the JSON line the README promises.

These check that the figures are produced, not what they are: timings are for the
benchmarks themselves to print (medians and ratios), never for tests to assert.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

COMMON_KEYS = {"benchmark", "ingest_rows_per_s", "baseline_rows_per_s", "ratio"}


def run_bench(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "ingest.bench", *argv], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("argv", "extra_keys"), [
    (["writer", "--rows", "30000", "--flush-every", "10000", "--repeats", "1"],
     {"flush_overhead", "single_thread_ratio", "fsync_ms_per_flush", "checksum_ms",
      "checksum_share"}),
    (["reader", "--base-rows", "20000", "--deltas", "2", "--delta-rows", "5000",
      "--repeats", "1"], {"rows", "with_row_id_rows_per_s", "checksum_overhead",
                          "checksum_ms", "checksum_share"}),
    (["day", "--commits", "15", "--rows", "200", "--repeats", "1"],
     {"files_left", "files_on_disk", "dirs_left", "major_compactions", "minor_compactions"}),
    (["compact", "--deltas", "3", "--delta-rows", "5000", "--repeats", "1"],
     {"peak_rss_mb", "rss_before_mb", "compact_s", "read_speedup"}),
])
def test_benchmark_prints_its_figures_as_a_json_last_line(argv: list[str],
                                                          extra_keys: set[str]) -> None:
    figures = run_bench(*argv)
    assert figures["benchmark"] == argv[0]
    assert COMMON_KEYS | extra_keys <= figures.keys()
    assert figures["ingest_rows_per_s"] > 0 and figures["baseline_rows_per_s"] > 0
    # `ratio` is rounded to 3 places: allow that much besides 1 %.
    assert figures["ratio"] == pytest.approx(
        figures["ingest_rows_per_s"] / figures["baseline_rows_per_s"], rel=0.01, abs=0.0006)
    if argv[0] == "day":  # the cleaner ran after each compaction: nothing obsolete is left
        assert figures["major_compactions"] >= 1
        assert figures["files_on_disk"] == figures["files_left"]
    if argv[0] == "compact":  # compaction ran in the process, whose peak covers what it held
        assert figures["peak_rss_scoped"] is True
        assert figures["peak_rss_mb"] >= figures["rss_before_mb"] > 0


_PEAK_RSS_PROBE = """
import json, subprocess, sys, time
from ingest.bench._memory import PeakRss
child = ("import time; b = bytearray(200 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]);"
         " time.sleep(1.0)")
with PeakRss(interval_s=0.05) as peak:
    subprocess.run([sys.executable, "-c", child], check=True, timeout=60)
with PeakRss(interval_s=0.05) as idle:
    time.sleep(0.1)
print(json.dumps({"peak": vars(peak) | {"_stop": None, "_thread": None},
                  "idle_worker_mb": idle.worker_mb}))
"""


def test_peak_rss_covers_the_block_and_the_python_processes_below() -> None:
    """A Python child that touches 200 MiB and ends within the block still counts; this
    process's own figure starts from what it held on entry. The probe runs in a fresh
    process: a test worker may already have a Spark JVM below it."""
    done = subprocess.run([sys.executable, "-c", _PEAK_RSS_PROBE], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    peak = probe["peak"]
    assert peak["scoped"]
    assert 200 <= peak["worker_mb"] < 400, peak
    assert peak["jvm_mb"] == 0  # no java below the probe
    assert peak["python_mb"] >= peak["python_start_mb"] > 0
    assert probe["idle_worker_mb"] == 0  # the child has ended: nothing of it left to count


def test_unknown_benchmark_is_a_usage_error() -> None:
    done = subprocess.run([sys.executable, "-m", "ingest.bench", "nope"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2 and "usage: python -m ingest.bench" in done.stderr


def test_upsert_benchmark_prints_the_batch_time_per_table_size() -> None:
    figures = run_bench("upsert", "--rows", "2000,8000", "--keys", "50", "--batches", "1",
                        "--buckets", "4")
    assert figures["benchmark"] == "upsert" and figures["rows"] == [2000, 8000]
    assert set(figures["batch_s"]) == set(figures["one_bucket_batch_s"]) == {"2000", "8000"}
    assert COMMON_KEYS <= figures.keys() and figures["ingest_rows_per_s"] > 0
    assert len(figures["batches_s"]["8000"]) == len(figures["batches_cpu_s"]["8000"]) == 1
    # The mixed batches went in as Arrow envelopes; the dicts' conversion was timed apart.
    assert figures["envelopes"] == "arrow" and figures["dicts_to_arrow_s"]["8000"] > 0
    # One batch: it indexes the loaded files of every bucket it touches, then uses them.
    assert figures["buckets_indexed"]["8000"] == 4 and figures["rows_scanned"]["8000"] == 8000
    # The baselines ran on the same changes (each checks its row count after the batches).
    for name in ("deltalake", "pyiceberg"):
        assert figures[f"ratio_vs_{name}"] > 0 and figures[f"{name}_changes_per_s"] > 0
    # The snapshot reads of the largest size: upserted, fresh with the same rows, compacted.
    for key in ("read_s_after_batches", "read_s_fresh", "read_s_after_major",
                "read_s_fresh_after_major",
                "read_ratio_after_batches", "read_ratio_after_major", "compact_s"):
        assert figures[key] > 0, key
    # Read right after the mixed batches: the load and the one-bucket batches come later.
    assert figures["read_rows"] == 8000 + 10 - 5  # inserts - deletes
    assert figures["deltas_before_major"] > 1 and figures["delete_deltas_before_major"] >= 1
