"""The `hive-acid` Spark source on a table kept in a Hive Metastore (`metastore` option set to a
`thrift://` URL): it reads exactly what `ingest cat` reads, after a load and a delete, with and
without a `where` option, on Hive 4.0.1 and 3.1.3."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hms_server import Server
from support import ok_json, run_cli

from ingest.spark import register

pytestmark = [pytest.mark.hms, pytest.mark.spark]


def _table(tmp_path: Path, uri: str, capsys: pytest.CaptureFixture[str]) -> str:
    """A partitioned table of eight rows in a new database, two of them deleted."""
    location = str(tmp_path / "wh" / "events")
    name = f"s_{uuid.uuid4().hex[:10]}.events"
    ok_json(["create", location, "--name", name, "--schema", "id BIGINT, v STRING, dt STRING",
             "--partitioned-by", "dt", "--metastore", uri], capsys)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "v": f"v{i}", "dt": f"d{i % 3}"}) + "\n"
                           for i in range(8)))
    ok_json(["load", location, "--input", str(src), "--metastore", uri], capsys)
    ok_json(["delete", location, "--where", "id IN (2, 5)", "--metastore", uri], capsys)
    return location


def test_the_spark_source_reads_what_cat_reads(spark: Any, metastore: Server, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    location = _table(tmp_path, metastore.uri, capsys)
    code, out, err = run_cli(["cat", location, "--metastore", metastore.uri], capsys)
    assert code == 0, err
    expected = sorted((r["id"], r["v"], r["dt"]) for r in map(json.loads, out.splitlines()))
    assert [i for i, _, _ in expected] == [0, 1, 3, 4, 6, 7]

    register(spark, filter_pushdown=False)
    frame = (spark.read.format("hive-acid").option("metastore", metastore.uri)
             .load(location))
    got = sorted((r["id"], r["v"], r["dt"]) for r in frame.collect())
    assert got == expected
    only = (spark.read.format("hive-acid").option("metastore", metastore.uri)
            .option("where", "dt = 'd1'").load(location))
    assert sorted(r["id"] for r in only.collect()) == [1, 4, 7]
