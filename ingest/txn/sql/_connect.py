"""What differs between the metastore's databases: URLs, connections, transaction starts, and
the words for a driver's failure.

SQLite (`sqlite:///abs/path`, `sqlite://:memory:`) and PostgreSQL (`postgresql://user@host/db`)
share every statement (SQLAlchemy Core); only the few spots here know which one is open. How
each serialises writers is in docs/invariants.md, 9.
"""

from __future__ import annotations

import math
import os
import sqlite3
import urllib.parse
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.pool import NullPool, StaticPool

from ingest.errors import ConfigError
from ingest.txn.registry import strip_userinfo

CONNECT_TIMEOUT_S = 10
"""How long a PostgreSQL connection attempt waits; `?connect_timeout=S` in the URL overrides."""

# The one PostgreSQL advisory lock every write transaction takes first (the bytes of
# "ingest"); advisory locks are per database, so metastores in other databases never wait.
WRITE_LOCK_KEY = 0x696E67657374


@dataclass(frozen=True)
class Target:
    """A parsed metastore URL.

    Attributes:
        url: as given (with its password, if any: it is what reopens the metastore).
        location: how messages name it: the file path, the memory URL, or the PostgreSQL URL
            without its password and query.
        dialect: "sqlite" or "postgresql".
        path: the SQLite file path or ":memory:"; None for PostgreSQL.
        engine_url: the SQLAlchemy URL for PostgreSQL (driver psycopg); None for SQLite.
    """

    url: str
    location: str
    dialect: str
    path: str | None = None
    engine_url: sa.URL | None = None

    @property
    def memory(self) -> bool:
        return self.path == ":memory:"


def parse_url(url: str) -> Target:
    """Check a metastore URL and say which database it names.

    Raises:
        ConfigError: neither an absolute `sqlite://` URL nor a `postgresql://` one.
    """
    if url.startswith("sqlite://"):
        path = sqlite_path(url)
        return Target(url, url if path == ":memory:" else path, "sqlite", path=path)
    if url.startswith(_POSTGRESQL_SCHEMES):
        try:
            parsed = sa.make_url(url)
        except (sa.exc.ArgumentError, ValueError) as e:
            raise ConfigError(
                f"Cannot open metastore {strip_userinfo(url)}: not a valid PostgreSQL URL",
                hint="write postgresql://USER@HOST:PORT/DATABASE (a port is a number; a "
                     "password with '@', ':' or '/' must be percent-encoded)") from e
        if not parsed.database:
            raise ConfigError(
                f"Cannot open metastore {_shown(parsed)}: the URL names no database",
                hint="write postgresql://USER@HOST:PORT/DATABASE")
        return Target(url, _shown(parsed), "postgresql",
                      engine_url=parsed.set(drivername="postgresql+psycopg"))
    raise ConfigError(
        f"Cannot open metastore {strip_userinfo(url)!r}: only sqlite:// and postgresql:// "
        "URLs are supported",
        hint="use 'sqlite:///absolute/path.sqlite', 'sqlite://:memory:' or "
        "'postgresql://USER@HOST:PORT/DATABASE'",
    )


def sqlite_path(url: str) -> str:
    """The sqlite3 database argument for a `sqlite://` URL (":memory:" or an absolute path).

    Raises:
        ConfigError: the URL is not `sqlite://` or its path is relative.
    """
    if not url.startswith("sqlite://"):
        raise ConfigError(f"Cannot open metastore {url!r}: not a sqlite:// URL",
                          hint="use 'sqlite:///absolute/path.sqlite' or 'sqlite://:memory:'")
    rest = url[len("sqlite://") :]
    if rest in (":memory:", "/:memory:"):
        return ":memory:"
    if not rest.startswith("/"):
        raise ConfigError(
            f"Cannot open metastore {url!r}: the path must be absolute",
            hint="write three slashes: 'sqlite:///absolute/path.sqlite'",
        )
    # SQLAlchemy spells an absolute path with four slashes (sqlite:////abs); one leading
    # slash, or a read-only `file:` URI would take the next name as its authority.
    return "/" + rest.lstrip("/")


# libpq and many hosting services spell the scheme postgres://.
_POSTGRESQL_SCHEMES = ("postgresql://", "postgresql+psycopg://", "postgres://")


def redact_url(url: str) -> str:
    """A metastore URL fit to print: a PostgreSQL URL without its password and query; any
    other URL unchanged.

    Raises:
        ConfigError: a postgresql:// URL that cannot be parsed.
    """
    if url.startswith(_POSTGRESQL_SCHEMES):
        return parse_url(url).location
    return strip_userinfo(url)


def _shown(url: sa.URL) -> str:
    """The URL as messages show it: no password, no query, the plain scheme."""
    return sa.URL.create("postgresql", username=url.username, host=url.host, port=url.port,
                         database=url.database).render_as_string(hide_password=False)


def make_engine(target: Target, *, read_only: bool, busy_timeout_s: float) -> sa.Engine:
    """An engine whose one connection the store keeps; transactions are begun by hand
    (`begin_statements`), so the driver runs in autocommit mode."""
    if target.dialect == "sqlite":
        path = target.path or ""
        database = path
        if read_only and not target.memory:
            database = "file:" + urllib.parse.quote(path) + "?mode=ro"

        def connect() -> sqlite3.Connection:
            return sqlite3.connect(database, timeout=busy_timeout_s, isolation_level=None,
                                   check_same_thread=False, uri=database != path)

        return sa.create_engine("sqlite://", creator=connect, poolclass=StaticPool,
                                isolation_level="AUTOCOMMIT")
    assert target.engine_url is not None
    query = target.engine_url.query
    args: dict[str, object] = {}
    if "application_name" not in query:
        args["application_name"] = "ingest"
    if "connect_timeout" not in query:
        args["connect_timeout"] = CONNECT_TIMEOUT_S
    # A host that dies or loses the network inside a write must not hold the write lock
    # until the kernel notices (hours): TCP keepalives, and the server ends a transaction
    # left idle (the lock is released with it).
    for key, value in (("keepalives", 1), ("keepalives_idle", 30), ("keepalives_interval", 10),
                       ("keepalives_count", 3)):
        if key not in query:
            args[key] = value
    # A write waits for the write lock as long as SQLite's busy timeout would (0 would mean
    # "forever" on PostgreSQL, "at once" on SQLite: at least 1 ms).
    lock_ms = max(1, math.ceil(busy_timeout_s * 1000))
    ours = (f"-c lock_timeout={lock_ms} "
            f"-c idle_in_transaction_session_timeout={max(60_000, 4 * lock_ms)}")
    if read_only:
        ours += " -c default_transaction_read_only=on"
    # Kept with the user's own (?options=, $PGOPTIONS, e.g. a search_path), not instead.
    theirs = query.get("options") or os.environ.get("PGOPTIONS")
    args["options"] = " ".join(filter(None, [theirs if isinstance(theirs, str) else None, ours]))
    return sa.create_engine(target.engine_url, poolclass=NullPool, connect_args=args,
                            isolation_level="AUTOCOMMIT")


def begin_statements(dialect: str, *, write: bool) -> tuple[str, ...]:
    """What starts a write or read transaction.

    SQLite: BEGIN IMMEDIATE takes the file's write lock at once. PostgreSQL: a write takes
    one transaction-scoped advisory lock first, so writes are serial as on SQLite, and READ
    COMMITTED then sees every write committed before it; a read is one REPEATABLE READ
    snapshot.
    """
    if dialect == "sqlite":
        return ("BEGIN IMMEDIATE",) if write else ("BEGIN",)
    if write:
        return ("BEGIN ISOLATION LEVEL READ COMMITTED",
                f"SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})")
    return ("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",)


def driver_error(error: BaseException) -> BaseException:
    """The driver's own exception under a SQLAlchemy one."""
    orig = getattr(error, "orig", None)
    return orig if isinstance(orig, BaseException) else error


def is_read_only_error(error: BaseException) -> bool:
    """The database refused a write because the metastore is open read-only (or the user
    may not write it)."""
    error = driver_error(error)
    if isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", None)
        return code is not None and code & 0xFF == sqlite3.SQLITE_READONLY
    # read_only_sql_transaction, insufficient_privilege
    return getattr(error, "sqlstate", None) in ("25006", "42501")


def explain(error: BaseException, target: Target) -> tuple[str, str | None]:
    """(reason, hint) for a driver error, in words a user can act on."""
    error = driver_error(error)
    text = str(error).strip()
    if target.dialect == "sqlite":
        hint = None
        if "locked" in text or "busy" in text:
            hint = "another process held the metastore lock too long; retry"
        return text, hint
    url = target.engine_url
    assert url is not None
    # No host in the URL: libpq used its local socket.
    where = f"{url.host}:{url.port or 5432}" if url.host else "the local socket"
    sqlstate = getattr(error, "sqlstate", None)
    if "password authentication failed" in text or sqlstate == "28P01":
        return (f"password authentication failed for user {url.username!r}",
                "check the password: in the URL (postgresql://USER:PASSWORD@HOST/DB), in "
                "PGPASSWORD or in ~/.pgpass")
    if "no password supplied" in text:
        return (f"the server asks user {url.username!r} for a password and none was given",
                "put it in PGPASSWORD, ~/.pgpass or the URL (postgresql://USER:PASSWORD@HOST/DB)")
    if sqlstate == "3D000" or ("database" in text and "does not exist" in text):
        return (f"database {url.database!r} does not exist on {where}",
                f"create it first (createdb{' -h ' + url.host if url.host else ''} "
                f"{url.database}), or fix the URL")
    if "resolve host" in text or "translate host name" in text:
        return (f"cannot resolve the host name {url.host!r}",
                "check the host in the URL and this machine's DNS")
    if "Connection refused" in text or "could not connect" in text.lower():
        return (f"cannot connect to the server at {where} (connection refused)",
                "check that PostgreSQL runs there (listening on TCP for a host in the URL), "
                "and the host and port in the URL")
    if "timeout expired" in text or "timed out" in text:
        timeout = url.query.get("connect_timeout", CONNECT_TIMEOUT_S)
        return (f"no answer from the server at {where} within {timeout} s",
                "check the host, port and firewall; a slow network may need "
                "?connect_timeout=SECONDS in the URL")
    if sqlstate == "55P03":  # lock_not_available: lock_timeout expired
        return ("timed out waiting for the metastore's write lock",
                "another process held the metastore lock too long; retry")
    if sqlstate == "42501":  # insufficient_privilege
        return (text.splitlines()[0],
                f"user {url.username!r} needs CREATE on the database's schema to create the "
                "metastore's tables (PostgreSQL 15 grants it to the database owner only), "
                "and SELECT, INSERT, UPDATE and DELETE on them to use it")
    if sqlstate == "25006":
        return ("it is open read-only (cannot execute a write in a read-only transaction)",
                None)
    first = text.splitlines()[0] if text else type(error).__name__
    return first, None


def empty_description(target: Target) -> str:
    """How an empty metastore is described: a file's size, or a database with no tables."""
    if target.dialect == "sqlite" and target.path and os.path.isfile(target.path):
        if os.path.getsize(target.path) == 0:
            return "file is empty (0 bytes)"
        return "file holds no tables"
    return "database holds no tables"


__all__ = [
    "CONNECT_TIMEOUT_S",
    "Target",
    "begin_statements",
    "driver_error",
    "empty_description",
    "explain",
    "is_read_only_error",
    "make_engine",
    "parse_url",
    "redact_url",
    "sqlite_path",
]
