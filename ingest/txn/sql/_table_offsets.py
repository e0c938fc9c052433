"""Each table's own Kafka ranges in a transaction across several tables (schema version 5).

A many-topic stream's micro-batch writes its anchor table and every table its topics route to
in one transaction (docs/many-tables.md). `txn_offsets` holds the micro-batch's ranges of
every topic, the stream's position; `table_offsets` gives each table only the ranges of its
own topics, so `offset_ranges(table)` (and `ingest status`, lag, verify) see that table's
topics alone. A transaction with rows here gives every table it wrote exactly its rows here,
the primary table included (its rows repeat `txn_offsets`, which marks the transaction as
one with per-table ranges); one without rows here gives every table all of `txn_offsets`'
ranges, as every transaction did before version 5.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import sqlalchemy as sa

from ingest.txn.model import OffsetRange, Transaction
from ingest.txn.sql._database import Part
from ingest.txn.sql._schema import table_offsets, txn_offsets, txn_to_write_id
from ingest.txn.table_ranges import checked_table_ranges


class TableOffsets(Part):
    """The `table_offsets` rows of one database: written by a commit, read by
    `offset_ranges`."""

    since_version = 5
    what = "per-table offset ranges"

    def record(self, c: sa.Connection, txn: Transaction, ranges: list[OffsetRange],
               per_table: Mapping[str, Iterable[OffsetRange]], *,
               names: Mapping[str, str] | None = None) -> None:
        """Insert `per_table`'s ranges (tables by name or location) and the primary table's
        (all of `ranges`) inside the commit's database transaction `c`. `names`: the stored
        name of each of `per_table`'s tables, when the caller looked them up already.

        Raises:
            ConfigError: see `checked_table_ranges`.
            TableNotFoundError: an unknown table.
            MetastoreError: the database predates schema version 5 (a read-only open).
        """
        self.require("record per-table offset ranges")
        rows = checked_table_ranges(
            txn, ranges, [(names[t] if names is not None else self._db.resolve(c, t), r)
                          for t, r in per_table.items()])
        if not ranges:
            return  # nothing to record: every table's ranges are empty either way
        rows[txn.table] = ranges
        c.execute(sa.insert(table_offsets), [
            {"txn_id": txn.txn_id, "table_name": name, "topic": r.topic,
             "partition": r.partition, "from_offset": r.from_offset,
             "until_offset": r.until_offset}
            for name, own in rows.items() for r in own])

    def ranges_of(self, c: sa.Connection, name: str) -> list[tuple[int, OffsetRange]]:
        """Table `name`'s (write id, range) pairs of committed transactions, unordered: its
        own rows of transactions with per-table ranges, and all `txn_offsets` rows of the
        others (every transaction of a database below version 5)."""
        o, w = txn_offsets, txn_to_write_id
        legacy = (sa.select(w.c.write_id, o.c.topic, o.c.partition, o.c.from_offset,
                            o.c.until_offset)
                  .join(w, w.c.txn_id == o.c.txn_id).where(w.c.table_name == name))
        if self.available:
            t = table_offsets
            legacy = legacy.where(~sa.exists().where(t.c.txn_id == o.c.txn_id))
            own = (sa.select(w.c.write_id, t.c.topic, t.c.partition, t.c.from_offset,
                             t.c.until_offset)
                   .join(w, sa.and_(w.c.txn_id == t.c.txn_id, w.c.table_name == t.c.table_name))
                   .where(t.c.table_name == name))
            rows = [*c.execute(legacy).all(), *c.execute(own).all()]
        else:
            rows = list(c.execute(legacy).all())
        return [(int(row[0]), OffsetRange(row[1], int(row[2]), int(row[3]), int(row[4])))
                for row in rows]

    def drop_table(self, c: sa.Connection, name: str) -> None:
        """Remove a dropped table's rows, inside the caller's transaction."""
        if self.available:
            c.execute(sa.delete(table_offsets).where(table_offsets.c.table_name == name))


__all__ = ["TableOffsets"]
