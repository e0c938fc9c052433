"""Two tables in one process on two S3 endpoints with different credentials: each table
carries its own storage options, so every operation on one reaches its own server with its
own key, and nothing of one leaks to the other (there is no process-wide registry).

The second server checks credentials (moto's IAM mode, `s3_auth`): the first server's key is
refused there, so a leaked option fails loudly instead of passing by luck.
"""

from __future__ import annotations

import pickle
import uuid
from typing import Any

import pyarrow as pa
import pytest
import s3fs
from s3_server import AuthServer, Bucket

import ingest
from ingest.spark.job import ensure_tables, table_layout
from ingest.spark.sink._results import FileWritten, from_arrow
from ingest.spark.sink._tasks import TaskPlan, write_task
from ingest.spark.sink.driver import AcidSink
from ingest.table import Table, open_table
from ingest.table.write import create_table

DDL = "id BIGINT, value STRING"


def _rows(ids: range, dt: str) -> pa.Table:
    return pa.table({"id": list(ids), "value": [f"v{i}" for i in ids], "dt": [dt] * len(ids)})


def _ids(table: Table) -> list[int]:
    return sorted(table.to_arrow(["id"]).column("id").to_pylist())


def _files(options: dict[str, Any], prefix: str) -> list[str]:
    fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **options)
    return [p for p in fs.find(prefix) if "/bucket_" in p]


@pytest.fixture
def second(s3_auth: AuthServer) -> tuple[str, dict[str, Any]]:
    """A fresh prefix in the credential-checking server's bucket, and its options."""
    return f"s3://{s3_auth.bucket}/{uuid.uuid4().hex[:12]}", dict(s3_auth.good)


def test_two_tables_on_two_endpoints_each_use_their_own_options(
        s3: Bucket, second: tuple[str, dict[str, Any]]) -> None:
    prefix_b, options_b = second
    assert options_b["endpoint_url"] != s3.options["endpoint_url"]
    assert options_b["key"] != s3.options["key"]
    a_loc, b_loc = f"{s3.url}/wh/a", f"{prefix_b}/wh/b"
    create_table(a_loc, DDL, partitioned_by=["dt"], storage_options=s3.options)
    create_table(b_loc, DDL, partitioned_by=["dt"], storage_options=options_b)
    a = ingest.open_table(a_loc, storage_options=s3.options)
    b = ingest.open_table(b_loc, storage_options=options_b)

    # Interleaved: whatever one did last must not decide what the other reaches.
    a.load(_rows(range(0, 5), "x"))
    b.load(_rows(range(100, 103), "y"))
    a.load(_rows(range(5, 8), "z"))
    b.load(_rows(range(103, 106), "y"))
    assert b.delete("id = 101").rows_deleted == 1
    assert a.delete("id < 2").rows_deleted == 2
    assert _ids(a) == list(range(2, 8))
    assert _ids(b) == [100, 102, 103, 104, 105]

    # The files are where each table's options lead, and only there.
    assert _files(s3.options, f"{s3.name}/wh/a") and not _files(s3.options, f"{s3.name}/wh/b")
    b_files = _files(options_b, prefix_b.removeprefix("s3://") + "/wh/b")
    assert len(b_files) == 3  # two loads and a delete, one partition

    # Every other operation of the Table, each on its own server.
    assert a.compact("major").partitions and b.compact("minor").partitions
    a.clean(retention_s=0)
    b.clean(retention_s=0)
    assert a.verify().ok and b.verify().ok, (a.verify().problems, b.verify().problems)
    assert a.recover(dry_run=True).clean and b.recover(dry_run=True).clean
    assert b.alter({"orc.compress": "SNAPPY"}).changed == (("orc.compress", "ZLIB",
                                                           "SNAPPY"),)
    assert [c.state for c in b.history()] == ["committed"] * 3
    status_a, status_b = a.status(), b.status()
    assert status_a.table == a.name and status_b.table == b.name
    # a: one base per partition; b: the minor compaction's delta and delete delta.
    assert (status_a.totals.partitions, status_a.totals.directories) == (2, 2)
    assert (status_b.totals.partitions, status_b.totals.directories) == (1, 2)
    assert _ids(ingest.open_table(a_loc, storage_options=s3.options)) == list(range(2, 8))
    assert _ids(ingest.open_table(b_loc, storage_options=options_b)) == [100, 102, 103, 104,
                                                                        105]

    # The first server's credentials at the second server are refused: had they leaked
    # into b, every step above would have failed.
    wrong = {**options_b, "key": s3.options["key"], "secret": s3.options["secret"]}
    with pytest.raises(PermissionError):
        ingest.open_table(b_loc, storage_options=wrong).to_arrow()


def test_a_sink_task_plan_carries_only_its_tables_options(
        s3: Bucket, second: tuple[str, dict[str, Any]]) -> None:
    """Two sinks in one driver: each task plan holds exactly its own table's options (not
    the other sink's, nor anything else of the process), and a task writes through them
    alone, after a pickle round trip as on an executor."""
    prefix_b, options_b = second
    layout = table_layout("id BIGINT, value STRING", None)
    sinks = []
    for location, options in ((f"{s3.url}/wh/sa", s3.options), (f"{prefix_b}/wh/sb",
                                                                 options_b)):
        ensure_tables(location, layout, storage_options=options)
        table = open_table(location, storage_options=options)
        sinks.append((AcidSink(table, sink_id=location), options))
    batch = pa.record_batch({
        "key": pa.nulls(3, pa.binary()),
        "value": pa.array([b'{"id": 1, "value": "a"}', b'{"id": 2, "value": "b"}',
                           b"not json"], pa.binary()),
        "topic": pa.array(["t"] * 3), "partition": pa.array([0] * 3, pa.int32()),
        "offset": pa.array(range(3), pa.int64())})
    for sink, options in sinks:
        store = sink._open(None)  # type: ignore[arg-type]  # one txn per delta: no session
        txn, plan = sink._begin(store)
        try:
            assert plan.storage_options == options
            assert "storage_options" not in repr(plan) and options["secret"] not in repr(plan)
            shipped = pickle.loads(pickle.dumps(plan))
            assert isinstance(shipped, TaskPlan) and shipped.storage_options == options
            written = [r for r in from_arrow(list(write_task(shipped, iter([batch])))[0])
                       if isinstance(r, FileWritten)]
            # A good-rows file in the table and a dead letter beside it, on its own server.
            assert len(written) == 2
            bucket = plan.target.root.removeprefix("s3://").split("/", 1)[0]
            fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False,
                                   **options)
            on_server = set(fs.find(bucket))
            # Object stores: the task stages each file; the driver publishes it.
            assert all((w.staging or w.path) in on_server for w in written), written
        finally:
            store.abort(txn, reason="test")
            sink.close()
