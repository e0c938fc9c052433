"""The streaming job with its table on S3 (moto's server), reached only through
`--storage-option`: killed before a commit, restarted, every record exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from s3_server import Bucket

import ingest
from ingest.errors import ConfigError
from ingest.kafka.produce import produce_events, sample_events
from ingest.spark.options import SinkOptions, StreamOptions
from ingest.spark.sink.driver import AcidSink
from ingest.table import TableRef
from ingest.txn import default_metastore_url

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"


def test_txns_per_delta_above_one_is_refused_on_s3(s3: Bucket) -> None:
    with pytest.raises(ConfigError, match=r"Cannot use --txns-per-delta 3 on s3://.*cannot "
                                          r"append") as info:
        AcidSink(TableRef(f"{s3.url}/wh/events", default_metastore_url(f"{s3.url}/wh/events")),
                 sink_id="x", options=SinkOptions(txns_per_delta=3))
    assert "--txns-per-delta 1 on object stores" in str(info.value)


def test_storage_options_of_the_job_are_parsed_and_checked() -> None:
    options = StreamOptions(bootstrap_servers="127.0.0.1:9092", topic="t", table="s3://b/t",
                            schema_ddl="id BIGINT", checkpoint="/ck", storage_options=(
                                "endpoint_url=http://127.0.0.1:9000", "anon=false",
                                'client_kwargs={"region_name": "us-east-1"}'))
    assert options.storage == {"endpoint_url": "http://127.0.0.1:9000", "anon": False,
                               "client_kwargs": {"region_name": "us-east-1"}}
    with pytest.raises(ConfigError, match="--storage-option number 1: expected KEY=VALUE"):
        StreamOptions(bootstrap_servers="127.0.0.1:9092", topic="t", table="s3://b/t",
                      schema_ddl="id BIGINT", checkpoint="/ck", storage_options=("secret",))


def run_job(servers: str, topic: str, s3: Bucket, checkpoint: Path,
            crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k != "INGEST_CRASH_AT" and not k.startswith(("FSSPEC_S3", "AWS_"))}
    if crash_at:
        env["INGEST_CRASH_AT"] = crash_at
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, str(JOB), "--bootstrap-servers", servers, "--topic", topic,
         "--table", f"{s3.url}/wh/events", "--schema", "id BIGINT, value STRING, ts TIMESTAMP",
         "--checkpoint", str(checkpoint), "--available-now", "--partition-by", "dt",
         "--max-offsets-per-trigger", "100",
         *s3.cli_args()],
        env=env, capture_output=True, text=True, timeout=180, check=False)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.crash
def test_stream_to_s3_killed_before_commit_then_restarted_is_exactly_once(
        kafka_broker: str, topic: str, s3: Bucket, tmp_path: Path) -> None:
    produce_events(kafka_broker, topic, events=sample_events(150), partitions=2,
                   key_fn=lambda e: str(e["id"]))  # type: ignore[index]
    produce_events(kafka_broker, topic, events=[b"{not json"], partitions=2)
    checkpoint = tmp_path / "checkpoint"

    crashed = run_job(kafka_broker, topic, s3, checkpoint, crash_at="sink.before_commit")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    fs = s3.fs()
    # The batch's files were uploaded whole; its transaction is open, so no reader sees them.
    written = [p for p in fs.find(f"{s3.name}/wh/events") if "/bucket_" in p]
    assert written and not [p for p in written if "_tmp." in p or "flush_length" in p]
    table = ingest.open_table(f"{s3.url}/wh/events", storage_options=s3.options)
    assert table.to_arrow().num_rows == 0

    restarted = run_job(kafka_broker, topic, s3, checkpoint)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert "batch 0: write id" in restarted.stderr
    assert "secret=test" not in restarted.stderr and "'secret'" not in restarted.stderr
    ids = sorted(ingest.open_table(f"{s3.url}/wh/events", storage_options=s3.options)
                 .to_arrow(["id"]).column("id").to_pylist())
    assert ids == list(range(150))
    # One delta directory per micro-batch and write id, whole files only.
    names = {p.split("/")[-2] for p in fs.find(f"{s3.name}/wh/events")
             if "/bucket_" in p and "/_ingest_" not in p}
    assert names and all(n.startswith(("delta_", "base_")) for n in names), names
    dead = ingest.open_table(f"{s3.url}/wh/events__dead_letter", storage_options=s3.options)
    assert dead.to_arrow().num_rows == 1
