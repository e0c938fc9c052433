"""Schema versions per snapshot (docs/format.md §25), on SQLite and PostgreSQL metastores: a
read keeps the columns of its snapshot while ALTERs run, a given older snapshot reads the
columns of its high watermark, and a write that began under older columns commits them (read
later as nulls / widened) or fails its commit when they no longer read as the table's."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import ingest
from ingest.errors import CommitConflictError, TableNotFoundError
from ingest.table import open_table
from ingest.table.core import check_written_columns, check_written_tables
from ingest.table.write import create_table
from ingest.table.write.load import load
from ingest.txn import Metastore

OLD = pa.schema([("id", pa.int64()), ("n", pa.int32()), ("value", pa.string())])
NEW = pa.schema([("id", pa.int64()), ("n", pa.int64()), ("value", pa.string()),
                 ("note", pa.string())])


@pytest.fixture(params=["sqlite", "postgresql"])
def metastore(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/metastore.sqlite"
    return str(request.getfixturevalue("pg_url"))


def _make(tmp_path: Path, metastore: str, loads: int = 3) -> str:
    location = str(tmp_path / "wh" / "t")
    create_table(location, "id BIGINT, n INT, value STRING", metastore=metastore)
    for i in range(loads):  # one delta each: a read streams at least one batch per load
        load(open_table(location, metastore=metastore),
             pa.table({"id": [i], "n": pa.array([i], pa.int32()),
                       "value": [f"v{i}"]}))
    return location


def _alter(location: str, metastore: str) -> None:
    ingest.open_table(location, metastore=metastore).alter(
        add_columns="note STRING", change_columns=["n BIGINT"])


def test_the_schema_version_counts_column_changes_and_is_kept_per_version(
        tmp_path: Path, metastore: str) -> None:
    location = _make(tmp_path, metastore, loads=1)
    with Metastore.open(metastore) as store:
        assert store.get_table(location).schema_version == 0
        before = store.snapshot(location)
        assert store.snapshot_schema(location, before) == (0, store.get_table(location)
                                                           .row_schema)
    load(open_table(location, metastore=metastore),
         pa.table({"id": [1], "n": pa.array([1], pa.int32()), "value": ["b"]}))
    t = ingest.open_table(location, metastore=metastore)
    t.alter(properties={"orc.compress": "SNAPPY"})  # properties are not a schema version
    assert t.definition is not None and t.definition.schema_version == 0
    _alter(location, metastore)
    t.alter(add_columns="extra DOUBLE")
    with Metastore.open(metastore) as store:
        now = store.get_table(location)
        assert now.schema_version == 2
        assert now.row_schema.names == ["id", "n", "value", "note", "extra"]
        with store.read_view(location, agent="test") as view:
            assert (view.schema_version, view.row_schema.names) == (2, now.row_schema.names)
        # The snapshot taken before both changes still reads the columns as created; one
        # taken now, the newest.
        version, columns = store.snapshot_schema(location, before)
        assert (version, columns.names, columns.field("n").type) == (
            0, ["id", "n", "value"], pa.int32())
        assert store.snapshot_schema(location, store.snapshot(location))[0] == 2
        # Each change is a committed transaction with a write id of its own.
        changes = [i for i in store.transactions(location) if i.agent == "ingest-alter"]
        assert [(i.write_id, i.state, i.reason) for i in changes] == [
            (3, "committed", "ALTER TABLE: schema version 1"),
            (4, "committed", "ALTER TABLE: schema version 2")]
        store.drop_table(location)
        store.create_table(now)
        assert store.get_table(location).schema_version == 0  # no history of the old table


def test_a_read_in_progress_keeps_the_columns_of_its_snapshot(
        tmp_path: Path, metastore: str) -> None:
    location = _make(tmp_path, metastore)
    reader = ingest.open_table(location, metastore=metastore)
    snapshot = reader.snapshot()
    batches = reader.scan().to_batches()
    first = next(batches)  # the snapshot is taken and leased here
    _alter(location, metastore)
    load(open_table(location, metastore=metastore),
         pa.table({"id": [9], "n": [2**40], "value": ["new"], "note": ["x"]}))
    rest = list(batches)
    for batch in [first, *rest]:
        assert batch.schema.names == ["id", "n", "value"]
        assert batch.schema.field("n").type == pa.int32()
    assert sorted(r["id"] for b in [first, *rest] for r in b.to_pylist()) == [0, 1, 2]
    # The same Table object's next read takes a new snapshot with its columns: the new ones.
    rows = sorted(reader.to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows[0] == {"id": 0, "n": 0, "value": "v0", "note": None}
    assert rows[-1] == {"id": 9, "n": 2**40, "value": "new", "note": "x"}
    # The snapshot taken before the change (and before the load that followed it) reads
    # with the columns it had.
    old = reader.to_arrow(snapshot=snapshot)
    assert old.schema.names == ["id", "n", "value"] and old.num_rows == 3
    assert old.schema.field("n").type == pa.int32()


def test_a_writer_that_began_before_a_change_commits_its_columns(
        tmp_path: Path, metastore: str) -> None:
    location = _make(tmp_path, metastore, loads=1)
    altered: list[bool] = []

    def alter_meanwhile(*_: object) -> None:
        if not altered:  # the load's transaction is open, its file being written
            _alter(location, metastore)
            altered.append(True)

    result = load(open_table(location, metastore=metastore),
                  pa.table({"id": [5], "n": pa.array([7], pa.int32()),
                            "value": ["old columns"]}), on_progress=alter_meanwhile)
    assert altered and result.write_id == 2
    table = ingest.open_table(location, metastore=metastore).to_arrow()
    assert table.schema.names == ["id", "n", "value", "note"]
    assert table.schema.field("n").type == pa.int64()
    assert sorted(table.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 0, "n": 0, "value": "v0", "note": None},
        {"id": 5, "n": 7, "value": "old columns", "note": None}]


def test_a_writer_whose_columns_no_longer_read_as_the_tables_fails_its_commit(
        tmp_path: Path, metastore: str) -> None:
    """A change the rules refuse cannot come from `ingest alter`, but a metastore without a
    compare-and-swap on columns (the Hive Metastore) can lose one alter to another; the
    metastore call itself records what it is given, as that race would leave it."""
    location = _make(tmp_path, metastore, loads=1)
    renamed = pa.schema([("id", pa.int64()), ("n", pa.int32()), ("other", pa.string())])

    def replace_columns(*_: object) -> None:
        with Metastore.open(metastore) as store:
            current = store.get_table(location).row_schema
            if current.names != renamed.names:
                store.alter_columns(location, renamed, expected=current)

    with pytest.raises(CommitConflictError) as caught:
        load(open_table(location, metastore=metastore),
             pa.table({"id": [5], "n": pa.array([7], pa.int32()),
                       "value": ["x"]}), on_progress=replace_columns)
    message = caught.value.message
    assert "schema version 0 (id BIGINT, n INT, value STRING)" in message
    assert "schema version 1 (id BIGINT, n INT, other STRING)" in message
    assert "column 3 is 'value' in the files but 'other' in the table" in message
    with Metastore.open(metastore) as store:
        # Write id 3: the change's own committed transaction (it wrote no file).
        assert store.write_id_states(location) == {1: "committed", 2: "aborted",
                                                   3: "committed"}
    assert not list((tmp_path / "wh" / "t").glob("delta_0000002_*"))  # its files removed
    rows = ingest.open_table(location, metastore=metastore).to_arrow().to_pylist()
    assert rows == [{"id": 0, "n": 0, "other": None}]  # by name: 'value' is not 'other'


def test_tables_checked_together_refuse_as_each_checked_alone(
        tmp_path: Path, metastore: str) -> None:
    """`check_written_tables` (a many-table micro-batch's commit) reads every table in one
    call and refuses the first whose columns changed, with the one table's message."""
    locations = [str(tmp_path / "wh" / name) for name in ("a", "b", "c")]
    for location in locations:
        create_table(location, "id BIGINT, n INT, value STRING", metastore=metastore)
    renamed = pa.schema([("id", pa.int64()), ("n", pa.int32()), ("other", pa.string())])
    with Metastore.open(metastore) as store:
        began = store.get_tables(locations)
        written = began[0].row_schema
        for location in locations[1:]:
            store.alter_columns(location, renamed, expected=written)
        writes = [(b.name, [written], b) for b in began]
        with pytest.raises(CommitConflictError) as alone:
            check_written_columns(store, began[1].name, [written], began=began[1],
                                  what="micro-batch 7")
        with pytest.raises(CommitConflictError) as together:
            check_written_tables(store, writes, what="micro-batch 7")
        assert together.value.message == alone.value.message
        assert together.value.hint == alone.value.hint
        assert "to table default.b:" in together.value.message
        check_written_tables(store, writes[:1], what="micro-batch 7")  # unchanged: passes
        # A table with no files written is not read at all.
        check_written_tables(store, [("default.gone", [], began[0]), *writes[:1]],
                             what="micro-batch 7")
        with pytest.raises(TableNotFoundError, match="Cannot find table default.gone"):
            check_written_tables(store, [*writes[:1], ("default.gone", [written], began[0])],
                                 what="micro-batch 7")
