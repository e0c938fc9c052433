"""One behaviour suite run over every store kind (the `store` fixture; tests/txn/conftest.py
says how a kind joins and what `requires` means)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from ingest.acid.format.writeids import ValidWriteIdList
from ingest.errors import (
    CommitConflictError,
    ConfigError,
    IngestError,
    TableExistsError,
    TableNotFoundError,
)
from ingest.txn import (
    Metastore,
    OffsetRange,
    SinkProgress,
    TableDefinition,
    Transaction,
)

# -- tables -------------------------------------------------------------------------------


@pytest.mark.requires("arrow_schema", "private")
def test_create_get_round_trips_definition_exactly(store: Metastore, table_def) -> None:
    defn = table_def(
        "Sales.Orders",
        "file:///tmp/wh/orders/",
        partition_columns=["dt", "hour"],
        bucket_count=4,
        bucket_columns=["id"],
        properties={"owner": "me", "transactional": "false"},
    )
    store.create_table(defn)
    for key in ("sales.orders", "SALES.ORDERS", "/tmp/wh/orders", "file:///tmp/wh/orders", defn):
        got = store.get_table(key)
        assert got == defn
        assert got.row_schema.equals(defn.row_schema, check_metadata=True)
    assert got.name == "sales.orders"
    assert got.location == "file:///tmp/wh/orders"
    assert got.partition_columns == ("dt", "hour")
    assert got.bucket_columns == ("id",)
    assert got.properties == {"owner": "me", "transactional": "true", "bucketing_version": "2"}


@pytest.mark.requires("private")  # bare names go to `default`, shared on a server
def test_bare_name_goes_to_default_database(store: Metastore, events: TableDefinition) -> None:
    assert events.name == "default.events"
    assert store.get_table("events") == events
    assert store.get_table("memory:///wh/events") == events


def test_create_twice_by_name_or_location_fails(
    store: Metastore, events: TableDefinition, backend: Any
) -> None:
    with pytest.raises(TableExistsError, match=f"{events.name}.* exists"):
        store.create_table(backend.table("events", backend.location("elsewhere/events")))
    with pytest.raises(TableExistsError) as info:
        store.create_table(backend.table("other", events.location))
    assert info.value.table == events.name


def test_missing_table(store: Metastore, backend: Any) -> None:
    nope = backend.name("nope")
    assert store.find_table(nope) is None
    with pytest.raises(TableNotFoundError, match=f"Cannot find table {nope}") as info:
        store.get_table(nope)
    assert info.value.table == nope
    assert "ingest create" in str(info.value)
    with pytest.raises(TableNotFoundError):
        store.open_transaction(backend.location("nope"))
    with pytest.raises(TableNotFoundError):
        store.snapshot(nope)


def test_list_and_drop(store: Metastore, events: TableDefinition, dead_letter,
                       backend: Any) -> None:
    assert backend.own(store.list_tables()) == [events.name, dead_letter.name]
    txn = store.open_transaction(events)
    with pytest.raises(CommitConflictError, match="are open"):
        store.drop_table(events)
    store.commit(txn, sink=SinkProgress("s", 0))
    store.drop_table(events.name)
    assert backend.own(store.list_tables()) == [dead_letter.name]
    assert store.committed_write_id("s", 0, table=dead_letter) is None
    with pytest.raises(TableNotFoundError):
        store.drop_table(events.name)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"partition_columns": ("id",)}, "also row columns"),
        ({"bucket_count": 2}, "give both"),
        ({"bucket_count": 2, "bucket_columns": ("nope",)}, "not row columns"),
        ({"bucket_count": -1}, "bucket_count is -1"),
        ({"partition_columns": ("dt", "dt")}, "repeated"),
    ],
)
def test_bad_definitions(table_def, kw: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        table_def("t", **kw)


def test_bad_table_name(table_def) -> None:
    with pytest.raises(ConfigError, match="expected '<table>'"):
        table_def("a.b.c", "memory://x/y")


# -- write ids and snapshots --------------------------------------------------------------


def test_empty_table_snapshot(store: Metastore, events: TableDefinition) -> None:
    snap = store.snapshot(events)
    assert snap == ValidWriteIdList(events.name, 0)
    assert snap.to_hive_string() == f"{events.name}:0:9223372036854775807::"


def test_snapshot_in_hives_string_form(store: Metastore, events: TableDefinition) -> None:
    txns = [store.open_transaction(events) for _ in range(5)]
    assert [t.write_id for t in txns] == [1, 2, 3, 4, 5]
    store.commit(txns[0])
    store.abort(txns[1])
    store.commit(txns[3])
    snap = store.snapshot(events.name)
    assert snap.to_hive_string() == f"{events.name}:5:3:3,5:2"
    assert ValidWriteIdList.from_hive_string(snap.to_hive_string()) == snap
    assert [w for w in range(1, 7) if snap.is_valid(w)] == [1, 4]
    store.commit(txns[2])
    store.abort(txns[4])
    assert store.snapshot(events).to_hive_string() == (
        f"{events.name}:5:9223372036854775807::2,5"
    )
    assert store.write_id_states(events) == {
        1: "committed", 2: "aborted", 3: "committed", 4: "committed", 5: "aborted",
    }


def test_txn_ids_are_global_write_ids_per_table(
    store: Metastore, events: TableDefinition, dead_letter: TableDefinition, backend: Any
) -> None:
    a = store.open_transaction(events, agent="host:1:sink")
    b = store.open_transaction(dead_letter)
    c = store.open_transaction(events)
    assert a.txn_id < b.txn_id < c.txn_id
    if "private" in backend.capabilities:  # a shared server's ids were used before
        assert (a.txn_id, b.txn_id, c.txn_id) == (1, 2, 3)
    assert (a.write_id, b.write_id, c.write_id) == (1, 1, 2)
    assert a.table == events.name and a.agent == "host:1:sink"
    assert a.opened_at == pytest.approx(1_000_000.0)


@pytest.mark.requires("transaction_batches")
def test_batch_of_consecutive_write_ids(store: Metastore, events: TableDefinition) -> None:
    store.commit(store.open_transaction(events))
    batch = store.allocate_write_ids(events, 4, agent="streaming")
    assert [t.write_id for t in batch] == [2, 3, 4, 5]
    assert len({t.txn_id for t in batch}) == 4
    store.commit(batch[0])
    store.abort(batch[1])
    store.commit(batch[2])
    assert store.snapshot(events).to_hive_string() == f"{events.name}:5:5:5:3"
    with pytest.raises(ConfigError):
        store.allocate_write_ids(events, 0)


def test_one_transaction_over_two_tables(
    store: Metastore, events: TableDefinition, dead_letter: TableDefinition
) -> None:
    store.commit(store.open_transaction(dead_letter))
    txn = store.open_transaction(events, also=[dead_letter], agent="sink")
    assert txn.write_ids == {events.name: 1, dead_letter.name: 2}
    assert txn.write_id_for(dead_letter.name.upper()) == 2
    assert txn.write_id_for(events) == 1
    store.commit(txn, sink=SinkProgress("q", 7), offsets=[OffsetRange("t", 0, 0, 5)])
    assert store.snapshot(events).to_hive_string() == f"{events.name}:1:9223372036854775807::"
    assert store.snapshot(dead_letter).high_watermark == 2
    assert store.offset_ranges(dead_letter) == [(2, OffsetRange("t", 0, 0, 5))]
    with pytest.raises(ConfigError, match="has no write id for table default.other"):
        txn.write_id_for("other")


def test_allocate_write_id_adds_a_table_to_an_open_transaction(
    store: Metastore, events: TableDefinition, dead_letter: TableDefinition
) -> None:
    txn = store.open_transaction(events)
    both = store.allocate_write_id(txn, dead_letter)
    assert both.other_write_ids == ((dead_letter.name, 1),)
    assert store.allocate_write_id(both, dead_letter) == both
    assert store.snapshot(dead_letter).open_write_ids == (1,)
    store.abort(both)
    assert store.snapshot(dead_letter).aborted_write_ids == (1,)
    assert store.snapshot(events).aborted_write_ids == (1,)
    with pytest.raises(CommitConflictError, match="it is aborted"):
        store.allocate_write_id(txn, dead_letter)
    with pytest.raises(ConfigError, match="repeated"):
        store.open_transaction(events, also=[events.name])


# -- commit / abort / heartbeat -----------------------------------------------------------


def test_commit_is_compare_and_swap(store: Metastore, events: TableDefinition) -> None:
    txn = store.open_transaction(events)
    store.commit(txn)
    with pytest.raises(CommitConflictError,
                       match=rf"Cannot commit transaction {txn.txn_id} .*it is committed"):
        store.commit(txn)
    with pytest.raises(CommitConflictError, match="it is committed"):
        store.abort(txn)
    other = store.open_transaction(events)
    store.abort(other)
    store.abort(other)  # idempotent
    with pytest.raises(CommitConflictError, match="it is aborted") as info:
        store.commit(other)
    assert "write it again" in str(info.value)


def test_commit_of_unknown_transaction(store: Metastore, events: TableDefinition) -> None:
    ghost = Transaction(txn_id=10**9, table=events.name, write_id=9, opened_at=0.0)
    with pytest.raises(CommitConflictError, match=f"{ghost.txn_id}.*(does not exist|no longer)"):
        store.commit(ghost)


@pytest.mark.requires("clock")
def test_timed_out_transactions_are_aborted(
    store: Metastore, events: TableDefinition, clock
) -> None:
    old = store.open_transaction(events, agent="dead-writer")
    clock.advance(100)
    alive = store.open_transaction(events)
    clock.advance(250)
    store.heartbeat(alive)
    clock.advance(100)
    aborted = store.abort_timed_out(300)
    assert aborted == [old]
    assert store.abort_timed_out(300) == []
    with pytest.raises(CommitConflictError, match=r"timed out: no heartbeat for 450\.0 s"):
        store.commit(old)
    with pytest.raises(CommitConflictError, match="it is aborted"):
        store.heartbeat(old)
    store.commit(alive)
    assert store.snapshot(events).to_hive_string() == f"{events.name}:2:9223372036854775807::1"
    (info,) = store.transactions(events, states=["aborted"])
    assert (info.txn_id, info.agent, info.state) == (old.txn_id, "dead-writer", "aborted")
    assert info.reason is not None and "timeout 300 s" in info.reason


@pytest.mark.requires("txn_history")
def test_context_manager_commits_or_aborts(store: Metastore, events: TableDefinition) -> None:
    with store.transaction(events, agent="cm", sink=SinkProgress("s", 1),
                           offsets=[OffsetRange("t", 0, 5, 9)]) as txn:
        assert store.snapshot(events).open_write_ids == (txn.write_id,)
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction(events) as failed:
            raise RuntimeError("boom")
    states = {i.write_id: (i.state, i.reason) for i in store.transactions(events)}
    assert states[txn.write_id] == ("committed", None)
    assert states[failed.write_id] == ("aborted", "aborted on error: RuntimeError: boom")
    assert store.committed_write_id("s", 1, table=events) == txn.write_id


def test_context_manager_keeps_original_error_when_abort_fails(
    store: Metastore, events: TableDefinition
) -> None:
    with pytest.raises(RuntimeError, match="boom") as info:
        with store.transaction(events) as txn:
            store.commit(txn)
            raise RuntimeError("boom")
    assert any("Also failed to abort" in note for note in info.value.__notes__)


# -- sink progress and offsets ------------------------------------------------------------


def test_sink_progress_is_idempotent(store: Metastore, events: TableDefinition) -> None:
    assert store.last_committed_batch("sink-a", table=events) is None
    first = store.open_transaction(events)
    store.commit(first, sink=SinkProgress("sink-a", 0))
    replay = store.open_transaction(events)
    with pytest.raises(CommitConflictError, match="batch 0 of sink 'sink-a' was already committed"):
        store.commit(replay, sink=SinkProgress("sink-a", 0))
    # The refused commit changed nothing: the replay is still open and can be aborted.
    assert store.snapshot(events).open_write_ids == (replay.write_id,)
    store.abort(replay)
    assert store.committed_write_id("sink-a", 0, table=events) == first.write_id
    nxt = store.open_transaction(events)
    store.commit(nxt, sink=SinkProgress("sink-a", 1))
    store.commit(store.open_transaction(events), sink=SinkProgress("sink-b", 0))
    assert store.last_committed_batch("sink-a", table=events) == 1
    assert store.committed_write_id("sink-a", 1, table=events) == nxt.write_id
    assert store.committed_write_id("sink-a", 2, table=events) is None


def test_offsets_recorded_with_commit_only(store: Metastore, events: TableDefinition) -> None:
    a = store.open_transaction(events)
    store.commit(a, offsets=[OffsetRange("t", 1, 10, 20), OffsetRange("t", 0, 0, 10)])
    b = store.open_transaction(events)
    store.commit(b, sink=SinkProgress("x", 0), offsets=[OffsetRange("t", 0, 10, 30)])
    refused = store.open_transaction(events)
    with pytest.raises(CommitConflictError):
        store.commit(refused, sink=SinkProgress("x", 0), offsets=[OffsetRange("t", 0, 30, 40)])
    assert store.offset_ranges(events) == [
        (1, OffsetRange("t", 0, 0, 10)),
        (1, OffsetRange("t", 1, 10, 20)),
        (2, OffsetRange("t", 0, 10, 30)),
    ]
    with pytest.raises(ConfigError, match="from_offset <= until_offset|0 <= from <= until"):
        store.commit(refused, offsets=[OffsetRange("t", 0, 30, 10)])


@pytest.mark.requires("txn_history")
def test_transactions_listing(
    store: Metastore, events: TableDefinition, dead_letter: TableDefinition
) -> None:
    a = store.open_transaction(events, also=[dead_letter], agent="x")
    b = store.open_transaction(dead_letter)
    store.commit(a)
    rows = [r for r in store.transactions() if r.table in (events.name, dead_letter.name)]
    assert [(r.txn_id, r.table, r.write_id, r.state) for r in rows] == [
        (a.txn_id, events.name, 1, "committed"),
        (a.txn_id, dead_letter.name, 1, "committed"),
        (b.txn_id, dead_letter.name, 2, "open"),
    ]
    assert [r.txn_id for r in store.transactions(dead_letter, states=["open"])] == [b.txn_id]
    assert rows[0].finished_at is not None and rows[2].finished_at is None


@pytest.mark.requires("arrow_schema")
def test_schema_round_trip_nested_types(store: Metastore) -> None:
    schema = pa.schema(
        [
            ("m", pa.map_(pa.string(), pa.list_(pa.struct([("x", pa.float64())])))),
            ("d", pa.dictionary(pa.int32(), pa.string())),
            ("u", pa.large_binary()),
        ]
    )
    defn = TableDefinition("n", "memory://wh/n", schema)
    store.create_table(defn)
    assert store.get_table("n").row_schema.equals(schema, check_metadata=True)


def test_errors_are_ingest_errors(store: Metastore) -> None:
    store.close()
    with pytest.raises(IngestError):
        store.list_tables()
