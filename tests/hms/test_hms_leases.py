"""Reads, deletes and the transaction list over a Hive Metastore (4.0.1 and 3.1.3): a read's
lease is a read transaction holding a SHARED_READ lock, so `ingest clean --retention 0` keeps
the inputs a Table API read in progress still uses and removes them once it ends; a delete
takes Hive's lock for DELETE when it opens; `transactions()` maps write ids to transactions
in a handful of calls."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hms_server import Server
from support import ok_json

import ingest
from ingest.errors import CommitConflictError
from ingest.txn import Metastore, TableDefinition, hms
from ingest.txn.hms.compactions import table_locks
from ingest.txn.hms.thrift import _stubs

pytestmark = pytest.mark.hms

Capsys = pytest.CaptureFixture[str]
ROWS = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _lock_kinds(uri: str, name: str) -> dict[int, tuple[str, str]]:
    """{txn id: (lock type, agent)} of the locks on table `name`."""
    with hms.connect(uri) as conn:
        locks = table_locks(conn, hms.get_table(conn, name))
    kinds = _stubs.ttypes().LockType._VALUES_TO_NAMES
    return {lk.txnid: (kinds[lk.type], lk.agentInfo) for lk in locks}


def _loaded(tmp_path: Path, uri: str, capsys: Capsys) -> tuple[Path, str]:
    table = tmp_path / "wh" / "events"
    name = f"r_{uuid.uuid4().hex[:10]}.events"
    ok_json(["create", str(table), "--name", name, "--schema", "id BIGINT, v STRING",
             "--metastore", uri], capsys)
    for k in range(2):
        src = tmp_path / f"in{k}.jsonl"
        src.write_text("".join(json.dumps({"id": i, "v": f"v{i}"}) + "\n"
                               for i in range(k * 100, (k + 1) * 100)))
        ok_json(["load", str(table), "--input", str(src), "--metastore", uri], capsys)
    return table, name


def _dirs(table: Path) -> list[str]:
    return sorted(p.name for p in table.iterdir() if not p.name.startswith(("_", ".")))


def test_clean_keeps_what_a_read_in_progress_uses_and_removes_it_after(
        metastore: Server, tmp_path: Path, capsys: Capsys) -> None:
    uri = metastore.uri
    table, name = _loaded(tmp_path, uri, capsys)
    deltas = _dirs(table)
    assert len(deltas) == 2
    batches = ingest.open_table(str(table), metastore=uri).to_batches()
    rows = next(batches).num_rows  # the read has its lease and its plan: both deltas
    # Its lock names the reader (get_open_txns_info answers "Unknown" for every agent).
    ((lease, (kind, agent)),) = _lock_kinds(uri, name).items()
    assert kind == "SHARED_READ" and agent.endswith(":ingest-read")
    with Metastore.open(uri) as store:
        (reader,) = [r for r in store.live_readers(name, timeout_s=300) if r.reader_id == lease]
    ok_json(["compact", str(table), "--major", "--metastore", uri], capsys)
    report = ok_json(["clean", str(table), "--retention", "0", "--metastore", uri], capsys)
    kept = {k["name"]: k["reason"] for p in report["partitions"] for k in p["kept"]}
    assert sorted(kept) == deltas
    assert all(f"{reader.reader_id} (" in why for why in kept.values()), kept
    assert set(deltas) <= set(_dirs(table))
    rows += sum(b.num_rows for b in batches)  # reads on to the end: its lease ends
    assert rows == 200
    with Metastore.open(uri) as store:
        assert reader.reader_id not in [r.reader_id for r in
                                        store.live_readers(name, timeout_s=300)]
    ok_json(["clean", str(table), "--retention", "0", "--metastore", uri], capsys)
    (base,) = _dirs(table)
    assert base.startswith("base_0000002")
    assert ingest.open_table(str(table), metastore=uri).to_arrow().num_rows == 200


def test_a_read_only_metastore_reads_without_a_lease(metastore: Server, tmp_path: Path) -> None:
    defn = TableDefinition(f"r_{uuid.uuid4().hex[:10]}.events", f"file://{tmp_path}/t", ROWS)
    with Metastore.open(metastore.uri) as store:
        store.create_table(defn)
    with Metastore.open(metastore.uri, read_only=True) as store:
        with store.read_view(defn.name, agent="h:1:ingest-read") as view:
            assert view.lease_id is None
            assert _lock_kinds(metastore.uri, defn.name) == {}
    with Metastore.open_for_reading(metastore.uri) as store:
        with store.read_view(defn.name, agent="h:1:ingest-read") as view:
            assert view.lease_id is not None
            assert _lock_kinds(metastore.uri, defn.name) == {
                view.lease_id: ("SHARED_READ", "h:1:ingest-read")}
            assert store.heartbeat_reader(view.lease_id)
        assert not store.heartbeat_reader(view.lease_id)  # ended: committed
        assert _lock_kinds(metastore.uri, defn.name) == {}


def test_a_kept_lease_is_renewed_and_ended_by_another_process(
        metastore: Server, tmp_path: Path) -> None:
    defn = TableDefinition(f"r_{uuid.uuid4().hex[:10]}.events", f"file://{tmp_path}/t", ROWS)
    with Metastore.open(metastore.uri) as store:
        store.create_table(defn)
        # An agent as long as a stream's (it names the checkpoint) is cut to what the
        # metastore's lock table holds.
        agent = "h:1:ingest-stream:" + "x" * 200
        with store.leased_snapshot(defn.name, agent=agent, keep_lease=True) as (lease, _):
            assert lease is not None
            assert _lock_kinds(metastore.uri, defn.name) == {
                lease: ("SHARED_READ", agent[:128])}
    with Metastore.open(metastore.uri) as other:  # as a Spark task would
        assert other.heartbeat_reader(lease)
        assert lease in [r.reader_id for r in other.live_readers(defn, timeout_s=300)]
        other.end_reader(lease)
        assert not other.heartbeat_reader(lease)
        other.end_reader(lease)  # twice: logged, never raised


def test_a_delete_takes_hives_delete_lock_when_it_opens(metastore: Server,
                                                        tmp_path: Path) -> None:
    defn = TableDefinition(f"r_{uuid.uuid4().hex[:10]}.events", f"file://{tmp_path}/t", ROWS)
    with Metastore.open(metastore.uri) as store:
        store.create_table(defn)
        hive4 = store.capabilities.visibility_suffix
        expected = "EXCL_WRITE" if hive4 else "SHARED_WRITE"
        deleting = store.open_transaction(defn, agent="h:1:ingest-delete", operation="delete")
        try:
            assert _lock_kinds(metastore.uri, defn.name)[deleting.txn_id] == (
                expected, "h:1:ingest-delete")
            # Readers and inserts go on beside it.
            with store.read_view(defn.name, agent="h:1:ingest-read") as view:
                assert view.lease_id is not None
            store.commit(store.open_transaction(defn, agent="h:1:ingest-load"))
            if hive4:  # a second delete waits for the first (EXCL_WRITE)
                with hms.connect(metastore.uri) as conn:
                    (other,) = hms.open_txns(conn, 1)
                    try:
                        hms.allocate_write_ids(conn, defn.name, [other])
                        with pytest.raises(CommitConflictError, match=r"still waits"):
                            hms.lock(conn, other, hms.get_table(conn, defn.name),
                                     lock_type="EXCL_WRITE", operation="DELETE", timeout_s=1)
                    finally:
                        hms.abort_txn(conn, other)
        finally:
            store.abort(deleting)
        assert deleting.txn_id not in _lock_kinds(metastore.uri, defn.name)


class _Counting:
    """Counts the calls a connection makes, by method name (a real connection under it)."""

    def __init__(self, conn: hms.HmsConnection) -> None:
        self.calls: dict[str, int] = {}
        self._call = conn.call

    def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        self.calls[method] = self.calls.get(method, 0) + 1
        return self._call(method, *args, **kwargs)


def test_transactions_maps_write_ids_in_a_handful_of_calls(
        metastore: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    defs = [TableDefinition(f"r_{uuid.uuid4().hex[:10]}.events", f"file://{tmp_path}/t{i}",
                            ROWS) for i in range(2)]
    with Metastore.open(metastore.uri) as store:
        for d in defs:
            store.create_table(d)
        opened = [store.open_transaction(defs[i % 2], agent=f"h:1:w{i}") for i in range(6)]
        for txn in opened[::3]:
            store.abort(txn)
        try:
            counting = _Counting(store._conn)
            monkeypatch.setattr(store._conn, "call", counting)
            infos = store.transactions(None, states=("open", "aborted"))
            ours = [(i.txn_id, i.table, i.write_id, i.state) for i in infos
                    if i.table in {d.name for d in defs}]
            assert ours == [(t.txn_id, t.table, t.write_id,
                             "aborted" if k % 3 == 0 else "open")
                            for k, t in enumerate(opened)]
            # Every open or aborted transaction the server keeps (other tests' too) is
            # mapped in 1 + ceil(log2(n + 1)) calls for all tables at once, and one more
            # lists the committed ones: not one call per transaction and table.
            with hms.connect(metastore.uri) as conn:
                n = len(hms.txn_snapshot(conn).open_txns) + len(
                    hms.txn_snapshot(conn).aborted_txns)
            assert counting.calls["get_valid_write_ids"] <= 1 + (n + 1).bit_length()
            assert counting.calls["get_valid_write_ids"] < n
        finally:
            monkeypatch.undo()
            for txn in opened:
                if txn not in opened[::3]:
                    store.abort(txn)


def test_a_shortened_snapshot_is_made_whole(hms4: Server, tmp_path: Path) -> None:
    """When no write id left in TXN_TO_WRITE_ID is valid (here: one aborted write, one open;
    also after Hive 4's housekeeping removed committed rows, the flake test_hms_backend used
    to show), the server answers with the lowest invalid write id as the high watermark;
    `snapshot` still lists every allocated write id."""
    from ingest.txn.hms.thrift.txns import snapshots, txn_snapshot

    defn = TableDefinition(f"r_{uuid.uuid4().hex[:10]}.events", f"file://{tmp_path}/t", ROWS)
    with Metastore.open(hms4.uri) as store:
        store.create_table(defn)
        aborted = store.open_transaction(defn)
        store.abort(aborted)
        pending = store.open_transaction(defn)
        try:
            raw = snapshots(store._conn, [defn.name], txns=txn_snapshot(store._conn),
                            whole=False)[defn.name]
            assert (raw.high_watermark, raw.open_write_ids, raw.aborted_write_ids) == (
                1, (), (1,))
            ids = store.snapshot(defn)
            assert (ids.high_watermark, ids.open_write_ids, ids.aborted_write_ids) == (
                2, (2,), (1,))
            assert store.write_id_states(defn) == {1: "aborted", 2: "open"}
        finally:
            store.abort(pending)
