"""Spark SQL with Hive support on a Hive Metastore, in a process of its own: a JVM keeps the
catalog implementation and Hive client it started with, and the suite's `spark` fixture has
none. Run as a script it prints each statement's rows as one JSON line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BUILTIN = "builtin"
"""Spark's own Hive client (2.3.10 in pyspark 4)."""
_MARK = "ingest-rows: "


def spark_sql(uri: str, statements: list[str], *, client_version: str = BUILTIN,
              client_jars: str = "") -> list[list[list[Any]]]:
    """The rows of each statement, run by a new SparkSession whose catalog is the metastore at
    `uri` through Hive client `client_version` (its jars: a class path, for any but builtin).

    Raises:
        AssertionError: Spark failed; its stderr.
    """
    with tempfile.TemporaryDirectory(prefix="ingest-spark-hive-") as scratch:
        done = subprocess.run(
            [sys.executable, __file__, uri, client_version, client_jars, scratch, *statements],
            capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    if done.returncode != 0:
        raise AssertionError(f"Spark SQL on {uri} failed ({done.returncode}):\n"
                             f"{done.stderr[-6000:]}")
    # Hive's client prints to stdout too ("Hive Session ID = ..."): only our lines count.
    return [json.loads(line.removeprefix(_MARK)) for line in done.stdout.splitlines()
            if line.startswith(_MARK)]


def _main(uri: str, client_version: str, client_jars: str, scratch: str,
          statements: list[str]) -> None:
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[1]").appName("ingest-spark-hive")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.warehouse.dir", str(Path(scratch) / "warehouse"))
               .config("spark.sql.catalogImplementation", "hive")
               .config("spark.hadoop.hive.metastore.uris", uri))
    if client_version != BUILTIN:
        builder = (builder.config("spark.sql.hive.metastore.version", client_version)
                   .config("spark.sql.hive.metastore.jars", "path")
                   .config("spark.sql.hive.metastore.jars.path",
                           ",".join(client_jars.split(os.pathsep))))
    session = builder.getOrCreate()
    try:
        for sql in statements:
            rows = [list(row) for row in session.sql(sql).collect()]
            print(_MARK + json.dumps(rows), flush=True)
    finally:
        session.stop()


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
