"""Hive 4.0.1's own ACID readers (hive-exec: AcidUtils.getAcidState, OrcInputFormat's splits,
then its row reader over OrcRawRecordMerger and the vectorized VectorizedOrcAcidRowBatchReader)
on tables `ingest` writes through a Hive Metastore 4.0.1, with the snapshot the metastore hands
a Hive query: exactly the committed rows, with the same ROW__IDs `ingest cat --row-id` shows,
after appends, after `ingest delete`, and never the rows of an aborted or a still-open write."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pytest
from hms.hive4 import acid_state, read_rows, read_rows_vectorized
from hms_server import Server
from support import ok_json, run_cli

from ingest.acid import (
    BucketFileOptions,
    BucketWriter,
    bucket_file_name,
    format_delta,
    write_acid_version_file,
)
from ingest.txn import hms

pytestmark = [pytest.mark.hms, pytest.mark.java, pytest.mark.slow]

ROWS = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _load(location: str, uri: str, rows: list[dict[str, Any]], tmp_path: Path,
          capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / f"in-{uuid.uuid4().hex[:6]}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ok_json(["load", location, "--input", str(src), "--metastore", uri], capsys)


def _cat(location: str, uri: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """`ingest cat --row-id`, in Hive's ROW__ID order."""
    code, out, err = run_cli(["cat", location, "--row-id", "--metastore", uri], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    return sorted(rows, key=lambda r: (r["row__id"]["writeid"], r["row__id"]["bucketid"],
                                       r["row__id"]["rowid"]))


def _hive_reads_what_cat_reads(conn: hms.HmsConnection, name: str, location: str, uri: str,
                               capsys: pytest.CaptureFixture[str]) -> list[int]:
    """Both Hive 4 readers' rows equal `ingest cat`'s, ROW__IDs (the row reader's) and
    partition values included; their ids."""
    hive = read_rows(conn, name)
    cat = _cat(location, uri, capsys)
    assert hive == cat
    vectorized = read_rows_vectorized(conn, name)
    assert sorted(vectorized, key=lambda r: r["id"]) == sorted(
        ({k: v for k, v in r.items() if k != "row__id"} for r in cat), key=lambda r: r["id"])
    return sorted(r["id"] for r in hive)


def test_hive4_reads_exactly_what_load_and_delete_commit(
        hms4: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = str(tmp_path / "wh" / "events")
    name = f"h4_{uuid.uuid4().hex[:10]}.events"
    ok_json(["create", location, "--name", name, "--schema", "id BIGINT, v STRING, dt STRING",
             "--partitioned-by", "dt", "--metastore", hms4.uri], capsys)
    with hms.connect(hms4.uri) as conn:
        _load(location, hms4.uri, [{"id": i, "v": f"v{i}", "dt": f"2024-01-0{1 + i % 2}"}
                                   for i in range(5)], tmp_path, capsys)
        assert _hive_reads_what_cat_reads(conn, name, location, hms4.uri, capsys) == [
            0, 1, 2, 3, 4]
        # An append, into an existing and a new partition.
        _load(location, hms4.uri, [{"id": 5, "v": "v5", "dt": "2024-01-01"},
                                   {"id": 6, "v": "v6", "dt": "2024-01-03"}], tmp_path, capsys)
        assert _hive_reads_what_cat_reads(conn, name, location, hms4.uri, capsys) == [
            0, 1, 2, 3, 4, 5, 6]
        # A delete of rows of both writes, in all three partitions.
        ok_json(["delete", location, "--where", "id = 1 OR id = 2 OR id = 6",
                 "--metastore", hms4.uri], capsys)
        assert _hive_reads_what_cat_reads(conn, name, location, hms4.uri, capsys) == [
            0, 3, 4, 5]
        # Hive picks every delta and delete delta of each partition, none obsolete.
        state = {s["partition"]: s for s in acid_state(conn, name)}
        assert sorted(state) == ["dt=2024-01-01", "dt=2024-01-02", "dt=2024-01-03"]
        assert [d["path"] for d in state["dt=2024-01-01"]["deltas"]] == [
            "delta_0000001_0000001_0000", "delta_0000002_0000002_0000",
            "delete_delta_0000003_0000003_0000"]
        assert [(d["min"], d["delete_delta"]) for d in state["dt=2024-01-03"]["deltas"]] == [
            (2, False), (3, True)]
        assert all(s["base"] is None and not s["obsolete"] for s in state.values())


def _write_delta(table_dir: Path, partition: str, write_id: int,
                 rows: list[tuple[int, str]]) -> Path:
    """One bucket file of insert events in `<partition>/delta_W_W_0000`, as `ingest load`
    lays them out."""
    fs = fsspec.filesystem("file")
    directory = table_dir / partition / format_delta(write_id, write_id, 0)
    fs.makedirs(str(directory), exist_ok=True)
    path = directory / bucket_file_name(0)
    writer = BucketWriter.create(str(path), BucketFileOptions(
        write_id=write_id, row_schema=ROWS, bucket_id=0), fs=fs)
    writer.write(pa.table({"id": [r[0] for r in rows], "v": [r[1] for r in rows]}, schema=ROWS))
    writer.close()
    write_acid_version_file(fs, str(directory))
    return path


def test_hive4_leaves_out_aborted_and_open_writes(
        hms4: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table_dir = tmp_path / "wh" / "events"
    name = f"h4_{uuid.uuid4().hex[:10]}.events"
    ok_json(["create", str(table_dir), "--name", name, "--schema",
             "id BIGINT, v STRING, dt STRING", "--partitioned-by", "dt",
             "--metastore", hms4.uri], capsys)
    _load(str(table_dir), hms4.uri, [{"id": 1, "v": "a", "dt": "2024-01-01"}], tmp_path, capsys)
    with hms.connect(hms4.uri) as conn:
        table = hms.get_table(conn, name)
        with pytest.raises(RuntimeError):
            with hms.write_transaction(conn, table) as aborted:
                aborted_file = _write_delta(table_dir, "dt=2024-01-01", aborted.write_id,
                                            [(99, "aborted")])
                raise RuntimeError("the writer died after writing its files")
        assert aborted_file.exists()
        with hms.write_transaction(conn, table) as pending:
            _write_delta(table_dir, "dt=2024-01-01", pending.write_id, [(2, "open")])
            pending.partitions = ["dt=2024-01-01"]
            assert _hive_reads_what_cat_reads(conn, name, str(table_dir), hms4.uri,
                                              capsys) == [1]
            (state,) = acid_state(conn, name)
            assert state["aborted"] == [format_delta(aborted.write_id, aborted.write_id, 0)]
        # Committed now: the same files are read.
        assert _hive_reads_what_cat_reads(conn, name, str(table_dir), hms4.uri, capsys) == [
            1, 2]


def test_hive4_reads_every_primitive_type_and_escaped_partition_values(
        hms4: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Values as both Hive 4 readers print them (Hive's text form for timestamps, dates and
    decimals); partition values that Hive escapes in directory names come back unescaped."""
    location = str(tmp_path / "wh" / "types")
    name = f"h4_{uuid.uuid4().hex[:10]}.types"
    ok_json(["create", location, "--name", name, "--schema",
             "id BIGINT, i INT, ts TIMESTAMP, d DATE, dec DECIMAL(12,3), f DOUBLE, b BOOLEAN, "
             "s STRING, dt STRING", "--partitioned-by", "dt", "--metastore", hms4.uri], capsys)
    _load(location, hms4.uri, [
        {"id": 1, "i": -7, "ts": "2024-03-01T12:34:56.789", "d": "2024-03-01",
         "dec": "-12.340", "f": 1.5, "b": True, "s": "é\"\\", "dt": "a b/c"},
        {"id": 2, "i": None, "ts": None, "d": None, "dec": None, "f": None, "b": None,
         "s": None, "dt": "p=q%"}], tmp_path, capsys)
    assert (tmp_path / "wh" / "types" / "dt=a b%2Fc").is_dir()
    expected = [
        {"id": 1, "i": -7, "ts": "2024-03-01 12:34:56.789", "d": "2024-03-01", "dec": "-12.34",
         "f": 1.5, "b": True, "s": "é\"\\", "dt": "a b/c"},
        {"id": 2, "i": None, "ts": None, "d": None, "dec": None, "f": None, "b": None,
         "s": None, "dt": "p=q%"}]
    with hms.connect(hms4.uri) as conn:
        rows = [{k: v for k, v in r.items() if k != "row__id"} for r in read_rows(conn, name)]
        assert sorted(rows, key=lambda r: r["id"]) == expected
        assert sorted(read_rows_vectorized(conn, name), key=lambda r: r["id"]) == expected
