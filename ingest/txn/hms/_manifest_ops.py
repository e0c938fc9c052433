"""`HiveMetastore`'s committed-file manifest: read it, record a compaction's outputs, forget
what the cleaner removed, each in a transaction of its own (`manifest.py`); and each target's
manifest table, which the commit writes inside its own transaction.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable

from ingest.acid.format import CommittedFile
from ingest.txn.hms._session import Session
from ingest.txn.hms.side import HmsManifest, is_side_table, own_transaction
from ingest.txn.hms.thrift import HiveTable
from ingest.txn.model import TableIdentifier


class ManifestOps:
    """The committed-file manifest of a `HiveMetastore` (see `Metastore`).

    Attributes:
        manifest: the manifest tables' reader and writer (`manifest.py`).
    """

    def __init__(self, session: Session) -> None:
        self._s = session
        self.manifest = HmsManifest(session.location)

    def committed_files(self, table: TableIdentifier) -> dict[str, CommittedFile]:
        """See `Metastore.committed_files`: the committed snapshot of the table's manifest
        table, folded (empty when no commit recorded files yet).

        Raises:
            TableNotFoundError: no such table.
            CorruptFileError: a committed delta of the manifest table does not read.
            MetastoreError: the metastore failed.
        """
        s = self._s
        with s.lock:
            found = s.read_retrying(lambda: s.hive_table(table))
            if is_side_table(found.name):
                return {}  # side tables keep no manifest (no side tables of side tables)
            return s.read_retrying(lambda: self.manifest.entries(s.conn, found))

    def record_committed_files(self, table: TableIdentifier,
                               files: Iterable[CommittedFile]) -> None:
        """See `Metastore.record_committed_files`: in a transaction of its own. Nothing is
        recorded for a side table (its compaction's outputs): it keeps no manifest, so that
        compacting it makes no side table of a side table."""
        entries = list(files)
        if not entries:
            return
        s = self._s
        with s.lock:
            s.writable("record committed files")
            found = s.hive_table(table)
            if is_side_table(found.name):
                return
            agent = _manifest_agent()
            with own_transaction(s.conn, agent=agent) as txn_id:
                self.manifest.write(s.conn, txn_id, found, record=entries, agent=agent)

    def forget_committed_files(self, table: TableIdentifier, paths: Iterable[str]) -> int:
        """See `Metastore.forget_committed_files`: in a transaction of its own, none when
        no path is listed (always for a side table, which keeps no manifest)."""
        wanted = list(paths)
        forgotten = 0
        s = self._s
        with s.lock:
            s.writable("forget committed files")
            found = s.hive_table(table)
            if is_side_table(found.name) or not set(wanted) & set(
                    self.manifest.entries(s.conn, found)):
                return 0
            agent = _manifest_agent()
            with own_transaction(s.conn, agent=agent) as txn_id:
                forgotten = self.manifest.write(s.conn, txn_id, found, forget=wanted,
                                                agent=agent)
        return forgotten

    def manifest_table(self, target: HiveTable) -> HiveTable:
        """The target's manifest table (registered first when missing), looked up once per
        target (forgotten when the session drops the target)."""
        s = self._s
        found = s.manifest_tables.get(target.name)
        if found is None:
            found = s.manifest_tables[target.name] = self.manifest.table(s.conn, target)
        return found


def _manifest_agent() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:ingest-manifest"


__all__ = ["ManifestOps"]
