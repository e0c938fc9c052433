"""Spark on a table in S3 (moto's server): compaction on executors, and the `hive-acid`
source with its `storage_options` / `storage_option.<key>` options. Executors' Python workers
are other processes: the options reach them only through the tasks."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from s3_server import Bucket

from ingest.spark import register
from ingest.spark.compact_job import compact_on_executors
from ingest.table import open_table, open_table_root
from ingest.table.write import create_table, load
from ingest.txn import default_metastore_url

pytestmark = [pytest.mark.spark, pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")]


def test_compaction_on_executors_and_the_hive_acid_source_on_s3(spark: Any, s3: Bucket) -> None:
    location = f"{s3.url}/wh/events"
    create_table(location, "id BIGINT, value STRING", partitioned_by=("dt",),
                 storage_options=s3.options)
    for i in range(3):
        ids = [i * 10, i * 10 + 1]
        load(open_table(location, storage_options=s3.options),
             pa.table({"id": ids, "value": [f"v{x}" for x in ids],
                       "dt": ["a", "b"]}))
    table = open_table_root(location, storage_options=s3.options)
    done = compact_on_executors(spark, table.ref, kind="major")  # the ref opens it again
    assert not done.failures and "compacted 2 of 2 partitions" in done.line()
    bases = sorted({p.split("/")[-2] for p in s3.fs().find(f"{s3.name}/wh/events")
                    if "/base_" in p})
    # Named after each partition's compactor transaction: published by its commit.
    assert len(bases) == 2 and all("_v" in b for b in bases), bases

    # The process keeps no options: the source's own options must reach the bucket.
    register(spark, filter_pushdown=False)
    # Named: the source may plan in a Python worker started before this test's $INGEST_HOME.
    metastore = default_metastore_url(location)
    as_json = (spark.read.format("hive-acid").option("metastore", metastore)
               .option("storage_options", json.dumps(s3.options)).load(location))
    assert sorted(r["id"] for r in as_json.collect()) == [0, 1, 10, 11, 20, 21]
    reader = spark.read.format("hive-acid").option("metastore", metastore)
    for key, value in s3.options.items():
        reader = reader.option(f"storage_option.{key}", value)
    rows = reader.load(f"{location}/dt=b").collect()
    assert sorted(r["id"] for r in rows) == [1, 11, 21]
