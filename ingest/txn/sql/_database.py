"""The SQL metastore's one database: its connection, transactions and table-name lookup.

Every part of `SqlMetastore` receives this one object and runs its statements through it.
Every driver error leaves here as a MetastoreError naming the metastore (never its password).
Write transactions are serial across processes and hosts (SQLite's write lock, or one
PostgreSQL advisory lock); reads see one consistent snapshot. What differs per database is
in `_connect`; the statements are shared.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, Self

import sqlalchemy as sa

from ingest.errors import ConfigError, MetastoreError, TableNotFoundError
from ingest.txn.model import TableIdentifier, table_key, table_not_found
from ingest.txn.sql._connect import (
    Target,
    begin_statements,
    driver_error,
    empty_description,
    explain,
    make_engine,
    parse_url,
)
from ingest.txn.sql._schema import SCHEMA_VERSION, ensure_schema
from ingest.txn.sql._schema import tables as tables_table

# Table names or locations one statement looks up (well below SQLite's parameter limit).
IDENTIFIERS_A_READ = 400


class Database:
    """One database connection shared by a process's threads.

    Holds one connection and serialises its own threads with a lock (a heartbeat thread may
    share it with the writer). Processes coordinate through the database's locks.

    Attributes:
        url: the URL it was opened with.
        location: how messages name it (the file path, or the URL without its password).
        dialect: "sqlite" or "postgresql".
        path: the SQLite file path or ":memory:"; None for PostgreSQL.
        schema_version: the schema version of the open database; below SCHEMA_VERSION only
            when opened read-only (the newer tables are then absent).
        clock: seconds since the epoch, for the times rows record.
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
        self.clock = clock
        self.url = target.url
        self.location = target.location
        self.dialect = target.dialect
        self.path = target.path
        self.schema_version = SCHEMA_VERSION

    @classmethod
    def open(
        cls,
        url: str,
        *,
        create: bool,
        read_only: bool,
        busy_timeout_s: float,
        clock: Callable[[], float],
    ) -> Self:
        """Open (and if needed create) the database at a `sqlite://` or `postgresql://` URL.

        Args:
            url: `sqlite:///abs/path.sqlite`, `sqlite://:memory:` (private to this object) or
                `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (without a password in the
                URL, libpq's PGPASSWORD and ~/.pgpass are used; `?connect_timeout=S` changes
                the 10 s connection time-out).
            create: create the file and its parent directories when missing, and the tables
                when the file or database is empty.
            read_only: SQLite's `mode=ro`, PostgreSQL's read-only transactions; the caller
                has made `create` False.
            busy_timeout_s: how long a write waits for another process's write lock.
            clock: seconds since the epoch.

        Raises:
            ConfigError: the URL is not a supported sqlite or postgresql URL.
            MetastoreError: the file is missing (create=False); the file or database is empty
                (create=False), unreadable or not a metastore; the server cannot be reached
                or refuses the credentials.
            UnsupportedFormatError: the metastore was written by a newer ingest.
        """
        target = parse_url(url)
        if target.dialect == "sqlite" and not target.memory:
            if create and not os.path.exists(target.location):
                _create_sqlite_file(cls, target.location, busy_timeout_s=busy_timeout_s)
            _check_file(target.location, create=create)
        engine = make_engine(target, read_only=read_only, busy_timeout_s=busy_timeout_s)
        db = cls(engine, target, clock=clock)
        try:
            with db.translate("open"):
                db._connection()
                if target.dialect == "sqlite":
                    db._exec(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
                # A private in-memory database is always new.
                fresh = target.memory
                empty = empty_description(target)
                if read_only or not create:
                    # Checked before any pragma: setting WAL on an empty file writes to it.
                    with db.read() as c:
                        db.schema_version = ensure_schema(
                            c, db.location, create=fresh, empty_what=empty)
                if not read_only:
                    if target.dialect == "sqlite":
                        db._exec("PRAGMA journal_mode = WAL")
                        db._exec("PRAGMA foreign_keys = ON")
                    with db.write() as c:
                        db.schema_version = ensure_schema(
                            c, db.location, create=create or fresh, upgrade=True,
                            empty_what=empty)
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        """Close the connection; the object is unusable afterwards."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._engine.dispose()

    # -- transactions -----------------------------------------------------------------------

    @contextmanager
    def translate(self, action: str) -> Iterator[None]:
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
    def write(self) -> Iterator[sa.Connection]:
        """One write transaction; no other process writes until it ends (see `_connect`)."""
        with self._lock, self._transaction(write=True) as c:
            yield c

    @contextmanager
    def read(self) -> Iterator[sa.Connection]:
        """One consistent read snapshot."""
        with self._lock, self._transaction(write=False) as c:
            yield c

    def resolve(self, c: sa.Connection, table: TableIdentifier) -> str:
        """The stored name of a table, inside an open transaction.

        Raises:
            TableNotFoundError: no such table.
        """
        column, value = table_key(table)
        name = c.execute(sa.select(tables_table.c.name)
                         .where(tables_table.c[column] == value)).scalar()
        if name is None:
            raise self.not_found(table)
        return str(name)

    def resolve_all(self, c: sa.Connection, identifiers: Iterable[str]) -> dict[str, str]:
        """`resolve` for many tables at once (a statement per kind of identifier, not per
        table): each identifier's stored name.

        Raises:
            TableNotFoundError: no such table (the first missing one, in the given order).
        """
        wanted = list(dict.fromkeys(identifiers))
        for t in wanted:
            table_key(t)  # a malformed name is refused before any look-up, as it always was
        return dict(zip(wanted, self.resolve_many(c, wanted), strict=True))

    def resolve_many(self, c: sa.Connection, tables: Sequence[TableIdentifier]) -> list[str]:
        """`resolve` of each of `tables`, in their order, in a statement per kind of
        identifier (and 400 of them): what resolving them one after the other would give
        or raise.

        Raises:
            ConfigError: a name that is not `table` or `db.table` (after the tables before
                it were found).
            TableNotFoundError: no such table (the first missing one, in the given order).
        """
        keys: list[tuple[str, str]] = []
        bad: ConfigError | None = None
        for t in tables:
            try:
                keys.append(table_key(t))
            except ConfigError as e:
                bad = e  # raised once every table before it is known to exist
                break
        found = {key: str(row[0]) for key, row in matching_rows(
            c, keys, (tables_table.c.name, tables_table.c.location))}
        out: list[str] = []
        for t, key in zip(tables, keys, strict=False):
            name = found.get(key)
            if name is None:
                raise self.not_found(t)
            out.append(name)
        if bad is not None:
            raise bad
        return out

    def not_found(self, table: TableIdentifier) -> TableNotFoundError:
        """The error for a table this metastore does not list."""
        return table_not_found(table, self.location)

    # -- plumbing ---------------------------------------------------------------------------

    def _connection(self) -> sa.Connection:
        """The one connection, opened on first use and again after the server dropped it
        (SQLAlchemy reconnects an invalidated connection once rolled back)."""
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
        """Begin a transaction on the one connection. A connection the server dropped
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


def inserted_id(result: sa.CursorResult[Any]) -> int:
    """The id an INSERT of one row into a table with an autoincrement key got (SQLite's
    rowid, PostgreSQL's sequence value, read back by SQLAlchemy)."""
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def _create_sqlite_file(cls: type[Database], path: str, *, busy_timeout_s: float) -> None:
    """Create a new SQLite metastore whole: its tables are made in a file beside `path` that
    is then linked to `path`, so no process ever opens a half-made one (a reader would take
    a file with no tables yet for a metastore emptied by accident, and refuse it). When
    another process links its own first, that one is kept."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    scratch = f"{path}.new-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        open(scratch, "xb").close()  # it exists, so opening it makes its tables in place
        # Closing the last connection checkpoints the WAL into the file and removes it.
        cls.open(f"sqlite://{scratch}", create=True, read_only=False,
                 busy_timeout_s=busy_timeout_s, clock=time.time).close()
        try:
            os.link(scratch, path)
        except OSError:
            # Another process's file is there (kept), or the filesystem has no hard links
            # (the caller then makes the tables in place, in one write transaction).
            pass
    finally:
        for leftover in (scratch, f"{scratch}-wal", f"{scratch}-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)


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


class Part:
    """The tables of one concern in a database (the manifest, reader leases, the compaction
    history), which a schema version added: a metastore of an older version opened read-only
    (never upgraded) lacks them, and callers ask `available` first."""

    since_version: ClassVar[int]
    """The schema version that added the part's tables."""
    what: ClassVar[str]
    """The part's tables, as an error names them ("a committed-file manifest")."""

    def __init__(self, db: Database) -> None:
        self._db = db

    @property
    def available(self) -> bool:
        """The open database has the part's tables."""
        return self._db.schema_version >= self.since_version

    def require(self, action: str) -> None:
        """Refuse to `action` (e.g. "record committed files") in a metastore whose schema
        predates the part.

        Raises:
            MetastoreError: the schema version is below `since_version`.
        """
        if not self.available:
            db = self._db
            raise MetastoreError(
                f"Cannot {action} in metastore {db.location}: its schema version "
                f"{db.schema_version} has no {self.what}",
                location=db.location, hint="open it for writing once: that upgrades it")


def matching_rows(c: sa.Connection, keys: Sequence[tuple[str, str]], columns: Sequence[Any]
                  ) -> Iterator[tuple[tuple[str, str], sa.Row[Any]]]:
    """The rows of the tables named by `keys` (`table_key`'s pairs), `columns` of each (the
    name and the location first), with the key each matched: a statement per kind of
    identifier and IDENTIFIERS_A_READ of them, not a statement per table."""
    for column in ("name", "location"):
        values = sorted({v for k, v in keys if k == column})
        for at in range(0, len(values), IDENTIFIERS_A_READ):
            chunk = values[at:at + IDENTIFIERS_A_READ]
            for row in c.execute(sa.select(*columns).where(tables_table.c[column].in_(chunk))):
                yield (column, row[0] if column == "name" else row[1]), row


__all__ = ["IDENTIFIERS_A_READ", "Database", "Part", "inserted_id", "matching_rows"]
