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
from ingest.errors import CommitConflictError, ConfigError
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
