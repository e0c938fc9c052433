"""One write to a table as one Hive Metastore transaction, as a context manager: open, heartbeat
on a second connection, allocate the write id, lock, and on a clean exit name the partitions
written and commit; on any exception abort (the server's timeout aborts it if even that fails).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ingest.errors import MetastoreError
from ingest.txn.hms.thrift.connection import HmsConnection, connect
from ingest.txn.hms.thrift.heartbeat import Heartbeater
from ingest.txn.hms.thrift.tables import HiveTable
from ingest.txn.hms.thrift.txns import (
    LOCK_TIMEOUT_S,
    abort_txn,
    allocate_write_ids,
    commit_txn,
    lock,
    open_txns,
    register_partitions,
)


@dataclass
class WriteTxn:
    """An open write: what the writer needs, and what it adds before the commit.

    Attributes:
        table: the table written.
        txn_id: the metastore's transaction.
        write_id: the table's write id for it (the delta directory's number).
        lock_id: the SHARED_READ/INSERT lock, released by the commit or abort.
        partitions: Hive names (`k=v/...`) of the partitions written, registered with
            `add_dynamic_partitions` before the commit; they must exist (`add_partitions`).
        key_value: (table id, `_meta...` key, value) for Hive 4's commit, or None.
    """

    table: HiveTable
    txn_id: int
    write_id: int
    lock_id: int
    partitions: list[str] = field(default_factory=list)
    key_value: tuple[int, str, str] | None = None


@contextmanager
def write_transaction(conn: HmsConnection, table: HiveTable, *,
                      lock_timeout_s: float = LOCK_TIMEOUT_S,
                      heartbeat_interval_s: float | None = None) -> Iterator[WriteTxn]:
    """Open a transaction that writes `table`; commit on a clean exit, abort on an exception.

    Args:
        heartbeat_interval_s: seconds between heartbeats; default half the server's
            `hive.txn.timeout`.

    Raises:
        UnsupportedFormatError: the table is not full-ACID ORC (before anything is opened).
        CommitConflictError: the lock was not granted in time, or the server aborted the
            transaction before the commit.
        MetastoreError: the metastore failed.
    """
    table.require_full_acid(conn.uri)
    (txn_id,) = open_txns(conn, 1)
    beats: Heartbeater | None = None
    try:
        beats = Heartbeater(conn.service_uri, txn_id, interval_s=heartbeat_interval_s,
                           info=conn.info, fresh=True).start()
        write_id = allocate_write_ids(conn, table.name, [txn_id])[txn_id]
        lock_id = lock(conn, txn_id, table, timeout_s=lock_timeout_s)
        write = WriteTxn(table, txn_id, write_id, lock_id)
        yield write
        beats.check()
        register_partitions(conn, txn_id, write_id, table, write.partitions)
        # Stopped first: a heartbeat after the commit would find the transaction gone.
        beats.stop()
        beats = None
        commit_txn(conn, txn_id, key_value=write.key_value)
    except BaseException as e:
        if beats is not None:
            beats.stop()
        _abort_quietly(conn, txn_id, e)
        raise


def _abort_quietly(conn: HmsConnection, txn_id: int, cause: BaseException) -> None:
    # Never hide the failure that led here: a failed abort only adds a note to it.
    try:
        try:
            abort_txn(conn, txn_id)
        except MetastoreError:
            with connect(conn.service_uri) as fresh:  # the first connection may be the broken part
                abort_txn(fresh, txn_id)
    except MetastoreError as e:
        cause.add_note(f"Transaction {txn_id} could not be aborted ({e.message}); the Hive "
                       "Metastore aborts it after hive.txn.timeout without heartbeats.")
