"""Each table's own offset ranges in a transaction across several tables: the checks every
backend makes before recording them (docs/many-tables.md, "Offsets and restarts").

A many-topic micro-batch commits the ranges of every topic it planned (`offsets`, the
stream's position, kept with its primary table) and, per other table, the ranges of the
topics routed to it (`table_offsets`), so `offset_ranges(table)` reports that table's topics
alone. Pure: the backends resolve table names first.
"""

from __future__ import annotations

from collections.abc import Iterable

from ingest.errors import ConfigError
from ingest.txn.model import OffsetRange, Transaction


def checked_table_ranges(txn: Transaction, ranges: list[OffsetRange],
                         per_table: Iterable[tuple[str, Iterable[OffsetRange]]]
                         ) -> dict[str, list[OffsetRange]]:
    """The per-table ranges of a commit of `txn`, by resolved table name, once checked.

    Args:
        txn: the transaction being committed.
        ranges: its ranges of every topic (commit's `offsets`).
        per_table: (resolved table name, that table's ranges) pairs.

    Raises:
        ConfigError: a table is the primary one (its ranges are all of `ranges`), one the
            transaction does not write, or named twice; a range is not one of `ranges`, or
            a table's ranges name a topic partition twice.
    """
    planned = {(r.topic, r.partition): r for r in ranges}
    write_ids = txn.write_ids
    out: dict[str, list[OffsetRange]] = {}
    for name, entries in per_table:
        why = ("it is the transaction's primary table, whose ranges are all of `offsets`"
               if name == txn.table else
               f"it writes {sorted(write_ids)} only" if name not in write_ids else
               "the table is named twice" if name in out else None)
        if why is not None:
            raise ConfigError(f"Cannot commit transaction {txn.txn_id} with per-table offsets "
                              f"of {name}: {why}")
        own = [OffsetRange(*r) for r in entries]
        for r in own:
            if planned.get((r.topic, r.partition)) != r:
                raise ConfigError(
                    f"Cannot commit transaction {txn.txn_id}: offset range {tuple(r)} of "
                    f"{name} is not one of the transaction's ranges (`offsets`)",
                    hint="a table's ranges are those of its own topics, as planned")
        if len({(r.topic, r.partition) for r in own}) != len(own):
            raise ConfigError(f"Cannot commit transaction {txn.txn_id}: the offsets of {name} "
                              "name a topic partition twice")
        out[name] = own
    return out


__all__ = ["checked_table_ranges"]
