"""A throwaway PostgreSQL server for the metastore tests: one per session, one empty database
per test. Runs Debian's newest /usr/lib/postgresql/*/bin as the `postgres` user (PostgreSQL
refuses root) on 127.0.0.1, with scram passwords for a user `ingest` so credential errors are
real. Missing binaries skip the tests, or fail them under INGEST_REQUIRE_ALL=1.
"""

from __future__ import annotations

import glob
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from external import free_port, require

PG_USER = "ingest"
PG_PASSWORD = "ingest-test-pw"
_ADMIN_PASSWORD = "admin-test-pw"


@dataclass(frozen=True)
class PgServer:
    """A running server: where it listens and how to reach it as `ingest` or as admin."""

    host: str
    port: int
    data_dir: Path

    def url(self, database: str, *, password: str | None = PG_PASSWORD,
            user: str = PG_USER) -> str:
        """A metastore URL for `database` (password None: none in the URL)."""
        auth = user if password is None else f"{user}:{password}"
        return f"postgresql://{auth}@{self.host}:{self.port}/{database}"

    def admin(self, sql: str, *, database: str = "postgres") -> list[tuple]:
        """Run one statement as the superuser (autocommit: CREATE DATABASE needs it)."""
        import psycopg

        with psycopg.connect(host=self.host, port=self.port, user="postgres",
                             password=_ADMIN_PASSWORD, dbname=database,
                             autocommit=True) as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description else []

    def create_database(self) -> str:
        """A new empty database owned by `ingest`; returns its name."""
        name = "t_" + uuid.uuid4().hex[:12]
        self.admin(f"CREATE DATABASE {name} OWNER {PG_USER} STRATEGY FILE_COPY")
        return name


def pg_bin_dir() -> Path | None:
    """The newest installed PostgreSQL server's bin directory, or None."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if not found:
        return None
    newest = max(found, key=lambda p: int(Path(p).parent.parent.name)
                 if Path(p).parent.parent.name.isdigit() else 0)
    return Path(newest).parent




def _as_postgres(*args: str) -> None:
    done = subprocess.run(["runuser", "-u", "postgres", "--", *args], capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): "
                           f"{done.stdout}{done.stderr}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server for the whole session, stopped at its end."""
    bin_dir = pg_bin_dir()
    require(bin_dir is not None, "PostgreSQL server (/usr/lib/postgresql/*/bin/initdb; "
             "apt-get install postgresql)")
    require(shutil.which("runuser") is not None and _has_postgres_user(),
             "runuser and a `postgres` user to run the PostgreSQL server as")
    assert bin_dir is not None
    root = Path(tempfile.mkdtemp(prefix="ingest-pg-"))
    shutil.chown(root, "postgres", "postgres")
    pwfile = root / "pw"
    pwfile.write_text(_ADMIN_PASSWORD + "\n")
    shutil.chown(pwfile, "postgres", "postgres")
    data = root / "data"
    port = free_port()
    _as_postgres(str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                 f"--pwfile={pwfile}", "--auth=scram-sha-256", "--encoding=UTF8",
                 "--no-sync", "--no-instructions")
    options = (f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root}"
               " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
               " -c shared_buffers=16MB -c max_connections=60")
    _as_postgres(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w",
                 "-t", "60", "-o", options, "start")
    server = PgServer("127.0.0.1", port, data)
    try:
        server.admin(f"CREATE ROLE {PG_USER} LOGIN PASSWORD '{PG_PASSWORD}'")
        yield server
    finally:
        _stop(bin_dir, data, root)


def _has_postgres_user() -> bool:
    import pwd

    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return False
    return True


def _stop(bin_dir: Path, data: Path, root: Path) -> None:
    """Stop the server this fixture started (pg_ctl signals the PID in its own data
    directory's postmaster.pid, nothing else), then remove its files."""
    try:
        _as_postgres(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w",
                     "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a new empty database on the session's server, as user `ingest`."""
    return pg_server.url(pg_server.create_database())
