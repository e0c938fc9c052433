"""Issue 11: a careless operator's commands never destroy committed data, and misuse gets a
clear error before anything is written (items 1, 12 and 13), through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import cat_ids, error_json, ok_json
from support import run_cli as run

from ingest.txn import METASTORE_FILENAME, Metastore

DDL = "id BIGINT, v STRING"


def rows_file(path: Path, ids: range) -> str:
    path.write_text("".join(json.dumps({"id": i, "v": "x"}) + "\n" for i in ids))
    return str(path)


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file and directory under root: its bytes (None for a directory)."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def table_3000(warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The issue's table: 3,000 committed rows in delta_0000001_0000001_0000."""
    table = str(warehouse / "T")
    ok_json(["create", table, "--schema", DDL], capsys)
    ok_json(["load", table, "--input", rows_file(tmp_path / "a.jsonl", range(3000))], capsys)
    return table


# -- item 1: a failed write never deletes another write's files --------------------------


def test_create_over_acid_data_with_another_metastore_is_refused(
        table_3000: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = f"sqlite://{tmp_path}/other.sqlite"
    before = tree(Path(table_3000))
    error = error_json(["create", table_3000, "--schema", DDL, "--metastore", other], capsys, 3)
    assert error["type"] == "TableExistsError"
    assert "already holds ACID data" in error["message"]
    assert f"{table_3000}/delta_0000001_0000001_0000" in error["message"]
    assert "--adopt" in error["hint"]
    assert not (tmp_path / "other.sqlite").exists()  # nothing created
    # The next step: a load against the other metastore has no table to write.
    error = error_json(["load", table_3000, "--input", rows_file(tmp_path / "b.jsonl",
                                                                 range(3000, 4000)),
                        "--metastore", other], capsys, 3)
    assert tree(Path(table_3000)) == before
    assert cat_ids(table_3000, capsys) == list(range(3000))


def test_adopt_continues_write_ids_above_every_id_on_disk(
        table_3000: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = f"sqlite://{tmp_path}/other.sqlite"
    # A higher write id in a partition-less delete delta and a compacted-looking base.
    (Path(table_3000) / "base_0000005").mkdir()
    (Path(table_3000) / "delete_delta_0000007_0000007_0000").mkdir()
    # The data arrives without its metastore (a location belongs to one metastore: adopting
    # it elsewhere while its own lists it is refused, tests/cli/test_bad_input.py).
    for f in Path(table_3000).parent.glob(METASTORE_FILENAME + "*"):
        f.unlink()
    created = ok_json(["create", table_3000, "--schema", DDL, "--metastore", other, "--adopt"],
                      capsys)
    assert created["properties"]["ingest.adopted_max_write_id"] == "7"
    loaded = ok_json(["load", table_3000, "--input", rows_file(tmp_path / "b.jsonl",
                                                               range(3000, 3500)),
                      "--metastore", other], capsys)
    assert loaded["write_id"] == 8
    (Path(table_3000) / "base_0000005").rmdir()
    (Path(table_3000) / "delete_delta_0000007_0000007_0000").rmdir()
    with Metastore.open(other, read_only=True) as store:
        assert store.snapshot(table_3000).high_watermark == 8
    assert cat_ids(table_3000, capsys, "--metastore", other) == list(range(3500))


def test_adopt_refused_when_the_metastore_already_lists_the_table(
        table_3000: str, capsys: pytest.CaptureFixture[str]) -> None:
    error = error_json(["create", table_3000, "--schema", DDL], capsys, 3)
    assert error["type"] == "TableExistsError"
    assert "table default.t already exists" in error["message"]


def test_emptied_metastore_is_not_rebuilt_and_create_needs_adopt(
        table_3000: str, warehouse: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    metastore = warehouse / METASTORE_FILENAME
    metastore.write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        Path(f"{metastore}{suffix}").unlink(missing_ok=True)
    more = rows_file(tmp_path / "b.jsonl", range(3000, 4000))
    error = error_json(["load", table_3000, "--input", more], capsys, 3)
    assert error["type"] == "MetastoreError"
    assert f"{metastore}: the file is empty (0 bytes)" in error["message"]
    assert "--adopt" in error["hint"]
    assert metastore.stat().st_size == 0
    # Following the hint without --adopt is refused; with it, ids continue above 1.
    error = error_json(["create", table_3000, "--schema", DDL], capsys, 3)
    assert "already holds ACID data" in error["message"]
    ok_json(["create", table_3000, "--schema", DDL, "--adopt"], capsys)
    assert ok_json(["load", table_3000, "--input", more], capsys)["write_id"] == 2
    assert cat_ids(table_3000, capsys) == list(range(4000))
    code, out, err = run(["verify", table_3000], capsys)
    assert code == 0, out + err


def test_a_write_into_an_existing_directory_fails_before_writing_and_keeps_it(
        table_3000: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The metastore of the issue: it knows the table but not the data (no --adopt).
    other = f"sqlite://{tmp_path}/other.sqlite"
    with Metastore.open(other) as store, Metastore.open(
            f"sqlite://{Path(table_3000).parent}/{METASTORE_FILENAME}") as mine:
        store.create_table(mine.get_table(table_3000))
    before = tree(Path(table_3000))
    error = error_json(["load", table_3000, "--input", rows_file(tmp_path / "b.jsonl",
                                                                 range(3000, 4000)),
                        "--metastore", other], capsys, 3)
    assert error["type"] == "IngestError"
    assert error["message"].startswith(
        f"Cannot write {table_3000}/delta_0000001_0000001_0000: the directory already exists")
    assert "--adopt" in error["hint"]
    assert tree(Path(table_3000)) == before
    assert cat_ids(table_3000, capsys) == list(range(3000))
    with Metastore.open(other, read_only=True) as store:
        assert store.write_id_states(table_3000) == {1: "aborted"}



# -- item 12: a table that cannot hold rows, or cannot be written, is refused at create ----


def test_create_with_only_partition_columns_is_refused(
        warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = warehouse / "T"
    error = error_json(["create", str(table), "--schema", "dt STRING", "--partitioned-by",
                        "dt"], capsys, 2)
    assert error["type"] == "ConfigError"
    assert error["message"] == (f"Cannot create table default.t at file://{table}: every "
                                "column is a partition column (dt); a table needs at least "
                                "one data column")
    assert error["hint"] == "add a data column to --schema, e.g. --schema 'id BIGINT, dt STRING'"
    error = error_json(["create", str(table), "--schema", "a STRING, b STRING",
                        "--partitioned-by", "a,b"], capsys, 2)
    assert "every column is a partition column (a, b)" in error["message"]
    assert list(warehouse.iterdir()) == []


@pytest.mark.parametrize(("prop", "found"), [
    ("orc.compress=BOGUS", "names no ORC codec: expected one of NONE, ZLIB, SNAPPY, LZ4, ZSTD"),
    ("transactional=false", "is not supported: ingest writes full-ACID tables"),
    ("transactional_properties=insert_only", "is not supported"),
    ("bucketing_version=1", "is not supported"),
    ("ingest.adopted_max_write_id=9", "is reserved"),
])
def test_create_refuses_bad_properties_and_writes_nothing(
        warehouse: Path, prop: str, found: str, capsys: pytest.CaptureFixture[str]) -> None:
    error = error_json(["create", str(warehouse / "T"), "--schema", DDL, "--property", prop],
                       capsys, 2)
    assert error["type"] == "ConfigError"
    assert f"Cannot create table default.t: table property {prop.split('=')[0]}=" in \
        error["message"]
    assert found in error["message"]
    assert list(warehouse.iterdir()) == []


def test_known_properties_are_normalised_and_others_kept(
        warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    created = ok_json(["create", str(warehouse / "T"), "--schema", DDL, "--property",
                       "orc.compress=snappy", "--property", "comment=raw events",
                       "--property", "transactional=TRUE"], capsys)
    assert len(created["properties"].pop("ingest.location_token")) == 32
    assert created["properties"] == {"orc.compress": "SNAPPY", "comment": "raw events",
                                     "transactional": "true", "bucketing_version": "2"}


def test_alter_changes_a_property_validated_as_create_does(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(warehouse / "T")
    ok_json(["create", table, "--schema", DDL], capsys)
    # A table stored with a bad codec (by an older ingest) fails every load ...
    metastore = f"sqlite://{warehouse}/{METASTORE_FILENAME}"
    with Metastore.open(metastore) as store:
        store.set_properties(table, {"orc.compress": "BOGUS"})
    rows = rows_file(tmp_path / "a.jsonl", range(5))
    error = error_json(["load", table, "--input", rows], capsys, 2)
    assert f"`ingest alter file://{table} --property orc.compress=ZLIB`" in error["hint"]
    # ... until `ingest alter` fixes it; a bad value is refused the same way as at create.
    error = error_json(["alter", table, "--property", "orc.compress=BOGUS"], capsys, 2)
    assert error["message"] == ("Cannot alter table default.t: table property "
                                "orc.compress='BOGUS' names no ORC codec: expected one of "
                                "NONE, ZLIB, SNAPPY, LZ4, ZSTD")
    altered = ok_json(["alter", table, "--property", "orc.compress=lz4"], capsys)
    assert altered["changed"] == [{"key": "orc.compress", "old": "BOGUS", "new": "LZ4"}]
    assert altered["properties"]["orc.compress"] == "LZ4"
    assert ok_json(["alter", table, "--property", "orc.compress=LZ4"], capsys)["changed"] == []
    loaded = ok_json(["load", table, "--input", rows], capsys)
    from ingest.acid import inspect_bucket_file
    tail = inspect_bucket_file(loaded["files"][0]).tail
    assert tail is not None and tail.compression.upper() == "LZ4"
    code, out, err = run(["alter", table, "--property", "comment=x"], capsys)
    assert code == 0 and out == "Altered table default.t: comment (unset) -> x\n", err


def test_alter_usage_and_missing_table(warehouse: Path, capsys: pytest.CaptureFixture[str],
                                       ) -> None:
    code, out, err = run(["alter", str(warehouse / "T")], capsys)
    assert code == 2 and "give --property, --add-columns, --change-column" in err
    error = error_json(["alter", str(warehouse / "T"), "--property", "a=b"], capsys, 3)
    assert error["type"] == "TableNotFoundError"
    error = error_json(["alter", str(warehouse / "T"), "--property", "novalue"], capsys, 2)
    assert error["message"] == "Cannot use --property 'novalue': expected KEY=VALUE"
    code, out, err = run(["alter", "--help"], capsys)
    assert code == 0 and "Changes the metastore only, never a data file" in out
    assert "ingest alter warehouse/events --property orc.compress=SNAPPY" in out
    code, out, err = run(["--help"], capsys)
    assert "alter" in out


# -- item 13: misuse gets a clear error, and nothing is left behind ------------------------


def test_create_on_a_regular_file_is_a_clear_error_leaving_nothing(
        warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = warehouse / "afile.txt"
    afile.write_text("not a table\n")
    error = error_json(["create", str(afile), "--schema", DDL], capsys, 2)
    assert error["type"] == "ConfigError"
    assert error["message"] == (f"Cannot create table default.afile_txt at file://{afile}: it "
                                "is a file, not a directory")
    error = error_json(["create", str(afile / "T"), "--schema", DDL], capsys, 2)
    assert "the path cannot be a directory: Not a directory" in error["message"]
    assert sorted(p.name for p in warehouse.iterdir()) == ["afile.txt"]
    assert afile.read_text() == "not a table\n"


@pytest.mark.parametrize("parents", [("a", "b"), ()], ids=["new-parents", "existing-parent"])
def test_create_with_a_300_character_name_is_a_clear_error_leaving_nothing(
        warehouse: Path, parents: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    # An existing parent once failed earlier, reading the owner marker (exit 4).
    long = warehouse.joinpath(*parents) / ("x" * 300)
    error = error_json(["create", str(long), "--schema", DDL], capsys, 2)
    assert error["type"] == "ConfigError"
    assert error["message"].endswith(
        "the path cannot be a directory: File name too long (its longest name has 300 bytes)")
    assert list(warehouse.iterdir()) == []  # neither a/b nor a metastore


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "soon"])
@pytest.mark.parametrize("command", ["verify", "recover"])
def test_txn_timeout_must_be_finite_and_not_negative(
        table_3000: str, command: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(Path(table_3000).parent)
    code, out, err = run([command, table_3000, "--txn-timeout-s", value], capsys)
    assert (code, out) == (2, "")
    assert f"Invalid value for '--txn-timeout-s': '{value}'" in err
    assert tree(Path(table_3000).parent) == before


def test_txn_timeout_is_checked_by_the_table_layer_too(table_3000: str) -> None:
    from ingest.errors import ConfigError
    from ingest.table import open_table
    from ingest.table.maintain import recover_table_with_metastore, verify_table
    for call in (verify_table, recover_table_with_metastore):
        with pytest.raises(ConfigError, match="must be a finite number of seconds"):
            call(open_table(table_3000), txn_timeout_s=float("nan"))


@pytest.mark.parametrize(("snapshot", "field"), [
    ("default.t:1:garbage::", "field minOpenWriteId 'garbage' is not a non-negative integer"),
    ("default.t:x::", "field highWatermark 'x' is not a non-negative integer"),
    ("default.t:-1::", "field highWatermark '-1' is not a non-negative integer"),
    ("default.t:5:2:2,x:", "field open write ids '2,x' holds 'x'"),
    ("default.t:5::: 3;4", "field aborted write ids ' 3;4' holds ' 3;4'"),
    ("default.t:5:2:2:2", "field aborted write ids '2' also lists open write ids [2]"),
    ("default.t:5:::9", "field aborted write ids '9' holds [9] above the highWatermark 5"),
    ("default.t:5:3:2:", "field minOpenWriteId '3' is not the smallest open write id 2"),
    ("default.t:5:1::", "field minOpenWriteId '1' names an open write id but none is listed"),
    (":5::", "field table '' is empty"),
    ("default.t:5::::extra", "expected 5 fields"),
])
def test_garbage_in_a_snapshot_field_is_refused_naming_it(
        table_3000: str, snapshot: str, field: str, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("cat", "status"):
        error = error_json([command, table_3000, "--snapshot", snapshot], capsys, 2)
        assert error["type"] == "ConfigError"
        assert error["message"].startswith(f"Cannot parse write-id list {snapshot!r}: ")
        assert field in error["message"], error["message"]


def test_valid_snapshot_strings_still_read(table_3000: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert len(cat_ids(table_3000, capsys, "--snapshot", "default.t:1::")) == 3000
    assert len(cat_ids(table_3000, capsys, "--snapshot",
                       f"default.t:1:{2**63 - 1}::")) == 3000
    assert cat_ids(table_3000, capsys, "--snapshot", "default.t:1:1:1:") == []
    assert cat_ids(table_3000, capsys, "--snapshot", "default.t:1:::1") == []


@pytest.mark.parametrize("args", [
    ["--schema", "id BIGINT, row__id STRING"],
    ["--schema", "id BIGINT, ROW__ID STRING"],
    ["--schema", "id BIGINT, Row__Id BIGINT"],
    ["--schema", "id BIGINT", "--partitioned-by", "row__id"],
])
def test_a_column_named_row_id_is_refused(warehouse: Path, args: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    error = error_json(["create", str(warehouse / "T"), *args], capsys, 2)
    assert error["type"] == "ConfigError"
    assert "is reserved by Hive: ROW__ID" in error["message"]
    assert error["hint"] == "rename the column, e.g. to row_id"
    assert list(warehouse.iterdir()) == []


def test_cat_row_id_is_the_real_one(table_3000: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["cat", table_3000, "--row-id", "--limit", "2"], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["row__id"] for r in rows] == [{"writeid": 1, "bucketid": 536870912, "rowid": 0},
                                            {"writeid": 1, "bucketid": 536870912, "rowid": 1}]


@pytest.mark.parametrize("command", [["cat"], ["status"], ["recover", "--dry-run"]])
def test_a_metastore_named_with_metastore_that_is_missing_is_an_error_not_a_fallback(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        command: list[str]) -> None:
    """Without --metastore a table no metastore lists is read from its files (with a
    warning); with it, the named metastore must exist and list the table."""
    table = str(warehouse / "events")
    ok_json(["create", table, "--schema", "id BIGINT"], capsys)
    missing = f"sqlite://{tmp_path}/elsewhere/meta.sqlite"
    code, out, err = run([command[0], table, *command[1:], "--metastore", missing], capsys)
    assert (code, out) == (3, "")
    assert f"Cannot open metastore {tmp_path}/elsewhere/meta.sqlite: file does not exist" in err
    other = f"sqlite://{tmp_path}/other.sqlite"
    ok_json(["create", str(tmp_path / "unrelated"), "--schema", "id BIGINT",
             "--metastore", other], capsys)
    code, out, err = run([command[0], table, *command[1:], "--metastore", other], capsys)
    assert (code, out) == (3, "")
    assert f"Cannot find an ingest table at or above {table}" in err


@pytest.mark.parametrize("command", [["status"], ["cat"], ["create", "--schema", "id BIGINT"]])
def test_a_metastore_url_of_an_unknown_scheme_is_a_usage_error(
        warehouse: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    table = str(warehouse / "events")
    if command[0] != "create":
        ok_json(["create", table, "--schema", "id BIGINT"], capsys)
    error = error_json([command[0], table, *command[1:], "--metastore",
                        "mysql://admin:pw-xyz@db.example/metastore"], capsys, 2)
    assert error["type"] == "ConfigError"
    assert error["message"] == (
        "Cannot open metastore 'mysql://db.example/metastore': scheme 'mysql://' is not "
        "supported; supported schemes: postgres://, postgresql://, postgresql+psycopg://, "
        "sqlite://, thrift://")
    assert "pw-xyz" not in json.dumps(error)
