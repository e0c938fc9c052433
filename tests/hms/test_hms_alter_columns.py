"""Schema evolution on the Hive Metastore backend (docs/format.md §25): `ingest alter`'s
column changes become `alter_table_with_cascade`, on Hive 4.0.1 and 3.1.3; the table and its
partitions get the new columns, and rows loaded before read them as null."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from hms_server import Server

import ingest
from ingest.acid import to_ddl
from ingest.errors import CommitConflictError, ConfigError
from ingest.table.write import create_table
from ingest.txn import Metastore, hms

pytestmark = pytest.mark.hms


def test_columns_change_in_the_hive_metastore_with_cascade(
        metastore: Server, tmp_path: Path) -> None:
    db = "s_" + uuid.uuid4().hex[:10]
    location = str(tmp_path / "wh" / "events")
    create_table(location, "id INT, value STRING", partitioned_by=["dt"],
                 name=f"{db}.events", metastore=metastore.uri)
    table = ingest.open_table(location, metastore=metastore.uri)
    table.load(pa.table({"id": pa.array([1, 2], pa.int32()), "value": ["a", "b"],
                         "dt": ["x", "y"]}))
    result = table.alter(add_columns="note STRING", change_columns=["id BIGINT"])
    assert [(c.kind, c.column) for c in result.columns_changed] == [("widen", "id"),
                                                                   ("add", "note")]
    with hms.connect(metastore.uri) as conn:
        t = hms.get_table(conn, f"{db}.events")
        assert [(c.name, c.type) for c in t.columns] == [
            ("id", "bigint"), ("value", "string"), ("note", "string")]
        parts = conn.call("get_partitions", db, "events", -1)
        assert parts and all([(c.name, c.type) for c in p.sd.cols] == [
            ("id", "bigint"), ("value", "string"), ("note", "string")] for p in parts)
    table.load(pa.table({"id": [2**40], "value": ["c"], "note": ["n"], "dt": ["x"]}))
    rows = ingest.open_table(location, metastore=metastore.uri).to_arrow().to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == [
        {"id": 1, "value": "a", "note": None, "dt": "x"},
        {"id": 2, "value": "b", "note": None, "dt": "y"},
        {"id": 2**40, "value": "c", "note": "n", "dt": "x"}]
    with pytest.raises(ConfigError, match="BIGINT -> INT narrows the type"):
        table.alter(change_columns=["id INT"])
    with Metastore.open(metastore.uri) as store, pytest.raises(CommitConflictError):
        store.alter_columns(f"{db}.events", pa.schema([("id", pa.int32())]),
                            expected=pa.schema([("id", pa.int32()), ("value", pa.string())]))


def test_column_comments_survive_later_changes(metastore: Server, tmp_path: Path) -> None:
    """The comments the metastore holds are the definition's (`ingest alter --json` shows
    them), so a later change writes them back rather than clearing them."""
    db = "s_" + uuid.uuid4().hex[:10]
    location = str(tmp_path / "wh" / "events")
    create_table(location, "id INT COMMENT 'the key', value STRING", name=f"{db}.events",
                 metastore=metastore.uri)
    table = ingest.open_table(location, metastore=metastore.uri)
    table.alter(add_columns="note STRING COMMENT 'it\\'s why'")
    result = ingest.open_table(location, metastore=metastore.uri).alter(
        add_columns="n INT", change_columns=["id BIGINT"])
    assert to_ddl(result.table.row_schema) == (
        "id BIGINT COMMENT 'the key', value STRING, note STRING COMMENT 'it\\'s why', n INT")
    with hms.connect(metastore.uri) as conn:
        assert [(c.name, c.type, c.comment) for c in hms.get_table(conn, f"{db}.events").columns
                ] == [("id", "bigint", "the key"), ("value", "string", None),
                      ("note", "string", "it's why"), ("n", "int", None)]
