"""The `thrift://` metastore backend (`HiveMetastore`) against a real Hive Metastore 4.0.1: the
behaviour of `tests/txn` that applies to it (tables, transactions, write ids, snapshots), what
it does not keep yet, and its refusals of bad input."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from external import free_port
from hms_server import Server, create_plain_orc_table

from ingest.acid.format.committed import CommittedFile
from ingest.errors import (
    CommitConflictError,
    ConfigError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFormatError,
)
from ingest.txn import Metastore, MetastoreError, TableDefinition, hms

pytestmark = pytest.mark.hms

ROWS = pa.schema([("id", pa.int64()), ("v", pa.string())])


@pytest.fixture
def store(hms4: Server) -> Iterator[Metastore]:
    with Metastore.open(hms4.uri) as opened:
        yield opened


@pytest.fixture
def defn(tmp_path: Path) -> TableDefinition:
    """A partitioned table in a database of its own (created by create_table)."""
    db = "b_" + uuid.uuid4().hex[:10]
    return TableDefinition(f"{db}.events", f"file://{tmp_path}/wh/events", ROWS,
                           partition_columns=("dt",), properties={"orc.compress": "ZLIB"})


def test_thrift_urls_open_the_hive_metastore_backend(store: Metastore, hms4: Server) -> None:
    assert type(store).__name__ == "HiveMetastore"
    assert store.location == hms4.uri
    caps = store.capabilities
    assert (caps.committed_files, caps.reader_leases, caps.compaction_history,
            caps.visibility_suffix) == (True, True, True, True)
    with Metastore.open(hms4.uri, read_only=True) as read_only:
        assert read_only.capabilities.reader_leases is False  # it changes nothing there


def test_create_find_and_list_map_back_to_the_definition(store: Metastore,
                                                         defn: TableDefinition) -> None:
    stored = store.create_table(defn)
    assert (stored.name, stored.location) == (defn.name, defn.location)
    assert stored.row_schema.names == ["id", "v"]
    assert stored.partition_columns == ("dt",)
    assert stored.properties["orc.compress"] == "ZLIB"
    assert stored.properties["transactional"] == "true"
    assert stored.properties["transactional_properties"] == "default"
    assert store.get_table(defn.name).location == defn.location
    assert store.get_table(defn.location).name == defn.name  # by location too
    assert defn.name in [t.name for t in store.list_tables()]
    with pytest.raises(TableExistsError):
        store.create_table(defn)
    assert store.find_table(defn.name.split(".")[0] + ".nope") is None


def test_a_location_found_again_is_the_table_that_lies_there_now(
        store: Metastore, defn: TableDefinition) -> None:
    """Finding a table by location remembers the name found there, but a table dropped and
    another created at the same place is found, not the remembered name."""
    store.create_table(defn)
    assert store.get_table(defn.location).name == defn.name
    assert store.get_table(defn.location).name == defn.name  # the remembered name, checked
    store.drop_table(defn.name)
    assert store.find_table(defn.location) is None
    moved = TableDefinition(defn.name.split(".")[0] + ".renamed", defn.location, ROWS,
                            partition_columns=("dt",))
    store.create_table(moved)
    assert store.get_table(defn.location).name == moved.name


def test_a_table_hive_did_not_take_as_transactional_is_refused_naming_the_property(
        store: Metastore, hms4: Server, tmp_path: Path) -> None:
    db = create_plain_orc_table(hms4.uri, tmp_path)
    with pytest.raises(UnsupportedFormatError, match="property transactional is not set"):
        store.get_table(f"{db}.plain")
    with pytest.raises(UnsupportedFormatError, match="transactional"):
        store.open_transaction(f"{db}.plain")
    with pytest.raises(UnsupportedFormatError, match="transactional"):
        store.begin_compaction(f"{db}.plain", "", "major", agent="a", stale_after_s=60)


def test_commit_abort_and_snapshots(store: Metastore, defn: TableDefinition) -> None:
    store.create_table(defn)
    committed = store.open_transaction(defn, agent="host:1:ingest-test")
    store.heartbeat(committed)
    entry = CommittedFile("dt=2024-01-01/delta_0000001_0000001_0000/bucket_00000",
                          committed.write_id, 100, "0" * 16, 1)
    store.commit(committed, files={defn.name: [entry]})
    assert store.committed_files(defn) == {entry.path: entry}
    aborted = store.open_transaction(defn)
    store.abort(aborted)
    store.abort(aborted)  # aborting an aborted one does nothing
    pending = store.open_transaction(defn, agent="host:1:ingest-open")
    try:
        assert (committed.write_id, aborted.write_id, pending.write_id) == (1, 2, 3)
        ids = store.snapshot(defn)
        assert (ids.high_watermark, ids.open_write_ids, ids.aborted_write_ids) == (3, (3,), (2,))
        assert store.write_id_states(defn) == {1: "committed", 2: "aborted", 3: "open"}
        infos = store.transactions(defn, states=("open", "aborted"))
        assert [(i.txn_id, i.write_id, i.state) for i in infos] == [
            (aborted.txn_id, 2, "aborted"), (pending.txn_id, 3, "open")]
        # A read's lease is a read transaction: no write id, so the snapshot is the same.
        with store.read_view(defn.name, agent="t") as view:
            assert view.lease_id is not None
            assert view.snapshot == ids
            assert view.committed == {entry.path: entry}
        # The commit added its partition to the metastore.
        with hms.connect(store.location) as conn:
            table = hms.get_table(conn, defn.name)
            assert hms.list_partition_names(conn, table) == ["dt=2024-01-01"]
    finally:
        store.abort(pending)
    with pytest.raises(CommitConflictError):
        store.abort(committed)  # it committed
    with pytest.raises(CommitConflictError):
        store.commit(aborted)


def test_two_writers_get_distinct_write_ids(store: Metastore, hms4: Server,
                                            defn: TableDefinition) -> None:
    store.create_table(defn)
    with Metastore.open(hms4.uri) as other:
        a = store.open_transaction(defn)
        b = other.open_transaction(defn)
        assert a.write_id != b.write_id
        other.commit(b)
        store.commit(a)
    assert store.write_id_states(defn) == {1: "committed", 2: "committed"}


def _split_update(txn: object, partition: str) -> list[CommittedFile]:
    w = txn.write_id  # type: ignore[attr-defined]
    return [CommittedFile(f"{partition}/{d}_{w:07d}_{w:07d}_0000/bucket_00000", w, 100,
                          "0" * 16, 1) for d in ("delete_delta", "delta")]


def test_hives_write_set_check_makes_the_later_updater_lose(metastore: Server,
                                                            defn: TableDefinition) -> None:
    """docs/format.md §24 over a Hive Metastore (4.0.1 and 3.1.3): `commit(updated=)`
    registers the write as an UPDATE and asks for the check, so Hive's own write-set check
    at commit_txn aborts the later of two overlapping updaters of one partition; another
    partition's updater commits."""
    with Metastore.open(metastore.uri) as store, Metastore.open(metastore.uri) as other:
        store.create_table(defn)
        a = store.open_transaction(defn)
        b = other.open_transaction(defn)
        c = other.open_transaction(defn)
        store.commit(a, files={defn.name: _split_update(a, "dt=1")}, updated={"dt=1": [0]})
        with pytest.raises(CommitConflictError):
            other.commit(b, files={defn.name: _split_update(b, "dt=1")},
                         updated={"dt=1": [0]})
        other.commit(c, files={defn.name: _split_update(c, "dt=2")}, updated={"dt=2": [0]})
        states = store.write_id_states(defn)
    assert (states[a.write_id], states[b.write_id], states[c.write_id]) == (
        "committed", "aborted", "committed")


def test_a_transaction_batch_is_refused_and_nothing_is_opened(store: Metastore,
                                                             defn: TableDefinition) -> None:
    store.create_table(defn)
    with pytest.raises(ConfigError, match=(
            rf"Cannot allocate 2 write ids at once on {defn.name} in {store.location}: "
            r"transaction batches .* are not supported on a Hive Metastore, .*trino#4044.*"
            r"Doris ignores the _flush_length side files")):
        store.allocate_write_ids(defn, 2)
    assert type(store).refuses_transaction_batches is not None
    store.record_committed_files(defn, [])  # nothing to record: no transaction either
    assert store.committed_files(defn) == {}
    assert store.compactions(defn) == []
    assert store.offset_ranges(defn) == []
    assert store.write_id_states(defn) == {}  # nothing was opened


def test_a_table_outside_the_warehouse_is_refused_with_a_way_out_for_create_and_stream(
        store: Metastore, tmp_path: Path) -> None:
    # `ingest stream` has no --name: the hint must not leave its user with that alone.
    outside = TableDefinition("default.t_" + uuid.uuid4().hex[:10],
                              f"file://{tmp_path}/elsewhere/events", ROWS)
    with pytest.raises(ConfigError, match="managed location or the warehouse") as info:
        store.create_table(outside)
    short = outside.name.split(".", 1)[1]
    assert info.value.hint is not None
    assert f"`ingest create {outside.location} --name {short}_db.{short} --schema ...`" in (
        info.value.hint)
    assert ("`ingest stream` names its table itself, so run that `ingest create` first with "
            "the stream's --schema, then stream into the same --table") in info.value.hint


def test_an_unknown_table_is_not_found(store: Metastore) -> None:
    with pytest.raises(TableNotFoundError, match="nodb_x.nothing"):
        store.open_transaction("nodb_x.nothing")


def test_an_unreachable_port_is_a_clear_error() -> None:
    uri = f"thrift://127.0.0.1:{free_port()}"
    with pytest.raises(MetastoreError, match=f"Cannot reach the Hive Metastore at {uri}"):
        Metastore.open(uri)
