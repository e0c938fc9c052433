"""`HiveMetastore`'s reads of a stream's progress: the committed rows of a target's progress
table (`progress.py`, docs/invariants.md 8.11).
"""

from __future__ import annotations

from ingest.acid import ValidWriteIdList
from ingest.errors import ConfigError
from ingest.txn.hms._base import HmsBase
from ingest.txn.hms.progress import ProgressRow
from ingest.txn.hms.tables import HiveTable
from ingest.txn.hms.txns import snapshot
from ingest.txn.model import OffsetRange, TableRef


class ProgressOps(HmsBase):
    """Sink progress of a `HiveMetastore` (see `Metastore` for the contract)."""

    def committed_write_id(self, sink_id: str, batch_id: int, *,
                           table: TableRef | None = None) -> int | None:
        """See `Metastore.committed_write_id`. Progress is kept per target table here:
        `table` names it; without it, the part of `sink_id` before `@` (the streaming job's
        sink ids are `<db.table>@<checkpoint>`).

        Raises:
            ConfigError: neither `table` nor the sink id names a table.
            TableNotFoundError: the target table is not in the metastore.
            MetastoreError: the metastore failed.
        """
        with self._lock:
            progress = self._progress_of(sink_id, table)
            if progress is None:
                return None
            return self._read_retrying(
                lambda: self._committed_write_id(progress, sink_id, batch_id))

    def last_committed_batch(self, sink_id: str, *,
                             table: TableRef | None = None) -> int | None:
        """See `Metastore.last_committed_batch` and, for `table`, `committed_write_id`.

        Raises:
            ConfigError: neither `table` nor the sink id names a table.
            TableNotFoundError: the target table is not in the metastore.
            MetastoreError: the metastore failed.
        """
        with self._lock:
            progress = self._progress_of(sink_id, table)
            if progress is None:
                return None
            rows = self._read_retrying(lambda: self._progress_rows(progress))
        batches = [r.batch_id for r in rows if r.sink_id == sink_id and r.batch_id is not None]
        return max(batches, default=None)

    def _progress_of(self, sink_id: str, table: TableRef | None) -> HiveTable | None:
        """The progress table of the sink's target table, or None before its first commit."""
        return self._read_retrying(lambda: self._progress_table(
            self._sink_target(sink_id, table), create=False))

    def offset_ranges(self, table: TableRef) -> list[tuple[int, OffsetRange]]:
        """See `Metastore.offset_ranges`: the ranges of the table's progress rows."""
        with self._lock:
            progress = self._progress_table(self._hive_table(table), create=False)
            rows = [] if progress is None else self._progress_rows(progress)
        out = [(r.write_id, o) for r in rows for o in r.offsets]
        return sorted(out, key=lambda x: (x[0], x[1].topic, x[1].partition))

    def _sink_target(self, sink_id: str, table: TableRef | None) -> HiveTable:
        if table is None:
            named = sink_id.split("@", 1)[0] if "@" in sink_id else ""
            if "." not in named:
                raise ConfigError(
                    f"Cannot read the progress of sink {sink_id!r} in the Hive Metastore at "
                    f"{self.location}: progress is kept per table there, and neither the call "
                    "nor the sink id (expected '<db.table>@...') names the table",
                    hint="pass table= to committed_write_id / last_committed_batch")
            table = named
        return self._hive_table(table)

    def _progress_rows(self, progress: HiveTable) -> list[ProgressRow]:
        return self._progress.rows(progress, snapshot(self._conn, progress.name))

    def _committed_write_id(self, progress: HiveTable, sink_id: str, batch_id: int, *,
                            ids: ValidWriteIdList | None = None) -> int | None:
        rows = (self._progress_rows(progress) if ids is None
                else self._progress.rows(progress, ids))
        found = [r.write_id for r in rows if r.sink_id == sink_id and r.batch_id == batch_id]
        return found[0] if found else None


__all__ = ["ProgressOps"]
