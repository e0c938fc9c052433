"""`ingest.open_table(location, storage_options=...)` on S3: read, load and delete use the
options given once; the storage-option registry resolves the right options per location."""

from __future__ import annotations

import pyarrow as pa
import pytest
from s3_server import Bucket

import ingest
from ingest.errors import ConfigError
from ingest.io import storage
from ingest.table import create_table


def test_open_table_storage_options_reach_read_load_and_delete(s3: Bucket) -> None:
    location = f"{s3.url}/wh/users"
    storage.register(storage.root_of(location), s3.options)
    create_table(location, "id BIGINT, name STRING", partitioned_by=["dt"])
    # The bucket now points at a closed port: only open_table's options can reach the table.
    storage.register(storage.root_of(location), {"endpoint_url": "http://127.0.0.1:1"})
    table = ingest.open_table(location, storage_options=s3.options)
    assert table.to_arrow().num_rows == 0
    table.load(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"], "dt": ["x", "x", "y"]}))
    table.delete("id = 2")
    got = ingest.open_table(location, storage_options=s3.options).to_arrow()
    assert sorted(zip(got.column("id").to_pylist(), got.column("dt").to_pylist(),
                      strict=True)) == [(1, "x"), (3, "y")]
    part = ingest.open_table(f"{location}/dt=y", storage_options=s3.options).to_arrow(["id"])
    assert part.column("id").to_pylist() == [3]


def test_registry_longest_prefix_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage, "_registered", {})
    storage.register("s3://bucket-a", {"endpoint_url": "http://one", "key": "k1"})
    storage.register("s3://bucket-a/wh/special", {"endpoint_url": "http://two"})
    assert storage.options_for("s3://bucket-a/wh/t")["endpoint_url"] == "http://one"
    assert storage.options_for("s3://bucket-a/wh/special/dt=1") == {"endpoint_url":
                                                                    "http://two"}
    assert storage.options_for("s3://bucket-a/wh/specialist") == {"endpoint_url": "http://one",
                                                                   "key": "k1"}
    assert storage.options_for("s3://bucket-b/t") == {}
    # Local paths never take a bucket's options.
    storage.register("/tmp", {"endpoint_url": "http://x"})
    assert storage.options_for("/tmp/t") == {}


def test_storage_option_values_parse_as_json_else_string() -> None:
    assert storage.parse_storage_options(
        ["anon=false", "endpoint_url=http://h:9000", 'client_kwargs={"region_name":"eu"}',
         "key= spaced", "max_concurrency=4"]) == {
        "anon": False, "endpoint_url": "http://h:9000",
        "client_kwargs": {"region_name": "eu"}, "key": " spaced", "max_concurrency": 4}
    with pytest.raises(ConfigError, match="number 2: expected KEY=VALUE, got an empty KEY"):
        storage.parse_storage_options(["a=1", "=2"])
    assert storage.redacted({"key": "AK", "secret": "S", "endpoint_url": "u",
                             "client_kwargs": {"aws_session_token": "T"}}) == {
        "key": "***", "secret": "***", "endpoint_url": "u",
        "client_kwargs": {"aws_session_token": "***"}}
