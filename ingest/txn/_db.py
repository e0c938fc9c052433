"""The SQL plumbing under the metastore: one connection, transactions, table rows.

Every driver error leaves here as a MetastoreError naming the metastore (never its password).
Write transactions are serial across processes and hosts (SQLite's write lock, or one
PostgreSQL advisory lock); reads see one consistent snapshot. What differs per database is
in `_connect`; the statements here and in the modules above are shared.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self

import pyarrow as pa
import sqlalchemy as sa

from ingest.errors import TableNotFoundError
from ingest.txn._connect import (
    MEMORY_URL,
    Target,
    begin_statements,
    driver_error,
    empty_description,
    explain,
    make_engine,
    parse_url,
    sqlite_path,
)
from ingest.txn._schema import SCHEMA_VERSION, ensure_schema, tables
from ingest.txn.errors import MetastoreError
from ingest.txn.locations import normalize_location
from ingest.txn.model import TableDefinition, qualify_table_name

TableRef = str | TableDefinition
"""A table given as its definition, its `db.table` name, or its location (path or URL)."""


def table_key(table: TableRef) -> tuple[str, str]:
    """(column, value) identifying a table: a string with a slash or scheme is a location."""
    if isinstance(table, TableDefinition):
        return "name", table.name
    if "://" in table or "/" in table or table.startswith(("~", "file:")):
        return "location", normalize_location(table)
    return "name", qualify_table_name(table)


TABLE_COLUMNS = (tables.c.name, tables.c.location, tables.c.row_schema,
                 tables.c.partition_columns, tables.c.bucket_count, tables.c.bucket_columns,
                 tables.c.properties)


def table_from_row(row: Sequence[Any]) -> TableDefinition:
    name, location, schema, partitions, bucket_count, buckets, properties = row
    return TableDefinition(
        name=name,
        location=location,
        row_schema=pa.ipc.read_schema(pa.py_buffer(bytes(schema))),
        partition_columns=tuple(json.loads(partitions)),
        bucket_count=int(bucket_count),
        bucket_columns=tuple(json.loads(buckets)),
        properties=dict(json.loads(properties)),
    )


class SqlStore:
    """One database connection shared by a process's threads, plus table lookup.

    Holds one connection and serialises its own threads with a lock (a heartbeat thread may
    share it with the writer). Processes coordinate through the database's locks.
    """

    def __init__(
        self,
        engine: sa.Engine,
        target: Target,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Wrap an engine; use `open` instead."""
        self._engine = engine
        self._target = target
        self._conn: sa.Connection | None = None
        self._closed = False
        self._lock = threading.RLock()
        self._clock = clock
        self.url = target.url
        self.location = target.location
        self.dialect = target.dialect
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
        """Open (and if needed create) the metastore at a `sqlite://` or `postgresql://` URL.

        Args:
            url: `sqlite:///abs/path.sqlite`, `sqlite://:memory:` (private to this object) or
                `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (without a password in the
                URL, libpq's PGPASSWORD and ~/.pgpass are used; `?connect_timeout=S` changes
                the 10 s connection time-out).
            create: create the file and its parent directories when missing, and the tables
                when the file or database is empty. Without it an empty one is an error, never
                rebuilt.
            read_only: nothing is created or changed, and any write fails (read-only
                commands, docs/invariants.md, 7): SQLite's `mode=ro`, PostgreSQL's
                read-only transactions. Implies create=False.
            busy_timeout_s: how long a write waits for another process's write lock.
            clock: seconds since the epoch, for open/heartbeat times (tests pass a fake one).

        Returns:
            The open metastore; close it with `close()` or use it as a context manager.

        Raises:
            ConfigError: the URL is not a supported sqlite or postgresql URL.
            MetastoreError: the file is missing (create=False); the file or database is empty
                (create=False), unreadable or not a metastore; the server cannot be reached
                or refuses the credentials.
            UnsupportedFormatError: the metastore was written by a newer ingest.
        """
        target = parse_url(url)
        create = create and not read_only
        if target.dialect == "sqlite" and not target.memory:
            _check_file(target.location, create=create)
        engine = make_engine(target, read_only=read_only, busy_timeout_s=busy_timeout_s)
        store = cls(engine, target, clock=clock)
        try:
            with store._translate("open"):
                store._connection()
                if target.dialect == "sqlite":
                    store._exec(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
                # A private in-memory database is always new.
                fresh = target.memory
                empty = empty_description(target)
                if read_only or not create:
                    # Checked before any pragma: setting WAL on an empty file writes to it.
                    with store._read() as c:
                        store.schema_version = ensure_schema(
                            c, store.location, create=fresh, empty_what=empty)
                if not read_only:
                    if target.dialect == "sqlite":
                        store._exec("PRAGMA journal_mode = WAL")
                        store._exec("PRAGMA foreign_keys = ON")
                    with store._write() as c:
                        store.schema_version = ensure_schema(
                            c, store.location, create=create or fresh, upgrade=True,
                            empty_what=empty)
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        """Close the connection; the object is unusable afterwards."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    # -- plumbing ---------------------------------------------------------------------------

    def _connection(self) -> sa.Connection:
        """The store's one connection, opened on first use and again after the server
        dropped it (SQLAlchemy reconnects an invalidated connection once rolled back)."""
        if self._closed:
            raise MetastoreError(f"Cannot use metastore {self.location}: it was closed",
                                 location=self.location, hint="open it again")
        if self._conn is None:
            self._conn = self._engine.connect()
        elif self._conn.invalidated:
            self._conn.rollback()
        return self._conn

    def _exec(self, sql: str) -> None:
        self._connection().exec_driver_sql(sql)

    @contextmanager
    def _translate(self, action: str) -> Iterator[None]:
        """Turn driver errors into MetastoreError naming the metastore, chained `from` the
        driver's own exception."""
        try:
            yield
        except sa.exc.SQLAlchemyError as e:
            reason, hint = explain(e, self._target)
            if action == "open":
                message = f"Cannot open metastore {self.location}: {reason}"
            else:
                message = f"Cannot {action} in metastore {self.location}: {reason}"
            raise MetastoreError(message, location=self.location, hint=hint) from driver_error(e)

    @contextmanager
    def _write(self) -> Iterator[sa.Connection]:
        """One write transaction; no other process writes until it ends (see `_connect`)."""
        with self._lock, self._transaction(write=True) as c:
            yield c

    @contextmanager
    def _read(self) -> Iterator[sa.Connection]:
        """One consistent read snapshot."""
        with self._lock, self._transaction(write=False) as c:
            yield c

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sa.Connection]:
        conn = self._begin(write=write)
        try:
            yield conn
        except BaseException:
            self._rollback_quietly(conn)
            raise
        try:
            conn.exec_driver_sql("COMMIT")
        except BaseException:
            # A COMMIT that failed may leave the transaction (and SQLite's write lock) open.
            self._rollback_quietly(conn)
            raise

    def _begin(self, *, write: bool) -> sa.Connection:
        """Begin a transaction on the store's connection. A connection the server dropped
        while idle (a restart, an idle-connection reaper) is replaced once: nothing of the
        transaction has run yet, so a long-running job does not fail a call for it."""
        for attempt in (1, 2):
            conn = self._connection()
            try:
                for statement in begin_statements(self.dialect, write=write):
                    conn.exec_driver_sql(statement)
                return conn
            except sa.exc.DBAPIError as e:
                self._rollback_quietly(conn)
                if attempt == 2 or not e.connection_invalidated:
                    raise
            except BaseException:
                self._rollback_quietly(conn)
                raise
        raise AssertionError("unreachable")

    @staticmethod
    def _rollback_quietly(conn: sa.Connection) -> None:
        """Roll back after an error; some driver errors ended the transaction already, and
        a dropped connection cannot roll back: the error that got here is the one to tell."""
        try:
            conn.exec_driver_sql("ROLLBACK")
        except sa.exc.SQLAlchemyError:
            pass

    def _select_table(self, c: sa.Connection, column: str, value: str) -> TableDefinition | None:
        found = c.execute(sa.select(*TABLE_COLUMNS).where(tables.c[column] == value)).first()
        return None if found is None else table_from_row(found)

    def _resolve(self, c: sa.Connection, table: TableRef) -> str:
        """The stored name of a table, inside an open transaction."""
        column, value = table_key(table)
        name = c.execute(sa.select(tables.c.name).where(tables.c[column] == value)).scalar()
        if name is None:
            raise self._not_found(table)
        return str(name)

    def _not_found(self, table: TableRef) -> TableNotFoundError:
        _, value = table_key(table)
        return TableNotFoundError(
            f"Cannot find table {value} in metastore {self.location}",
            table=value,
            hint="create it with `ingest create`, or set INGEST_METASTORE to the metastore "
            "that holds it",
        )


def inserted_id(result: sa.CursorResult[Any]) -> int:
    """The id an INSERT of one row into a table with an autoincrement key got (SQLite's
    rowid, PostgreSQL's sequence value, read back by SQLAlchemy)."""
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def _check_file(path: str, *, create: bool) -> None:
    """A SQLite metastore file must exist unless it may be created, and be a file."""
    if not os.path.exists(path):
        if not create:
            raise MetastoreError(f"Cannot open metastore {path}: file does not exist",
                                 location=path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
    elif not os.path.isfile(path):
        raise MetastoreError(
            f"Cannot open metastore {path}: it is a directory, not a file",
            location=path,
            hint="point --metastore or INGEST_METASTORE at a .sqlite file",
        )


__all__ = ["MEMORY_URL", "SqlStore", "TableRef", "inserted_id", "sqlite_path", "table_from_row",
           "table_key"]
