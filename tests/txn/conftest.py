"""Fixtures of the transaction-store suite: one behaviour suite run over every kind of
metastore (a SQLite file, SQLite in memory, a PostgreSQL database, a real Hive Metastore 4.0
and 3.1 over `thrift://`), and metastore files as older ingest versions wrote them.

How a backend joins the suite (the template for a third one):

1. Add its kind to `KINDS` with the capabilities it has (`CAPABILITIES` says what each one
   means; declare only what the backend really does).
2. Give `_open_kind` a branch that returns a `Backend` for it: its URL, and a namespace of the
   test's own -- a new database (PostgreSQL), or on a shared server a new database name that
   bare table names go to (`Backend.database`) and a warehouse its table locations go under.
   A session-scoped server is a fixture (`pg_server`, `hms4`) fetched with getfixturevalue, so
   only the kinds selected start one; a server that cannot start skips its kind (`require`).
3. A server shared by many tests needs its xdist group (tests/conftest.py, `_store_group`), so
   that it starts once per worker.

The cases name tables through the `table_def` factory, `events`/`dead_letter`, and `backend`
(`backend.name("t")`, `backend.location("t")`), never a literal `default.`-qualified name or a
`memory://` location. A case that needs something not every backend does is marked
`@pytest.mark.requires("clock", ...)`: on a kind without it, it is skipped with the reason
shown (`-rs`), before any server starts. A known bug of one backend is marked
`@pytest.mark.gap("hive4", reason=...)`: a strict xfail there, so its fix is noticed. A case
about one backend alone (legacy SQLite files, PostgreSQL's connection errors) stays in its
own file and opens that backend itself.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from ingest.txn import Metastore, TableDefinition

CAPABILITIES: dict[str, str] = {
    "clock": "the store's clock (an injected one in tests) alone decides transaction and "
             "reader time-outs and the times it records",
    "private": "the store holds nothing but the test's own: transaction ids start at 1 and "
               "listings of every table or transaction see only the test's",
    "processes": "several processes can open the store at once",
    "sql": "it is ingest's SQL schema (a case may read or write its rows through `_db`)",
    "bucket_write_set": "the write set is (partition, bucket) pairs from commit's `updated` "
                        "(a Hive Metastore's is partitions, from the delete deltas committed)",
    "transaction_batches": "its tables may hold transaction batches (`allocate_write_ids`: "
                           "K write ids appending to one delta)",
    "txn_history": "it keeps each ended transaction's id, agent, end time and reason (a Hive "
                   "Metastore reports a committed write id with transaction 0)",
    "arrow_schema": "the store keeps a table's Arrow schema as given (metadata, time zones, "
                    "dictionary and large types), not only what Hive's types express",
}
"""What a backend may do beyond the `Metastore` contract every kind keeps."""

_SQL = frozenset({"clock", "private", "arrow_schema", "transaction_batches", "txn_history",
                  "sql", "bucket_write_set"})
KINDS: dict[str, frozenset[str]] = {
    "sqlite-file": _SQL | {"processes"},
    "sqlite-memory": _SQL,
    "postgresql": _SQL | {"processes"},
    "hive4": frozenset({"processes"}),
    "hive3": frozenset({"processes"}),
}
"""Each kind of store the suite runs on, with its capabilities (`CAPABILITIES`)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requires(*capabilities): the store kinds it runs on "
                                       "(tests/txn/conftest.py, CAPABILITIES)")
    config.addinivalue_line("markers", "gap(*kinds, reason): a known bug of those kinds' "
                                       "backend; the case is a strict xfail there")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip, with the reason, each case marked `requires` on a kind that lacks one."""
    here = Path(__file__).parent
    for item in items:
        if here not in item.path.parents:
            continue
        wanted = {c for m in item.iter_markers("requires") for c in m.args}
        if unknown := wanted - set(CAPABILITIES):
            raise pytest.UsageError(f"{item.nodeid}: unknown capabilities {sorted(unknown)}; "
                                    f"known: {sorted(CAPABILITIES)}")
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("backend") if callspec is not None else None
        if kind not in KINDS:
            continue
        for gap in item.iter_markers("gap"):
            if kind in gap.args:
                item.add_marker(pytest.mark.xfail(strict=True, reason=gap.kwargs["reason"]))
        missing = sorted(wanted - KINDS[kind])
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"{kind} lacks {', '.join(missing)}: "
                                             + "; ".join(CAPABILITIES[c] for c in missing)))


class FakeClock:
    """A settable wall clock so time-outs are tested without sleeping."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@dataclass(frozen=True)
class Backend:
    """One test's store: its kind, URL, and the namespace its tables go in.

    Attributes:
        database: where a bare table name goes (`default` in a store of the test's own).
        warehouse: the directory (URL) table locations go under.
    """

    kind: str
    url: str
    database: str
    warehouse: str

    @property
    def capabilities(self) -> frozenset[str]:
        return KINDS[self.kind]

    def name(self, table: str) -> str:
        """`table`'s full name here (`db.table`; a qualified name is kept)."""
        return table.lower() if "." in table else f"{self.database}.{table}"

    def location(self, table: str) -> str:
        return f"{self.warehouse}/{table.rsplit('.', 1)[-1]}"

    def own(self, tables: list[TableDefinition]) -> list[str]:
        """The names of `tables` in this test's namespace (a shared server lists others')."""
        return [t.name for t in tables if t.name.startswith(f"{self.database}.")]

    def table(self, name: str, location: str | None = None, **kw: object) -> TableDefinition:
        """A definition (`table_def`) named and placed in this store's namespace, of a row
        schema it can hold (`ROW_SCHEMA`, or `HIVE_ROW_SCHEMA` without "arrow_schema")."""
        kw.setdefault("row_schema", ROW_SCHEMA if "arrow_schema" in self.capabilities
                      else HIVE_ROW_SCHEMA)
        return _table_def(self.name(name), location or self.location(name), **kw)


def _open_kind(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Backend:
    if kind == "sqlite-file":
        return Backend(kind, f"sqlite://{tmp_path}/ms/_ingest_metastore.sqlite", "default",
                       "memory://wh")
    if kind == "sqlite-memory":
        return Backend(kind, "sqlite://:memory:", "default", "memory://wh")
    if kind == "postgresql":
        return Backend(kind, str(request.getfixturevalue("pg_url")), "default", "memory://wh")
    # A Hive Metastore of the session: a database of the test's own, made by the first table
    # (with the warehouse as its managed location, which Hive 4 needs) and dropped after it.
    server = request.getfixturevalue({"hive4": "hms4", "hive3": "hms3"}[kind])
    request.getfixturevalue("_tidy_hms")
    return Backend(kind, server.uri, "t_" + uuid.uuid4().hex[:10], f"file://{tmp_path}/wh")


@pytest.fixture
def _tidy_hms() -> Iterator[None]:
    """Abort what a test left open on the session's Hive Metastores and drop its databases."""
    from hms_server import STARTED, metastore_state, tidy_metastore

    before = {s.uri: metastore_state(s.uri) for s in STARTED}
    yield
    for server in list(STARTED):
        tidy_metastore(server.uri, before.get(server.uri))


@pytest.fixture(params=list(KINDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """A store of each kind (`KINDS`): new, or a new namespace on a shared server."""
    return _open_kind(request, request.param, tmp_path)


@pytest.fixture
def store_url(backend: Backend) -> str:
    return backend.url


@pytest.fixture(params=["sqlite-file", "postgresql"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new metastore several processes can open: a SQLite file or a PostgreSQL database."""
    if request.param == "sqlite-file":
        return f"sqlite://{tmp_path}/_ingest_metastore.sqlite"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(store_url: str, clock: FakeClock) -> Iterator[Metastore]:
    with Metastore.open(store_url, clock=clock) as s:
        yield s


# The DDL ingest wrote for SQLite before the schema was declared with SQLAlchemy, kept
# verbatim (comments aside) so files written then are tested as they are.
LEGACY_V1_DDL = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE tables (
    name              TEXT PRIMARY KEY,
    location          TEXT NOT NULL UNIQUE,
    row_schema        BLOB NOT NULL,
    partition_columns TEXT NOT NULL,
    bucket_count      INTEGER NOT NULL,
    bucket_columns    TEXT NOT NULL,
    properties        TEXT NOT NULL,
    next_write_id     INTEGER NOT NULL DEFAULT 1,
    created_at        REAL NOT NULL
);
CREATE TABLE txns (
    txn_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    state        TEXT NOT NULL CHECK (state IN ('open', 'committed', 'aborted')),
    agent        TEXT NOT NULL,
    opened_at    REAL NOT NULL,
    heartbeat_at REAL NOT NULL,
    finished_at  REAL,
    reason       TEXT
);
CREATE INDEX txns_open ON txns (state, heartbeat_at);
CREATE TABLE txn_to_write_id (
    txn_id     INTEGER NOT NULL REFERENCES txns (txn_id),
    table_name TEXT NOT NULL REFERENCES tables (name),
    write_id   INTEGER NOT NULL,
    is_primary INTEGER NOT NULL,
    PRIMARY KEY (table_name, write_id),
    UNIQUE (txn_id, table_name)
);
CREATE TABLE sink_progress (
    sink_id    TEXT NOT NULL,
    batch_id   INTEGER NOT NULL,
    txn_id     INTEGER NOT NULL REFERENCES txns (txn_id),
    table_name TEXT NOT NULL,
    write_id   INTEGER NOT NULL,
    PRIMARY KEY (sink_id, batch_id)
);
CREATE TABLE txn_offsets (
    txn_id       INTEGER NOT NULL REFERENCES txns (txn_id),
    topic        TEXT NOT NULL,
    partition    INTEGER NOT NULL,
    from_offset  INTEGER NOT NULL,
    until_offset INTEGER NOT NULL,
    PRIMARY KEY (txn_id, topic, partition)
);
"""
LEGACY_V2_DDL = """
CREATE TABLE committed_files (
    table_name TEXT NOT NULL REFERENCES tables (name),
    path       TEXT NOT NULL,
    write_id   INTEGER NOT NULL,
    length     INTEGER NOT NULL,
    tail_hash  TEXT NOT NULL,
    rows       INTEGER NOT NULL,
    PRIMARY KEY (table_name, path)
);
CREATE TABLE readers (
    reader_id    INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name   TEXT NOT NULL,
    agent        TEXT NOT NULL,
    min_open_txn INTEGER NOT NULL,
    opened_at    REAL NOT NULL,
    heartbeat_at REAL NOT NULL
);
CREATE TABLE compactions (
    compaction_id INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name    TEXT NOT NULL,
    partition     TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('major', 'minor')),
    state         TEXT NOT NULL CHECK (state IN ('working', 'ready for cleaning',
                                                 'succeeded', 'failed')),
    txn_id        INTEGER REFERENCES txns (txn_id),
    highest_write_id INTEGER,
    started_at    REAL NOT NULL,
    finished_at   REAL,
    cleaned_at    REAL,
    rows          INTEGER,
    inputs        TEXT NOT NULL DEFAULT '[]',
    outputs       TEXT NOT NULL DEFAULT '[]',
    error         TEXT
);
"""


@pytest.fixture
def legacy_sqlite() -> Callable[[Path, int], str]:
    """Factory: legacy_sqlite(path, version) writes an empty metastore of schema version 1
    or 2 with the old raw DDL and returns its URL."""

    def make(path: Path, version: int) -> str:
        script = LEGACY_V1_DDL + (LEGACY_V2_DDL if version >= 2 else "")
        conn = sqlite3.connect(path)
        try:
            conn.executescript(script + f"INSERT INTO meta VALUES ('schema_version', '{version}');")
        finally:
            conn.close()
        return f"sqlite://{path}"

    return make


ROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("payload", pa.string()),
        pa.field(
            "tags",
            pa.list_(pa.struct([("k", pa.string()), ("v", pa.map_(pa.string(), pa.int32()))])),
        ),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("amount", pa.decimal128(18, 4)),
    ],
    metadata={b"origin": b"tests"},
)


HIVE_ROW_SCHEMA = pa.schema(
    [field.with_type(pa.timestamp("us")) if field.name == "ts" else field
     for field in ROW_SCHEMA]
)
"""`ROW_SCHEMA` as Hive's types express it (a timestamp without a time zone, no metadata)."""


def _table_def(name: str = "events", location: str | None = None, **kw: object) -> TableDefinition:
    kw.setdefault("row_schema", ROW_SCHEMA)
    return TableDefinition(
        name=name,
        location=location or f"memory://wh/{name.split('.')[-1]}",
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def table_def() -> object:
    """Factory: table_def(name, location=None, **TableDefinition fields)."""
    return _table_def


@pytest.fixture
def events(store: Metastore, backend: Backend) -> TableDefinition:
    return store.create_table(backend.table("events", partition_columns=("dt",)))


@pytest.fixture
def dead_letter(store: Metastore, backend: Backend) -> TableDefinition:
    return store.create_table(backend.table("events__dead_letter"))
