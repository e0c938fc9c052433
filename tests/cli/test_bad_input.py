"""Issue 19 §6: bad input on the command line exits 2 (usage or configuration) or 3 (the
operation failed) with a message naming what was wrong, never 4, and commits nothing."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest
from fsspec.registry import known_implementations
from support import error_json, ok_json
from support import run_cli as run

from ingest.txn import Metastore

DDL = "id BIGINT, v STRING"
ALL_TYPES = ("id BIGINT, s STRING, d DATE, dec DECIMAL(10,2), ts TIMESTAMP, b BOOLEAN, "
             "a ARRAY<INT>, st STRUCT<x:INT>, m MAP<STRING,INT>")
NOT_ID = ["s", "d", "dec", "ts", "b", "a", "st", "m"]


@pytest.fixture
def table(warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """default.t with one committed row."""
    location = str(warehouse / "t")
    ok_json(["create", location, "--schema", DDL], capsys)
    src = tmp_path / "one.jsonl"
    src.write_text('{"id": 1, "v": "a"}\n')
    ok_json(["load", location, "--input", str(src)], capsys)
    return location


def acid_names(location: str) -> list[str]:
    """The table directory's entries but hidden ones (the metastore marker)."""
    return sorted(p.name for p in Path(location).iterdir() if not p.name.startswith("_"))


def cat_rows(location: str, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    code, out, err = run(["cat", location], capsys)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


# -- item 1 ------------------------------------------------------------------------------


def test_load_of_a_csv_with_an_unterminated_quote_exits_3_and_commits_nothing(
        table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "u.csv"
    src.write_text('id,v\n1,"unterminated\n2,b\n')
    error = error_json(["load", table, "--input", str(src)], capsys, 3)
    assert error["type"] == "BadRecordError"
    assert error["message"] == (f"Cannot read input {src}: the quoted field opened on line 2 "
                                "is never closed (the file ends inside it); nothing was loaded")
    assert cat_rows(table, capsys) == [{"id": 1, "v": "a"}]
    assert acid_names(table) == ["delta_0000001_0000001_0000"]


# -- item 2 ------------------------------------------------------------------------------


@pytest.mark.parametrize("name,text", [("only_id.jsonl", '{"id": 1}\n'),
                                       ("only_id.csv", "id\n1\n")])
def test_a_wholly_missing_column_is_refused_for_every_type_unless_asked(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
        text: str) -> None:
    location = str(warehouse / "typed")
    ok_json(["create", location, "--schema", ALL_TYPES], capsys)
    src = tmp_path / name
    src.write_text(text)
    error = error_json(["load", location, "--input", str(src)], capsys, 3)
    assert error["type"] == "SchemaMismatchError"
    assert error["message"].startswith("Cannot load 1 rows into default.typed: column 's' "
                                       "(STRING) is missing; column 'd' (DATE) is missing; ")
    assert error["message"].count(" is missing") == len(NOT_ID)
    assert error["hint"].endswith("; to load NULL into the columns the input lacks, ask for "
                                  "it with `ingest load --missing-columns null` (Python: "
                                  'missing_columns="null")')
    assert not [p for p in Path(location).iterdir() if p.name.startswith("delta_")]
    loaded = ok_json(["load", location, "--input", str(src), "--missing-columns", "null"],
                     capsys)
    assert loaded["rows"] == 1
    assert cat_rows(location, capsys) == [{"id": 1, **dict.fromkeys(NOT_ID)}]


# -- item 3 ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["cat", "status"])
def test_a_snapshot_of_another_table_exits_2_naming_both(
        table: str, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    error = error_json([command, table, "--snapshot", "default.other:1::"], capsys, 2)
    assert error["type"] == "ConfigError"
    assert error["message"] == ("Cannot read table default.t with snapshot "
                                "'default.other:1::': it is a write-id list of table "
                                "default.other, not of default.t")
    code, out, err = run([command, table, "--snapshot", "default.t:1::"], capsys)
    assert code == 0, err


# -- item 4 ------------------------------------------------------------------------------


@pytest.mark.parametrize("flags", [["--major", "--minor"], ["--minor", "--auto"],
                                   ["--major", "--minor", "--auto"]])
def test_compaction_kinds_exclude_each_other(table: str, flags: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["compact", table, *flags], capsys)
    assert (code, out) == (2, "")
    assert "Error: " + " and ".join(flags) + " exclude each other: give one kind of " \
           "compaction (default --major)" in err
    assert acid_names(table) == ["delta_0000001_0000001_0000"]
    assert ok_json(["compact", table, "--minor", "--dry-run"], capsys)["kind"] == "minor"
    assert ok_json(["compact", table, "--dry-run"], capsys)["kind"] == "major"


# -- item 5 ------------------------------------------------------------------------------


def test_a_400_deep_type_exits_2_naming_the_limit(warehouse: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    deep = "x " + "struct<a:" * 400 + "int" + ">" * 400
    location = warehouse / "deep"
    error = error_json(["create", str(location), "--schema", deep], capsys, 2)
    assert error["type"] == "ConfigError"
    assert error["message"].startswith("Cannot parse schema: the type of column 'x' nests "
                                       "ARRAY/MAP/STRUCT more than 100 levels deep")
    assert not location.exists()


def test_a_400_deep_where_exits_2(table: str, capsys: pytest.CaptureFixture[str]) -> None:
    error = error_json(["delete", table, "--where", "(" * 400 + "id = 1" + ")" * 400],
                       capsys, 2)
    assert "nests parentheses and NOTs more than 100 levels deep" in error["message"]
    assert cat_rows(table, capsys) == [{"id": 1, "v": "a"}]


# -- item 6 ------------------------------------------------------------------------------


@pytest.mark.parametrize("item,found", [("endpoint_url", "no ="), ("=x", "an empty KEY")])
def test_malformed_storage_options_exit_2(table: str, item: str, found: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    for location in (table, "s3://bucket/t"):
        error = error_json(["cat", location, "--storage-option", item], capsys, 2)
        assert error["message"] == ("Cannot use --storage-option number 1: expected "
                                    f"KEY=VALUE, got {found}")


@pytest.mark.parametrize("args", [["cat"], ["status"], ["verify"], ["recover"],
                                  ["create", "--schema", DDL]])
def test_an_unknown_url_scheme_exits_2_naming_it(args: list[str],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    error = error_json([args[0], "foo://bucket/t", *args[1:]], capsys, 2)
    assert error["message"] == "Cannot use foo://bucket/t: unknown URL scheme foo://"


def test_stream_with_an_unknown_url_scheme_exits_2_before_contacting_kafka(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["stream", "--table", "foo://bucket/t", "--bootstrap-servers",
                          "127.0.0.1:1", "--topic", "t", "--checkpoint", str(tmp_path / "ck"),
                          "--schema", "id BIGINT"], capsys)
    assert (code, out) == (2, "")
    assert "Error: Cannot use foo://bucket/t: unknown URL scheme foo://" in err
    assert "Kafka" not in err


def _uninstalled_backend() -> tuple[str, str]:
    """A protocol fsspec knows whose package is not installed here: (protocol, package)."""
    for protocol in ("gcs", "abfs", "oss", "webhdfs", "dropbox"):
        package = known_implementations[protocol]["class"].split(".", 1)[0]
        if importlib.util.find_spec(package) is None:
            return protocol, package
    raise AssertionError("every candidate fsspec backend is installed")


@pytest.mark.parametrize("args", [["cat"], ["create", "--schema", DDL]])
def test_a_missing_fsspec_backend_exits_2_naming_the_package(
        args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    protocol, package = _uninstalled_backend()
    url = f"{protocol}://bucket/t"
    error = error_json([args[0], url, *args[1:]], capsys, 2)
    assert error["message"].startswith(f"Cannot use {url}: the {protocol}:// filesystem needs "
                                       f"the Python package {package}, which is not installed")
    assert error["hint"] == f"pip install {package}"


@pytest.mark.parametrize("url", ["s3:///t", "s3://", "s3:///"])
@pytest.mark.parametrize("args", [["cat"], ["load", "--input", "x.jsonl"],
                                  ["create", "--schema", DDL]])
def test_an_s3_url_without_a_bucket_names_the_url(url: str, args: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    error = error_json([args[0], url, *args[1:]], capsys, 2)
    assert error["message"] == (f"Cannot use {url}: the bucket is missing (nothing between "
                                "s3:// and the path)")
    assert "file://" not in json.dumps(error)


def test_a_storage_option_the_filesystem_does_not_take_exits_2(
        capsys: pytest.CaptureFixture[str]) -> None:
    error = error_json(["cat", "s3://bucket/t", "--storage-option", "bogus=1"], capsys, 2)
    assert error["message"] == ("Cannot use s3://bucket/t: storage option 'bogus' is not an "
                                "option of the s3:// filesystem")
    error = error_json(["cat", "s3://bucket/t", "--storage-option", "key=k", "--storage-option",
                        "secret=hush", "--storage-option", "endpoint_url=notaurl"], capsys, 2)
    assert error["message"] == ("Cannot use s3://bucket/t: the s3:// filesystem refused its "
                                "storage options (endpoint_url, key, secret): ValueError: "
                                "Invalid endpoint: notaurl")
    assert "hush" not in json.dumps(error)


# -- item 10: a location belongs to one metastore ----------------------------------------


@pytest.fixture
def three_loads(warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The issue's table: write ids 1..3 committed through the metastore beside it."""
    location = str(warehouse / "t")
    ok_json(["create", location, "--schema", DDL], capsys)
    for i in (1, 2, 3):
        src = tmp_path / f"in{i}.jsonl"
        src.write_text(json.dumps({"id": i, "v": "a"}) + "\n")
        ok_json(["load", location, "--input", str(src)], capsys)
    return location


def test_create_writes_a_hidden_marker_naming_the_metastore(
        three_loads: str, warehouse: Path) -> None:
    marker = json.loads((Path(three_loads) / "_ingest_metastore").read_text())
    assert marker["metastore"] == f"sqlite://{warehouse}/_ingest_metastore.sqlite"
    assert marker["table"] == "default.t"
    with Metastore.open(marker["metastore"], read_only=True) as store:
        assert store.get_table(three_loads).properties["ingest.location_token"] == \
            marker["token"]


@pytest.mark.parametrize("adopt", [["--adopt"], []])
def test_create_through_another_metastore_is_refused_naming_both(
        three_loads: str, warehouse: Path, tmp_path: Path, adopt: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    other = f"sqlite://{tmp_path}/other.sqlite"
    owner = f"sqlite://{warehouse}/_ingest_metastore.sqlite"
    before = tree(three_loads)
    error = error_json(["create", three_loads, "--schema", DDL, "--metastore", other, *adopt],
                       capsys, 2 if adopt else 3)
    assert other in error["message"] or not adopt
    if adopt:
        assert error["message"] == (
            f"Cannot create table default.t at file://{three_loads} in metastore {other}: "
            f"metastore {owner} already lists table default.t; a location belongs to one "
            "metastore, since two would hand out the same write ids")
    assert tree(three_loads) == before
    # Without the marker (a table from before it), the metastore beside it still decides.
    (Path(three_loads) / "_ingest_metastore").unlink()
    error = error_json(["create", three_loads, "--schema", DDL, "--metastore", other,
                        "--adopt"], capsys, 2)
    assert f"metastore {owner} already lists table default.t" in error["message"]
    assert not (tmp_path / "other.sqlite").exists()


def test_an_empty_table_is_not_created_again_in_another_metastore(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = str(warehouse / "empty")
    ok_json(["create", location, "--schema", DDL], capsys)
    other = f"sqlite://{tmp_path}/other.sqlite"
    error = error_json(["create", location, "--schema", DDL, "--metastore", other], capsys, 2)
    assert "already lists table default.empty" in error["message"]


@pytest.mark.parametrize("command", [
    ["load", "--input", "{src}"], ["delete", "--where", "id = 1"], ["clean"],
    ["compact", "--minor"], ["recover"]])
def test_writes_through_a_metastore_that_does_not_own_the_location_are_refused(
        three_loads: str, warehouse: Path, tmp_path: Path, command: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    # Another metastore lists the location without the owner's token: an older ingest
    # registered it there, or someone copied a definition by hand.
    other = f"sqlite://{tmp_path}/other.sqlite"
    owner = f"sqlite://{warehouse}/_ingest_metastore.sqlite"
    with Metastore.open(owner, read_only=True) as mine, Metastore.open(other) as store:
        defn = mine.get_table(three_loads)
        properties = {k: v for k, v in defn.properties.items() if k != "ingest.location_token"}
        store.create_table(dataclasses.replace(defn, properties=properties),
                           next_write_id=4)
    src = tmp_path / "more.jsonl"
    src.write_text('{"id": 4, "v": "other"}\n')
    args = [a.format(src=src) for a in command]
    before = tree(three_loads)
    error = error_json([args[0], three_loads, *args[1:], "--metastore", other], capsys, 2)
    assert error["type"] == "ConfigError"
    assert error["message"] == (
        f"Cannot write table default.t at file://{three_loads} through metastore {other}: the "
        f"location belongs to metastore {owner} (table default.t); a location belongs to one "
        "metastore, since two would hand out the same write ids")
    assert error["hint"] == f"use that metastore: --metastore {owner} (or INGEST_METASTORE)"
    assert tree(three_loads) == before
    with Metastore.open(other, read_only=True) as store:
        assert store.transactions("default.t") == []
    # Through the owner the same command runs.
    code, out, err = run([args[0], three_loads, *args[1:]], capsys)
    assert code == 0, err
    assert [r["id"] for r in cat_rows(three_loads, capsys)] == (
        [2, 3] if args[0] == "delete" else [1, 2, 3, 4] if args[0] == "load" else [1, 2, 3])


def test_a_table_without_a_marker_keeps_working(
        three_loads: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (Path(three_loads) / "_ingest_metastore").unlink()
    src = tmp_path / "more.jsonl"
    src.write_text('{"id": 4, "v": "b"}\n')
    assert ok_json(["load", three_loads, "--input", str(src)], capsys)["write_id"] == 4
    ok_json(["compact", three_loads], capsys)
    assert [r["id"] for r in cat_rows(three_loads, capsys)] == [1, 2, 3, 4]


def tree(location: str) -> dict[str, bytes | None]:
    root = Path(location)
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}


# -- issue 32, item 5: SQLAlchemy's four-slash SQLite URL --------------------------------


def test_a_four_slash_sqlite_metastore_url_works_for_every_command(
        warehouse: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/ms.sqlite"  # tmp_path is absolute: four slashes
    assert url.startswith("sqlite:////")
    location = str(warehouse / "t4")
    ok_json(["create", location, "--schema", DDL, "--metastore", url], capsys)
    src = tmp_path / "one.jsonl"
    src.write_text('{"id": 1, "v": "a"}\n')
    ok_json(["load", location, "--input", str(src), "--metastore", url], capsys)
    code, out, err = run(["cat", location, "--metastore", url], capsys)
    assert (code, [json.loads(line) for line in out.splitlines()]) == (
        0, [{"id": 1, "v": "a"}]), err
    assert ok_json(["status", location, "--metastore", url], capsys)
    assert ok_json(["verify", location, "--metastore", url], capsys)
    # Both spellings name one metastore: the three-slash one is its owner too.
    three = f"sqlite://{tmp_path}/ms.sqlite"
    assert ok_json(["load", location, "--input", str(src), "--metastore", three],
                   capsys)["write_id"] == 2
