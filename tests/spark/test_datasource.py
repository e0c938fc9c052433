"""The "hive-acid" batch reader returns what `ingest cat` returns, on every kind of table.

Tables: partitioned and bucketed with delete deltas, a transaction batch still being written
(open transaction, side file), a major-compacted table, and a table written by Hive's own
`OrcRecordUpdater`; plus the options (columns, where), SQL over a temporary view, and errors.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support import run_cli

from ingest.acid import BucketFileOptions, BucketWriter
from ingest.acid.format.names import format_delta
from ingest.acid.format.side_file import side_file_path
from ingest.cli._output import dumps, rows
from ingest.spark import register
from ingest.table import open_table
from ingest.table.core._definition import VISIBILITY_PROPERTY
from ingest.table.maintain import compact
from ingest.table.write import alter_table, create_table, delete, load
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")]

DDL = "id BIGINT, value STRING, ts TIMESTAMP, amount DECIMAL(10,2)"


@pytest.fixture(scope="module")
def acid_spark(spark: Any) -> Any:
    register(spark, filter_pushdown=False)
    return spark


def events(ids: range) -> pa.Table:
    return pa.table({
        "id": pa.array(list(ids), pa.int64()),
        "value": [None if i % 7 == 0 else f"v{i}" for i in ids],
        "ts": [dt.datetime(2026, 1, 1) + dt.timedelta(seconds=i, microseconds=i) for i in ids],
        "amount": [decimal.Decimal(i) / 4 for i in ids],
        "dt": [f"2026-01-0{1 + i % 2}" for i in ids],
    })


def partitioned_table(root: Path) -> str:
    """dt-partitioned, 2 buckets, three loads and a delete: 27 of 30 rows visible."""
    location = str(root / "events")
    create_table(location, DDL, partitioned_by=["dt"], buckets=2, bucketed_by=["id"])
    for k in range(3):
        load(open_table(location), events(range(k * 10, k * 10 + 10)))
    assert delete(open_table(location), "id IN (3, 14, 25)").rows_deleted == 3
    return location


def cat_lines(location: str, capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    code, out, err = run_cli(["cat", location, *args], capsys)
    assert code == 0, err
    return sorted(out.splitlines())


def spark_lines(df: Any, reference: pa.Schema | None = None) -> list[str]:
    """The DataFrame's rows as `ingest cat` prints them (types cast back to the table's)."""
    table = df.toArrow()
    if reference is not None:
        table = table.cast(pa.schema([reference.field(n) for n in table.schema.names]))
    return sorted(dumps(r) for r in rows(table))


def table_schema(location: str) -> pa.Schema:
    with Metastore.open(default_metastore_url(location), read_only=True) as store:
        defn = store.get_table(location)
    return pa.schema(list(defn.row_schema) + [pa.field(c, pa.string())
                                              for c in defn.partition_columns])


@pytest.mark.slow
def test_partitioned_bucketed_table_with_deletes_reads_like_ingest_cat(
        acid_spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = partitioned_table(tmp_path)
    df = acid_spark.read.format("hive-acid").option("minPartitions", "8").load(location)
    assert df.schema.simpleString() == (
        "struct<id:bigint,value:string,ts:timestamp_ntz,amount:decimal(10,2),dt:string>")
    # 2 partitions x 2 buckets: one task per bucket group when asked for 8.
    assert df.rdd.getNumPartitions() == 4
    got = spark_lines(df, table_schema(location))
    assert got == cat_lines(location, capsys)
    assert len(got) == 27 and not any('"id": 14,' in line for line in got)


def test_where_and_columns_prune_partitions_and_match_cat_filtered(
        acid_spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = partitioned_table(tmp_path)
    reader = acid_spark.read.format("hive-acid").option("minPartitions", "8")
    pruned = reader.option("where", "dt = '2026-01-02'").load(location)
    assert pruned.rdd.getNumPartitions() == 2  # the other partition's buckets are not read
    df = (reader.option("columns", "dt,id")
          .option("where", "dt = '2026-01-02' AND (value IS NULL OR id >= 20)").load(location))
    assert df.columns == ["dt", "id"]
    got = sorted((r.dt, r.id) for r in df.collect())
    expected = sorted(
        (r["dt"], r["id"]) for r in map(_json, cat_lines(location, capsys))
        if r["dt"] == "2026-01-02" and (r["value"] is None or r["id"] >= 20))
    assert got == expected and len(got) == 5  # ids 7, 21, 23, 27, 29


def _json(line: str) -> dict[str, Any]:
    import json

    return dict(json.loads(line))


@pytest.mark.slow
def test_sql_over_a_temporary_view_reads_the_dataframes_one_snapshot(
        acid_spark: Any, tmp_path: Path) -> None:
    location = partitioned_table(tmp_path)
    acid_spark.read.format("hive-acid").load(location).createOrReplaceTempView("acid_events")
    query = ("SELECT dt, count(*) AS n, sum(amount) AS total FROM acid_events "
             "GROUP BY dt ORDER BY dt")
    got = acid_spark.sql(query).collect()
    visible = [i for i in range(30) if i not in (3, 14, 25)]
    expected = [(f"2026-01-0{1 + p}", sum(1 for i in visible if i % 2 == p),
                 sum(decimal.Decimal(i) / 4 for i in visible if i % 2 == p)) for p in (0, 1)]
    assert [(r.dt, r.n, r.total) for r in got] == expected
    # A commit after the DataFrame was planned: its queries keep their snapshot, a new
    # load() sees the commit.
    load(open_table(location), events(range(100, 104)))
    assert [(r.dt, r.n, r.total) for r in acid_spark.sql(query).collect()] == expected
    assert acid_spark.read.format("hive-acid").load(location).count() == 31


@pytest.mark.slow
def test_pushed_down_filters_prune_partitions_when_enabled(acid_spark: Any, tmp_path: Path
                                                           ) -> None:
    location = partitioned_table(tmp_path)
    register(acid_spark, filter_pushdown=True)
    try:
        df = (acid_spark.read.format("hive-acid").option("minPartitions", "8").load(location)
              .where("dt = '2026-01-02' AND id > 20 AND value LIKE 'v2%'"))
        assert df.rdd.getNumPartitions() == 2  # dt pruned in the reader: one partition's buckets
        assert sorted(r.id for r in df.collect()) == [23, 27, 29]  # 21 has a null value
    finally:
        acid_spark.conf.unset("spark.sql.python.filterPushdown.enabled")
        register(acid_spark, filter_pushdown=False)


def test_rows_of_an_open_transaction_in_a_transaction_batch_are_not_seen(
        acid_spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = str(tmp_path / "live")
    create_table(location, "id BIGINT, value STRING")
    load(open_table(location), pa.table({"id": [1, 2], "value": ["a", "b"]}))
    with Metastore.open(default_metastore_url(location)) as store:
        first, second, _third = store.allocate_write_ids(location, 3, agent="test:stream")
        # One delta for the batch, as Hive Streaming writes it; the file stays open.
        path = f"{location}/{format_delta(first.write_id, first.write_id + 2)}/bucket_00000"
        schema = pa.schema([("id", pa.int64()), ("value", pa.string())])
        w = BucketWriter.create(path, BucketFileOptions(write_id=first.write_id,
                                                        row_schema=schema))
        w.write(pa.table({"id": [10, 11], "value": ["c", "d"]}, schema=schema))
        w.flush()
        w.abandon()
        store.commit(first)
        w = BucketWriter.open_append(path, BucketFileOptions(write_id=second.write_id))
        w.write(pa.table({"id": [20, 21], "value": ["open", "open"]}, schema=schema))
        w.flush()
        w.abandon()
    assert Path(side_file_path(path)).exists()
    got = spark_lines(acid_spark.read.format("hive-acid").load(location))
    assert got == cat_lines(location, capsys)
    assert sorted(_json(line)["id"] for line in got) == [1, 2, 10, 11]


def test_major_compacted_table_reads_like_ingest_cat(
        acid_spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = partitioned_table(tmp_path)
    before = cat_lines(location, capsys)
    report = compact(open_table(location), kind="major")
    assert report.partitions and list(Path(location).glob("dt=*/base_*"))
    got = spark_lines(acid_spark.read.format("hive-acid").load(location), table_schema(location))
    assert got == cat_lines(location, capsys) == before


@pytest.mark.slow
def test_a_compactors_vT_output_counts_only_once_its_transaction_commits(
        acid_spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = partitioned_table(tmp_path)
    alter_table(open_table(location), properties={VISIBILITY_PROPERTY: "true"})
    before = cat_lines(location, capsys)
    # The compactor is killed after renaming its output into place, before its transaction
    # commits (as a Hive 4 compactor writes in place).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
           "INGEST_CRASH_AT": "compact.after_rename"}
    done = subprocess.run([sys.executable, "-m", "ingest", "compact", location, "--major"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    bases = sorted(Path(location).glob("dt=*/base_*_v*"))
    assert bases
    # Half written too: were it taken as committed, rows would be missing.
    for base in bases:
        (base / "bucket_00001").unlink(missing_ok=True)
    got = spark_lines(acid_spark.read.format("hive-acid").load(location), table_schema(location))
    assert got == cat_lines(location, capsys) == before


@pytest.mark.java
@pytest.mark.parametrize("scenario", ["basic", "streaming_open"])
def test_table_written_by_hive_orc_record_updater(
        acid_spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], scenario: str
) -> None:
    """Inserts, updates and deletes by Hive's writer (and, in streaming_open, a transaction
    batch still open with its side file), at each snapshot Hive's manifest describes."""
    from compat import javatools
    from conftest import require

    ok, why = javatools.available()
    require(ok, f"Java and pyspark's jars for the Hive tools ({why})")
    table = tmp_path / "ref"
    manifest = javatools.hive_write_reference_table(table, scenario)
    create_table(str(table), "id BIGINT, value STRING", adopt=True)
    for name, valid_txns in manifest["valid_txns"].items():
        hwm, _min_open, *aborted = valid_txns.split(":")
        snapshot = f"default.ref:{hwm}:9223372036854775807::{','.join(aborted)}"
        df = acid_spark.read.format("hive-acid").option("snapshot", snapshot).load(str(table))
        got = sorted(({"id": r.id, "value": r.value} for r in df.collect()),
                     key=lambda r: r["id"])
        assert got == manifest["expected_rows"][name], name
        assert spark_lines(df) == cat_lines(str(table), capsys, "--snapshot", snapshot), name


def test_unknown_column_and_bad_where_are_clear_errors(acid_spark: Any, tmp_path: Path) -> None:
    location = partitioned_table(tmp_path)
    with pytest.raises(Exception, match=r"Cannot read columns \['nope'\] of table default.events"):
        acid_spark.read.format("hive-acid").option("columns", "id,nope").load(location).collect()
    with pytest.raises(Exception, match="where"):
        acid_spark.read.format("hive-acid").option("where", "id = 'x'").load(location).collect()
