"""Every table command with a PostgreSQL metastore (`--metastore postgresql://…`, or
INGEST_METASTORE): no SQLite file appears beside the table, and the password never shows in
the output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pg_server import PG_PASSWORD
from support import ok_json
from support import run_cli as run

from ingest.txn import Metastore

DDL = "id BIGINT, value STRING, dt STRING"


def test_table_commands_with_a_postgresql_metastore(
        warehouse: Path, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "events")
    ms = ["--metastore", pg_url]
    created = ok_json(["create", table, "--schema", DDL, "--partitioned-by", "dt", *ms], capsys)
    assert created["metastore"] == pg_url.replace(f":{PG_PASSWORD}@", "@")
    for batch in range(3):
        rows = tmp_path / f"in{batch}.jsonl"
        rows.write_text("".join(json.dumps({"id": i, "value": f"v{i}", "dt": f"d{i % 2}"})
                                + "\n" for i in range(batch * 10, batch * 10 + 10)))
        loaded = ok_json(["load", table, "--input", str(rows), *ms], capsys)
        assert loaded["write_id"] == batch + 1
    deleted = ok_json(["delete", table, "--where", "id < 5", *ms], capsys)
    assert (deleted["rows_deleted"], deleted["write_id"]) == (5, 4)
    compacted = ok_json(["compact", table, *ms], capsys)
    assert sorted(p["outputs"][0] for p in compacted["partitions"]) == ["base_0000004"] * 2
    cleaned = ok_json(["clean", table, "--retention", "0", *ms], capsys)
    assert cleaned["directories"] > 0

    # The reading commands take --metastore too, or find it in INGEST_METASTORE.
    code, out, err = run(["cat", table, *ms], capsys)
    assert code == 0, err
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == list(range(5, 30))
    verified = ok_json(["verify", table, *ms], capsys)
    assert verified["problems"] == []
    recovered = ok_json(["recover", table, "--dry-run", *ms], capsys)
    assert recovered["nothing_to_do"]
    monkeypatch.setenv("INGEST_METASTORE", pg_url)
    code, out, err = run(["status", table, "--json"], capsys)
    assert code == 0, err
    status = json.loads(out)
    assert (status["snapshot"], status["snapshot_source"]) == (
        "default.events:4:9223372036854775807::", "metastore")
    assert PG_PASSWORD not in out + err

    assert sorted(p.name for p in warehouse.iterdir()) == ["events"]  # no SQLite file
    with Metastore.open(pg_url, read_only=True) as store:
        assert [c.state for c in store.compactions("default.events")] == ["succeeded"] * 2
        assert store.live_readers("default.events", timeout_s=300) == []  # cat unregistered
        assert sorted(store.committed_files("default.events")) == [
            "dt=d0/base_0000004/bucket_00000", "dt=d1/base_0000004/bucket_00000"]


def test_unreachable_metastore_is_a_clear_cli_error(
        warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"postgresql://ingest:{PG_PASSWORD}@127.0.0.1:9/meta"
    code, out, err = run(["create", str(warehouse / "t"), "--schema", DDL, "--metastore", url],
                         capsys)
    assert code != 0 and out == ""
    assert "Cannot open metastore postgresql://ingest@127.0.0.1:9/meta: cannot connect to the " \
        "server at 127.0.0.1:9 (connection refused)" in err
    assert PG_PASSWORD not in err


WRITER = """
import sys
import pyarrow as pa
from ingest.table import open_table
from ingest.table.write import load
location, url, batches = sys.argv[1], sys.argv[2], int(sys.argv[3])
table = open_table(location, metastore=url)
for b in range(batches):
    ids = list(range(b * 20, b * 20 + 20))
    load(table, pa.table({"id": ids, "value": [f"b{b}"] * 20}))
"""

READER = """
import json, sys, time
from ingest import open_table
url, locations = sys.argv[1], sys.argv[2:]
seen = []
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    counts = []
    for location in locations:
        rows = open_table(location, metastore=url).to_arrow().to_pylist()
        ids = sorted(r["id"] for r in rows)
        # Whole loads only: every batch of 20 rows all there, in order from batch 0.
        assert ids == list(range(len(ids))) and len(ids) % 20 == 0, ids
        assert all(r["value"] == f"b{r['id'] // 20}" for r in rows)
        counts.append(len(ids))
    seen.append(counts)
    if counts == [100, 100]:
        break
print(json.dumps(seen))
"""


def test_two_writer_processes_and_a_reader_share_a_postgresql_metastore(
        warehouse: Path, pg_url: str) -> None:
    """Two processes load into two tables through one PostgreSQL metastore while a third
    reads both over and over: it only ever sees whole loads."""
    import subprocess
    import sys

    from ingest.table.write import create_table

    tables = [str(warehouse / name) for name in ("a", "b")]
    for location in tables:
        create_table(location, "id BIGINT, value STRING", metastore=pg_url)
    reader = subprocess.Popen([sys.executable, "-c", READER, pg_url, *tables],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, location, pg_url, "5"],
                                stderr=subprocess.PIPE, text=True) for location in tables]
    for w in writers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err
    out, err = reader.communicate(timeout=150)
    assert reader.returncode == 0, err
    seen = json.loads(out)
    assert seen[-1] == [100, 100]
    with Metastore.open(pg_url, read_only=True) as store:
        for name in ("default.a", "default.b"):
            assert store.snapshot(name).high_watermark == 5
            assert store.live_readers(name, timeout_s=300) == []
