"""Errors of the transaction store that ingest.errors has no word for.

The metastore's own storage (a SQLite file, a PostgreSQL server) failing is neither a missing
table nor a commit conflict; it gets `MetastoreError`, always chained `from` the driver's
exception.
"""

from __future__ import annotations

from ingest.errors import IngestError


class MetastoreError(IngestError):
    """The metastore database cannot be opened, read or written.

    Attributes:
        location: the metastore file path or URL (without its password) the error is about.
    """

    def __init__(self, message: str, *, location: str, hint: str | None = None) -> None:
        self.location = location
        super().__init__(message, hint=hint)


__all__ = ["MetastoreError"]
