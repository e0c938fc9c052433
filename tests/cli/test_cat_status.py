"""`ingest cat` and `ingest status` through ingest.cli.main.main: output, snapshots, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from support import SIMPLE_SCHEMA, simple_table, write_deletes
from support import run_cli as _run

from ingest.acid import BucketFileOptions, BucketWriter
from ingest.acid.format.names import encode_bucket_property, format_delta
from ingest.txn import Metastore, TableDefinition, default_metastore_url


def _write(directory: Path, write_id: int, ids: range) -> str:
    path = str(directory / "bucket_00000")
    with BucketWriter.create(path, BucketFileOptions(write_id=write_id,
                                                     row_schema=SIMPLE_SCHEMA)) as w:
        w.write(simple_table(ids))
    return path


@pytest.fixture
def table(warehouse: Path) -> Path:
    """events, partitioned by dt: txn 1 committed (ids 0..4), txn 2 committed delete of id 1,
    txn 3 aborted (ids 10..11), txn 4 open and flushed in a side-filed delta (ids 20..21)."""
    root = warehouse / "events"
    root.mkdir()
    part = root / "dt=2026-11-21"
    with Metastore.open(default_metastore_url(str(root))) as store:
        store.create_table(TableDefinition("events", str(root), SIMPLE_SCHEMA,
                                           partition_columns=("dt",)))
        with store.transaction("events") as txn:
            _write(part / format_delta(txn.write_id, txn.write_id), txn.write_id, range(5))
        with store.transaction("events") as txn:
            keys = pa.table({"originalTransaction": pa.array([1], pa.int64()),
                             "bucket": pa.array([encode_bucket_property(0, 0)], pa.int32()),
                             "rowId": pa.array([1], pa.int64())})
            write_deletes(
                str(part / format_delta(txn.write_id, txn.write_id, delete=True) /
                    "bucket_00000"), keys, write_id=txn.write_id)
        aborted = store.open_transaction("events", agent="test:aborted")
        _write(part / format_delta(aborted.write_id, aborted.write_id), aborted.write_id,
               range(10, 12))
        store.abort(aborted, reason="test")
        live = store.open_transaction("events", agent="test:open")
        live_dir = part / format_delta(live.write_id, live.write_id)
        w = BucketWriter.create(str(live_dir / "bucket_00000"),
                                BucketFileOptions(write_id=live.write_id, row_schema=SIMPLE_SCHEMA))
        w.write(simple_table(range(20, 22)))
        w.flush()
        w.abandon()
    return root


def test_cat_uses_the_metastore_snapshot(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["cat", str(table)], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows == [{"id": i, "value": f"v{i}", "dt": "2026-11-21"} for i in (0, 2, 3, 4)]
    assert err == ""


def test_cat_options(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["cat", str(table / "dt=2026-11-21"), "--row-id", "--limit", "2",
                           "--columns", "value"], capsys)
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == [
        {"row__id": {"writeid": 1, "bucketid": 536870912, "rowid": 0}, "value": "v0"},
        {"row__id": {"writeid": 1, "bucketid": 536870912, "rowid": 2}, "value": "v2"},
    ]


def test_cat_explicit_snapshot_sees_the_open_transaction(
        table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["cat", str(table), "--snapshot", "default.events:4::3:", "--columns",
                         "id"], capsys)
    assert code == 0
    assert [json.loads(line)["id"] for line in out.splitlines()] == [0, 2, 3, 4, 20, 21]


def test_cat_without_metastore_warns_on_stderr(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "loose"
    _write(root / format_delta(1, 1), 1, range(2))
    code, out, err = _run(["cat", str(root)], capsys)
    assert code == 0
    assert len(out.splitlines()) == 2
    assert err.startswith("Warning: Reading loose without a snapshot")


def test_cat_bad_snapshot_is_exit_2(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["cat", str(table), "--snapshot", "nonsense", "--json"], capsys)
    assert code == 2 and out == ""
    error = json.loads(err)["error"]
    assert error["type"] == "ConfigError"
    assert error["message"].startswith("Cannot parse write-id list 'nonsense'")


def test_cat_corrupt_file_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "broken"
    path = _write(root / format_delta(1, 1), 1, range(2))
    Path(path + "_flush_length").write_bytes((10**9).to_bytes(8, "big"))
    code, out, err = _run(["cat", str(root), "--snapshot", "default.broken:1::"], capsys)
    assert code == 3 and out == ""
    assert "side file records a flush length of 1,000,000,000 bytes" in err
    assert "Hint: run `ingest recover`" in err


def test_cat_missing_path_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["cat", str(tmp_path / "nope"), "--snapshot", "d.t:1::"], capsys)
    assert code == 3 and out == ""
    assert "does not exist" in err


def test_status_json(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["status", str(table), "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["table"] == "default.events"
    assert doc["snapshot"] == "default.events:4:4:4:3"
    assert doc["snapshot_source"] == "metastore"
    [part] = doc["partitions"]
    assert part["values"] == {"dt": "2026-11-21"}
    dirs = {d["name"]: d for d in part["directories"]}
    assert {n: d["status"] for n, d in dirs.items()} == {
        "delta_0000001_0000001_0000": "chosen",
        "delete_delta_0000002_0000002_0000": "chosen",
        "delta_0000003_0000003_0000": "aborted",
        "delta_0000004_0000004_0000": "not_visible",
    }
    [open_file] = dirs["delta_0000004_0000004_0000"]["files"]
    assert open_file["side_file"] is True
    assert open_file["flush_lengths"][0] == 0
    assert open_file["readable_length"] == open_file["flush_lengths"][-1]
    assert open_file["rows"] == 2
    assert dirs["delta_0000001_0000001_0000"]["files"][0]["side_file"] is False
    assert [(t["write_id"], t["state"]) for t in doc["transactions"]] == [
        (3, "aborted"), (4, "open")]
    totals = doc["totals"]
    assert totals["files"] == 4 and totals["rows"] == 5 + 1 + 2 + 2
    assert totals["chosen_rows"] == 5
    assert totals["bytes"] == sum(f["file_length"] for d in dirs.values() for f in d["files"])


def test_status_text(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["status", str(table)], capsys)
    assert code == 0, err
    assert "Snapshot  default.events:4:4:4:3  (from metastore)" in out
    assert "Partition dt=2026-11-21" in out
    assert "aborted     delta_0000003_0000003_0000" in out
    assert "Open transactions:\n  txn 4  write id 4  agent test:open" in out
    assert "Aborted transactions:\n  txn 3  write id 3  agent test:aborted, reason: test" in out
    assert out.rstrip().splitlines()[-1].startswith("Totals: 1 partitions, 4 directories, 4 files")
