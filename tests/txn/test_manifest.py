"""The committed-file manifest in the metastore: entries recorded with the commit and only
with it, updated by later commits of a transaction batch, never lowered; outside a commit for
compaction outputs; gone with the table; absent in a version 1 metastore opened read-only."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ingest.acid.format.committed import CommittedFile
from ingest.errors import CommitConflictError, ConfigError, TableNotFoundError
from ingest.txn import Metastore, MetastoreError, TableDefinition

HASH_A, HASH_B = "0123456789abcdef", "fedcba9876543210"


def entry(path: str, write_id: int, length: int, rows: int = 10,
          tail_hash: str = HASH_A) -> CommittedFile:
    return CommittedFile(path, write_id, length, tail_hash, rows)


def test_commit_records_files_of_each_table_it_writes(
        store: Metastore, events: TableDefinition, dead_letter: TableDefinition) -> None:
    txn = store.open_transaction(events, also=[dead_letter])
    mine = entry("dt=1/delta_0000001_0000001_0000/bucket_00000", txn.write_id, 800)
    dead = entry("delta_0000001_0000001_0000/bucket_00003",
                 txn.write_id_for(dead_letter), 90, rows=1)
    assert store.committed_files(events) == {}  # nothing before the commit
    store.commit(txn, files={events.name: [mine], dead_letter.location: [dead]})
    assert store.committed_files(events) == {mine.path: mine}
    assert store.committed_files(dead_letter.name) == {dead.path: dead}


@pytest.mark.requires("transaction_batches")
def test_a_transaction_batch_file_grows_commit_by_commit(
        store: Metastore, events: TableDefinition) -> None:
    first, second, third = store.allocate_write_ids(events, 3)
    path = "dt=1/delta_0000001_0000003/bucket_00000"
    store.commit(first, files={events.name: [entry(path, first.write_id, 500, rows=5)]})
    store.commit(second, files={events.name: [entry(path, second.write_id, 900, rows=9,
                                                    tail_hash=HASH_B)]})
    assert store.committed_files(events)[path] == entry(path, 2, 900, rows=9, tail_hash=HASH_B)
    # A commit that would lower the committed length is refused, atomically: the
    # transaction stays open and nothing of the commit is recorded.
    with pytest.raises(CommitConflictError, match="never lowers a committed length"):
        store.commit(third, files={events.name: [entry(path, third.write_id, 700)]})
    assert store.write_id_states(events)[third.write_id] == "open"
    assert store.committed_files(events)[path].length == 900
    store.abort(third)


@pytest.mark.parametrize("bad, match", [
    ({"events": [entry("dt=a/bucket_00000", 7, 100)]}, "the commit is of write id 1"),
    ({"other": [entry("dt=a/bucket_00000", 1, 100)]}, "it writes"),
    ({"events": [entry("dt=a/bucket_00000", 1, 100)] * 2}, "twice"),
])
def test_malformed_commit_files_are_refused_before_anything_commits(
        store: Metastore, events: TableDefinition, backend, bad: dict[str, list[CommittedFile]],
        match: str) -> None:
    store.create_table(backend.table("other"))
    txn = store.open_transaction(events)
    with pytest.raises(ConfigError, match=match):
        store.commit(txn, files={backend.name(table): files for table, files in bad.items()})
    assert store.write_id_states(events)[txn.write_id] == "open"
    assert store.committed_files(events) == {}


def test_files_of_an_unknown_table_are_refused(store: Metastore, events: TableDefinition,
                                               backend) -> None:
    txn = store.open_transaction(events)
    with pytest.raises(TableNotFoundError):
        store.commit(txn, files={backend.name("nope"): [entry("dt=a/bucket_00000", 1, 100)]})
    assert store.write_id_states(events)[txn.write_id] == "open"


@pytest.mark.parametrize("path", ["", "/abs/bucket_00000", "a/../bucket_00000", "a//b",
                                  "./bucket_00000"])
def test_entry_paths_must_be_relative(path: str) -> None:
    with pytest.raises(ConfigError, match="relative to the table root"):
        entry(path, 1, 100)


def test_entry_values_are_checked() -> None:
    with pytest.raises(ConfigError, match="16 hex digits"):
        CommittedFile("a/bucket_00000", 1, 100, "abc", 1)
    with pytest.raises(ConfigError, match="at least 4 bytes"):
        entry("dt=a/bucket_00000", 1, 0)


def test_an_aborted_transaction_records_nothing(store: Metastore, events: TableDefinition) -> None:
    txn = store.open_transaction(events)
    store.abort(txn)
    with pytest.raises(CommitConflictError):
        store.commit(txn, files={events.name: [entry("dt=a/bucket_00000", txn.write_id, 100)]})
    assert store.committed_files(events) == {}


def test_compaction_outputs_are_recorded_and_forgotten_outside_a_commit(
        store: Metastore, events: TableDefinition) -> None:
    base = entry("dt=1/base_0000004/bucket_00000", 4, 4000, rows=40)
    store.record_committed_files(events, [base])
    assert store.committed_files(events) == {base.path: base}
    assert store.forget_committed_files(events, [base.path, "not/listed"]) == 1
    assert store.committed_files(events) == {}


def test_drop_table_forgets_its_entries(store: Metastore, events: TableDefinition,
                                        backend) -> None:
    txn = store.open_transaction(events)
    store.commit(txn, files={events.name: [entry("dt=a/bucket_00000", txn.write_id, 100)]})
    store.drop_table(events)
    again = store.create_table(backend.table("events", partition_columns=("dt",)))
    assert store.committed_files(again) == {}


def test_version_1_metastore_read_only_has_no_entries(tmp_path: Path, table_def,
                                                     legacy_sqlite) -> None:
    """A version 1 file opened read-only stays version 1: no manifest, files read as before;
    recording needs the upgrade a writer does."""
    path = tmp_path / "v1.sqlite"
    url = legacy_sqlite(path, 1)
    with Metastore.open(url, create=False) as writer:
        writer.create_table(table_def("t"))
    conn = sqlite3.connect(path)  # back to version 1, as an older ingest left it
    conn.executescript("DROP TABLE committed_files; UPDATE meta SET value = '1' "
                       "WHERE key = 'schema_version';")
    conn.close()
    with Metastore.open(url, read_only=True) as reader:
        assert reader.schema_version == 1
        assert reader.committed_files("default.t") == {}
        with pytest.raises(MetastoreError, match="has no committed-file manifest"):
            reader.record_committed_files("default.t", [entry("dt=a/bucket_00000", 1, 100)])


@pytest.mark.requires("sql")
def test_a_sql_metastore_keeps_no_side_tables(store: Metastore,
                                              events: TableDefinition) -> None:
    # Its manifest and progress are its own tables: nothing for the table layer to compact.
    txn = store.open_transaction(events)
    store.commit(txn, files={events.name: [
        entry("dt=1/delta_0000001_0000001_0000/bucket_00000", txn.write_id, 800)]})
    assert store.side_tables(events) == []
    with pytest.raises(TableNotFoundError):
        store.side_tables("db.missing")


def test_one_commit_records_many_tables_entries_beyond_one_read_and_grows_them_later(
        store: Metastore, backend) -> None:
    # 3 tables x 150 files, the same paths in each (their write ids match): more entries than
    # one read of the recorded rows takes, each recorded under its own table.
    anchor = store.create_table(backend.table("anchor"))
    tables = [store.create_table(backend.table(f"t{i}")) for i in range(3)]
    txn = store.open_transaction(anchor, also=tables)
    files = {t.name: [entry(f"delta_{w:07d}_{w:07d}_0000/bucket_{b:05d}", w, 100 + b + i)
                      for b in range(150)]
             for i, t in enumerate(tables) for w in [txn.write_id_for(t)]}
    store.commit(txn, files=files)
    for t in tables:
        assert store.committed_files(t) == {e.path: e for e in files[t.name]}
    grown = [entry(e.path, e.write_id, e.length + 50, tail_hash=HASH_B)
             for e in files[tables[1].name]]
    store.record_committed_files(tables[1], grown)
    assert store.committed_files(tables[1]) == {e.path: e for e in grown}
    assert store.committed_files(tables[2]) == {e.path: e for e in files[tables[2].name]}
    with pytest.raises(CommitConflictError, match="never lowers a committed length"):
        store.record_committed_files(tables[2], [*files[tables[2].name][:-1], entry(
            files[tables[2].name][-1].path, 1, 10)])
    assert store.committed_files(tables[2]) == {e.path: e for e in files[tables[2].name]}
