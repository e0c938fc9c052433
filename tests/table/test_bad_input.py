"""Issue 19 §6: bad input to the Python API and the table layer gets a clear error (or, where
the input has one sensible meaning, that meaning), and nothing is committed on a refusal."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import ingest
from ingest.acid import ValidWriteIdList
from ingest.acid.format.schema import MAX_TYPE_NESTING, parse_schema
from ingest.acid.predicate.where import MAX_CONDITION_NESTING, parse_predicate
from ingest.errors import BadRecordError, ConfigError, SchemaMismatchError
from ingest.records import read_input
from ingest.table import open_table
from ingest.table.write import create_table, load_file
from ingest.txn import Metastore, default_metastore_url

ALL_TYPES = ("id BIGINT, s STRING, d DATE, dec DECIMAL(10,2), ts TIMESTAMP, b BOOLEAN, "
             "a ARRAY<INT>, st STRUCT<x:INT>, m MAP<STRING,INT>")
NOT_ID = ["s", "d", "dec", "ts", "b", "a", "st", "m"]


@pytest.fixture
def events(warehouse: Path) -> str:
    location = str(warehouse / "events")
    create_table(location, "id BIGINT, value STRING", partitioned_by=["dt"])
    ingest.open_table(location).load(pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                                               "value": ["a", "b", "c"],
                                               "dt": ["d1", "d1", "d2"]}))
    return location


@pytest.fixture
def typed(warehouse: Path) -> str:
    location = str(warehouse / "typed")
    create_table(location, ALL_TYPES)
    return location


def _write_ids(location: str) -> list[int]:
    with Metastore.open(default_metastore_url(location), read_only=True) as store:
        return [c.write_id for c in store.transactions("default." + Path(location).name)]


# -- item 1: an unterminated CSV quote ---------------------------------------------------


def test_csv_quote_never_closed_is_refused_naming_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "u.csv"
    path.write_text('id,v\n1,"unterminated\n2,b\n')
    with pytest.raises(BadRecordError) as info:
        read_input(str(path), schema=pa.schema([("id", pa.int64()), ("v", pa.string())]))
    assert info.value.message == (
        f"Cannot read input {path}: the quoted field opened on line 2 is never closed (the "
        "file ends inside it); nothing was loaded")
    # A doubled quote inside a quoted value does not close it either.
    path.write_text('id,v\n1,"ok"\n2,"multi\nline"\n3,"ends with ""\n')
    with pytest.raises(BadRecordError, match="opened on line 5 is never closed"):
        read_input(str(path))


def test_csv_quotes_that_close_still_read(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('id,v\n1,"a ""quoted"" word"\n2,"two\nlines"\n3,in"side\n')
    assert read_input(str(path)).column("v").to_pylist() == [
        'a "quoted" word', "two\nlines", 'in"side']


# -- item 2: a column the input lacks ----------------------------------------------------


def test_load_refuses_a_missing_column_of_every_type(typed: str, tmp_path: Path) -> None:
    table = ingest.open_table(typed)
    with pytest.raises(SchemaMismatchError) as info:
        table.load(pa.table({"id": pa.array([1], pa.int64())}))
    for name in NOT_ID:
        assert f"column {name!r} (" in info.value.message
    assert info.value.message.count("is missing") == len(NOT_ID)
    assert "--missing-columns null" in (info.value.hint or "")
    # The same from a JSON Lines file, whose reader used to fill some types with NULL.
    src = tmp_path / "only_id.jsonl"
    src.write_text('{"id": 1}\n')
    with pytest.raises(SchemaMismatchError) as info:
        load_file(open_table(typed), str(src))
    assert info.value.message.count("is missing") == len(NOT_ID)
    assert _write_ids(typed) == []


def test_missing_columns_null_loads_null_into_every_type(typed: str, tmp_path: Path) -> None:
    table = ingest.open_table(typed)
    table.load(pa.table({"id": pa.array([1], pa.int64())}), missing_columns="null")
    src = tmp_path / "only_id.jsonl"
    src.write_text('{"id": 2}\n')
    load_file(open_table(typed), str(src), missing_columns="null")
    got = table.to_arrow().sort_by("id").to_pylist()
    assert got == [{"id": i, **dict.fromkeys(NOT_ID)} for i in (1, 2)]


def test_a_json_key_given_as_null_is_present_not_missing(typed: str, tmp_path: Path) -> None:
    src = tmp_path / "nulls.jsonl"
    src.write_text('{"id": 1, "s": null, "d": null, "dec": null, "ts": null, "b": null, '
                   '"a": null, "st": null, "m": null}\n')
    load_file(open_table(typed), str(src))
    assert ingest.open_table(typed).to_arrow().to_pylist() == [
        {"id": 1, **dict.fromkeys(NOT_ID)}]


def test_missing_columns_takes_only_error_or_null(typed: str) -> None:
    with pytest.raises(ConfigError, match="missing_columns='maybe' is not one of 'error', "
                                          "'null'"):
        ingest.open_table(typed).load([{"id": 1}], missing_columns="maybe")  # type: ignore[arg-type]


# -- item 3: a snapshot of another table -------------------------------------------------


@pytest.mark.parametrize("snapshot", ["default.other:5::",
                                      ValidWriteIdList("default.other", 5)])
def test_a_snapshot_of_another_table_is_refused_naming_both(
        events: str, snapshot: str | ValidWriteIdList) -> None:
    table = ingest.open_table(events)
    for read in (lambda: table.to_arrow(snapshot=snapshot),
                 lambda: list(table.to_batches(snapshot=snapshot)),
                 lambda: table.scan(snapshot=snapshot).plan()):
        with pytest.raises(ConfigError) as info:
            read()
        assert info.value.message == (
            f"Cannot read table default.events with snapshot '{snapshot}': it is a "
            "write-id list of table default.other, not of default.events")


def test_a_snapshot_of_the_table_itself_reads_in_any_case(events: str) -> None:
    table = ingest.open_table(events)
    assert table.to_arrow(snapshot="DEFAULT.Events:1::").num_rows == 3


# -- item 5: nesting limits --------------------------------------------------------------


def _nested(levels: int) -> str:
    return "x " + "struct<a:" * levels + "int" + ">" * levels


def test_types_nest_at_most_the_limit(warehouse: Path) -> None:
    assert len(parse_schema(_nested(MAX_TYPE_NESTING))) == 1
    for levels in (MAX_TYPE_NESTING + 1, 400, 5000):
        with pytest.raises(ConfigError) as info:
            parse_schema(_nested(levels))
        assert info.value.message.startswith(
            "Cannot parse schema: the type of column 'x' nests ARRAY/MAP/STRUCT more than 100 "
            "levels deep")
    deep = "x " + "array<map<string," * 200 + "int" + ">>" * 200
    with pytest.raises(ConfigError, match="more than 100 levels deep"):
        create_table(str(warehouse / "deep"), deep)
    assert not (warehouse / "deep").exists()


def test_conditions_nest_at_most_the_limit_and_long_chains_stay_shallow() -> None:
    schema = pa.schema([("id", pa.int64())])
    n = MAX_CONDITION_NESTING
    assert parse_predicate("(" * n + "id = 1" + ")" * n, schema, option="where")
    for text in ("(" * 400 + "id = 1" + ")" * 400, "NOT " * 400 + "id = 1"):
        with pytest.raises(ConfigError, match="nests parentheses and NOTs more than 100 "
                                              "levels deep"):
            parse_predicate(text, schema, option="where")
    chain = parse_predicate(" OR ".join(f"id = {i}" for i in range(5000)), schema,
                            option="where")
    assert pa.table({"id": [3, 4999, 5000]}).filter(chain.expression).num_rows == 2


# -- item 7: argument checks of the Python API -------------------------------------------


def test_columns_must_be_a_list(events: str) -> None:
    table = ingest.open_table(events)
    for read in (lambda: table.to_arrow(columns="id"), lambda: table.scan("id"),
                 lambda: list(table.to_batches(columns="id")),
                 lambda: table.to_pandas(columns="id")):
        with pytest.raises(ConfigError) as info:
            read()
        assert info.value.message == ("Cannot read table default.events: columns='id' is a "
                                      "string, not a list of column names")
        assert info.value.hint == "pass a list: columns=['id']"


def test_limit_must_not_be_negative_and_zero_reads_no_rows(events: str) -> None:
    table = ingest.open_table(events)
    with pytest.raises(ConfigError, match=r"limit=-1 must be an integer >= 0 \(0 returns no "
                                          r"rows\)"):
        table.to_arrow(limit=-1)
    with pytest.raises(ConfigError, match="limit=1.5 must be an integer"):
        table.to_arrow(limit=1.5)  # type: ignore[arg-type]
    assert table.to_arrow(limit=0).num_rows == 0
    assert table.to_arrow(limit=2).num_rows == 2


def test_no_columns_keeps_the_row_count(events: str) -> None:
    table = ingest.open_table(events)
    got = table.to_arrow(columns=[])
    assert (got.num_rows, got.num_columns) == (3, 0)
    assert sum(b.num_rows for b in table.to_batches(columns=[])) == 3
    assert all(b.num_columns == 0 for b in table.to_batches(columns=[]))
    assert len(table.to_pandas(columns=[])) == 3
    assert table.to_arrow(columns=[], where="value <> 'b'").num_rows == 2
    assert table.to_arrow(columns=[], limit=1).num_rows == 1
    assert table.scan(columns=[]).plan().schema == pa.schema([])
    unpartitioned = ingest.open_table(events + "/dt=d1")
    assert unpartitioned.to_arrow(columns=[]).num_rows == 2
    files_only = ingest.open_table(events, metastore=False)
    assert files_only.to_arrow(columns=[], snapshot="all-on-disk").num_rows == 3


def test_storage_options_must_be_a_dict(events: str) -> None:
    with pytest.raises(ConfigError, match="storage_options='notadict' is not a dict of fsspec "
                                          "options"):
        ingest.open_table(events, storage_options="notadict")  # type: ignore[arg-type]


def test_load_takes_a_list_of_dicts(events: str) -> None:
    table = ingest.open_table(events)
    result = table.load([{"id": 10, "value": "x", "dt": "d3"}, {"id": 11, "value": "y",
                                                                "dt": "d3"}])
    assert result.rows == 2
    assert sorted(table.to_arrow(where="dt = 'd3'").column("id").to_pylist()) == [10, 11]
    with pytest.raises(ConfigError, match="Cannot load rows into default.events: int is not "
                                          "rows Arrow can read"):
        table.load(5)


# -- issue 32, item 3: integers beyond a key's range; alter's column arguments -----------------


@pytest.mark.parametrize("value", [2**63, -2**63 - 1])
def test_an_integer_beyond_bigint_is_refused_naming_the_value_and_range(
        warehouse: Path, value: int) -> None:
    location = str(warehouse / "keyed")
    create_table(location, "id BIGINT, v STRING", buckets=2, bucketed_by=["id"])
    table = ingest.open_table(location)
    expected = (f"Cannot load rows into default.keyed: the value {value} is out of range for "
                f"BIGINT column 'id', whose range is {-2**63} to {2**63 - 1}")
    with pytest.raises(ConfigError, match=expected):
        table.upsert([{"id": 1, "v": "a"}, {"id": value, "v": "b"}], key=["id"])
    with pytest.raises(ConfigError, match=expected):
        table.load([{"id": value, "v": "b"}])
    assert table.to_arrow().num_rows == 0


def test_alter_takes_a_string_or_a_list_for_each_column_argument(warehouse: Path) -> None:
    location = str(warehouse / "alt")
    create_table(location, "id INT, small TINYINT")
    table = ingest.open_table(location)
    result = table.alter(change_columns="id BIGINT")  # one change, not one per character
    assert [(c.column, c.new_type) for c in result.columns_changed] == [("id", "BIGINT")]
    result = table.alter(add_columns=["a STRING", "b DOUBLE COMMENT 'x, y'"])
    assert [(c.kind, c.column, c.new_type) for c in result.columns_changed] == [
        ("add", "a", "STRING"), ("add", "b", "DOUBLE")]
    assert table.schema.names == ["id", "small", "a", "b"]
    with pytest.raises(ConfigError, match=r"add_columns=\['c STRING', 5\] is not a column "
                                          "specification string or a list of them"):
        table.alter(add_columns=["c STRING", 5])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="change_columns=5 is not a column specification"):
        table.alter(change_columns=5)  # type: ignore[arg-type]
    assert table.schema.names == ["id", "small", "a", "b"]
