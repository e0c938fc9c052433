"""The exception hierarchy of `ingest`: one root, grouped by what the caller does next.

Storage failures stay builtin (FileNotFoundError, PermissionError); everything this package
decides is wrong raises a subclass of IngestError whose str() is the full sentence.
"""

from __future__ import annotations


class IngestError(Exception):
    """Root of every error `ingest` raises on purpose.

    Attributes:
        hint: what the user can do about it, or None.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message} Hint: {hint}")


class TableNotFoundError(IngestError):
    """The table is not in the metastore and there is no ACID table at its location."""

    def __init__(self, message: str, *, table: str, hint: str | None = None) -> None:
        self.table = table
        super().__init__(message, hint=hint)


class TableExistsError(IngestError):
    """A table was to be created where one already exists."""

    def __init__(self, message: str, *, table: str, hint: str | None = None) -> None:
        self.table = table
        super().__init__(message, hint=hint)


class CommitConflictError(IngestError):
    """Someone else changed the state this commit was conditioned on; retrying may succeed."""


class CorruptFileError(IngestError):
    """A file's bytes are not what the format says they must be."""

    def __init__(
        self, message: str, *, path: str, offset: int | None = None, hint: str | None = None
    ) -> None:
        self.path = path
        self.offset = offset
        super().__init__(message, hint=hint)


class UnsupportedFormatError(IngestError):
    """The input is well formed but uses something this version does not support."""


class SchemaMismatchError(IngestError):
    """Data does not fit the schema it is written to."""


class BadRecordError(IngestError):
    """One input record cannot be parsed; it goes to the dead letter or stops the query."""


class ConfigError(IngestError):
    """Bad options or configuration; the CLI exits with code 2."""


class StorageError(IngestError, OSError):
    """The storage behind a table location failed: unreachable endpoint, refused
    credentials, a missing bucket. Also an OSError, so storage-failure handlers still see it.

    Attributes:
        location: the table location the command named.
        endpoint: the endpoint URL its options name, or None for the provider's default.
    """

    def __init__(self, message: str, *, location: str, endpoint: str | None,
                 hint: str | None = None) -> None:
        self.location = location
        self.endpoint = endpoint
        IngestError.__init__(self, message, hint=hint)


__all__ = [
    "BadRecordError",
    "CommitConflictError",
    "ConfigError",
    "CorruptFileError",
    "IngestError",
    "SchemaMismatchError",
    "StorageError",
    "TableExistsError",
    "TableNotFoundError",
    "UnsupportedFormatError",
]
