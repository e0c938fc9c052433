"""A table's history from its metastore: one entry per write id, with the transaction's state,
agent, times and the Kafka offset ranges its commit consumed (Hive's `SHOW TRANSACTIONS`
joined with the sink's offsets). Reads `ingest.txn` only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.txn import Metastore, OffsetRange, TableDefinition, TxnState


@dataclass(frozen=True)
class Commit:
    """One write id of a table and the transaction that took it.

    Attributes:
        write_id: the table's write id.
        txn_id: the global transaction id.
        state: "open", "committed" or "aborted".
        agent: who opened it (host:pid:what, or the streaming sink's id).
        opened_at, finished_at: Unix seconds; finished_at is None while open.
        reason: why it was aborted, if it was; for a column change's own transaction (agent
            `ingest-alter`), "ALTER TABLE: schema version N" (docs/format.md §25).
        offsets: Kafka ranges [from, until) the commit consumed, by topic and partition.
    """

    write_id: int
    txn_id: int
    state: TxnState
    agent: str
    opened_at: float
    finished_at: float | None
    reason: str | None
    offsets: tuple[OffsetRange, ...] = ()


def table_history(store: Metastore, table: TableDefinition | str) -> list[Commit]:
    """Every write id of `table`, oldest first.

    Raises:
        TableNotFoundError: no such table.
        MetastoreError: the database failed.
    """
    offsets: dict[int, list[OffsetRange]] = {}
    for write_id, r in store.offset_ranges(table):
        offsets.setdefault(write_id, []).append(r)
    out = [Commit(t.write_id, t.txn_id, t.state, t.agent, t.opened_at, t.finished_at, t.reason,
                  tuple(offsets.get(t.write_id, ())))
           for t in store.transactions(table)]
    return sorted(out, key=lambda c: c.write_id)


__all__ = ["Commit", "table_history"]
