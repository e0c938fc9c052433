"""The SQLite plumbing under the metastore: URLs, one connection, transactions, table rows.

Every driver error leaves here as a MetastoreError naming the file. Writes take
`BEGIN IMMEDIATE` (SQLite's write lock at once, so allocations in several processes are
serial); the file is in WAL mode so readers do not block the writer.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self

import pyarrow as pa

from ingest.errors import ConfigError, TableNotFoundError
from ingest.txn._schema import SCHEMA_VERSION, ensure_schema
from ingest.txn.errors import MetastoreError
from ingest.txn.locations import normalize_location
from ingest.txn.model import TableDefinition, qualify_table_name

TableRef = str | TableDefinition
"""A table given as its definition, its `db.table` name, or its location (path or URL)."""

MEMORY_URL = "sqlite://:memory:"


def table_key(table: TableRef) -> tuple[str, str]:
    """(column, value) identifying a table: a string with a slash or scheme is a location."""
    if isinstance(table, TableDefinition):
        return "name", table.name
    if "://" in table or "/" in table or table.startswith(("~", "file:")):
        return "location", normalize_location(table)
    return "name", qualify_table_name(table)


def sqlite_path(url: str) -> str:
    """The sqlite3 database argument for a `sqlite://` URL (":memory:" or an absolute path)."""
    if not url.startswith("sqlite://"):
        raise ConfigError(
            f"Cannot open metastore {url!r}: only sqlite:// URLs are supported",
            hint="use 'sqlite:///absolute/path.sqlite' or 'sqlite://:memory:'",
        )
    rest = url[len("sqlite://") :]
    if rest in (":memory:", "/:memory:"):
        return ":memory:"
    if not rest.startswith("/"):
        raise ConfigError(
            f"Cannot open metastore {url!r}: the path must be absolute",
            hint="write three slashes: 'sqlite:///absolute/path.sqlite'",
        )
    return rest


TABLE_COLUMNS = (
    "name, location, row_schema, partition_columns, bucket_count, bucket_columns, properties"
)


def table_from_row(row: Sequence[Any]) -> TableDefinition:
    name, location, schema, partitions, bucket_count, buckets, properties = row
    return TableDefinition(
        name=name,
        location=location,
        row_schema=pa.ipc.read_schema(pa.py_buffer(schema)),
        partition_columns=tuple(json.loads(partitions)),
        bucket_count=int(bucket_count),
        bucket_columns=tuple(json.loads(buckets)),
        properties=dict(json.loads(properties)),
    )


class SqliteStore:
    """One SQLite connection shared by a process's threads, plus table lookup.

    Holds one connection and serialises its own threads with a lock (a heartbeat thread may
    share it with the writer). Processes coordinate through SQLite's file locks.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        url: str,
        location: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Wrap an open connection; use `open` instead."""
        self._conn = conn
        self._lock = threading.RLock()
        self._clock = clock
        self.url = url
        self.location = location
        # Below SCHEMA_VERSION only when opened read-only: the newer tables are then absent.
        self.schema_version = SCHEMA_VERSION

    @classmethod
    def open(
        cls,
        url: str,
        *,
        create: bool = True,
        read_only: bool = False,
        busy_timeout_s: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> Self:
        """Open (and if needed create) the metastore at a `sqlite://` URL.

        Args:
            url: `sqlite:///abs/path.sqlite` or `sqlite://:memory:` (private to this object).
            create: create the file and its parent directories when missing, and its tables
                when the file is empty. Without it an empty file is an error, never rebuilt.
            read_only: open with SQLite's `mode=ro`: nothing is created or changed, and any
                write fails (read-only commands, docs/invariants.md, 7). Implies create=False.
            busy_timeout_s: how long a write waits for another process's lock.
            clock: seconds since the epoch, for open/heartbeat times (tests pass a fake one).

        Returns:
            The open metastore; close it with `close()` or use it as a context manager.

        Raises:
            ConfigError: the URL is not a supported sqlite URL.
            MetastoreError: the file is missing (create=False), empty (create=False),
                unreadable or not a metastore.
            UnsupportedFormatError: the file was written by a newer ingest.
        """
        path = sqlite_path(url)
        location = url if path == ":memory:" else path
        create = create and not read_only
        if path != ":memory:":
            if not os.path.exists(path):
                if not create:
                    raise MetastoreError(
                        f"Cannot open metastore {path}: file does not exist", location=path
                    )
                os.makedirs(os.path.dirname(path), exist_ok=True)
            elif not os.path.isfile(path):
                raise MetastoreError(
                    f"Cannot open metastore {path}: it is a directory, not a file",
                    location=path,
                    hint="point --metastore or INGEST_METASTORE at a .sqlite file",
                )
        target = path
        if read_only and path != ":memory:":
            target = "file:" + urllib.parse.quote(path) + "?mode=ro"
        try:
            conn = sqlite3.connect(
                target,
                timeout=busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
                uri=target != path,
            )
        except sqlite3.Error as e:
            raise MetastoreError(f"Cannot open metastore {location}: {e}", location=location) from e
        store = cls(conn, url=url, location=location, clock=clock)
        try:
            with store._translate("open"):
                conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
                fresh = path == ":memory:"  # a private in-memory database is always new
                if read_only or not create:
                    # Checked before any pragma: setting WAL on an empty file writes to it.
                    with store._read() as c:
                        store.schema_version = ensure_schema(c, location, create=fresh)
                if not read_only:
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA foreign_keys = ON")
                    with store._write() as c:
                        store.schema_version = ensure_schema(
                            c, location, create=create or fresh, upgrade=True
                        )
        except BaseException:
            conn.close()
            raise
        return store

    def close(self) -> None:
        """Close the connection; the object is unusable afterwards."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # -- plumbing ---------------------------------------------------------------------------

    @contextmanager
    def _translate(self, action: str) -> Iterator[None]:
        """Turn driver errors into MetastoreError naming the file, chained `from` them."""
        try:
            yield
        except sqlite3.Error as e:
            hint = None
            if "locked" in str(e) or "busy" in str(e):
                hint = "another process held the metastore lock too long; retry"
            if action == "open":
                message = f"Cannot open metastore {self.location}: {e}"
            else:
                message = f"Cannot {action} in metastore {self.location}: {e}"
            raise MetastoreError(message, location=self.location, hint=hint) from e

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One SQLite write transaction, taken with BEGIN IMMEDIATE so allocation is serial."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                # Some driver errors end the transaction themselves.
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One consistent read snapshot (a deferred transaction)."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                if self._conn.in_transaction:
                    self._conn.execute("COMMIT")

    def _select_table(
        self, c: sqlite3.Connection, column: str, value: str
    ) -> TableDefinition | None:
        row = c.execute(f"SELECT {TABLE_COLUMNS} FROM tables WHERE {column} = ?", (value,))
        found = row.fetchone()
        return None if found is None else table_from_row(found)

    def _resolve(self, c: sqlite3.Connection, table: TableRef) -> str:
        """The stored name of a table, inside an open SQLite transaction."""
        column, value = table_key(table)
        row = c.execute(f"SELECT name FROM tables WHERE {column} = ?", (value,)).fetchone()
        if row is None:
            raise self._not_found(table)
        return str(row[0])

    def _not_found(self, table: TableRef) -> TableNotFoundError:
        _, value = table_key(table)
        return TableNotFoundError(
            f"Cannot find table {value} in metastore {self.location}",
            table=value,
            hint="create it with `ingest create`, or set INGEST_METASTORE to the metastore "
            "that holds it",
        )
