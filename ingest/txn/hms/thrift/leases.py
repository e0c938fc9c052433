"""Reader leases in a Hive Metastore, taken Hive's own way: a read is a transaction of the
metastore that holds a SHARED_READ lock for SELECT on the table, heartbeated while it reads
and committed at its end, as Hive's Driver and Trino's Hive connector read ACID tables.

The lease id is the transaction id. Every cleaner respects it: ours counts each open
transaction as a reader (`HiveMetastore.live_readers`: one opened before a compaction
committed keeps that compaction's inputs), Hive 4's keeps obsolete directories while a
transaction older than the compaction's commit is open, and Hive 3's waits for the locks taken
before it. A lease the server aborted (no heartbeat within `hive.txn.timeout`) has lapsed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ingest.acid import ValidWriteIdList
from ingest.errors import IngestError, MetastoreError
from ingest.txn.hms.thrift.connection import HmsConnection, ServerInfo
from ingest.txn.hms.thrift.heartbeat import Heartbeater
from ingest.txn.hms.thrift.tables import HiveTable
from ingest.txn.hms.thrift.txns import abort_txn, commit_txn, heartbeat, lock, open_txns, snapshot

log = logging.getLogger(__name__)


def begin_read(conn: HmsConnection, table: HiveTable, *,
               agent: str) -> tuple[int, ValidWriteIdList]:
    """Open a read transaction, take its SHARED_READ lock on `table`, then the snapshot; (the
    transaction id, the snapshot).

    The snapshot comes after the transaction opened: a compaction that commits after that
    counts the reader as older than itself and keeps its inputs, whichever snapshot it took.

    Raises:
        CommitConflictError: the lock was not granted in time (an EXCLUSIVE lock is held, e.g.
            by a DROP TABLE); the transaction is aborted.
        MetastoreError: the metastore failed.
    """
    (txn_id,) = open_txns(conn, 1, agent=agent)
    try:
        lock(conn, txn_id, table, lock_type="SHARED_READ", operation="SELECT", agent=agent)
        return txn_id, snapshot(conn, table.name)
    except BaseException:
        try:
            abort_txn(conn, txn_id)
        except MetastoreError:
            pass  # the error below says what failed; the server's timeout aborts it
        raise


def renew_read(conn: HmsConnection, txn_id: int) -> bool:
    """Heartbeat a read transaction; False when the server no longer has it open.

    Raises:
        MetastoreError: the metastore failed.
    """
    return heartbeat(conn, txn_id, txn_id).ok


def end_read(conn: HmsConnection, txn_id: int, *, location: str) -> None:
    """Commit a read transaction (its lock goes with it); a failure is logged, never raised:
    the server aborts it after `hive.txn.timeout` anyway."""
    try:
        commit_txn(conn, txn_id)
    except IngestError:
        log.warning("could not end the read transaction %d in the Hive Metastore at %s; it "
                    "lapses after hive.txn.timeout", txn_id, location, exc_info=True)


@contextmanager
def holding(uri: str, txn_id: int, *, interval_s: float, keep: bool,
            end: Callable[[int], None], info: ServerInfo | None = None) -> Iterator[None]:
    """Heartbeat read transaction `txn_id` on a connection of its own while the block runs;
    then `end` it, unless `keep` and the block ended without an exception. `info`: the
    server as another connection knows it (`connect`).

    Raises:
        MetastoreError: the heartbeat's connection cannot be opened (the lease is ended).
    """
    try:
        beats = Heartbeater(uri, txn_id, interval_s=interval_s, info=info).start()
    except BaseException:
        end(txn_id)
        raise
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        beats.stop()
        if failed or not keep:
            end(txn_id)


__all__ = ["begin_read", "end_read", "holding", "renew_read"]
