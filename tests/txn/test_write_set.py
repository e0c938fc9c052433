"""Write-write conflicts at commit (Hive's WRITE_SET, docs/format.md §24): of two
transactions that declare the same (partition, bucket) and overlap in time, the first to
commit wins and the other is aborted by its commit; disjoint pairs, sequential writers and
plain appends never conflict. Runs on every metastore kind (tests/txn/conftest.py)."""

from __future__ import annotations

import pytest

from ingest.errors import CommitConflictError
from ingest.txn import Metastore, TableDefinition


@pytest.mark.requires("bucket_write_set")
def test_the_second_committer_of_one_bucket_is_aborted(store: Metastore,
                                                       events: TableDefinition) -> None:
    a = store.open_transaction(events)
    b = store.open_transaction(events)
    store.commit(a, updated={"dt=1": [3]})
    with pytest.raises(CommitConflictError) as e:
        store.commit(b, updated={"dt=1": [3, 4]})
    assert f"transaction {a.txn_id} committed updates or deletes" in str(e.value)
    assert "partition 'dt=1', bucket 3" in str(e.value)
    assert "ingest upsert" in (e.value.hint or "")
    states = store.write_id_states(events)
    assert states[a.write_id] == "committed"
    assert states[b.write_id] == "aborted"  # aborted by the commit itself
    with pytest.raises(CommitConflictError, match="aborted"):
        store.commit(b)  # nothing can commit the loser afterwards


@pytest.mark.requires("bucket_write_set")
def test_the_winner_is_whoever_commits_first_not_opens_first(
        store: Metastore, events: TableDefinition) -> None:
    a = store.open_transaction(events)
    b = store.open_transaction(events)
    store.commit(b, updated={"": [0]})
    with pytest.raises(CommitConflictError):
        store.commit(a, updated={"": [0]})
    assert store.write_id_states(events)[b.write_id] == "committed"


@pytest.mark.parametrize("second", [{"dt=1": [4]}, {"dt=2": [3]}, {}, None])
def test_disjoint_pairs_and_plain_appends_both_commit(
        store: Metastore, events: TableDefinition, second: dict[str, list[int]] | None,
) -> None:
    a = store.open_transaction(events)
    b = store.open_transaction(events)
    store.commit(a, updated={"dt=1": [3]})
    store.commit(b, updated=second)
    states = store.write_id_states(events)
    assert states[a.write_id] == states[b.write_id] == "committed"


@pytest.mark.requires("bucket_write_set")
def test_a_writer_that_opened_after_the_commit_sees_it_and_commits(
        store: Metastore, events: TableDefinition) -> None:
    a = store.open_transaction(events)
    store.commit(a, updated={"dt=1": [3]})
    b = store.open_transaction(events)
    store.commit(b, updated={"dt=1": [3]})
    c = store.open_transaction(events)
    d = store.open_transaction(events)
    store.commit(d, updated={"dt=1": [3]})
    with pytest.raises(CommitConflictError, match=f"transaction {d.txn_id} committed"):
        store.commit(c, updated={"dt=1": [3]})


def test_an_aborted_writer_never_makes_another_lose(store: Metastore,
                                                    events: TableDefinition) -> None:
    a = store.open_transaction(events)
    b = store.open_transaction(events)
    store.abort(a)
    store.commit(b, updated={"dt=1": [3]})
    assert store.write_id_states(events)[b.write_id] == "committed"


def test_other_tables_do_not_conflict(store: Metastore, events: TableDefinition,
                                      backend) -> None:  # type: ignore[no-untyped-def]
    other = store.create_table(backend.table("other"))
    a = store.open_transaction(events)
    b = store.open_transaction(other)
    store.commit(a, updated={"": [0]})
    store.commit(b, updated={"": [0]})
    assert store.write_id_states(other)[b.write_id] == "committed"


@pytest.mark.requires("bucket_write_set")
def test_a_transaction_of_several_tables_declares_each_tables_write_set(
        store: Metastore, events: TableDefinition, backend) -> None:  # type: ignore[no-untyped-def]
    """A many-table micro-batch's keyed tables are other tables of its transaction
    (`table_updated`): each is checked against that table's write set, not the primary's."""
    anchor = store.create_table(backend.table("anchor"))
    a = store.open_transaction(anchor, also=[events])
    b = store.open_transaction(events)
    store.commit(b, updated={"dt=1": [3]})
    with pytest.raises(CommitConflictError, match=f"transaction {b.txn_id} committed updates"):
        store.commit(a, table_updated={events.name: {"dt=1": [3]}})
    assert store.write_id_states(events)[a.write_id_for(events)] == "aborted"
    c = store.open_transaction(anchor, also=[events])
    d = store.open_transaction(events)
    store.commit(c, table_updated={events.name: {"dt=1": [4]}})  # another bucket
    with pytest.raises(CommitConflictError, match=f"transaction {c.txn_id} committed updates"):
        store.commit(d, updated={"dt=1": [4]})  # c's write set is the table's own
