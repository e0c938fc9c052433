"""Write-write conflicts at commit: Hive's WRITE_SET in miniature.

A transaction that updated or deleted rows declares at commit the partitions and buckets it
did so in. Under the metastore's write lock (docs/invariants.md 9) the commit looks for a
transaction that committed after ours opened and declared one of the same (partition,
bucket) pairs of the same table: if there is one, the first committer won and ours aborts
(`TxnHandler.commitTxn`'s WRITE_SET check, at bucket rather than partition granularity: a
key's bucket is a function of the key, docs/format.md §24, so two writers of one key always
meet in one bucket). Otherwise ours records its pairs, and rows no open transaction can
conflict with any more are dropped (Hive's `performWriteSetGC`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import sqlalchemy as sa

from ingest.txn.model import Transaction
from ingest.txn.sql._database import Part
from ingest.txn.sql._schema import txns, write_set

WriteSet = Mapping[str, Iterable[int]]
"""Partition (relative to the table root, '' if none) → the buckets updated or deleted in."""


class WriteSets(Part):
    """The `write_set` table of one database."""

    since_version = 3
    what = "write set"

    def check_and_record(self, c: sa.Connection, txn: Transaction, table_name: str,
                         updated: WriteSet) -> str | None:
        """Inside the commit's write transaction: the reason `txn` conflicts, or None after
        recording its pairs.

        Args:
            c: the commit's connection (the write lock is held).
            txn: the committing transaction.
            table_name: the table the pairs are of (resolved name).
            updated: what `txn` updated or deleted in.

        Raises:
            MetastoreError: the metastore's schema predates the write set.
        """
        pairs = {(str(p), int(b)) for p, buckets in updated.items() for b in buckets}
        if not pairs:
            return None
        self.require("check write-write conflicts")
        rows = c.execute(
            sa.select(write_set.c.partition, write_set.c.bucket, write_set.c.txn_id)
            .where(write_set.c.table_name == table_name,
                   write_set.c.commit_id >= txn.txn_id,
                   write_set.c.txn_id != txn.txn_id)
            .order_by(write_set.c.commit_id)).all()
        for partition, bucket, other in rows:
            if (partition, bucket) in pairs:
                where = f"partition {partition!r}, " if partition else ""
                return (f"write-write conflict: transaction {other} committed updates or "
                        f"deletes in {table_name} ({where}bucket {bucket}) after transaction "
                        f"{txn.txn_id} opened")
        commit_id = int(c.execute(sa.select(sa.func.max(txns.c.txn_id))).scalar_one())
        c.execute(sa.insert(write_set), [
            {"table_name": table_name, "partition": p, "bucket": b, "txn_id": txn.txn_id,
             "commit_id": commit_id} for p, b in sorted(pairs)])
        self._forget_old(c, commit_id)
        return None

    @staticmethod
    def _forget_old(c: sa.Connection, commit_id: int) -> None:
        """Drop rows committed before every open transaction opened: none can conflict."""
        oldest = c.execute(sa.select(sa.func.min(txns.c.txn_id))
                           .where(txns.c.state == "open")).scalar_one_or_none()
        below = commit_id + 1 if oldest is None else int(oldest)
        c.execute(sa.delete(write_set).where(write_set.c.commit_id < below))


__all__ = ["WriteSet", "WriteSets"]
