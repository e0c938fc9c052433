"""Random open/batch/commit/abort/time-out sequences against a dict model of the snapshot."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.acid.format.writeids import ValidWriteIdList
from ingest.errors import CommitConflictError
from ingest.txn import Metastore, TableDefinition, Transaction

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("open"), st.sampled_from(["a", "b"]), st.booleans()),
        st.tuples(st.just("batch"), st.sampled_from(["a", "b"]), st.integers(1, 4)),
        st.tuples(st.just("commit"), st.integers(0, 50), st.booleans()),
        st.tuples(st.just("abort"), st.integers(0, 50), st.booleans()),
        st.tuples(st.just("tick"), st.integers(0, 3), st.booleans()),
    ),
    max_size=40,
)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_snapshot_matches_model(ops: list[tuple[str, object, object]]) -> None:
    clock = Clock()
    schema = pa.schema([("x", pa.int64())])
    with Metastore.open("sqlite://:memory:", clock=clock) as store:
        for name in "ab":
            store.create_table(TableDefinition(name, f"memory://wh/{name}", schema))
        model: dict[str, dict[int, str]] = {"default.a": {}, "default.b": {}}
        txns: list[Transaction] = []
        txn_state: dict[int, str] = {}
        heartbeat: dict[int, float] = {}

        def set_state(txn: Transaction, state: str) -> None:
            txn_state[txn.txn_id] = state
            for table, write_id in txn.write_ids.items():
                model[table][write_id] = state

        for op, x, y in ops:
            new: list[Transaction] = []
            if op == "open":
                other = ["b" if x == "a" else "a"] if y else []
                new = [store.open_transaction(str(x), also=other)]
            elif op == "batch":
                new = store.allocate_write_ids(str(x), int(y))  # type: ignore[call-overload]
            elif op == "tick":
                clock.now += int(x)  # type: ignore[call-overload]
                if y:
                    for t in store.abort_timed_out(2.5):
                        assert txn_state[t.txn_id] == "open"
                        assert clock.now - heartbeat[t.txn_id] > 2.5
                        set_state(t, "aborted")
            else:
                if not txns:
                    continue
                txn = txns[int(x) % len(txns)]  # type: ignore[call-overload]
                if y and txn_state[txn.txn_id] == "open":
                    store.heartbeat(txn)
                    heartbeat[txn.txn_id] = clock.now
                before = txn_state[txn.txn_id]
                try:
                    (store.commit if op == "commit" else store.abort)(txn)
                except CommitConflictError:
                    assert before != "open"
                    assert not (op == "abort" and before == "aborted")
                else:
                    assert before == "open" or (op == "abort" and before == "aborted")
                    set_state(txn, "committed" if op == "commit" else "aborted")
            for t in new:
                for table, write_id in t.write_ids.items():
                    assert write_id == len(model[table]) + 1
                set_state(t, "open")
                heartbeat[t.txn_id] = clock.now
            txns.extend(new)

            for table, states in model.items():
                expected = ValidWriteIdList(
                    table,
                    len(states),
                    tuple(w for w, s in states.items() if s == "open"),
                    tuple(w for w, s in states.items() if s == "aborted"),
                )
                assert store.snapshot(table) == expected
                assert store.write_id_states(table) == states
