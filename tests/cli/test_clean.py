"""`ingest clean`: text and JSON summaries, dry run, clear errors; `ingest cat` registers its
snapshot for as long as it reads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from support import error_json, ok_json, run_cli, visible

from ingest.acid.format.names import format_base, format_delta
from ingest.table import open_table
from ingest.table.maintain import clean, compact
from ingest.table.write import create_table, load
from ingest.txn import Metastore, default_metastore_url


def rows(ids: range, dt: str) -> pa.Table:
    return pa.table({"id": list(ids), "value": [f"v{i}" for i in ids], "dt": [dt] * len(ids)})


@pytest.fixture
def location(tmp_path: Path) -> str:
    loc = str(tmp_path / "wh" / "events")
    create_table(loc, "id BIGINT, value STRING, dt STRING", partitioned_by=["dt"])
    for i in range(3):
        load(open_table(loc), rows(range(i * 10, i * 10 + 10), "2026-01-01"))
    load(open_table(loc), rows(range(50, 55), "2026-01-02"))
    compact(open_table(loc), kind="major")
    return loc


def test_clean_json_summary_per_partition(location: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    before = visible(location)
    doc = ok_json(["clean", location, "--retention", "0", "--dry-run"], capsys)
    assert doc["dry_run"] is True and doc["directories"] == 4 and doc["files"] == 8
    assert sorted(os.listdir(f"{location}/dt=2026-01-01")) == [
        format_base(4), *(format_delta(w, w, 0) for w in (1, 2, 3))]
    doc = ok_json(["clean", location, "--retention", "0"], capsys)
    assert doc["dry_run"] is False and doc["retention_s"] == 0 and doc["live_readers"] == 0
    parts = {p["partition"]: p for p in doc["partitions"]}
    assert set(parts) == {"dt=2026-01-01", "dt=2026-01-02"}
    first = parts["dt=2026-01-01"]
    assert (first["directories"], first["files"]) == (3, 6)
    assert first["bytes"] == sum(r["bytes"] for r in first["removed"]) > 0
    assert {r["name"]: (r["kind"], r["covered_by"]) for r in first["removed"]} == {
        format_delta(w, w, 0): ("obsolete", format_base(4)) for w in (1, 2, 3)}
    assert doc["bytes"] == first["bytes"] + parts["dt=2026-01-02"]["bytes"]
    assert os.listdir(f"{location}/dt=2026-01-01") == [format_base(4)]
    assert visible(location) == before


def test_clean_text_output_progress_and_kept_reasons(location: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["clean", location, "--partition", "dt=2026-01-02"], capsys)
    assert code == 0, err
    assert f"Cleaning {location}" in err
    assert "dt=2026-01-02: removed 0 directories, 0 files, 0 bytes; 1 kept" in err
    assert (f"kept dt=2026-01-02/{format_delta(4, 4, 0)}: within the retention time: "
            in out)
    assert "0 directories, 0 files, 0 bytes removed in 1 partitions of default.events " \
           "(1 kept, retention 300 s, 0 live readers" in out
    code, out, err = run_cli(["clean", location, "--retention", "0", "--quiet"], capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert f"removed dt=2026-01-01/{format_delta(1, 1, 0)} (hidden by {format_base(4)}): " \
           "2 files, " in out
    assert len(lines) == 5 and lines[-1].startswith("4 directories, 8 files, ")


def test_clean_errors(tmp_path: Path, location: str,
                      capsys: pytest.CaptureFixture[str]) -> None:
    error = error_json(["clean", str(tmp_path / "nothing")], capsys, 3)
    assert error["type"] == "TableNotFoundError" and "ingest create" in error["hint"]
    error = error_json(["clean", location, "--partition", "dt=2030-01-01"], capsys, 2)
    assert error["type"] == "ConfigError"
    assert "no partition 'dt=2030-01-01'" in error["message"]
    assert "dt=2026-01-01" in error["hint"]
    missing = tmp_path / "gone" / "ms.sqlite"
    error = error_json(["clean", location, "--metastore", f"sqlite://{missing}"], capsys, 3)
    assert error["type"] == "MetastoreError" and str(missing) in error["message"]
    assert not missing.exists()
    code, out, err = run_cli(["clean", location, "--retention", "-5"], capsys)
    assert code == 2 and "at least 0" in err
    assert len(os.listdir(f"{location}/dt=2026-01-01")) == 4  # nothing removed by any


def test_clean_help_says_what_it_changes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["clean", "--help"], capsys)
    assert code == 0
    assert "Changes the disk unless --dry-run" in out
    assert "ingest.cleaner.retention.seconds" in out
    assert "ingest clean warehouse/events --dry-run" in out
    code, out, _ = run_cli(["--help"], capsys)
    assert "clean" in out


def test_a_read_holds_a_registration_while_it_streams(location: str) -> None:
    """What `ingest cat` does: `Table.to_batches` registers its snapshot until it ends."""
    url = default_metastore_url(location)
    batches = open_table(location).to_batches(with_row_id=True)
    first = next(batches)  # the snapshot is taken and the first stripe read
    assert first.num_rows > 0
    with Metastore.open(url, read_only=True) as other:
        (reader,) = other.live_readers(location, timeout_s=60)
        assert reader.agent.endswith(":ingest-read")
    # A compaction after the registration: while it holds, the cleaner keeps what the
    # snapshot may read in that partition; in the other, what the fixture's compaction
    # (committed before the registration) made obsolete goes.
    load(open_table(location), rows(range(30, 40), "2026-01-01"))
    compact(open_table(location), kind="major", partitions=["dt=2026-01-01"])
    with Metastore.open(url, create=False) as cleaner_store:
        doc = clean(open_table(location, metastore=cleaner_store), retention_s=0)
    assert doc.live_readers == 1
    removed = {r.name for p in doc.partitions for r in p.removed}
    kept = {k.name: k.reason for p in doc.partitions for k in p.kept}
    assert removed == {format_delta(4, 4, 0)}  # dt=2026-01-02's
    assert {format_base(4), format_delta(5, 5, 0)} <= kept.keys()
    assert all("registered readers" in kept[n] for n in (format_base(4),
                                                          format_delta(5, 5, 0)))
    rest = list(batches)  # the read goes on over what it listed, then unregisters
    assert sum(b.num_rows for b in [first, *rest]) == 35
    with Metastore.open(url, read_only=True) as other:
        assert other.live_readers(location, timeout_s=60) == []
    # A snapshot given by the caller is not the metastore's: nothing is registered.
    pinned = open_table(location).to_batches(snapshot="default.events:4:9223372036854775807::")
    next(pinned)
    with Metastore.open(url, read_only=True) as other:
        assert other.live_readers(location, timeout_s=60) == []
    pinned.close()


def test_cat_output_is_the_same_before_and_after_cleaning(
        location: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, before, err = run_cli(["cat", location, "--row-id"], capsys)
    assert code == 0, err
    ok_json(["clean", location, "--retention", "0"], capsys)
    code, after, err = run_cli(["cat", location, "--row-id"], capsys)
    assert code == 0, err
    assert sorted(json.loads(x)["id"] for x in after.splitlines()) == \
        sorted(json.loads(x)["id"] for x in before.splitlines())
    assert sorted(after.splitlines()) == sorted(before.splitlines())
