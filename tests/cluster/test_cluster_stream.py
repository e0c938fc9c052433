"""jobs/kafka_to_acid.py through spark-submit on a standalone cluster of two workers.

Executors run in their own JVMs and Python workers, with `ingest` shipped by --py-files; one
test checks every record lands exactly once and both workers did the work, the other SIGKILLs
a worker (its executor and Python workers with it) mid-stream: the job goes on on the other.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cluster.spark_cluster import SPARK_SUBMIT, SparkCluster, daemon_env

from ingest.acid.read.reader import read_table
from ingest.kafka.produce import produce_events, sample_events
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"
RECORDS = 3000
PER_BATCH = 250  # 12 micro-batches, each spread over both executors
FLUSH_ROWS = 10  # a write task flushes (fsyncs) many times: its staging file is open longer

# What a small cluster needs: executors that fit one 1-core, 1 GiB worker each, so the job
# keeps running on one worker; a task lost with its executor is retried elsewhere (Spark's
# default of 4 attempts; the kill costs an attempt only to the tasks that executor ran).
SPARK_CONF = {
    "spark.executor.cores": "1",
    "spark.executor.memory": "512m",
    "spark.driver.memory": "512m",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.task.maxFailures": "4",
    "spark.pyspark.python": sys.executable,
}


@contextmanager
def submitted(cluster: SparkCluster, ingest_zip: Path, servers: str, topic: str,
              base: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run the job in client mode against the cluster, its output in base/driver.log; a job
    still running on exit is killed with its whole session (driver JVM and Python)."""
    conf = [arg for key, value in SPARK_CONF.items() for arg in ("--conf", f"{key}={value}")]
    with open(base / "driver.log", "wb") as log:
        job = subprocess.Popen(
            [str(SPARK_SUBMIT), "--master", cluster.url, "--deploy-mode", "client", *conf,
             "--py-files", str(ingest_zip), str(JOB),
             "--bootstrap-servers", servers, "--topic", topic, "--table", str(base / "events"),
             "--schema", "id BIGINT, value STRING, ts TIMESTAMP", "--partition-by", "dt",
             "--checkpoint", str(base / "checkpoint"),
             "--max-offsets-per-trigger", str(PER_BATCH), "--flush-rows", str(FLUSH_ROWS),
             # Micro-batches this small would each run as one task; these tests are about
             # micro-batches spread over both workers and their shuffle.
             "--one-task-records", "0", "--available-now"],
            env=daemon_env(), cwd=base, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        yield job
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()


def finish(job: subprocess.Popen[bytes], cluster: SparkCluster, base: Path) -> str:
    """Wait for the job; its exit code must be 0. Returns the driver's log."""
    try:
        code: int | None = job.wait(timeout=240)
    except subprocess.TimeoutExpired:
        code = None
    log = (base / "driver.log").read_text()
    assert code == 0, f"job exit {code}\n{log[-6000:]}\n{cluster.logs()}"
    return log


def committed_write_ids(location: str) -> int:
    try:
        with Metastore.open(default_metastore_url(location)) as store:
            states = store.write_id_states(location)
    except Exception:  # noqa: BLE001 - the job has not created the table yet
        return 0
    return sum(1 for state in states.values() if state == "committed")


def committed_ids(location: str) -> list[int]:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
    return sorted(read_table(location, snapshot).column("id").to_pylist())


def app_id(driver_log: str) -> str:
    m = re.search(r"Connected to Spark cluster with app ID (app-[\d-]+)", driver_log)
    assert m, driver_log[-3000:]
    return m.group(1)


def executor_dirs(cluster: SparkCluster, app: str) -> list[list[Path]]:
    """Per worker: the executor directories it made for the application."""
    return [sorted(p for p in (w.work_dir / app).glob("*") if p.is_dir())  # type: ignore[operator]
            if (w.work_dir / app).is_dir() else [] for w in cluster.workers]  # type: ignore[operator]


def tasks_finished(executor_dir: Path) -> int:
    return len(re.findall(r"Finished task", (executor_dir / "stderr").read_text()))


def tasks_in_flight(executor_dir: Path) -> dict[str, str]:
    """TID -> stage of the tasks the executor's log shows started and not finished."""
    log = (executor_dir / "stderr").read_text()
    started = {tid: stage for stage, tid in re.findall(
        r"Running task \S+ in stage (\d+)\.\d+ \(TID (\d+)\)", log)}
    finished = set(re.findall(r"Finished task .*\(TID (\d+)\)", log))
    return {tid: stage for tid, stage in started.items() if tid not in finished}


def staging_files_of(location: str, tids: set[str]) -> list[Path]:
    """The sink's staging files `_tmp.bucket_N.<task attempt id>` of these tasks (a task
    attempt id is Spark's TID)."""
    return [p for p in Path(location).glob("*/delta_*/_tmp.bucket_*")
            if p.name.rsplit(".", 1)[-1] in tids]


def writing_worker(cluster: SparkCluster, app: str,
                   location: str) -> tuple[int, list[Path]] | None:
    """A worker whose executor has a task in flight with a staging file on disk, and those
    files; None if there is none now."""
    for i, dirs in enumerate(executor_dirs(cluster, app)):
        files = staging_files_of(location, set(tasks_in_flight(dirs[0]))) if dirs else []
        if files:
            return i, files
    return None


def test_every_record_exactly_once_with_executors_on_both_workers(
        spark_cluster: SparkCluster, ingest_zip: Path, kafka_broker: str, topic: str,
        tmp_path: Path) -> None:
    produce_events(kafka_broker, topic, events=sample_events(RECORDS), partitions=2,
                   key_fn=lambda e: str(e["id"]))  # type: ignore[index]
    started = time.monotonic()
    with submitted(spark_cluster, ingest_zip, kafka_broker, topic, tmp_path) as job:
        log = finish(job, spark_cluster, tmp_path)
    seconds = time.monotonic() - started
    location = str(tmp_path / "events")
    assert committed_ids(location) == list(range(RECORDS))
    assert f"{RECORDS:,} rows, 0 dead letters" in log
    assert committed_write_ids(location) == RECORDS // PER_BATCH
    # The work ran in both workers' executors, each given the shipped zip: per micro-batch a
    # read task for each of the 2 Kafka partitions and at least one write task.
    app = app_id(log)
    finished = []
    for dirs in executor_dirs(spark_cluster, app):
        assert len(dirs) == 1, dirs
        assert (dirs[0] / "ingest.zip").is_file()
        finished.append(tasks_finished(dirs[0]))
    assert min(finished) > 0 and sum(finished) >= 3 * RECORDS // PER_BATCH, finished
    print(f"{RECORDS} records in {seconds:.1f} s ({RECORDS / seconds:.0f} records/s, "
          f"spark-submit to exit)")


def test_sigkill_of_a_worker_mid_stream_the_job_goes_on_exactly_once(
        spark_cluster: SparkCluster, ingest_zip: Path, kafka_broker: str, topic: str,
        tmp_path: Path) -> None:
    produce_events(kafka_broker, topic, events=sample_events(RECORDS), partitions=2,
                   key_fn=lambda e: str(e["id"]))  # type: ignore[index]
    location = str(tmp_path / "events")
    with submitted(spark_cluster, ingest_zip, kafka_broker, topic, tmp_path) as job:
        deadline = time.monotonic() + 180
        while committed_write_ids(location) < 1:
            assert job.poll() is None, (tmp_path / "driver.log").read_text()[-6000:]
            assert time.monotonic() < deadline, (tmp_path / "driver.log").read_text()[-6000:]
            time.sleep(0.2)
        # Kill the worker whose executor runs a write task with its staging file open, so the
        # attempt dies half written and its task runs again on the other worker.
        app = app_id((tmp_path / "driver.log").read_text())
        while not (found := writing_worker(spark_cluster, app, location)):
            assert job.poll() is None, "the stream ended before a write task was caught writing"
            assert time.monotonic() < deadline, "no write task caught writing"
            time.sleep(0.005)
        victim, half_written = found
        spark_cluster.workers[victim].kill()
        committed_at_kill = committed_write_ids(location)
        survivor = executor_dirs(spark_cluster, app)[1 - victim][0]
        finished_at_kill = tasks_finished(survivor)
        assert committed_at_kill < RECORDS // PER_BATCH, "the stream ended before the kill"

        log = finish(job, spark_cluster, tmp_path)
    assert re.search(r"Lost executor \d+ on 127\.0\.0\.1", log), log[-6000:]
    # The write task died with its executor and ran again (after its lost shuffle input was
    # computed again) on the other worker.
    assert re.search(r"\(TID \d+\) failed because while it was being computed, its executor "
                     r"exited", log), log[-6000:]
    assert committed_ids(location) == list(range(RECORDS))
    assert f"{RECORDS:,} rows, 0 dead letters" in log
    assert not any(p.exists() for p in half_written), "the killed attempt's file stayed"
    assert not list(Path(location).rglob("_tmp.*"))
    with Metastore.open(default_metastore_url(location)) as store:
        ranges = [r for _, r in store.offset_ranges(location)]
    assert sum(r.until_offset - r.from_offset for r in ranges) == RECORDS
    # The rest of the stream ran on the surviving worker.
    assert tasks_finished(survivor) >= finished_at_kill + RECORDS // PER_BATCH - committed_at_kill
    print(f"killed worker{victim} after {committed_at_kill} committed micro-batches, while it "
          f"wrote {[str(p.relative_to(location)) for p in half_written]}")
