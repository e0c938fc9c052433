"""`ingest.open_table(location, storage_options=...)` on S3: read, load and delete use the
options given once, carried by the table; the process keeps none."""

from __future__ import annotations

import pyarrow as pa
import pytest
from s3_server import Bucket

import ingest
from ingest.errors import ConfigError
from ingest.io import storage
from ingest.table.write import create_table


def test_open_table_storage_options_reach_read_load_and_delete(s3: Bucket) -> None:
    location = f"{s3.url}/wh/users"
    create_table(location, "id BIGINT, name STRING", partitioned_by=["dt"],
                 storage_options=s3.options)
    table = ingest.open_table(location, storage_options=s3.options)
    assert table.to_arrow().num_rows == 0
    table.load(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"], "dt": ["x", "x", "y"]}))
    table.delete("id = 2")
    got = ingest.open_table(location, storage_options=s3.options).to_arrow()
    assert sorted(zip(got.column("id").to_pylist(), got.column("dt").to_pylist(),
                      strict=True)) == [(1, "x"), (3, "y")]
    part = ingest.open_table(f"{location}/dt=y", storage_options=s3.options).to_arrow(["id"])
    assert part.column("id").to_pylist() == [3]


def test_the_process_keeps_no_storage_options(s3: Bucket) -> None:
    """Options live with the table that was given them: there is no registry to fill, and a
    URL resolved without options gets none, whatever tables the process opened before."""
    for name in ("register", "register_all", "registered", "_registered", "_lock"):
        assert not hasattr(storage, name), name
    location = f"{s3.url}/wh/t"
    create_table(location, "id BIGINT", storage_options=s3.options)
    table = ingest.open_table(location, storage_options=s3.options)
    assert table.storage_options == s3.options
    table.storage_options["endpoint_url"] = "http://127.0.0.1:1"  # a copy: the table's stay
    assert table.to_arrow().num_rows == 0
    fs, _ = storage.url_to_fs(location)
    assert "endpoint_url" not in fs.storage_options
    fs, _ = storage.url_to_fs(location, {"endpoint_url": "http://h:1"})
    assert fs.storage_options["endpoint_url"] == "http://h:1"
    # A local path never takes a bucket's options (a checkpoint or input file beside them).
    assert storage.options_for("/tmp/t", s3.options) == {}
    assert storage.options_for("s3://b/t", s3.options) == s3.options


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
