"""Bucket files written straight to their final names on S3 (moto's server): a micro-batch makes
no staging, copy or delete request, and an upload that never completed, or completed for a
write id that never committed, is trusted by no reader, `verify` or `recover`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from s3_server import Bucket, MotoServer, start_moto, stop_moto

import ingest
from ingest.acid import BucketFileOptions, BucketWriter
from ingest.bench.support.s3_requests import count, keys_of, recording
from ingest.io import storage
from ingest.table.write import create_table
from ingest.txn import Metastore, default_metastore_url

ROOT = Path(__file__).resolve().parents[2]
PANDAS_WARNING = "ignore:PySpark does not yet fully support:FutureWarning"

# Killed by SIGKILL at `writer.after_footer`: its first flush has passed the 5 MiB block
# size, so a multipart upload has parts on the server and was never completed.
_WRITER = """
import json, os, sys
import pyarrow as pa
from ingest.acid import BucketFileOptions, BucketWriter
from ingest.io import storage
location, options, path = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
write_id = int(sys.argv[4])
fs, _ = storage.url_to_fs(location, {**options, "default_block_size": 5 * 2**20})
writer = BucketWriter.create(path, BucketFileOptions(
    write_id=write_id, bucket_id=0, compression="none",
    row_schema=pa.schema([("id", pa.int64()), ("value", pa.string())])), fs=fs)
n = 80_000
writer.write(pa.table({"id": pa.array(range(n), pa.int64()),
                       "value": [os.urandom(48).hex() for _ in range(n)]}))
writer.flush()
writer.close()
print("closed")
"""


@pytest.fixture
def recorded_s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bucket]:
    """A moto server of the test's own whose recorder writes into tmp_path, and a bucket."""
    for name in list(os.environ):
        if name.startswith(("FSSPEC_S3", "AWS_")):
            monkeypatch.delenv(name)
    server: MotoServer = start_moto(tmp_path / "moto.log",
                                    MOTO_RECORDER_FILEPATH=str(tmp_path / "recording"))
    try:
        bucket = Bucket("b-recorded", server.endpoint,
                        {"endpoint_url": server.endpoint, "key": "test", "secret": "test"})
        bucket.fs().mkdir(bucket.name)
        yield bucket
    finally:
        stop_moto(server)


def _events(start: int, n: int) -> list[bytes]:
    return [json.dumps({"id": i, "value": f"v{i}", "ts": "2026-11-21T10:00:00Z",
                        "dt": f"2026-11-{21 + i % 3}"}).encode() for i in range(start, start + n)]


def _kafka_batch(spark: Any, values: list[bytes], start: int) -> Any:
    n = len(values)
    return spark.createDataFrame(pa.table({
        "key": pa.array([str(i).encode() for i in range(n)], pa.binary()),
        "value": pa.array(values, pa.binary()),
        "topic": pa.array(["events"] * n),
        "partition": pa.array([i % 2 for i in range(n)], pa.int32()),
        "offset": pa.array([start + i // 2 for i in range(n)], pa.int64()),
    })).repartition(2, "partition")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.filterwarnings(PANDAS_WARNING)
def test_a_micro_batch_on_s3_makes_no_staging_copy_or_delete_request(
        spark: Any, recorded_s3: Bucket) -> None:
    from ingest.spark.job import ensure_tables, table_layout
    from ingest.spark.options import SinkOptions
    from ingest.spark.sink.driver import AcidSink
    from ingest.table import open_table

    s3 = recorded_s3
    location = f"{s3.url}/wh/events"
    layout = table_layout("id BIGINT, value STRING, ts TIMESTAMP, dt STRING", "dt")
    table, _ = ensure_tables(location, layout, storage_options=s3.options)
    good = _events(0, 30)
    with AcidSink(open_table(table.location, storage_options=s3.options), sink_id="direct",
                  options=SinkOptions()) as sink:
        sink(_kafka_batch(spark, good, 0), 0)  # the first opens the tables and recovers
        with recording(s3.endpoint) as rec:
            sink(_kafka_batch(spark, [*_events(30, 30), b"{not json"], 15), 1)
        report = sink.reports[-1]
    counts = count(rec.entries)
    # 3 partitions' bucket files and one dead-letter file, each one PUT; one version marker
    # per directory; nothing staged, copied or deleted.
    assert report.files == 4 and report.dead_letters == 1
    assert counts["COPY"] == 0 and counts["DELETE"] == 0, counts
    assert not [k for e in rec.entries if "_tmp." in (k := str(e["url"]))], "staging request"
    puts = keys_of(rec.entries, "PUT")
    assert len([p for p in puts if "/bucket_" in p]) == 4, puts
    assert len([p for p in puts if p.endswith("/_orc_acid_version")]) == 4, puts
    # Creating a bucket file asks nothing first: no HEAD of a file about to be written.
    assert not [k for k in keys_of(rec.entries, "HEAD") if "/bucket_" in k]
    got = ingest.open_table(location, storage_options=s3.options).to_arrow()
    assert sorted(got.column("id").to_pylist()) == list(range(60))
    verified = ingest.open_table(location, storage_options=s3.options).verify()
    assert not verified.problems, verified.problems


def test_a_crash_mid_upload_leaves_nothing_a_reader_or_recovery_trusts(
        s3: Bucket, tmp_path: Path) -> None:
    import boto3

    location = f"{s3.url}/wh/events"
    create_table(location, "id BIGINT, value STRING", storage_options=s3.options)
    table = ingest.open_table(location, storage_options=s3.options)
    table.load(pa.table({"id": [1, 2, 3], "value": ["a", "b", "c"]}))
    with Metastore.open(default_metastore_url(location)) as store:
        txn = store.open_transaction(store.get_table(location), agent="crash-test")
    w = txn.write_id
    _, root = storage.url_to_fs(location, s3.options)
    path = f"{root}/delta_{w:07d}_{w:07d}_0000/bucket_00000"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "INGEST_CRASH_AT": "writer.after_footer"}
    crashed = subprocess.run([sys.executable, "-c", _WRITER, location, json.dumps(s3.options),
                              path, str(w)], env=env, capture_output=True, text=True,
                             timeout=120, check=False)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    client = boto3.client("s3", endpoint_url=s3.endpoint, aws_access_key_id="test",
                          aws_secret_access_key="test", region_name="us-east-1")
    key = path.split("/", 1)[1]
    # Mid-upload: parts are on the server, the object does not exist.
    uploads = client.list_multipart_uploads(Bucket=s3.name).get("Uploads", [])
    assert [u["Key"] for u in uploads] == [key]
    assert not s3.fs().exists(path)

    def trusted_nothing(*, aborted: bool) -> None:
        opened = ingest.open_table(location, storage_options=s3.options)
        assert sorted(opened.to_arrow().column("id").to_pylist()) == [1, 2, 3]
        assert not opened.verify().problems
        recovered = opened.recover(backup=False)
        assert not recovered.report.changed and not recovered.report.unrecoverable
        delta = f"delta_{w:07d}_{w:07d}_0000"
        if aborted:  # left alone and handed to the cleaner
            assert recovered.report.aborted_directories == (delta,)
        else:  # an open write: nothing of it is looked at
            assert all(delta not in f.path for f in recovered.report.files)

    trusted_nothing(aborted=False)

    # The writer's upload completes after all (a zombie), but its write id never commits.
    fs, _ = storage.url_to_fs(location, s3.options)
    with Metastore.open(default_metastore_url(location)) as store:
        store.abort(txn, reason="the writer died")
    late = BucketWriter.create(path, BucketFileOptions(
        write_id=w, bucket_id=0, row_schema=pa.schema([("id", pa.int64()),
                                                        ("value", pa.string())])), fs=fs)
    late.write(pa.table({"id": [99], "value": ["zombie"]}))
    late.close()
    assert s3.fs().exists(path)
    trusted_nothing(aborted=True)
    # A second writer of the name is refused by the store, not by a request asking first.
    again = BucketWriter.create(path, BucketFileOptions(
        write_id=w, bucket_id=0, row_schema=pa.schema([("id", pa.int64()),
                                                        ("value", pa.string())])), fs=fs)
    stored = s3.fs().cat_file(path)
    again.write(pa.table({"id": [100], "value": ["second"]}))
    with pytest.raises(FileExistsError):
        again.close()
    assert s3.fs().cat_file(path) == stored
    # The cleaner removes the aborted write's directory; nothing of it is read meanwhile.
    table.clean(retention_s=0)
    assert not s3.fs().exists(path)
    assert sorted(table.to_arrow().column("id").to_pylist()) == [1, 2, 3]


def test_a_retried_task_publishes_over_the_names_its_failed_first_attempt_left(
        s3: Bucket) -> None:
    """A first attempt that completed `bucket_00001` and then failed is not reported; its
    retry staged. Before the commit the driver deletes every final name no reported attempt
    wrote, and copies the staged file over its name."""
    from ingest.spark.sink._batch import _remove_unreported
    from ingest.spark.sink._results import FileWritten

    fs, root = storage.url_to_fs(f"{s3.url}/wh/t", s3.options)
    d = f"{root}/delta_0000002_0000002_0000"
    for name, data in (("bucket_00000", b"first attempt, reported"),
                       ("bucket_00001", b"first attempt, failed"),
                       ("bucket_00002", b"first attempt, failed, name rewritten by the retry"),
                       ("_tmp.bucket_00002.7", b"retry, reported")):
        fs.pipe_file(f"{d}/{name}", data)
    files = [FileWritten("table", f"{d}/bucket_00000", None, 1, 1, 1, "0" * 16, 1),
             FileWritten("table", f"{d}/bucket_00002", f"{d}/_tmp.bucket_00002.7", 1, 1, 1,
                         "0" * 16, 1)]
    _remove_unreported(files, fs=fs, dl_fs=fs)
    left = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(d, detail=False))
    assert left == ["_tmp.bucket_00002.7", "bucket_00000", "bucket_00002"]
    fs.mv(f"{d}/_tmp.bucket_00002.7", f"{d}/bucket_00002")  # as publish_results does next
    assert fs.cat_file(f"{d}/bucket_00002") == b"retry, reported"


def test_staging_leftovers_go_from_an_object_store_and_nothing_else(s3: Bucket) -> None:
    """After the commit, a speculating micro-batch's directories lose their staging files
    (listed, as an object store lists a prefix), and a directory with no objects is no
    error."""
    from ingest.spark.sink._batch import remove_staging_leftovers
    from ingest.spark.sink._results import FileWritten

    fs, root = storage.url_to_fs(f"{s3.url}/wh/t", s3.options)
    d = f"{root}/delta_0000002_0000002_0000"
    for name in ("bucket_00000", "_tmp.bucket_00001.7", "_tmp.other"):
        fs.pipe_file(f"{d}/{name}", b"x")
    files = [FileWritten("table", f"{d}/bucket_00000", None, 1, 1, 1, "0" * 16, 1),
             FileWritten("dead_letter", f"{root}/nothing_here/bucket_00000", None, 1, 1, 1,
                         "0" * 16, 1)]
    remove_staging_leftovers(files, fs=fs, dl_fs=fs, speculation=True)
    left = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(d, detail=False))
    assert left == ["_tmp.other", "bucket_00000"]
