"""One value for "table T as of its committed snapshot": everything a correct read needs.

A read needs four things together: the valid write-id list, the committed-file manifest, which
compactor transactions (`_vT` directories) are committed, and a reader lease so the cleaner
keeps what the read uses. The metastore makes all four in one call (`Metastore.read_view`) and
ends the lease when the read ends; every reader plans from this value (docs/invariants.md, 7).
Plain data: the ACID layer never sees the metastore.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ingest.acid.format import CommittedFile, ValidWriteIdList
from ingest.acid.read.directories import VisibleTxn


@dataclass(frozen=True)
class ReadView:
    """A table as of one committed snapshot.

    Attributes:
        table: `db.table`, the name the snapshot is of.
        snapshot: the valid write-id list.
        committed: the committed-file manifest, entries by path relative to the table root
            (empty for a metastore that predates it: files then read as they are).
        visible_txn: whether the compactor transaction T of a `_vT` directory is committed;
            None takes every `_vT` directory as committed (no metastore).
        lease_id: the reader registration the cleaner honours while the read runs; None when
            the read is unregistered (a read-only metastore, or no metastore).
    """

    table: str
    snapshot: ValidWriteIdList
    committed: Mapping[str, CommittedFile] = field(default_factory=dict)
    visible_txn: VisibleTxn | None = None
    lease_id: int | None = None

    @classmethod
    def unchecked(cls, snapshot: ValidWriteIdList) -> ReadView:
        """A view of files on disk without a metastore: no manifest, every `_vT` visible."""
        return cls(snapshot.table, snapshot)


__all__ = ["ReadView"]
