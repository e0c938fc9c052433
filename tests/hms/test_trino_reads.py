"""The end-to-end proof: deltas written by our ACID writer under write ids the Hive Metastore
allocated, committed there, are what Trino's Hive connector returns, no more (not the files of
an aborted or a still-open transaction) and no less."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest
from hms_server import Server, trino_query

from ingest.acid import (
    BucketFileOptions,
    BucketWriter,
    bucket_file_name,
    format_delta,
    write_acid_version_file,
)
from ingest.acid.format.bucketing import bucket_ids
from ingest.txn import hms

pytestmark = [pytest.mark.hms, pytest.mark.trino, pytest.mark.slow]

ROWS = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _write_delta(table_dir: Path, partition: str | None, write_id: int,
                 rows: list[tuple[int, str]], *, bucket: int = 0) -> Path:
    """One bucket file of insert events in `<partition>/delta_W_W_0000`, as `ingest load` lays
    them out, with the directory's `_orc_acid_version`."""
    fs = fsspec.filesystem("file")
    directory = table_dir / partition / format_delta(write_id, write_id, 0) if partition \
        else table_dir / format_delta(write_id, write_id, 0)
    fs.makedirs(str(directory), exist_ok=True)
    path = directory / bucket_file_name(bucket)
    writer = BucketWriter.create(str(path), BucketFileOptions(
        write_id=write_id, row_schema=ROWS, bucket_id=bucket), fs=fs)
    writer.write(pa.table({"id": [r[0] for r in rows], "v": [r[1] for r in rows]},
                          schema=ROWS))
    writer.close()
    write_acid_version_file(fs, str(directory))
    return path


@pytest.fixture
def hms4_conn(hms4: Server) -> Iterator[hms.HmsConnection]:
    conn = hms.connect(hms4.uri)
    yield conn
    conn.close()


def test_trino_reads_exactly_the_committed_rows(hms4_conn: hms.HmsConnection,
                                                trino_on_hms4: Server, tmp_path: Path) -> None:
    conn = hms4_conn
    db = f"trino_{tmp_path.name[-12:].lower().replace('-', '_')}"
    hms.create_database(conn, db, location=f"file://{tmp_path}/ext",
                        managed_location=f"file://{tmp_path}/db")
    table_dir = tmp_path / "db" / "events"
    table = hms.create_table(conn, hms.HiveTableSpec.from_schema(
        f"{db}.events", ROWS, partition_columns=["dt"], location=f"file://{table_dir}"))

    # Two committed writes, in two partitions.
    for rows, dt in (([(1, "a"), (2, "b")], "2024-01-01"), ([(3, "c")], "2024-01-02")):
        with hms.write_transaction(conn, table) as write:
            (name,) = hms.add_partitions(conn, table, [[dt]])
            _write_delta(table_dir, name, write.write_id, rows)
            write.partitions = [name]
    # An aborted write whose files stay on disk, and one still open.
    with pytest.raises(RuntimeError):
        with hms.write_transaction(conn, table) as aborted:
            aborted_file = _write_delta(table_dir, "dt=2024-01-01", aborted.write_id,
                                        [(99, "aborted")])
            raise RuntimeError("the writer died after writing its files")
    assert aborted_file.exists()
    expected = [[1, "a", "2024-01-01"], [2, "b", "2024-01-01"], [3, "c", "2024-01-02"]]
    sql = f"SELECT id, v, dt FROM {db}.events ORDER BY id"
    with hms.write_transaction(conn, table) as pending:
        _write_delta(table_dir, "dt=2024-01-02", pending.write_id, [(100, "open")])
        pending.partitions = ["dt=2024-01-02"]
        assert trino_query(trino_on_hms4, sql) == expected
    # Once the metastore commits it, the same files are read.
    assert trino_query(trino_on_hms4, sql) == [*expected, [100, "open", "2024-01-02"]]
    assert hms.snapshot(conn, table.name).aborted_write_ids == (aborted.write_id,)
    assert trino_query(trino_on_hms4, f"SELECT count(*) FROM {db}.events WHERE id = 99") == [[0]]


def test_trino_reads_a_bucketed_table(hms4_conn: hms.HmsConnection, trino_on_hms4: Server,
                                      tmp_path: Path) -> None:
    """Rows placed by our bucketing (version 2, murmur3) are where Trino's bucket checks
    (hive.validate-bucketing, on by default) expect them."""
    conn = hms4_conn
    db = f"trino_{tmp_path.name[-12:].lower().replace('-', '_')}"
    hms.create_database(conn, db, location=f"file://{tmp_path}/ext",
                        managed_location=f"file://{tmp_path}/db")
    table_dir = tmp_path / "db" / "bucketed"
    table = hms.create_table(conn, hms.HiveTableSpec.from_schema(
        f"{db}.bucketed", ROWS, bucket_columns=["id"], bucket_count=4,
        location=f"file://{table_dir}"))
    data = pa.table({"id": list(range(20)), "v": [f"v{i}" for i in range(20)]}, schema=ROWS)
    buckets = bucket_ids(data, ("id",), 4).to_pylist()
    with hms.write_transaction(conn, table) as write:
        for bucket in sorted(set(buckets)):
            rows = [(i, f"v{i}") for i, b in zip(range(20), buckets, strict=True) if b == bucket]
            _write_delta(table_dir, None, write.write_id, rows, bucket=bucket)
    assert len(set(buckets)) > 1
    assert trino_query(trino_on_hms4, f"SELECT id, v FROM {db}.bucketed ORDER BY id") == [
        [i, f"v{i}"] for i in range(20)]
    # Trino's "$bucket" is the file's bucket number: each row is in the bucket Hive would pick.
    assert trino_query(trino_on_hms4, f'SELECT id, "$bucket" FROM {db}.bucketed ORDER BY id') == [
        [i, b] for i, b in enumerate(buckets)]
