"""Benchmarks run end to end on small inputs and end with the JSON line the README promises.

These check that the figures are produced, not what they are: timings are for the
benchmarks themselves to print (medians and ratios), never for tests to assert.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from external import require
from s3_server import Bucket

COMMON_KEYS = {"benchmark", "ingest_rows_per_s", "baseline_rows_per_s", "ratio"}
# From the root: `--broker apache` starts Kafka with the checkout's scripts/kafka.sh.
ROOT = Path(__file__).resolve().parent.parent


def run_bench(*argv: str, timeout: float = 300) -> dict:
    done = subprocess.run([sys.executable, "-m", "ingest.bench", *argv], capture_output=True,
                          text=True, timeout=timeout, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
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
from ingest.bench.support import PeakRss
child = ("import sys; b = bytearray(200 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]);"
         " print(flush=True); sys.stdin.read()")
with PeakRss(interval_s=0.05) as peak:
    # The child holds its 200 MiB until the sampling thread has seen them (or a generous
    # deadline), then ends inside the block.
    proc = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    proc.stdout.readline()
    deadline = time.monotonic() + 180
    while peak.worker_mb < 200 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
with PeakRss(interval_s=0.05) as idle:
    time.sleep(0.1)  # a few samples; the exit's own sample alone would do (no child left)
print(json.dumps({"peak": vars(peak) | {"_stop": None, "_thread": None},
                  "idle_worker_mb": idle.worker_mb}))
"""


def test_peak_rss_covers_the_block_and_the_python_processes_below() -> None:
    """A Python child that touches 200 MiB and ends within the block still counts; this
    process's own figure starts from what it held on entry. The probe runs in a fresh
    process: a test worker may already have a Spark JVM below it."""
    done = subprocess.run([sys.executable, "-c", _PEAK_RSS_PROBE], capture_output=True,
                          text=True, timeout=120, check=False, cwd=ROOT)
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
                          text=True, timeout=60, check=False, cwd=ROOT)
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


def test_parse_write_ceiling_runs_the_sink_write_task_on_records_in_memory() -> None:
    """The ceiling `bench stream` reports: the sink's own write task parses and writes every
    record (unpartitioned, the events' dt dropped; partitioned by it), or says it did not."""
    from ingest.bench.stream import _events, _key
    from ingest.bench.support import BATCH_ROWS, kafka_batches, parse_and_write

    events = list(_events(25_000))
    batches = kafka_batches(events, map(_key, events), topic="t", partitions=2)
    assert [b.num_rows for b in batches] == [BATCH_ROWS, BATCH_ROWS, 5_000]
    assert batches[1].column("offset")[0].as_py() == BATCH_ROWS // 2
    for ddl, column in (("id BIGINT, value STRING, ts TIMESTAMP", None),
                        ("id BIGINT, value STRING, ts TIMESTAMP", "dt")):
        seconds, cpu_s, written = parse_and_write(batches, schema_ddl=ddl,
                                                  partition_column=column,
                                                  compression="zlib", flush_rows=10_000)
        assert written == 25_000 and seconds > 0 and cpu_s > 0
    bad = kafka_batches([b'{"id": "not a number"}', *events[:10]], [b"k"] * 11, topic="t",
                        partitions=1)
    with pytest.raises(RuntimeError, match="wrote 10 of 11 rows"):
        parse_and_write(bad, schema_ddl="id BIGINT, value STRING, ts TIMESTAMP",
                        partition_column=None, compression="zlib", flush_rows=10_000)


def test_standin_is_found_by_its_listening_port_and_its_cpu_read() -> None:
    """`bench stream` finds a local S3 stand-in it did not start by the endpoint's port."""
    import socket
    import time

    from ingest.bench.support import endpoint_pid, listening_pid, process_cpu_s

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while listening_pid(port) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert endpoint_pid(f"http://127.0.0.1:{port}") == server.pid
        assert endpoint_pid(f"http://localhost:{port}/") == server.pid
        before = process_cpu_s(server.pid)
        assert before is not None and before >= 0
    finally:
        server.terminate()
        server.wait(10)
    assert process_cpu_s(server.pid) is None  # reaped: gone
    assert endpoint_pid(f"http://127.0.0.1:{port}") is None  # nothing listens any more
    assert endpoint_pid("https://s3.amazonaws.com") is None  # not on this machine
    assert endpoint_pid(None) is None
    mine = process_cpu_s(os.getpid())
    started = time.process_time()
    while time.process_time() - started < 0.3:
        pass
    assert process_cpu_s(os.getpid()) >= mine + 0.2  # type: ignore[operator]


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.slow
def test_stream_benchmark_reports_the_ceiling_the_handover_floor_and_the_s3_cpu(
        s3: Bucket, tmp_path: Path) -> None:
    figures = run_bench("stream", "--rows", "6000", "--repeats", "1", "--no-baseline",
                        "--warmup-rows", "1000", "--warehouse", f"{s3.url}/wh",
                        "--metastore", f"sqlite:///{tmp_path / 'ms.db'}", *s3.cli_args(),
                        timeout=600)
    assert figures["benchmark"] == "stream"
    consumer = figures["consumer_seconds"]
    assert figures["parse_write_seconds"] > 0 and figures["parse_write_cpu_s"] > 0
    assert figures["consumer_cpu_s"] > 0
    for key, denominator in (("ratio_parse_write_to_consumer", figures["parse_write_seconds"]),
                             ("ratio_parse_write_cpu_to_consumer", figures["parse_write_cpu_s"]),
                             ("ratio_parse_write_cpu_halved_to_consumer",
                              figures["parse_write_cpu_s"] / 2)):
        assert figures[key] == pytest.approx(consumer / denominator, rel=0.05), key
    assert figures["parse_write_below_goal"] == (
        figures["ratio_parse_write_cpu_halved_to_consumer"] < 0.9)
    # The handover floor: the Python source's records handed to a Python worker and dropped
    # (the worker counted every record, or the bench failed); no JVM source in this run.
    handover = figures["layouts"]["handover@python"]
    assert handover["seconds"] > 0 and "handover@jvm" not in figures["layouts"]
    assert figures["handover_seconds"] == {"python": handover["seconds"]}
    assert figures["handover_ratio_to_consumer"] == {"python": handover["ratio_to_consumer"]}
    assert handover["ratio_to_consumer"] == pytest.approx(consumer / handover["seconds"],
                                                          rel=0.01)
    assert figures["handover_below_goal"] == (handover["ratio_to_consumer"] < 0.9)
    assert "jvm_ratio_to_consumer" not in figures
    # moto's server (started by the fixture, found by its port) served the remote round.
    remote = figures["layouts"]["partition@remote"]
    assert figures["s3_standin_cpu_s"] == remote["standin_cpu_s"]
    assert len(figures["s3_standin_cpu_s"]) == 1 and figures["s3_standin_cpu_s"][0] > 0
    assert figures["remote_ratio_to_local"] == remote["ratio_to_local"]
    without = remote["seconds"] - figures["s3_standin_cpu_s"][0]
    assert figures["remote_ratio_to_local_without_standin"] == pytest.approx(
        figures["layouts"]["partition"]["seconds"] / without, rel=0.01)
    assert figures["remote_ratio_to_local_without_standin"] > figures["remote_ratio_to_local"]


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.slow
def test_stream_benchmark_on_apache_kafka_quotes_the_cost_of_sasl_ssl() -> None:
    """`bench stream --broker apache --secured-listener SASL_SSL` starts Apache Kafka
    (scripts/kafka.sh) and runs the job and the bare consumer over PLAINTEXT and SASL_SSL in
    the same round; its figures are each listener's own ratio and the cost of TLS."""
    from kafka_server import kafka_home

    require((kafka_home() / "classpath").exists(),
            "Apache Kafka (scripts/fetch-servers.sh kafka)")
    figures = run_bench("stream", "--rows", "4000", "--repeats", "1", "--no-baseline",
                        "--warmup-rows", "1000", "--broker", "apache",
                        "--secured-listener", "SASL_SSL", timeout=900)
    assert figures["broker"] == "apache"
    secured, plain = figures["layouts"]["partition@secured"], figures["layouts"]["partition"]
    assert secured["listener"] == "SASL_SSL" and secured["batches"] >= 1
    assert secured["ratio_to_consumer"] == pytest.approx(
        secured["consumer_seconds"] / secured["seconds"], rel=0.01)
    assert secured["secured_ratio_to_plaintext"] == pytest.approx(
        plain["seconds"] / secured["seconds"], rel=0.01)
    assert secured["consumer_secured_ratio_to_plaintext"] == pytest.approx(
        figures["consumer_seconds"] / secured["consumer_seconds"], rel=0.01)


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.slow
def test_stream_benchmark_of_many_topics_quotes_both_throughputs_and_the_driver_costs() -> None:
    """`bench stream --topics N`: N topics into N tables against the same records into one
    table, in the same run, over several micro-batches each."""
    figures = run_bench("stream", "--topics", "3", "--rows", "1500", "--warmup-rows", "150",
                        "--repeats", "1", "--max-offsets-per-trigger", "500", timeout=900)
    assert figures["benchmark"] == "stream" and figures["topics"] == 3
    assert figures["rows"] == 1500 and figures["records_per_topic"] == 500
    assert COMMON_KEYS <= figures.keys()
    assert figures["ingest_rows_per_s"] == figures["many_tables_records_per_s"] > 0
    assert figures["baseline_rows_per_s"] == figures["one_table_records_per_s"] > 0
    assert figures["ratio"] == pytest.approx(
        figures["ingest_rows_per_s"] / figures["baseline_rows_per_s"], rel=0.01, abs=0.0006)
    assert figures["goal_met"] == (figures["ratio"] >= 0.8)
    # Several micro-batches each (the bound is on records per micro-batch), each committed.
    assert figures["micro_batches_one"] >= 2 and figures["micro_batches_many"] >= 2
    assert figures["one_table_commit_ms"] > 0 and figures["many_tables_commit_ms"] > 0
    # The driver's share of a micro-batch is part of it, the commit part of that.
    assert 0 < figures["many_tables_commit_ms"] <= figures["many_tables_driver_ms"] \
        <= figures["many_tables_batch_ms"]
    assert figures["many_tables_spark_actions_per_batch"] >= 1
    assert figures["peak_rss_driver_python_mb"] > 0 and figures["peak_rss_driver_jvm_mb"] > 0
    assert figures["python_heap_blocks"] > 0
    assert figures["topic_check_ms"] > 0 and figures["topic_check_each_ms"] > 0
