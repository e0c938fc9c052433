"""`HiveMetastore`'s snapshots and what readers see: a table's write ids, leased snapshots (a read
transaction holding a SHARED_READ lock, `leases.py`), transactions and write id states.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager

from ingest.acid import ValidWriteIdList
from ingest.errors import MetastoreError
from ingest.txn.hms._catalog import all_tables
from ingest.txn.hms._session import Session
from ingest.txn.hms._states import table_transactions, write_id_of, write_id_states
from ingest.txn.hms.side import is_side_table
from ingest.txn.hms.thrift import begin_read, end_read, holding, renew_read, snapshot, txn_snapshot
from ingest.txn.metastore import READER_HEARTBEAT_S
from ingest.txn.model import TXN_STATES, TableIdentifier, TransactionInfo, TxnState


class ReadOps:
    """Snapshots and reader leases of a `HiveMetastore` (see `Metastore`)."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def snapshot(self, table: TableIdentifier) -> ValidWriteIdList:
        s = self._s
        with s.lock:
            return s.read_retrying(lambda: snapshot(s.conn, s.hive_table(table).name))

    @contextmanager
    def _leased(self, table: TableIdentifier, agent: str, heartbeat_s: float,
                keep_lease: bool) -> Iterator[tuple[int | None, ValidWriteIdList]]:
        s = self._s
        if not s.leases:
            yield None, self.snapshot(table)
            return
        with s.lock:
            found = s.hive_table(table)
            reader_id, taken = begin_read(s.conn, found, agent=agent)
            # Within the server's time-out whatever the caller asks: it aborts silent ones.
            interval_s = min(heartbeat_s, s.conn.info.heartbeat_interval_s)
        with holding(s.current.service_uri, reader_id, interval_s=interval_s, keep=keep_lease,
                     end=self.end_reader, info=s.current.info):
            yield reader_id, taken

    def leased_snapshot(
        self, table: TableIdentifier, *, agent: str, heartbeat_s: float = READER_HEARTBEAT_S,
        keep_lease: bool = False,
    ) -> AbstractContextManager[tuple[int | None, ValidWriteIdList]]:
        """See `Metastore.leased_snapshot`. The lease is a read transaction of the metastore
        holding a SHARED_READ lock for SELECT on the table (Hive's and Trino's way to read,
        `leases.py`); its id is the transaction id. Heartbeated every `heartbeat_s`, or half
        the server's `hive.txn.timeout` when that is shorter. Opened read-only
        (`Metastore.open(..., read_only=True)`), nothing is registered.

        Raises:
            TableNotFoundError: no such table.
            CommitConflictError: the SHARED_READ lock was not granted in time (an EXCLUSIVE
                lock on the table, e.g. a DROP TABLE's, is held).
            MetastoreError: the metastore failed.
        """
        return self._leased(table, agent, heartbeat_s, keep_lease)

    def heartbeat_reader(self, reader_id: int) -> bool:
        """See `Metastore.heartbeat_reader`: heartbeats the read transaction."""
        s = self._s
        if not s.leases:
            s.writable(f"renew reader lease {reader_id}")
        with s.lock:
            return renew_read(s.conn, reader_id)

    def end_reader(self, reader_id: int) -> None:
        """See `Metastore.end_reader`: commits the read transaction, releasing its lock."""
        s = self._s
        with s.lock:
            try:
                conn = s.conn
            except MetastoreError:
                conn = None
            if conn is not None:
                end_read(conn, reader_id, location=s.location)

    def transactions(
        self, table: TableIdentifier | None = None, *, states: Iterable[TxnState] = TXN_STATES
    ) -> list[TransactionInfo]:
        """See `Metastore.transactions`. Committed write ids come with txn id 0: the
        metastore does not say which transaction wrote them."""
        wanted = tuple(states)
        s = self._s
        with s.lock:
            names = ([s.hive_table(table).name] if table is not None
                     else [t.name for t in all_tables(s.conn)
                           if t.full_acid_problem() is None and not is_side_table(t.name)])
            return table_transactions(s.conn, names, wanted)

    def write_id_states(self, table: TableIdentifier) -> dict[int, TxnState]:
        return write_id_states(self.snapshot(table))

    def write_id_of(self, txn_id: int, table: TableIdentifier) -> int | None:
        """The write id transaction `txn_id` holds on `table`, or None.

        Raises:
            TableNotFoundError: no such table.
            MetastoreError: the metastore failed.
        """
        s = self._s
        with s.lock:
            name = s.hive_table(table).name
            return write_id_of(s.conn, name, txn_id, txn_snapshot(s.conn).high_watermark)


__all__ = ["ReadOps"]
