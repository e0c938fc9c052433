"""The PostgreSQL metastore: clear errors for what goes wrong with a server (unreachable,
credentials, missing or foreign database, newer schema), never showing the password; the
version-keyed upgrade; read-only opens; the write lock; one snapshot per read transaction."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import psycopg
import pyarrow as pa
import pytest
import sqlalchemy as sa
from external import free_port
from pg_server import PG_PASSWORD, PgServer
from support import wait_until

from ingest.errors import UnsupportedFormatError
from ingest.txn import Metastore, MetastoreError, TableDefinition
from ingest.txn.sql._connect import WRITE_LOCK_KEY
from ingest.txn.sql._schema import SCHEMA_VERSION, VERSION_TABLES, meta, metadata

SCHEMA = pa.schema([("id", pa.int64())])


def _shown(url: str) -> str:
    return url.replace(f":{PG_PASSWORD}@", "@")


def _no_password(error: BaseException) -> None:
    text = f"{error} {getattr(error, 'hint', '')} {getattr(error, 'location', '')}"
    assert PG_PASSWORD not in text



def test_unreachable_server_names_host_and_port() -> None:
    port = free_port()
    url = f"postgresql://ingest:{PG_PASSWORD}@127.0.0.1:{port}/meta"
    with pytest.raises(MetastoreError) as info:
        Metastore.open(url)
    assert str(info.value).startswith(
        f"Cannot open metastore postgresql://ingest@127.0.0.1:{port}/meta: cannot connect to "
        f"the server at 127.0.0.1:{port} (connection refused)")
    assert "host and port" in str(info.value.hint)
    assert info.value.location == f"postgresql://ingest@127.0.0.1:{port}/meta"
    _no_password(info.value)


def test_silent_server_times_out_after_connect_timeout() -> None:
    # Accepts TCP connections and never answers: only the connection time-out ends the wait.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(MetastoreError) as info:
            Metastore.open(f"postgresql://ingest:{PG_PASSWORD}@127.0.0.1:{port}/meta"
                           "?connect_timeout=2")
        assert time.monotonic() - started < 15
    assert f"no answer from the server at 127.0.0.1:{port} within 2 s" in str(info.value)
    assert "connect_timeout" in str(info.value.hint)
    _no_password(info.value)


def test_wrong_password(pg_server: PgServer, pg_url: str) -> None:
    url = pg_url.replace(PG_PASSWORD, "not-the-password")
    with pytest.raises(MetastoreError) as info:
        Metastore.open(url)
    assert info.value.message == (f"Cannot open metastore {_shown(pg_url)}: password "
                               "authentication failed for user 'ingest'")
    assert "PGPASSWORD" in str(info.value.hint)
    assert "not-the-password" not in f"{info.value} {info.value.hint}"
    assert isinstance(info.value.__cause__, psycopg.OperationalError)


def test_password_from_pgpassword(pg_server: PgServer, pg_url: str, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    database = pg_url.rsplit("/", 1)[1]
    url = pg_server.url(database, password=None)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with pytest.raises(MetastoreError, match="asks user 'ingest' for a password and none"):
        Metastore.open(url)
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    with Metastore.open(url) as store:
        assert store.list_tables() == []
    monkeypatch.delenv("PGPASSWORD")
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"127.0.0.1:{pg_server.port}:{database}:ingest:{PG_PASSWORD}\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    with Metastore.open(url, create=False) as store:
        assert store.schema_version == SCHEMA_VERSION


def test_missing_database(pg_server: PgServer) -> None:
    url = pg_server.url("no_such_db")
    with pytest.raises(MetastoreError) as info:
        Metastore.open(url)
    assert info.value.message.endswith(
        f"database 'no_such_db' does not exist on 127.0.0.1:{pg_server.port}")
    assert "createdb" in str(info.value.hint)
    _no_password(info.value)


def test_foreign_database_is_refused(pg_server: PgServer, pg_url: str) -> None:
    database = pg_url.rsplit("/", 1)[1]
    pg_server.admin("CREATE TABLE users (id int)", database=database)
    with pytest.raises(MetastoreError) as info:
        Metastore.open(pg_url)
    assert "it is a postgresql database but not an ingest metastore (tables ['users'], " \
        "no 'meta' table)" in str(info.value)
    assert pg_server.admin("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
                           database=database) == [(1,)]


def test_empty_database_without_create_is_an_error(pg_url: str) -> None:
    for read_only in (False, True):
        with pytest.raises(MetastoreError) as info:
            Metastore.open(pg_url, create=False, read_only=read_only)
        assert str(info.value).startswith(
            f"Cannot open metastore {_shown(pg_url)}: the database holds no tables, so it is "
            "not an ingest metastore; it was not rebuilt")
    with Metastore.open(pg_url) as store:  # with create (the default) it becomes one
        assert store.list_tables() == []


def test_newer_schema_version_refused(pg_server: PgServer, pg_url: str) -> None:
    Metastore.open(pg_url).close()
    pg_server.admin("UPDATE meta SET value = '99' WHERE key = 'schema_version'",
                    database=pg_url.rsplit("/", 1)[1])
    with pytest.raises(UnsupportedFormatError, match="schema version is 99 but this ingest"):
        Metastore.open(pg_url)


def _tables(pg_server: PgServer, pg_url: str) -> set[str]:
    rows = pg_server.admin("SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
                           database=pg_url.rsplit("/", 1)[1])
    return {name for (name,) in rows}


def test_version_1_database_is_upgraded_by_a_writer_only(pg_server: PgServer,
                                                         pg_url: str) -> None:
    engine = sa.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        metadata.create_all(conn, tables=list(VERSION_TABLES[1]))
        conn.execute(sa.insert(meta).values(key="schema_version", value="1"))
    engine.dispose()
    before = _tables(pg_server, pg_url)
    with Metastore.open(pg_url, read_only=True) as store:
        assert store.schema_version == 1
        assert store.list_tables() == []
    assert _tables(pg_server, pg_url) == before  # a reader never upgrades
    with Metastore.open(pg_url, create=False) as store:
        assert store.schema_version == SCHEMA_VERSION == 5
        store.create_table(TableDefinition("default.t", "/x/t", SCHEMA))
        txn = store.open_transaction("default.t")
        store.commit(txn)
        assert store.snapshot("default.t").high_watermark == 1
    assert _tables(pg_server, pg_url) - before == {"committed_files", "readers", "compactions",
                                                   "write_set", "table_schemas",
                                                   "table_offsets"}
    with Metastore.open(pg_url, read_only=True) as store:
        assert store.schema_version == 5


def test_read_only_open_refuses_writes_and_reads_unregistered(pg_url: str) -> None:
    with Metastore.open(pg_url) as store:
        store.create_table(TableDefinition("default.t", "/x/t", SCHEMA))
    with Metastore.open(pg_url, read_only=True) as store:
        with pytest.raises(MetastoreError, match="it is open read-only"):
            store.open_transaction("default.t")
        with store.reading("default.t", agent="ro") as snapshot:
            assert snapshot.high_watermark == 0
        with Metastore.open(pg_url) as other:
            assert other.live_readers("default.t", timeout_s=60) == []
            assert other.snapshot("default.t").high_watermark == 0
    # A reading command's only write: its reader lease, held while it reads.
    with Metastore.open_for_reading(pg_url) as store, \
            store.reading("default.t", agent="rw") as snapshot:
        assert snapshot.high_watermark == 0
        with Metastore.open(pg_url, read_only=True) as other:
            assert [r.agent for r in other.live_readers("default.t", timeout_s=60)] == ["rw"]
    with Metastore.open(pg_url, read_only=True) as other:
        assert other.live_readers("default.t", timeout_s=60) == []


def test_lock_held_too_long_is_a_metastore_error(pg_url: str) -> None:
    with Metastore.open(pg_url, busy_timeout_s=0.2) as store, \
            psycopg.connect(pg_url) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
        with pytest.raises(MetastoreError, match="timed out waiting for the metastore's "
                           "write lock") as info:
            store.abort_timed_out(1)
        assert "retry" in str(info.value.hint)
        holder.rollback()
        assert store.abort_timed_out(1) == []


def _write_lock_waiters(url: str) -> int:
    """Sessions waiting for the metastore's write lock (a bigint advisory lock: its key split
    into classid, the high half, and objid)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND objsubid = 1 AND (classid::bigint << 32 | objid::bigint) = %s",
            (WRITE_LOCK_KEY,)).fetchone()
    return int(row[0]) if row else 0


def test_writes_wait_for_the_write_lock(pg_url: str) -> None:
    """A second writer blocks until the first commits, then sees its write (READ COMMITTED
    after the lock): write ids stay distinct without any retry."""
    with Metastore.open(pg_url) as store, Metastore.open(pg_url) as other:
        store.create_table(TableDefinition("default.t", "/x/t", SCHEMA))
        got: list[int] = []
        with store._db.write():
            thread = threading.Thread(
                target=lambda: got.append(other.open_transaction("default.t").write_id))
            thread.start()
            wait_until("the second writer waiting for the write lock",
                       lambda: _write_lock_waiters(pg_url) > 0 or not thread.is_alive())
            assert got == []  # waiting for the lock
            store._transactions._take_write_ids(store._db._conn, ["default.t"], 5)  # type: ignore[arg-type]
        thread.join(180)
        assert got == [6]


def test_a_connection_dropped_while_idle_is_replaced_without_failing_a_call(
        pg_server: PgServer, pg_url: str) -> None:
    with Metastore.open(pg_url) as store:
        store.create_table(TableDefinition("default.t", "/x/t", SCHEMA))
        for _ in range(2):  # a server restart, an idle-connection reaper
            pg_server.admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            f"WHERE datname = '{pg_url.rsplit('/', 1)[1]}'")
            assert [t.name for t in store.list_tables()] == ["default.t"]
            txn = store.open_transaction("default.t", agent="after-drop")
            store.commit(txn)


def test_a_server_that_is_gone_is_a_metastore_error_without_the_password(
        pg_server: PgServer, pg_url: str) -> None:
    url = pg_url.rsplit("/", 1)[0] + "/" + pg_server.create_database()
    with Metastore.open(url) as store:
        pg_server.admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        f"WHERE datname = '{url.rsplit('/', 1)[1]}'")
        pg_server.admin(f"DROP DATABASE {url.rsplit('/', 1)[1]} WITH (FORCE)")
        with pytest.raises(MetastoreError) as info:
            store.list_tables()
        _no_password(info.value)


def test_ingest_metastore_names_a_postgresql_metastore(pg_url: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from ingest.errors import TableNotFoundError
    from ingest.txn import default_metastore_url, find_metastore_for

    monkeypatch.setenv("INGEST_METASTORE", pg_url)
    assert default_metastore_url(str(tmp_path / "events")) == pg_url
    with Metastore.open(pg_url) as store:
        store.create_table(TableDefinition("default.events", str(tmp_path / "events"), SCHEMA))
    store, found = find_metastore_for(str(tmp_path / "events" / "dt=1"), read_only=True)
    with store:
        assert (found.name, store.dialect) == ("default.events", "postgresql")
    with pytest.raises(TableNotFoundError) as info:
        find_metastore_for(str(tmp_path / "other"))
    assert f"(metastores searched: {_shown(pg_url)})" in info.value.message
    _no_password(info.value)


def test_a_user_who_may_not_create_tables_is_told_so(pg_server: PgServer) -> None:
    database = "t_not_owned"
    pg_server.admin(f"CREATE DATABASE {database}")  # owned by the superuser, not by ingest
    with pytest.raises(MetastoreError) as info:
        Metastore.open(pg_server.url(database))
    assert info.value.message.endswith("permission denied for schema public")
    assert "needs CREATE on the database's schema" in str(info.value.hint)
    assert pg_server.admin("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
                           database=database) == [(0,)]


def test_unknown_host_is_named() -> None:
    with pytest.raises(MetastoreError) as info:
        Metastore.open(f"postgresql://ingest:{PG_PASSWORD}@no-such-host.invalid/meta"
                       "?connect_timeout=3")
    assert info.value.message == ("Cannot open metastore postgresql://ingest@no-such-host."
                                  "invalid/meta: cannot resolve the host name "
                                  "'no-such-host.invalid'")
    _no_password(info.value)
