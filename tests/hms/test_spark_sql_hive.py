"""Spark SQL with Hive support (`spark.sql.catalogImplementation=hive`) pointed at the Hive
Metastore lists our tables, their partitions and `transactional=true`. Hive 4.0.1's metastore
no longer answers the Thrift calls of Spark's built-in Hive 2.3 client (`get_table`): Spark
takes Hive 4.0.1's client there (`spark.sql.hive.metastore.version=4.0.1`, its jars by
`spark.sql.hive.metastore.jars=path`); on Hive 3.1 the built-in client works."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from hms.hive4 import classpath
from hms.spark_hive import BUILTIN, spark_sql
from hms_server import Server
from support import ok_json

pytestmark = [pytest.mark.hms, pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize("version", ["4", "3"], ids=["hive4", "hive3"])
def test_spark_sql_lists_the_table_its_partitions_and_transactional(
        version: str, request: pytest.FixtureRequest, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    server: Server = request.getfixturevalue(f"hms{version}")
    db = f"sp_{uuid.uuid4().hex[:10]}"
    location = str(tmp_path / "wh" / "events")
    ok_json(["create", location, "--name", f"{db}.events", "--schema",
             "id BIGINT, v STRING, dt STRING", "--partitioned-by", "dt",
             "--metastore", server.uri], capsys)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "v": "x", "dt": f"2024-01-0{1 + i % 2}"}) + "\n"
                           for i in range(4)))
    ok_json(["load", location, "--input", str(src), "--metastore", server.uri], capsys)
    client = {"client_version": "4.0.1", "client_jars": classpath()} if version == "4" \
        else {"client_version": BUILTIN}
    tables, partitions, properties, columns = spark_sql(server.uri, [
        f"SHOW TABLES IN {db}", f"SHOW PARTITIONS {db}.events",
        f"SHOW TBLPROPERTIES {db}.events", f"DESCRIBE TABLE {db}.events"], **client)
    # The metastore also lists the table's side tables (its committed-file manifest).
    assert [t for t in tables if "__ingest_" not in t[1]] == [[db, "events", False]]
    assert {t[1] for t in tables} <= {"events", "events__ingest_files", "events__ingest_progress"}
    assert partitions == [["dt=2024-01-01"], ["dt=2024-01-02"]]
    props = dict(properties)
    assert props["transactional"] == "true"
    assert props["transactional_properties"] == "default"
    assert [c[:2] for c in columns[:3]] == [["id", "bigint"], ["v", "string"], ["dt", "string"]]
