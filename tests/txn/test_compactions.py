"""The compaction history: one working compaction per partition, outcomes recorded with the
compactor's transaction, dead compactors taken over."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.errors import CommitConflictError, ConfigError
from ingest.txn import Metastore, TableDefinition, Transaction


def begin(store: Metastore, events: TableDefinition, partition: str = "dt=1",
          **kw: object) -> tuple[int, object]:
    args: dict[str, object] = {"agent": "h:1:ingest-compact", "stale_after_s": 300.0, **kw}
    return store.begin_compaction(events.name, partition, "minor", **args)  # type: ignore[arg-type]


@pytest.mark.requires("clock")  # a Hive Metastore times compactions by its own clock
def test_a_compaction_is_recorded_with_its_transaction(store: Metastore, events: TableDefinition,
                                                       clock: Any) -> None:
    cid, txn = begin(store, events)
    (info,) = store.compactions(events)
    assert (info.compaction_id, info.partition, info.kind, info.state, info.txn_state) == (
        cid, "dt=1", "minor", "working", "open")
    assert info.started_at == clock.now and info.finished_at is None and not info.abandoned
    # The compactor's transaction writes nothing: no write id, no effect on snapshots.
    assert store.snapshot(events).high_watermark == 0
    assert store.transactions(events) == []
    clock.advance(2.5)
    store.finish_compaction(cid, txn, highest_write_id=7, rows=120,  # type: ignore[arg-type]
                            inputs=["delta_1_1", "delta_2_2"], outputs=["delta_1_7"])
    (info,) = store.compactions(events)
    assert (info.state, info.txn_state, info.highest_write_id, info.rows) == (
        "ready for cleaning", "committed", 7, 120)
    assert info.inputs == ("delta_1_1", "delta_2_2") and info.outputs == ("delta_1_7",)
    assert info.finished_at == info.started_at + 2.5
    # Recording twice is a conflict: the row is no longer working.
    with pytest.raises(CommitConflictError, match="is ready for cleaning"):
        store.finish_compaction(cid, txn, highest_write_id=7, rows=1,  # type: ignore[arg-type]
                                inputs=[], outputs=[])


def test_one_working_compaction_per_partition(store: Metastore, events: TableDefinition) -> None:
    cid, txn = begin(store, events)
    with pytest.raises(CommitConflictError, match=f"compaction {cid} .* is still working"):
        begin(store, events)
    other, other_txn = begin(store, events, "dt=2")  # another partition is free
    store.fail_compaction(cid, txn, "OSError: disk full")  # type: ignore[arg-type]

    def ours(*ids: int) -> list[Any]:
        # Hive 3.1's own initiator (on in the test server) may queue compactions of its own.
        return [c for c in store.compactions(events) if c.compaction_id in ids]

    (failed, working) = ours(cid, other)
    assert (failed.state, failed.txn_state, failed.error) == ("failed", "aborted",
                                                              "OSError: disk full")
    assert working.compaction_id == other
    third, _ = begin(store, events)  # a failed compaction no longer holds the partition
    store.forget_compaction(other, other_txn)  # type: ignore[arg-type]
    assert [c.partition for c in ours(cid, other, third)] == ["dt=1", "dt=1"]


@pytest.mark.requires("clock")  # a Hive Metastore times compactions by its own clock
def test_a_dead_compactor_is_taken_over(store: Metastore, events: TableDefinition,
                                        clock: Any) -> None:
    first, txn = begin(store, events)
    clock.advance(301)
    second, _ = begin(store, events)
    dead, working = store.compactions(events)
    assert (dead.compaction_id, dead.state, dead.txn_state) == (first, "failed", "aborted")
    assert "no heartbeat for 301.0 s" in (dead.error or "")
    assert working.compaction_id == second
    # The dead one cannot record afterwards: its output is in place, but the history says
    # so only through the compaction that took over.
    with pytest.raises(CommitConflictError, match="is failed"):
        store.finish_compaction(first, txn, highest_write_id=1, rows=0,  # type: ignore[arg-type]
                                inputs=[], outputs=[])
    # A process known to be gone is taken over at once; a heartbeat keeps a live one.
    store.heartbeat(_txn_of(store, events, second))
    with pytest.raises(CommitConflictError):
        begin(store, events, is_alive=lambda agent: True)
    third, _ = begin(store, events, is_alive=lambda agent: agent != "h:1:ingest-compact")
    assert "process (h:1:ingest-compact) is gone" in (store.compactions(events)[1].error or "")
    assert store.compactions(events)[2].compaction_id == third


@pytest.mark.requires("clock")  # a Hive Metastore times compactions by its own clock
def test_a_timed_out_transaction_shows_the_compaction_abandoned(
        store: Metastore, events: TableDefinition, clock: Any) -> None:
    begin(store, events)
    clock.advance(400)
    store.abort_timed_out(300)
    (info,) = store.compactions(events)
    assert info.state == "working" and info.txn_state == "aborted" and info.abandoned
    begin(store, events)
    assert [c.state for c in store.compactions(events)] == ["failed", "working"]


def test_bad_kind_and_unknown_table(store: Metastore, events: TableDefinition) -> None:
    with pytest.raises(ConfigError, match="'auto' compaction"):
        store.begin_compaction(events, "", "auto", agent="a", stale_after_s=1)
    nope = events.name.replace(".events", ".nope")
    with pytest.raises(Exception, match=f"Cannot find table {nope}"):
        store.begin_compaction(nope, "", "major", agent="a", stale_after_s=1)
    assert store.compactions(events) == []


def _txn_of(store: Metastore, events: TableDefinition, compaction_id: int) -> Transaction:
    info = next(c for c in store.compactions(events.name)
                if c.compaction_id == compaction_id)
    return Transaction(info.txn_id or 0, events.name, 0, info.started_at, info.agent)
