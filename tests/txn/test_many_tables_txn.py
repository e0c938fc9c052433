"""One transaction across many tables (docs/many-tables.md): a micro-batch of a many-table
stream writes the stream's anchor table (its progress row) and every table it touches in one
metastore transaction; all their write ids and manifest entries commit together, or none do,
whatever refuses the commit or kills it midway."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from ingest.acid.format.committed import CommittedFile
from ingest.errors import CommitConflictError, ConfigError, TableNotFoundError
from ingest.txn import Metastore, OffsetRange, SinkProgress, TableDefinition

if TYPE_CHECKING:
    from txn.conftest import Backend

TABLES = ("orders", "payments", "refunds", "orders__dead_letter")


def _tables(store: Metastore, backend: Backend) -> tuple[TableDefinition, list[TableDefinition]]:
    anchor = store.create_table(backend.table("stream_unrouted"))
    return anchor, [store.create_table(backend.table(t)) for t in TABLES]


def _entries(txn_write_ids: dict[str, int], tables: list[TableDefinition]
             ) -> dict[str, list[CommittedFile]]:
    return {t.name: [CommittedFile(f"delta_{txn_write_ids[t.name]:07d}_"
                                   f"{txn_write_ids[t.name]:07d}_0000/bucket_00000",
                                   txn_write_ids[t.name], 100 + i, "0123456789abcdef", 1 + i)]
            for i, t in enumerate(tables)}


OFFSETS = [OffsetRange("orders", 0, 0, 10), OffsetRange("payments", 0, 5, 9),
           OffsetRange("refunds", 1, 0, 3)]


def _none_committed(store: Metastore, txn_ids: dict[str, int], sink: str, batch: int,
                    anchor: TableDefinition) -> None:
    for name, write_id in txn_ids.items():
        assert not store.snapshot(name).is_valid(write_id), name
        assert store.committed_files(name) == {}, name
    assert store.committed_write_id(sink, batch, table=anchor.name) is None
    assert store.offset_ranges(anchor) == []


def test_one_transaction_commits_every_table_and_one_progress_row(
        store: Metastore, backend: Backend) -> None:
    anchor, tables = _tables(store, backend)
    txn = store.open_transaction(anchor, agent="many:1", also=tables)
    ids = txn.write_ids
    assert set(ids) == {anchor.name, *(t.name for t in tables)}
    files = _entries(ids, tables)
    _none_committed(store, ids, "s", 0, anchor)  # readers see nothing before the commit
    store.commit(txn, sink=SinkProgress("s", 0), offsets=OFFSETS, files=files)
    for t in tables:
        assert store.snapshot(t).is_valid(ids[t.name])
        assert store.committed_files(t) == {f.path: f for f in files[t.name]}
    assert store.snapshot(anchor).is_valid(ids[anchor.name])
    assert store.committed_write_id("s", 0, table=anchor.name) == ids[anchor.name]
    assert sorted(r for _, r in store.offset_ranges(anchor)) == sorted(OFFSETS)


def test_a_file_entry_refused_in_one_table_commits_none_of_them(
        store: Metastore, backend: Backend) -> None:
    anchor, tables = _tables(store, backend)
    txn = store.open_transaction(anchor, also=tables[:3])
    files = _entries(txn.write_ids, tables[:3])
    # The last table's entry names a table the transaction does not write: refused after
    # the other tables' entries (and on SQL the state change) are already in the commit.
    files[tables[3].name] = [CommittedFile("delta_0000001_0000001_0000/bucket_00000", 1, 10,
                                           "0123456789abcdef", 1)]
    with pytest.raises((ConfigError, CommitConflictError)):
        store.commit(txn, sink=SinkProgress("s", 0), offsets=OFFSETS, files=files)
    _none_committed(store, txn.write_ids, "s", 0, anchor)
    store.abort(txn)
    _none_committed(store, txn.write_ids, "s", 0, anchor)
    # The micro-batch is not recorded, so it commits whole in a new transaction.
    again = store.open_transaction(anchor, also=tables)
    store.commit(again, sink=SinkProgress("s", 0), offsets=OFFSETS,
                 files=_entries(again.write_ids, tables))
    assert all(store.snapshot(t).is_valid(again.write_id_for(t)) for t in tables)
    assert store.committed_write_id("s", 0, table=anchor.name) == again.write_id


def test_a_replayed_micro_batch_commits_none_of_its_tables(
        store: Metastore, backend: Backend) -> None:
    anchor, tables = _tables(store, backend)
    first = store.open_transaction(anchor, also=tables[:2])
    store.commit(first, sink=SinkProgress("s", 3), offsets=OFFSETS[:1])
    replay = store.open_transaction(anchor, also=tables[1:])
    with pytest.raises(CommitConflictError, match="already committed"):
        store.commit(replay, sink=SinkProgress("s", 3), offsets=OFFSETS,
                     files=_entries(replay.write_ids, tables[1:]))
    for t in tables[1:]:
        assert not store.snapshot(t).is_valid(replay.write_id_for(t)), t.name
        assert store.committed_files(t) == {}
    assert store.committed_write_id("s", 3, table=anchor.name) == first.write_id
    assert store.snapshot(tables[0]).is_valid(first.write_id_for(tables[0]))


def test_find_tables_gives_what_find_table_gives_for_each_in_the_order_given(
        store: Metastore, backend: Backend) -> None:
    anchor, tables = _tables(store, backend)
    missing_name, missing_at = backend.name("nope"), backend.location("nope")
    asked = [tables[2].location, anchor.name, missing_name, tables[0].name, missing_at,
             tables[0].location, tables[2], tables[1].name]
    found = store.find_tables(asked)
    assert found == [store.find_table(t) for t in asked]
    assert [None if f is None else f.name for f in found] == [
        tables[2].name, anchor.name, None, tables[0].name, None, tables[0].name,
        tables[2].name, tables[1].name]
    assert store.find_tables([]) == []
    assert store.get_tables([tables[1].location, anchor.name]) == [
        store.get_table(tables[1]), store.get_table(anchor)]
    # The first missing table in the order given, with get_table's message.
    with pytest.raises(TableNotFoundError) as one:
        store.get_table(missing_at)
    with pytest.raises(TableNotFoundError) as many:
        store.get_tables([anchor.name, missing_at, missing_name])
    assert many.value.message == one.value.message
    assert many.value.hint == one.value.hint


def test_a_transaction_on_many_tables_gives_each_its_own_next_write_id(
        store: Metastore, backend: Backend) -> None:
    """Each table's write id is its own next one (table i has had i transactions), the one
    adding the tables one by one gives (`allocate_write_id`)."""
    anchor, tables = _tables(store, backend)
    for i, t in enumerate(tables):
        for _ in range(i):
            store.abort(store.open_transaction(t))
    txn = store.open_transaction(anchor, agent="many:ids", also=tables)
    for i, t in enumerate(tables):
        states = store.write_id_states(t)
        assert len(states) == i + 1, t.name
        assert states[txn.write_id_for(t)] == "open", t.name
        assert max(states) == txn.write_id_for(t), t.name
    assert txn.other_write_ids == tuple((t.name, txn.write_id_for(t)) for t in tables)
    one_by_one = store.open_transaction(anchor)
    for t in tables:
        one_by_one = store.allocate_write_id(one_by_one, t)
    assert one_by_one.write_id == txn.write_id + 1
    assert {t.name: one_by_one.write_id_for(t) - txn.write_id_for(t) for t in tables} == {
        t.name: 1 for t in tables}


def test_a_transaction_on_a_missing_or_repeated_table_takes_no_write_id(
        store: Metastore, backend: Backend) -> None:
    anchor, tables = _tables(store, backend)
    missing = backend.name("nope")
    with pytest.raises(TableNotFoundError, match=f"Cannot find table {missing}"):
        store.open_transaction(anchor, also=[tables[0], missing, tables[1], "x.nope2"])
    with pytest.raises(ConfigError, match="a table is repeated"):
        store.open_transaction(anchor, also=[tables[0], tables[1], tables[0].location])
    with pytest.raises(ConfigError, match="a table is repeated"):
        store.open_transaction(anchor, also=[tables[1], anchor.location])
    for t in (anchor, *tables):
        assert store.write_id_states(t) == {}, t.name
    txn = store.open_transaction(anchor, also=tables)
    assert [txn.write_id_for(t) for t in (anchor, *tables)] == [
        min(store.write_id_states(t)) for t in (anchor, *tables)]


@pytest.mark.requires("sql")
def test_more_tables_than_one_statement_reads_are_found_and_opened_together(
        store: Metastore, backend: Backend) -> None:
    """Past the 400 identifiers one statement reads: every table found, each given its
    own write id, whether named or located."""
    anchor = store.create_table(backend.table("stream_unrouted"))
    tables = [store.create_table(backend.table(f"t{i:03d}")) for i in range(450)]
    asked = [t.name if i % 2 else t.location for i, t in enumerate(tables)]
    assert [t.name for t in store.get_tables(asked)] == [t.name for t in tables]
    store.abort(store.open_transaction(tables[7]))
    txn = store.open_transaction(anchor, also=asked)
    assert {t.name: txn.write_id_for(t) for t in tables} == {
        t.name: 2 if t is tables[7] else 1 for t in tables}
    again = store.open_transaction(anchor, also=tables[::-1])
    assert {t.name: again.write_id_for(t) for t in tables} == {
        t.name: txn.write_id_for(t) + 1 for t in tables}


KILLED_COMMIT = textwrap.dedent("""
    import sys
    from ingest.acid.format.committed import CommittedFile
    from ingest.txn import Metastore, OffsetRange, SinkProgress
    url, anchor, *tables = sys.argv[1:]
    with Metastore.open(url) as store:
        txn = store.open_transaction(anchor, agent="many:kill", also=tables)
        print(txn.txn_id, flush=True)
        files = {t: [CommittedFile("delta_x/bucket_00000", txn.write_id_for(t), 10,
                                   "0123456789abcdef", 1)] for t in tables}
        store.commit(txn, sink=SinkProgress("s", 9), offsets=[OffsetRange("a", 0, 0, 5)],
                     files=files)
""")


@pytest.mark.crash
def test_a_kill_inside_the_commit_of_many_tables_commits_none(shared_url: str) -> None:
    names = [f"default.t{i}" for i in range(6)]
    with Metastore.open(shared_url) as store:
        anchor = store.create_table(TableDefinition(
            "default.unrouted", "memory://wh/unrouted", pa.schema([("id", pa.int64())])))
        tables = [store.create_table(TableDefinition(n, f"memory://wh/{n[8:]}",
                                                     anchor.row_schema)) for n in names]
    env = {**os.environ, "INGEST_CRASH_AT": "metastore.during_commit"}
    done = subprocess.run([sys.executable, "-c", KILLED_COMMIT, shared_url, anchor.name,
                           *names], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    with Metastore.open(shared_url) as store:
        for t in (anchor, *tables):
            assert list(store.write_id_states(t).values()) == ["open"], t.name
            assert store.committed_files(t) == {}
        assert store.committed_write_id("s", 9, table=anchor.name) is None
        assert store.offset_ranges(anchor) == []
        aborted = store.abort_timed_out(0)
        assert {t.table for t in aborted} == {anchor.name}  # one transaction, all tables
        assert all(set(store.write_id_states(t).values()) == {"aborted"}
                   for t in (anchor, *tables))


OWN = {"orders": [OFFSETS[0]], "payments": [OFFSETS[1]], "refunds": [OFFSETS[2]]}


def test_each_table_gets_the_ranges_of_its_own_topics(
        store: Metastore, backend: Backend) -> None:
    anchor, tables = _tables(store, backend)
    by_short = {t.name.rsplit(".", 1)[1]: t for t in tables}
    txn = store.open_transaction(anchor, also=tables)
    store.commit(txn, sink=SinkProgress("s", 0), offsets=OFFSETS,
                 files=_entries(txn.write_ids, tables),
                 table_offsets={by_short[k].name: v for k, v in OWN.items()})
    # The anchor keeps the stream's position: every topic's range.
    assert store.offset_ranges(anchor) == sorted(
        ((txn.write_id, r) for r in OFFSETS), key=lambda x: (x[1].topic, x[1].partition))
    for short, own in OWN.items():
        t = by_short[short]
        assert store.offset_ranges(t) == [(txn.write_id_for(t), r) for r in own], short
    assert store.offset_ranges(by_short["orders__dead_letter"]) == []  # no topic of its own
    # The next micro-batch names a table by its location; a table it leaves out gets none.
    nxt = [OffsetRange("orders", 0, 10, 12), OffsetRange("payments", 0, 9, 9)]
    second = store.open_transaction(anchor, also=tables[:2])
    store.commit(second, sink=SinkProgress("s", 1), offsets=nxt,
                 table_offsets={by_short["orders"].location: nxt[:1]})
    assert [r for _, r in store.offset_ranges(by_short["orders"])] == [OFFSETS[0], nxt[0]]
    assert [r for _, r in store.offset_ranges(by_short["payments"])] == [OFFSETS[1]]
    assert [r for _, r in store.offset_ranges(anchor)][-2:] == nxt
    # Without per-table ranges every table of the transaction gets all of them, as before.
    third = store.open_transaction(anchor, also=tables[2:3])
    store.commit(third, offsets=[OffsetRange("x", 0, 0, 1)])
    assert store.offset_ranges(by_short["refunds"])[-1] == (
        third.write_id_for(by_short["refunds"]), OffsetRange("x", 0, 0, 1))


@pytest.mark.parametrize(("bad", "match"), [
    ({"@anchor": [OFFSETS[0]]}, "primary table"),
    ({"refunds": [OFFSETS[2]]}, "writes"),  # not written by the transaction
    ({"orders": [OffsetRange("orders", 0, 0, 11)]}, "not one of the transaction's ranges"),
    ({"orders": [OffsetRange("nowhere", 0, 0, 10)]}, "not one of the transaction's ranges"),
    ({"orders": [OFFSETS[0], OFFSETS[0]]}, "twice"),
])
def test_wrong_per_table_ranges_are_refused_and_commit_nothing(
        store: Metastore, backend: Backend, bad: dict[str, list[OffsetRange]],
        match: str) -> None:
    anchor, tables = _tables(store, backend)
    by_short = {t.name.rsplit(".", 1)[1]: t for t in tables}
    txn = store.open_transaction(anchor, also=tables[:2])
    named = {(anchor.name if k == "@anchor" else by_short[k].name): v for k, v in bad.items()}
    with pytest.raises(ConfigError, match=match):
        store.commit(txn, sink=SinkProgress("s", 0), offsets=OFFSETS,
                     files=_entries(txn.write_ids, tables[:2]), table_offsets=named)
    _none_committed(store, txn.write_ids, "s", 0, anchor)
    assert store.offset_ranges(tables[0]) == []
    # Still open: the same micro-batch commits with the right ranges.
    store.commit(txn, sink=SinkProgress("s", 0), offsets=OFFSETS,
                 files=_entries(txn.write_ids, tables[:2]),
                 table_offsets={tables[0].name: OWN["orders"]})
    assert [r for _, r in store.offset_ranges(tables[0])] == OWN["orders"]


def _as_version_4(url: str) -> None:
    """Make a current metastore one that schema version 4 wrote: no `table_offsets`."""
    import sqlalchemy as sa

    sa_url = (url.replace("postgresql://", "postgresql+psycopg://", 1)
              if url.startswith("postgresql://") else "sqlite:///" + url[len("sqlite://"):])
    engine = sa.create_engine(sa_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE table_offsets"))
            conn.execute(sa.text("UPDATE meta SET value = '4' WHERE key = 'schema_version'"))
    finally:
        engine.dispose()


def test_a_version_4_metastore_reads_its_offsets_and_a_writer_upgrades_it(
        shared_url: str) -> None:
    schema = pa.schema([("id", pa.int64())])
    with Metastore.open(shared_url) as store:
        anchor = store.create_table(TableDefinition("default.a", "memory://wh/a", schema))
        other = store.create_table(TableDefinition("default.b", "memory://wh/b", schema))
        old = store.open_transaction(anchor, also=[other])
        store.commit(old, sink=SinkProgress("s", 0), offsets=OFFSETS)
    _as_version_4(shared_url)
    legacy = [(1, r) for r in sorted(OFFSETS)]
    with Metastore.open(shared_url, read_only=True) as store:
        assert store.schema_version == 4  # a reader never upgrades, and reads as before
        assert store.offset_ranges(anchor) == store.offset_ranges(other) == legacy
    with Metastore.open(shared_url, create=False) as store:
        assert store.schema_version == 5
        assert store.offset_ranges(other) == legacy  # the old transaction's ranges stay
        txn = store.open_transaction(anchor, also=[other])
        store.commit(txn, sink=SinkProgress("s", 1), offsets=[OffsetRange("orders", 0, 10, 20)],
                     table_offsets={other.name: []})
        assert store.offset_ranges(other) == legacy  # the new one has none for it
        assert store.offset_ranges(anchor)[-1] == (2, OffsetRange("orders", 0, 10, 20))
        store.drop_table(other)
        assert store.offset_ranges(anchor)[-1] == (2, OffsetRange("orders", 0, 10, 20))
