"""Registered readers (Hive's MIN_HISTORY_LEVEL): the snapshot and its registration are one
SQLite transaction, kept alive by heartbeats, removed at the end; never on a metastore that
cannot take them (read-only, not writable, schema version 1)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

from ingest.txn import Metastore, TableDefinition
from ingest.txn.sql._schema import readers


def registrations(store: Metastore) -> list[tuple[int, str, int]]:
    with store._db.read() as c:
        return [tuple(r) for r in c.execute(
            sa.select(readers.c.min_open_txn, readers.c.agent, readers.c.reader_id)
            .order_by(readers.c.reader_id))]


@pytest.mark.requires("sql")  # leases on a Hive Metastore: tests/hms/test_hms_leases.py
def test_reading_registers_its_snapshot_and_unregisters_at_the_end(
        store: Metastore, events: TableDefinition) -> None:
    first = store.open_transaction(events)
    store.commit(first)
    with store.reading(events, agent="a") as snapshot:
        assert snapshot == store.snapshot(events)
        # Nothing open: the next transaction id, since every transaction below it ended.
        assert [r[:2] for r in registrations(store)] == [(first.txn_id + 1, "a")]
        open_txn = store.open_transaction(events)
        with store.reading(events, agent="b") as inner:
            assert inner.open_write_ids == (open_txn.write_id,)
            assert [r[:2] for r in registrations(store)] == [(first.txn_id + 1, "a"),
                                                             (open_txn.txn_id, "b")]
        live = store.live_readers(events, timeout_s=300)
        assert [(r.agent, r.table, r.min_open_txn) for r in live] == [
            ("a", "default.events", first.txn_id + 1)]
    assert registrations(store) == []
    with pytest.raises(RuntimeError), store.reading(events, agent="c"):
        assert len(registrations(store)) == 1
        raise RuntimeError("the read failed")
    assert registrations(store) == []  # unregistered on an error too


@pytest.mark.requires("sql", "clock")
def test_registrations_heartbeat_and_dead_ones_are_ignored_then_forgotten(
        store: Metastore, events: TableDefinition, clock: Any) -> None:
    with store.reading(events, agent="alive", heartbeat_s=0.01):
        opened = store.live_readers(events, timeout_s=1)[0].heartbeat_at
        clock.advance(100)
        deadline = time.monotonic() + 10
        while store.live_readers(events, timeout_s=1) == []:
            assert time.monotonic() < deadline, "no heartbeat"
            time.sleep(0.01)
        assert store.live_readers(events, timeout_s=1)[0].heartbeat_at == opened + 100
    # A reader that died without unregistering: only its row is left.
    with store._db.write() as c:
        c.execute(sa.insert(readers).values(table_name="default.events", agent="dead",
                                            min_open_txn=1, opened_at=clock.now,
                                            heartbeat_at=clock.now))
    assert [r.agent for r in store.live_readers(events, timeout_s=300)] == ["dead"]
    clock.advance(301)
    assert store.live_readers(events, timeout_s=300) == []
    assert store.forget_dead_readers(timeout_s=300) == 1
    assert registrations(store) == []


def _metastore_with_table(path: Path) -> str:
    url = f"sqlite://{path}"
    with Metastore.open(url) as store:
        store.create_table(TableDefinition("default.events", str(path.parent / "events"),
                                           pa.schema([("id", "int64")])))
        txn = store.open_transaction("default.events")
        store.commit(txn)
    return url


def _rows(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT * FROM readers").fetchall()
    finally:
        conn.close()


def test_a_read_only_metastore_reads_unregistered(tmp_path: Path) -> None:
    path = tmp_path / "wh" / "_ingest_metastore.sqlite"
    url = _metastore_with_table(path)
    with Metastore.open(url, read_only=True) as store:
        with store.reading("default.events", agent="ro") as snapshot:
            assert snapshot.high_watermark == 1
            assert _rows(path) == []
    with Metastore.open_for_reading(url) as store, \
            store.reading("default.events", agent="rw") as snapshot:
        assert snapshot.high_watermark == 1
        assert [r[2] for r in _rows(path)] == ["rw"]
    assert _rows(path) == []


def test_open_for_reading_never_upgrades_a_version_1_metastore(tmp_path: Path,
                                                              legacy_sqlite) -> None:
    path = tmp_path / "v1.sqlite"
    legacy_sqlite(path, 1)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO tables (name, location, row_schema, partition_columns,"
                 " bucket_count, bucket_columns, properties, created_at)"
                 " VALUES ('default.events', 'file:///x/events', ?, '[]', 0, '[]', '{}', 0)",
                 (pa.schema([("id", "int64")]).serialize().to_pybytes(),))
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with Metastore.open_for_reading(f"sqlite://{path}") as store:
        assert store.schema_version == 1
        with store.reading("default.events", agent="v1") as snapshot:
            assert snapshot.high_watermark == 0
        assert store.live_readers("default.events", timeout_s=1) == []
    assert path.read_bytes() == before
