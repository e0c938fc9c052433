"""Driver failures, corrupt or foreign files and newer schema versions become clear errors."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.errors import ConfigError, IngestError, UnsupportedFormatError
from ingest.txn import Metastore, MetastoreError


def test_corrupt_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "_ingest_metastore.sqlite"
    path.write_bytes(b"this is not sqlite at all " * 200)
    with pytest.raises(MetastoreError) as info:
        Metastore.open(f"sqlite://{path}")
    assert str(info.value) == f"Cannot open metastore {path}: file is not a database"
    assert info.value.location == str(path)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)
    assert isinstance(info.value, IngestError)


def test_foreign_sqlite_database(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id)")
    conn.close()
    with pytest.raises(MetastoreError, match="not an ingest metastore"):
        Metastore.open(f"sqlite://{path}")


def test_newer_schema_version_refused(tmp_path: Path) -> None:
    path = tmp_path / "ms.sqlite"
    Metastore.open(f"sqlite://{path}").close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(UnsupportedFormatError, match="schema version is 99 but this ingest"):
        Metastore.open(f"sqlite://{path}")


def test_reopen_keeps_data(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/deep/er/ms.sqlite"
    with Metastore.open(url) as store:
        assert store.list_tables() == []
    with Metastore.open(url, create=False) as store:
        assert store.list_tables() == []


def test_missing_file_without_create(tmp_path: Path) -> None:
    with pytest.raises(MetastoreError, match="file does not exist"):
        Metastore.open(f"sqlite://{tmp_path}/none.sqlite", create=False)


@pytest.mark.parametrize("url", ["mysql://u:pw-xyz@x/y", "sqlite://relative.sqlite", "ms.sqlite",
                                 "postgresql://ingest@127.0.0.1:5432",
                                 "postgres://u:pw-xyz@h:abc/db", "postgresql://u:pw-xyz@[::1/db"])
def test_bad_urls(url: str) -> None:
    with pytest.raises(ConfigError, match="Cannot open metastore") as info:
        Metastore.open(url)
    assert "pw-xyz" not in f"{info.value} {info.value.hint}"  # never the password


def test_lock_held_too_long_is_a_metastore_error(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/ms.sqlite"
    holder = sqlite3.connect(tmp_path / "ms.sqlite", isolation_level=None)
    with Metastore.open(url, busy_timeout_s=0.05) as store:
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(MetastoreError, match="database is locked") as info:
                store.abort_timed_out(1)
            assert "retry" in str(info.value)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert store.abort_timed_out(1) == []


@pytest.mark.parametrize("read_only", [False, True])
def test_an_empty_file_is_never_rebuilt_without_create(tmp_path: Path, read_only: bool) -> None:
    path = tmp_path / "_ingest_metastore.sqlite"
    path.write_bytes(b"")
    with pytest.raises(MetastoreError) as info:
        Metastore.open(f"sqlite://{path}", create=False, read_only=read_only)
    assert str(info.value).startswith(
        f"Cannot open metastore {path}: the file is empty (0 bytes), so it is not an ingest "
        "metastore; it was not rebuilt")
    assert "--adopt" in str(info.value.hint)
    assert path.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_a_metastore_being_created_is_never_seen_without_its_tables(tmp_path: Path) -> None:
    """A reader that opens the file the moment it appears finds a whole metastore, never an
    empty one (which it must refuse as emptied by accident)."""
    paths = [tmp_path / f"m{i}" / "_ingest_metastore.sqlite" for i in range(40)]
    creator = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom ingest.txn import Metastore\n"
         "for p in sys.argv[1:]:\n    Metastore.open(f'sqlite://{p}').close()",
         *map(str, paths)])
    try:
        for path in paths:
            while not path.exists():  # no sleep: opened the moment it appears
                code = creator.poll()
                assert code is None or path.exists(), \
                    f"the creating process ended ({code}) without making {path}"
            with Metastore.open(f"sqlite://{path}", read_only=True) as store:
                assert store.list_tables() == []
    finally:
        assert creator.wait(timeout=120) == 0
    scratch = [p for path in paths for p in path.parent.iterdir() if ".new-" in p.name]
    assert scratch == []  # the files the tables were made in are gone


def test_read_only_open_creates_nothing_and_refuses_writes(tmp_path: Path) -> None:
    import pyarrow as pa

    from ingest.txn import TableDefinition
    url = f"sqlite://{tmp_path}/m.sqlite"
    with pytest.raises(MetastoreError, match="file does not exist"):
        Metastore.open(url, read_only=True)
    assert not (tmp_path / "m.sqlite").exists()
    with Metastore.open(url) as s:
        s.create_table(TableDefinition("default.t", str(tmp_path / "t"),
                                       pa.schema([("id", pa.int64())])))
    before = (tmp_path / "m.sqlite").read_bytes()
    with Metastore.open(url, read_only=True) as s:
        assert s.snapshot("default.t").high_watermark == 0
        with pytest.raises(MetastoreError, match="readonly"):
            s.open_transaction("default.t")
    assert (tmp_path / "m.sqlite").read_bytes() == before


def test_next_write_id_and_properties(tmp_path: Path) -> None:
    import pyarrow as pa

    from ingest.txn import TableDefinition
    with Metastore.open(f"sqlite://{tmp_path}/m.sqlite") as s:
        defn = TableDefinition("default.t", str(tmp_path / "t"), pa.schema([("id", pa.int64())]),
                               properties={"a": "1"})
        with pytest.raises(ConfigError, match="next write id 0 must be at least 1"):
            s.create_table(defn, next_write_id=0)
        s.create_table(defn, next_write_id=8)
        assert s.open_transaction("default.t").write_id == 8
        stored = s.set_properties("default.t", {"b": "2", "a": "3"})
        assert stored.properties == {"a": "3", "b": "2", "transactional": "true",
                                     "bucketing_version": "2"}
        assert s.get_table("default.t").properties == stored.properties


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    conn.close()
    return {name for (name,) in rows}


def test_version_1_metastore_is_upgraded_by_a_writer_only(tmp_path: Path,
                                                         legacy_sqlite) -> None:
    from ingest.txn.sql._schema import SCHEMA_VERSION

    path = tmp_path / "v1.sqlite"
    legacy_sqlite(path, 1)
    before = _tables(path)
    with Metastore.open(f"sqlite://{path}", read_only=True) as store:
        assert store.schema_version == 1
        assert store.list_tables() == []
    assert _tables(path) == before  # a reader never upgrades
    with Metastore.open(f"sqlite://{path}", create=False) as store:
        assert store.schema_version == SCHEMA_VERSION == 5
    assert _tables(path) - before == {"committed_files", "readers", "compactions", "write_set",
                                      "table_schemas", "table_offsets"}
    with Metastore.open(f"sqlite://{path}", read_only=True) as store:
        assert store.schema_version == 5


def test_version_2_file_of_the_old_raw_ddl_works_as_before(tmp_path: Path,
                                                          legacy_sqlite) -> None:
    """A file written before the schema was declared with SQLAlchemy: every kind of row is
    written and read back, and txn ids still come from AUTOINCREMENT (sqlite_sequence)."""
    import pyarrow as pa

    from ingest.acid.format.committed import CommittedFile
    from ingest.txn import TableDefinition

    path = tmp_path / "v2.sqlite"
    url = legacy_sqlite(path, 2)
    with Metastore.open(url, create=False) as store:
        assert store.schema_version == 5  # a writer adds the write set, schema history and
        # per-table offsets
        store.create_table(TableDefinition("default.t", str(tmp_path / "t"),
                                           pa.schema([("id", pa.int64())])))
        txn = store.open_transaction("default.t", agent="a")
        entry = CommittedFile("delta_0000001_0000001/bucket_00000", 1, 100, "ab" * 8, 3)
        store.commit(txn, sink=("sink", 0), offsets=[("topic", 0, 5, 9)],
                     files={"default.t": [entry]}, updated={"": [0]})
        cid, ctxn = store.begin_compaction("default.t", "", "major", agent="c",
                                           stale_after_s=60)
        store.finish_compaction(cid, ctxn, highest_write_id=1, rows=3, inputs=["d"],
                                outputs=["base_0000001"])
        store.mark_compactions_cleaned([cid])
        with store.reading("default.t", agent="r") as snapshot:
            assert [r.agent for r in store.live_readers("default.t", timeout_s=60)] == ["r"]
    with Metastore.open(url, read_only=True) as store:
        assert snapshot.high_watermark == 1
        assert store.committed_files("default.t") == {entry.path: entry}
        assert store.last_committed_batch("sink") == 0
        assert [(w, tuple(r)) for w, r in store.offset_ranges("default.t")] == [
            (1, ("topic", 0, 5, 9))]
        assert [c.state for c in store.compactions("default.t")] == ["succeeded"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'txns'"
                            ).fetchall() == [(2,)]
    conn.close()


def test_new_sqlite_files_keep_autoincrement_ids(tmp_path: Path) -> None:
    """The generated DDL keeps SQLite's INTEGER PRIMARY KEY AUTOINCREMENT: ids are rowids
    and are never handed out twice."""
    path = tmp_path / "new.sqlite"
    Metastore.open(f"sqlite://{path}").close()
    with sqlite3.connect(path) as conn:
        ddl = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    conn.close()
    for table, column in (("txns", "txn_id"), ("readers", "reader_id"),
                          ("compactions", "compaction_id")):
        assert f"{column} INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT" in ddl[table], ddl[table]
    assert "sqlite_sequence" in ddl
