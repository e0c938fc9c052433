"""What a micro-batch costs the Hive Metastore (4.0.1 and 3.1.3): the Thrift calls of the
streaming sink's steps (progress check, open with the dead-letter table, commit with progress
and files), counted on every connection; one lock request per step with a component per
table; tables looked up together; a heartbeat's connection that asks the server nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hms_server import Server
from support import wait_until

from ingest.acid.format.committed import CommittedFile
from ingest.errors import CommitConflictError
from ingest.txn import Metastore, TableDefinition, hms
from ingest.txn.hms.compactions import table_locks
from ingest.txn.hms.thrift import _stubs
from ingest.txn.model import OffsetRange, SinkProgress

pytestmark = pytest.mark.hms

ROWS = pa.schema([("id", pa.int64()), ("v", pa.string())])


class _Calls:
    """Counts the calls of every connection (the heartbeat's too), by method name."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: dict[str, int] = {}
        real: Callable[..., Any] = hms.HmsConnection.call_with

        def counted(conn: hms.HmsConnection, method: str, body: Any, **kw: Any) -> Any:
            self.calls[method] = self.calls.get(method, 0) + 1
            return real(conn, method, body, **kw)

        monkeypatch.setattr(hms.HmsConnection, "call_with", counted)


def _tables(tmp_path: Path) -> tuple[TableDefinition, TableDefinition]:
    db = "c_" + uuid.uuid4().hex[:10]
    return (TableDefinition(f"{db}.events", f"file://{tmp_path}/wh/events", ROWS),
            TableDefinition(f"{db}.events__dead_letter",
                            f"file://{tmp_path}/wh/events__dead_letter", ROWS))


def _batch(store: Metastore, target: TableDefinition, dead: TableDefinition,
           batch_id: int) -> int:
    """The sink's metastore steps for one micro-batch; the data's write id."""
    sink = f"{target.name}@ck"
    assert store.committed_write_id(sink, batch_id, table=target.name) is None
    txn = store.open_transaction(target, agent="h:1:stream", also=[dead])
    path = f"delta_{txn.write_id:07d}_{txn.write_id:07d}_0000/bucket_00000"
    store.commit(txn, sink=SinkProgress(sink, batch_id),
                 offsets=[OffsetRange("t", 0, batch_id * 10, batch_id * 10 + 10)],
                 files={target.name: [CommittedFile(path, txn.write_id, 100,
                                                    "0123456789abcdef", 10)],
                        dead.name: []})
    return txn.write_id


def test_a_micro_batch_is_a_bounded_number_of_calls(metastore: Server, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    target, dead = _tables(tmp_path)
    with Metastore.open(metastore.uri) as store:
        store.create_table(target)
        store.create_table(dead)
        _batch(store, target, dead, 0)  # registers the side tables
        counting = _Calls(monkeypatch)
        write_id = _batch(store, target, dead, 1)
        monkeypatch.undo()
        calls = counting.calls
        # One lock request when the transaction opens (the table and its dead letters), one
        # at commit (both side tables); the heartbeat's connection asks nothing to open.
        assert calls["lock"] == 2, calls
        assert "check_lock" not in calls and "getVersion" not in calls, calls
        assert "get_config_value" not in calls, calls
        # The tables and their side tables in one lookup at open; the progress check's
        # target is the only other.
        assert calls["get_table_objects_by_name_req"] == 1, calls
        assert calls.get("get_table_req", 0) <= 1, calls
        # Progress and manifest share one snapshot call at commit (two more when Hive
        # answers it shortened); the progress check before opening takes its own.
        assert calls["get_open_txns"] == 2 and calls["get_valid_write_ids"] <= 6, calls
        # Write ids: the table, its dead letters, the table's progress and manifest, and the
        # dead letters' progress (its offsets, for `offset_ranges`).
        assert calls["allocate_table_write_ids"] == 5 and calls["commit_txn"] == 1, calls
        assert sum(n for m, n in calls.items() if m != "heartbeat_txn_range") <= 17, calls
        # ... and what it committed is all there.
        assert store.committed_write_id(f"{target.name}@ck", 1, table=target.name) == write_id
        assert [f.write_id for f in store.committed_files(target.name).values()] == [
            write_id - 1, write_id]
        assert store.write_id_states(dead.name) == {1: "committed", 2: "committed"}
        assert store.offset_ranges(dead.name) == [(1, OffsetRange("t", 0, 0, 10)),
                                                  (2, OffsetRange("t", 0, 10, 20))]


def test_a_replayed_batch_is_refused_at_commit_under_the_one_lock(
        metastore: Server, tmp_path: Path) -> None:
    target, dead = _tables(tmp_path)
    with Metastore.open(metastore.uri) as store:
        store.create_table(target)
        store.create_table(dead)
        first = store.open_transaction(target, agent="h:1:a", also=[dead])
        # Named in upper case: the same tables and side tables.
        second = store.open_transaction(target.name.upper(), agent="h:1:b",
                                        also=[dead.name.upper()])
        store.commit(first, sink=SinkProgress(f"{target.name}@ck", 0))
        with pytest.raises(CommitConflictError, match="micro-batch 0 .* already committed"):
            store.commit(second, sink=SinkProgress(f"{target.name}@ck", 0))
        store.abort(second)
        assert store.write_id_states(target.name) == {1: "committed", 2: "aborted"}
        assert store.write_id_states(dead.name) == {1: "committed", 2: "aborted"}


def test_one_lock_request_holds_every_component(metastore: Server, tmp_path: Path) -> None:
    target, dead = _tables(tmp_path)
    with Metastore.open(metastore.uri) as store:
        store.create_table(target)
        store.create_table(dead)
    with hms.connect(metastore.uri) as conn:
        one, two = (hms.get_table(conn, d.name) for d in (target, dead))
        holder, waiter = hms.open_txns(conn, 2)
        try:
            lock_id = hms.lock_all(conn, holder, [
                hms.LockTarget(one), hms.LockTarget(two, "EXCLUSIVE", "INSERT")],
                agent="h:1:both")
            kinds = _stubs.ttypes().LockType._VALUES_TO_NAMES
            held = {t.name: [(lk.lockid, kinds[lk.type]) for lk in table_locks(conn, t)]
                    for t in (one, two)}
            assert held == {one.name: [(lock_id, "SHARED_READ")],
                            two.name: [(lock_id, "EXCLUSIVE")]}
            # A request that needs both waits for the EXCLUSIVE one and names it.
            with pytest.raises(CommitConflictError) as caught:
                hms.lock_all(conn, waiter, [hms.LockTarget(one), hms.LockTarget(two)],
                             timeout_s=1.5)
            message = str(caught.value)
            assert f"SHARED_READ lock for INSERT on {one.name} and the SHARED_READ lock for " \
                   f"INSERT on {two.name}" in message
            assert f"behind lock {lock_id} (EXCLUSIVE of transaction {holder}" in message
        finally:
            hms.abort_txn(conn, waiter)
            hms.abort_txn(conn, holder)
        with pytest.raises(ValueError, match="no table to lock"):
            hms.lock_all(conn, waiter, [])


def test_tables_are_looked_up_together(metastore: Server, tmp_path: Path) -> None:
    target, dead = _tables(tmp_path)
    with Metastore.open(metastore.uri) as store:
        store.create_table(target)
        store.create_table(dead)
    with hms.connect(metastore.uri) as conn:
        missing = target.name + "_nope"
        found = hms.get_tables(conn, [dead.name.upper(), missing, target.name,
                                      "nodb_" + uuid.uuid4().hex[:8] + ".t"])
        assert {k: v.name for k, v in found.items()} == {dead.name.upper(): dead.name,
                                                         target.name: target.name}
        assert found[target.name].location == hms.get_table(conn, target.name).location


def test_a_connection_given_the_server_info_asks_nothing(
        metastore: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    with hms.connect(metastore.uri) as first:
        counting = _Calls(monkeypatch)
        with hms.connect(metastore.uri, info=first.info) as second:
            assert second.info == first.info
        assert counting.calls == {}
        other = hms.ServerInfo("thrift://127.0.0.1:1", "4.0.1", 4, 1.0)
        with hms.connect(metastore.uri, info=other) as third:  # another server's: asked
            assert third.info == first.info
        assert counting.calls["getVersion"] == 1


def test_a_fresh_transaction_is_first_heartbeated_after_one_interval(
        metastore: Server) -> None:
    with hms.connect(metastore.uri) as conn:
        fresh, old = hms.open_txns(conn, 2)
        try:
            opened = time.monotonic()
            with hms.Heartbeater(conn.uri, fresh, interval_s=3, fresh=True,
                                 info=conn.info) as late, \
                    hms.Heartbeater(conn.uri, old, interval_s=30, info=conn.info) as now:
                # The first beat of one opened earlier comes at once (well before its 30 s).
                wait_until("the first heartbeat of the older transaction",
                           lambda: now.beats >= 1, timeout_s=25)
                # The fresh one's first beat comes one interval after its start, however long
                # a loaded machine took for the other's: it is seen no sooner than that.
                wait_until("the first heartbeat of the fresh transaction",
                           lambda: late.beats >= 1, interval_s=0.01)
                assert time.monotonic() - opened >= 3
        finally:
            for txn in (fresh, old):
                hms.abort_txn(conn, txn)
