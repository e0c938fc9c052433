"""Schema evolution by Hive's rules (docs/format.md §25): appended columns and widened types
are recorded in the metastore, files written before read under the new schema (our reader,
delete, major and minor compaction, Hive 2.3's reader), and every other change is refused
with the reason and what to do instead, the stored schema unchanged."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as po
import pytest
from compat import javatools
from conftest import require

import ingest
from ingest.acid.format import to_ddl
from ingest.errors import CommitConflictError, ConfigError
from ingest.table import Table
from ingest.table.write import create_table
from ingest.txn import Metastore, default_metastore_url


def _table(tmp_path: Path, ddl: str, **create: object) -> Table:
    location = str(tmp_path / "wh" / "t")
    create_table(location, ddl, **create)  # type: ignore[arg-type]
    return ingest.open_table(location)


def _stored_ddl(table: Table) -> str:
    with Metastore.open(default_metastore_url(table.location), create=False) as store:
        return to_ddl(store.get_table(table.location).row_schema)


def _rows(table: Table) -> list[dict[str, object]]:
    fresh = ingest.open_table(table.location)  # the definition as stored now
    return sorted(fresh.to_arrow().to_pylist(), key=lambda r: r["id"])  # type: ignore[arg-type, return-value]


def test_added_columns_read_as_null_in_old_rows_and_new_loads_write_them(
        tmp_path: Path) -> None:
    t = _table(tmp_path, "id BIGINT, value STRING", partitioned_by=["dt"])
    t.load(pa.table({"id": [1, 2], "value": ["a", "b"], "dt": ["x", "y"]}))
    result = t.alter(add_columns="note STRING COMMENT 'why', score DOUBLE")
    assert [(c.kind, c.column, c.new_type) for c in result.columns_changed] == [
        ("add", "note", "STRING"), ("add", "score", "DOUBLE")]
    assert _stored_ddl(t) == "id BIGINT, value STRING, note STRING COMMENT 'why', score DOUBLE"
    t.load(pa.table({"id": [3], "value": ["c"], "note": ["n"], "score": [0.5], "dt": ["x"]}))
    assert _rows(t) == [
        {"id": 1, "value": "a", "note": None, "score": None, "dt": "x"},
        {"id": 2, "value": "b", "note": None, "score": None, "dt": "y"},
        {"id": 3, "value": "c", "note": "n", "score": 0.5, "dt": "x"}]
    fresh = ingest.open_table(t.location)
    assert fresh.verify().ok  # files of both schemas check against the new one
    # Filters and projections over the new column see old rows as null.
    assert fresh.to_arrow(["id"], where="note = 'n'").column("id").to_pylist() == [3]
    assert sorted(fresh.to_arrow(["id", "note"], where="score IS NULL")
                  .column("id").to_pylist()) == [1, 2]
    # A delete by the new column, and one of an old row.
    assert fresh.delete("note = 'n'").rows_deleted == 1
    assert fresh.delete("id = 1 AND note IS NULL").rows_deleted == 1
    assert [r["id"] for r in _rows(t)] == [2]


def test_widened_types_read_old_values_widened(tmp_path: Path) -> None:
    t = _table(tmp_path, "id INT, small TINYINT, f FLOAT, amount DECIMAL(10,2), "
                         "name VARCHAR(5), code CHAR(3)")
    t.load(pa.table({
        "id": pa.array([1, 2], pa.int32()), "small": pa.array([-128, 127], pa.int8()),
        "f": pa.array([1.5, -2.25], pa.float32()),
        "amount": pa.array([Decimal("12345678.91"), None], pa.decimal128(10, 2)),
        "name": ["ab", "abcde"], "code": ["xyz", "q"]}))
    result = t.alter(change_columns=["id BIGINT", "small SMALLINT", "f DOUBLE",
                                     "amount DECIMAL(12,2)", "name STRING", "code STRING"])
    assert [(c.column, c.old_type, c.new_type) for c in result.columns_changed] == [
        ("id", "INT", "BIGINT"), ("small", "TINYINT", "SMALLINT"), ("f", "FLOAT", "DOUBLE"),
        ("amount", "DECIMAL(10,2)", "DECIMAL(12,2)"), ("name", "VARCHAR(5)", "STRING"),
        ("code", "CHAR(3)", "STRING")]
    # The Table altered reads and loads with the new definition at once.
    assert t.schema.field("id").type == pa.int64()
    t.load(pa.table({"id": [2**40], "small": [300], "f": [1e300],
                     "amount": pa.array([Decimal("1234567890.12")], pa.decimal128(12, 2)),
                     "name": ["longer than five"], "code": ["long code"]}))
    got = ingest.open_table(t.location).to_arrow()
    assert got.schema.field("id").type == pa.int64()
    assert got.schema.field("small").type == pa.int16()
    assert got.schema.field("f").type == pa.float64()
    assert got.schema.field("amount").type == pa.decimal128(12, 2)
    assert _rows(t) == [
        {"id": 1, "small": -128, "f": 1.5, "amount": Decimal("12345678.91"), "name": "ab",
         "code": "xyz"},
        {"id": 2, "small": 127, "f": -2.25, "amount": None, "name": "abcde", "code": "q"},
        {"id": 2**40, "small": 300, "f": 1e300, "amount": Decimal("1234567890.12"),
         "name": "longer than five", "code": "long code"}]
    # Steps one at a time reach the same place: INT -> BIGINT after TINYINT -> SMALLINT -> INT.
    assert t.alter(change_columns=["small INT"]).columns_changed[0].new_type == "INT"
    assert t.alter(change_columns=["small BIGINT"]).columns_changed[0].old_type == "INT"


REST = "ratio DOUBLE, amount DECIMAL(10,2), tags ARRAY<INT>"


@pytest.mark.parametrize(("kwargs", "words", "hint"), [
    ({"columns": f"id BIGINT, {REST}"}, "it drops ['value']", "keep every column"),
    ({"columns": f"id BIGINT, label STRING, {REST}"},
     "it renames or drops ['value'] (new names: ['label'])", "keep every column"),
    ({"change_columns": ["value label STRING"]}, "renaming column value to label",
     "--add-columns \"label STRING\""),
    ({"columns": f"value STRING, id BIGINT, {REST}"}, "reorders the columns",
     "keep the existing order"),
    ({"change_columns": ["id INT"]}, "BIGINT -> INT narrows the type", "add a new column"),
    ({"change_columns": ["ratio FLOAT"]}, "DOUBLE -> FLOAT narrows", "add a new column"),
    ({"change_columns": ["amount DECIMAL(8,2)"]}, "narrows the precision", "add a new column"),
    ({"change_columns": ["amount DECIMAL(12,3)"]}, "changes the scale", "add a new column"),
    ({"change_columns": ["value INT"]}, "STRING -> INT is not a widening", "add a new column"),
    ({"change_columns": ["id DOUBLE"]}, "BIGINT -> DOUBLE is not a widening",
     "add a new column"),
    ({"change_columns": ["tags ARRAY<BIGINT>"]}, "changing a nested type",
     "add a new column"),
    ({"change_columns": ["dt INT"]}, "dt is a partition column", "create a new table"),
    ({"add_columns": "dt STRING"}, "dt is a partition column", "create a new table"),
    ({"add_columns": "VALUE STRING"}, "column VALUE already exists", "choose another name"),
    ({"change_columns": ["missing BIGINT"]}, "it has no column missing", "--add-columns"),
    ({"change_columns": ["id BIGINT, value STRING"]}, "takes one column", "repeat"),
])
def test_every_other_change_is_refused_and_nothing_is_stored(
        tmp_path: Path, kwargs: dict[str, object], words: str, hint: str) -> None:
    ddl = f"id BIGINT, value STRING, {REST}"
    t = _table(tmp_path, ddl, partitioned_by=["dt"])
    with pytest.raises(ConfigError) as info:
        t.alter(**kwargs)  # type: ignore[arg-type]
    assert str(info.value).startswith("Cannot alter the columns of table default.t: ")
    assert words in str(info.value)
    assert hint in (info.value.hint or ""), info.value.hint
    assert _stored_ddl(t) == ddl


def test_a_bucket_column_keeps_its_type(tmp_path: Path) -> None:
    t = _table(tmp_path, "id INT, value STRING", buckets=4, bucketed_by=["id"])
    with pytest.raises(ConfigError, match=r"id is a bucket column: rows are placed in "
                       r"buckets by its value's hash, which differs between INT and BIGINT"):
        t.alter(change_columns=["id BIGINT"])
    # Its other columns still evolve.
    assert t.alter(add_columns="note STRING").columns_changed[0].column == "note"


def test_replace_columns_appends_and_widens(tmp_path: Path) -> None:
    t = _table(tmp_path, "id INT, value STRING")
    t.load(pa.table({"id": pa.array([1], pa.int32()), "value": ["a"]}))
    result = t.alter(columns="ID BIGINT, value STRING, note STRING")
    assert [(c.kind, c.column) for c in result.columns_changed] == [("widen", "id"),
                                                                   ("add", "note")]
    assert _stored_ddl(t) == "id BIGINT, value STRING, note STRING"  # the stored name's case
    assert t.alter(columns="id BIGINT, value STRING, note STRING").columns_changed == ()


def test_a_stale_schema_is_a_commit_conflict(tmp_path: Path) -> None:
    t = _table(tmp_path, "id BIGINT")
    stale = t.definition
    assert stale is not None
    t.alter(add_columns="a STRING")
    with Metastore.open(default_metastore_url(t.location)) as store, \
            pytest.raises(CommitConflictError, match="changed by another process"):
        store.alter_columns(stale.name, pa.schema([*stale.row_schema,
                                                   pa.field("b", pa.string())]),
                            expected=stale.row_schema)
    assert _stored_ddl(t) == "id BIGINT, a STRING"


@pytest.mark.parametrize("kind", ["major", "minor"])
def test_compaction_after_evolution_writes_the_new_schema(tmp_path: Path, kind: str) -> None:
    t = _table(tmp_path, "id INT, value STRING")
    t.load(pa.table({"id": pa.array([1, 2], pa.int32()), "value": ["a", "b"]}))
    t.alter(add_columns="note STRING", change_columns=["id BIGINT"])
    t.load(pa.table({"id": [3], "value": ["c"], "note": ["n"]}))
    t.delete("id = 2")
    before = _rows(t)
    assert before == [{"id": 1, "value": "a", "note": None},
                      {"id": 3, "value": "c", "note": "n"}]
    report = ingest.open_table(t.location).compact(kind)  # type: ignore[arg-type]
    (part,) = [p for p in report.partitions if p.result is not None]
    assert part.result is not None
    assert _rows(t) == before
    assert ingest.open_table(t.location).verify().ok
    out = [f for f in part.result.output_files if "delete_delta" not in f.path]
    assert out
    for f in out:
        with open(tmp_path / "wh" / "t" / f.path, "rb") as fh:
            row = po.ORCFile(fh).schema.field("row").type
        assert [(x.name, x.type) for x in row] == [
            ("id", pa.int64()), ("value", pa.string()), ("note", pa.string())]


@pytest.mark.java
def test_hive_23_reads_the_evolved_table_as_we_do(tmp_path: Path) -> None:
    """Hive 2.3's query path (`OrcInputFormat` splits and readers, the table's columns as its
    schema evolution columns) returns old files' rows with nulls and widened values, as ours
    does, before and after our major compaction. Hive 2.3's raw merger (its compactor's
    reader) converts no types, so it reads only the compacted table, whose files all have
    the new schema; appended columns alone it reads before (the next test)."""
    ok, why = javatools.available()
    require(ok, f"Java and pyspark's jars for the Hive tools ({why})")
    t = _table(tmp_path, "id INT, f FLOAT, amount DECIMAL(10,2)")
    t.load(pa.table({"id": pa.array([1, 2], pa.int32()), "f": pa.array([1.5, 2.5], pa.float32()),
                     "amount": pa.array([Decimal("1.25"), None], pa.decimal128(10, 2))}))
    t.alter(add_columns="note STRING",
            change_columns=["id BIGINT", "f DOUBLE", "amount DECIMAL(12,2)"])
    t.load(pa.table({"id": [2**40], "f": [0.125], "note": ["n"],
                     "amount": pa.array([Decimal("1234567890.12")], pa.decimal128(12, 2))}))
    columns = {"columns": "id,f,amount,note",
               "columns_types": "bigint:double:decimal(12,2):string"}

    def hive_rows(reader: str = "input_format") -> list[dict[str, object]]:
        snapshot = str(ingest.open_table(t.location).snapshot())
        read = javatools.hive_merged_read(tmp_path / "wh" / "t", snapshot, reader=reader,
                                          **columns)
        return sorted((r["row"] for r in read["rows"]), key=lambda r: r["id"])

    def ours() -> list[dict[str, object]]:
        return [{**r, "amount": None if r["amount"] is None else str(r["amount"])}
                for r in _rows(t)]

    expected = [{"id": 1, "f": 1.5, "amount": "1.25", "note": None},
                {"id": 2, "f": 2.5, "amount": None, "note": None},
                {"id": 2**40, "f": 0.125, "amount": "1234567890.12", "note": "n"}]
    assert ours() == expected
    assert hive_rows() == expected
    ingest.open_table(t.location).compact("major")
    assert ours() == expected
    assert hive_rows() == expected
    assert hive_rows("raw_merger") == expected


@pytest.mark.java
def test_hive_23_raw_merger_reads_appended_columns_as_null(tmp_path: Path) -> None:
    ok, why = javatools.available()
    require(ok, f"Java and pyspark's jars for the Hive tools ({why})")
    t = _table(tmp_path, "id BIGINT, value STRING")
    t.load(pa.table({"id": [1, 2], "value": ["a", "b"]}))
    t.alter(add_columns="note STRING")
    t.load(pa.table({"id": [3], "value": ["c"], "note": ["n"]}))
    expected = [{"id": 1, "value": "a", "note": None}, {"id": 2, "value": "b", "note": None},
                {"id": 3, "value": "c", "note": "n"}]
    assert _rows(t) == expected
    snapshot = str(ingest.open_table(t.location).snapshot())
    for reader in ("raw_merger", "input_format"):
        read = javatools.hive_merged_read(tmp_path / "wh" / "t", snapshot, reader=reader,
                                          columns="id,value,note",
                                          columns_types="bigint:string:string")
        assert sorted((r["row"] for r in read["rows"]), key=lambda r: r["id"]) == expected


def test_a_postgresql_metastore_records_the_change_by_compare_and_swap(
        tmp_path: Path, pg_url: str) -> None:
    location = str(tmp_path / "wh" / "t")
    create_table(location, "id INT, value STRING", metastore=pg_url)
    t = ingest.open_table(location, metastore=pg_url)
    t.load(pa.table({"id": pa.array([1], pa.int32()), "value": ["a"]}))
    stale = t.definition
    assert stale is not None
    t.alter(add_columns="note STRING", change_columns=["id BIGINT"])
    with Metastore.open(pg_url) as store:
        assert to_ddl(store.get_table(location).row_schema) == \
            "id BIGINT, value STRING, note STRING"
        with pytest.raises(CommitConflictError, match="changed by another process"):
            store.alter_columns(stale.name, pa.schema([*stale.row_schema,
                                                       pa.field("b", pa.string())]),
                                expected=stale.row_schema)
    t.load(pa.table({"id": [2**40], "value": ["b"], "note": ["n"]}))
    rows = ingest.open_table(location, metastore=pg_url).to_arrow().to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == [
        {"id": 1, "value": "a", "note": None}, {"id": 2**40, "value": "b", "note": "n"}]
