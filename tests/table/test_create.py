"""default_table_name: one name for a table's path, whoever creates the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_cli

from ingest.errors import ConfigError, IngestError
from ingest.spark.job import ensure_tables, table_layout
from ingest.table import open_table
from ingest.table.core._written import Written
from ingest.table.write import create_table, default_table_name, load
from ingest.txn import METASTORE_FILENAME


@pytest.mark.parametrize(("location", "name"), [
    ("/wh/2026-Events", "default.t_2026_events"),
    ("/wh/Events-2026", "default.events_2026"),
    ("memory://wh/_raw", "default.t__raw"),
    ("/wh/café", "default.caf_"),
])
def test_default_table_name(location: str, name: str) -> None:
    assert default_table_name(location) == name


def test_ingest_create_and_the_stream_name_a_path_alike(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    by_cli = tmp_path / "cli" / "wh" / "2026-Events"
    by_cli.parent.mkdir(parents=True)
    code, out, err = run_cli(["create", str(by_cli), "--schema", "id BIGINT", "--json"], capsys)
    assert code == 0, err
    by_stream = tmp_path / "stream" / "wh" / "2026-Events"
    by_stream.parent.mkdir(parents=True)
    table, dead = ensure_tables(str(by_stream), table_layout("id BIGINT", None))
    assert json.loads(out)["table"] == table.name == "default.t_2026_events"
    assert dead.name.startswith("default.t_2026_events")


def test_scan_layout_finds_acid_and_stray_directories_below_partitions(tmp_path: Path) -> None:
    import fsspec

    from ingest.table.core._layout import scan_layout
    for d in ("dt=1/delta_0000003_0000004", "dt=1/_tmp/delta_0000009_0000009_0000",
              "dt=2/base_0000002", "dt=2/delete_delta_0000005_0000005_0000",
              "dt=2/delta_x_y", ".hidden/delta_0000099_0000099_0000"):
        (tmp_path / d).mkdir(parents=True)
    layout = scan_layout(fsspec.filesystem("file"), str(tmp_path))
    assert sorted(p.name for _, p in layout.directories) == [
        "base_0000002", "delete_delta_0000005_0000005_0000", "delta_0000003_0000004"]
    assert layout.max_write_id == 5
    assert layout.stray == (str(tmp_path / "dt=2" / "delta_x_y"),)
    assert scan_layout(fsspec.filesystem("file"), str(tmp_path / "none")).directories == ()


# Issue 11, item 1: a write removes only what it created; adopting data on disk.
def test_written_removes_only_what_it_created(tmp_path: Path) -> None:
    import fsspec

    fs = fsspec.filesystem("file")
    existing = tmp_path / "t" / "p=1" / "delta_0000001_0000001_0000"
    existing.mkdir(parents=True)
    (existing / "bucket_00000").write_bytes(b"committed")
    written = Written(fs)
    written.make_directory(str(tmp_path / "t" / "p=2"),
                           str(tmp_path / "t" / "p=2" / "delta_0000001_0000001_0000"))
    with pytest.raises(IngestError, match="already exists"):
        written.make_directory(str(existing.parent), str(existing))
    written.remove()
    assert (existing / "bucket_00000").read_bytes() == b"committed"
    assert not (tmp_path / "t" / "p=2").exists()


def test_create_table_api_adopts_partitioned_data(tmp_path: Path) -> None:
    location = str(tmp_path / "wh" / "p")
    create_table(location, "id BIGINT, v STRING, dt STRING", partitioned_by=["dt"])
    import pyarrow as pa

    data = pa.table({"id": [1, 2], "v": ["a", "b"], "dt": ["x", "y"]})
    load(open_table(location), data)
    load(open_table(location), data)
    other = f"sqlite://{tmp_path}/o.sqlite"
    # A location belongs to one metastore: adopting it elsewhere is refused while its own
    # lists it, and allowed once that one is gone (the data moved without its metastore).
    with pytest.raises(ConfigError, match="already lists table default.p; a location "
                                          "belongs to one metastore"):
        create_table(location, "id BIGINT, v STRING, dt STRING", partitioned_by=["dt"],
                     metastore=other, adopt=True)
    for f in (tmp_path / "wh").glob(METASTORE_FILENAME + "*"):
        f.unlink()
    defn = create_table(location, "id BIGINT, v STRING, dt STRING", partitioned_by=["dt"],
                        metastore=other, adopt=True)
    assert defn.properties["ingest.adopted_max_write_id"] == "2"
    assert load(open_table(location, metastore=other), data).write_id == 3
