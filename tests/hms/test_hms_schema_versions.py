"""Schema versions on the Hive Metastore backend (docs/format.md §25): a column change sets
the table parameter `ingest.schema.version` in the same `alter_table_with_cascade`; a read in
progress keeps the columns of its snapshot; a load that began before the change commits its
columns, read afterwards as nulls and widened values."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from hms_server import Server

import ingest
from ingest.table import open_table
from ingest.table.write import create_table
from ingest.table.write.load import load
from ingest.txn import Metastore, hms

pytestmark = pytest.mark.hms


def test_reads_and_writes_across_a_column_change(metastore: Server, tmp_path: Path) -> None:
    db = "v_" + uuid.uuid4().hex[:10]
    location = str(tmp_path / "wh" / "events")
    create_table(location, "id BIGINT, n INT, value STRING", name=f"{db}.events",
                        metastore=metastore.uri)
    for i in range(2):
        load(open_table(location, metastore=metastore.uri),
             pa.table({"id": [i], "n": pa.array([i], pa.int32()),
                       "value": [f"v{i}"]}))
    reader = ingest.open_table(location, metastore=metastore.uri)
    assert reader.definition is not None and reader.definition.schema_version == 0
    batches = reader.scan().to_batches()
    first = next(batches)  # snapshot and columns taken here
    changed: list[int] = []

    def alter_meanwhile(*_: object) -> None:  # the load's transaction is open
        if not changed:
            ingest.open_table(location, metastore=metastore.uri).alter(
                add_columns="note STRING", change_columns=["n BIGINT"])
            changed.append(1)

    load(open_table(location, metastore=metastore.uri),
         pa.table({"id": [5], "n": pa.array([7], pa.int32()), "value": ["old"]}),
         on_progress=alter_meanwhile)
    assert changed
    load(open_table(location, metastore=metastore.uri),
         pa.table({"id": [9], "n": [2**40], "value": ["new"], "note": ["x"]}))
    rest = list(batches)
    assert all(b.schema.names == ["id", "n", "value"] and b.schema.field("n").type == pa.int32()
               for b in [first, *rest])
    assert sorted(r["id"] for b in [first, *rest] for r in b.to_pylist()) == [0, 1]
    with hms.connect(metastore.uri) as conn:
        params = hms.get_table(conn, f"{db}.events").thrift.parameters
        assert params["ingest.schema.version"] == "1"
    with Metastore.open(metastore.uri) as store:
        defn = store.get_table(location)
        assert defn.schema_version == 1 and "ingest.schema.version" not in defn.properties
        with store.read_view(location, agent="test") as view:
            assert view.schema_version == 1
            assert view.row_schema is not None and view.row_schema.names == [
                "id", "n", "value", "note"]
    rows = sorted(reader.to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 0, "n": 0, "value": "v0", "note": None},
                    {"id": 1, "n": 1, "value": "v1", "note": None},
                    {"id": 5, "n": 7, "value": "old", "note": None},
                    {"id": 9, "n": 2**40, "value": "new", "note": "x"}]
