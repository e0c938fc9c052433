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


class MetastoreError(IngestError):
    """The metastore database cannot be opened, read or written: neither a missing table nor
    a commit conflict; always chained `from` the driver's (or Thrift's) exception.

    Attributes:
        location: the metastore file path or URL (without its password) the error is about.
    """

    def __init__(self, message: str, *, location: str, hint: str | None = None) -> None:
        self.location = location
        super().__init__(message, hint=hint)


class UnknownMethodError(MetastoreError):
    """A Hive Metastore does not implement a Thrift method (an older Hive).

    Attributes:
        method: the Thrift method name.
    """

    def __init__(self, message: str, *, location: str, method: str,
                 hint: str | None = None) -> None:
        self.method = method
        super().__init__(message, location=location, hint=hint)


class KafkaConnectError(IngestError):
    """The broker could not be reached or refused this client (authentication, TLS, ACL)."""


class NotEnoughHistoryError(IngestError):
    """Hive's ACID_NOT_ENOUGH_HISTORY: the only bases are compactor output this snapshot cannot use.

    A compacted base erases history, so a reader whose snapshot still has a write id inside it
    open cannot read the partition; a newer snapshot can.
    """

    def __init__(
        self, message: str, *, oldest_base: str, high_watermark: int, hint: str | None = None
    ) -> None:
        self.oldest_base = oldest_base
        self.high_watermark = high_watermark
        super().__init__(message, hint=hint)


# Raised and caught inside the ORC and ACID layers, which turn them into a CorruptFileError
# naming the file; also ValueErrors, as they were before they joined this hierarchy.

class TailError(IngestError, ValueError):
    """The bytes at the end of the region are not a complete ORC tail."""

    def __init__(self, message: str, offset: int | None = None, *,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.offset = offset


class WireError(IngestError, ValueError):
    """The bytes are not a valid protobuf message."""


class EventOrderError(IngestError, ValueError):
    """Events were handed over out of Hive's order: the caller sorts them and starts again."""


__all__ = [
    "BadRecordError",
    "CommitConflictError",
    "ConfigError",
    "CorruptFileError",
    "EventOrderError",
    "IngestError",
    "KafkaConnectError",
    "MetastoreError",
    "NotEnoughHistoryError",
    "SchemaMismatchError",
    "StorageError",
    "TableExistsError",
    "TableNotFoundError",
    "TailError",
    "UnknownMethodError",
    "UnsupportedFormatError",
    "WireError",
]
