"""`HiveMetastore`'s reads of a stream's progress: the committed rows of a target's progress
table (`progress.py`, docs/invariants.md 8.11).
"""

from __future__ import annotations

from ingest.acid import ValidWriteIdList
from ingest.errors import ConfigError
from ingest.txn.hms._session import Session
from ingest.txn.hms.side import ProgressCache, ProgressRow
from ingest.txn.hms.thrift import HiveTable, snapshot
from ingest.txn.model import OffsetRange, TableIdentifier


class ProgressOps:
    """Sink progress of a `HiveMetastore` (see `Metastore` for the contract); the commit
    checks a micro-batch against it too (`committed_write_id_in`)."""

    def __init__(self, session: Session) -> None:
        self._s = session
        self._cache = ProgressCache()

    def committed_write_id(self, sink_id: str, batch_id: int, *,
                           table: TableIdentifier | None = None) -> int | None:
        """See `Metastore.committed_write_id`. Progress is kept per target table here:
        `table` names it; without it, the part of `sink_id` before `@` (the streaming job's
        sink ids are `<db.table>@<checkpoint>`).

        Raises:
            ConfigError: neither `table` nor the sink id names a table.
            TableNotFoundError: the target table is not in the metastore.
            MetastoreError: the metastore failed.
        """
        s = self._s
        with s.lock:
            progress = self._progress_of(sink_id, table)
            if progress is None:
                return None
            return s.read_retrying(
                lambda: self.committed_write_id_in(progress, sink_id, batch_id))

    def last_committed_batch(self, sink_id: str, *,
                             table: TableIdentifier | None = None) -> int | None:
        """See `Metastore.last_committed_batch` and, for `table`, `committed_write_id`.

        Raises:
            ConfigError: neither `table` nor the sink id names a table.
            TableNotFoundError: the target table is not in the metastore.
            MetastoreError: the metastore failed.
        """
        s = self._s
        with s.lock:
            progress = self._progress_of(sink_id, table)
            if progress is None:
                return None
            rows = s.read_retrying(lambda: self._rows(progress))
        batches = [r.batch_id for r in rows if r.sink_id == sink_id and r.batch_id is not None]
        return max(batches, default=None)

    def _progress_of(self, sink_id: str, table: TableIdentifier | None) -> HiveTable | None:
        """The progress table of the sink's target table, or None before its first commit."""
        s = self._s
        return s.read_retrying(lambda: s.progress_table(
            self._sink_target(sink_id, table), create=False))

    def offset_ranges(self, table: TableIdentifier) -> list[tuple[int, OffsetRange]]:
        """See `Metastore.offset_ranges`: the ranges of the table's progress rows."""
        s = self._s
        with s.lock:
            progress = s.progress_table(s.hive_table(table), create=False)
            rows = [] if progress is None else self._rows(progress)
        out = [(r.write_id, o) for r in rows for o in r.offsets]
        return sorted(out, key=lambda x: (x[0], x[1].topic, x[1].partition))

    def _sink_target(self, sink_id: str, table: TableIdentifier | None) -> HiveTable:
        if table is None:
            named = sink_id.split("@", 1)[0] if "@" in sink_id else ""
            if "." not in named:
                raise ConfigError(
                    f"Cannot read the progress of sink {sink_id!r} in the Hive Metastore at "
                    f"{self._s.location}: progress is kept per table there, and neither the "
                    "call nor the sink id (expected '<db.table>@...') names the table",
                    hint="pass table= to committed_write_id / last_committed_batch")
            table = named
        return self._s.hive_table(table)

    def _rows(self, progress: HiveTable) -> list[ProgressRow]:
        return self._cache.rows(progress, snapshot(self._s.conn, progress.name))

    def committed_write_id_in(self, progress: HiveTable, sink_id: str, batch_id: int, *,
                              ids: ValidWriteIdList | None = None) -> int | None:
        """The write id that committed the sink's micro-batch, read from the progress table
        `progress` at its committed snapshot now, or at `ids` (the commit's own, taken under
        its lock); None when it is not there."""
        rows = self._rows(progress) if ids is None else self._cache.rows(progress, ids)
        found = [r.write_id for r in rows if r.sink_id == sink_id and r.batch_id == batch_id]
        return found[0] if found else None


__all__ = ["ProgressOps"]
