"""Fixtures of the Hive Metastore tests: one server per version for the session (Hive 4.0.1,
3.1.3, and Hive 2.3 from pyspark's jars for the refusal), Trino on the Hive 4 and 3.1 ones,
a new database per test whose managed location is the test's own directory, and a backend
with an unpartitioned table definition for the backend tests.

After each test, what it left on the session's metastores goes (`_tidy_metastores`): the
transactions it left open (a killed job's, until the server's timeout), which Hive's cleaning
rule would count as readers of every table in the next tests, and the databases it created,
which every lookup of a table by location walks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from hms_server import STARTED as _STARTED
from hms_server import Server, hms_server, metastore_state, tidy_metastore, trino_server

from ingest.txn import Metastore, TableDefinition, hms


@pytest.fixture(scope="session")
def hms2() -> Iterator[Server]:
    with hms_server("2") as server:
        yield server


@pytest.fixture(autouse=True)
def _tidy_metastores() -> Iterator[None]:
    """Abort the transactions a test left open and drop the databases it created, on each
    session metastore (one first started by this test: everything on it but `default`)."""
    before = {s.uri: metastore_state(s.uri) for s in _STARTED}
    yield
    for server in list(_STARTED):
        tidy_metastore(server.uri, before.get(server.uri))


@pytest.fixture(params=["4", "3"], ids=["hive4", "hive3"])
def metastore(request: pytest.FixtureRequest) -> Server:
    """Each test that takes it runs against Hive 4 and Hive 3.1."""
    return request.getfixturevalue(f"hms{request.param}")


@pytest.fixture
def conn(metastore: Server) -> Iterator[hms.HmsConnection]:
    with hms.connect(metastore.uri) as connection:
        yield connection


@pytest.fixture
def database(conn: hms.HmsConnection, tmp_path: Path) -> str:
    """A new database managing tables under tmp_path/db (Hive 4 creates that directory)."""
    name = "t_" + uuid.uuid4().hex[:10]
    hms.create_database(conn, name, location=f"file://{tmp_path}/ext",
                        managed_location=f"file://{tmp_path}/db")
    return name


@pytest.fixture(scope="session")
def trino_on_hms4(hms4: Server) -> Iterator[Server]:
    with trino_server(hms4.uri) as server:
        yield server


@pytest.fixture(scope="session")
def trino_on_hms3(hms3: Server) -> Iterator[Server]:
    """Trino on Hive 3.1, which lets it create transactional tables (Hive 4 does not)."""
    with trino_server(hms3.uri) as server:
        yield server


@pytest.fixture
def store(metastore: Server) -> Iterator[Metastore]:
    """The `thrift://` backend on each server version."""
    with Metastore.open(metastore.uri) as opened:
        yield opened


@pytest.fixture
def defn(tmp_path: Path) -> TableDefinition:
    """An unpartitioned table (id BIGINT, v STRING) in a database of its own, not yet created."""
    db = "d_" + uuid.uuid4().hex[:10]
    return TableDefinition(f"{db}.events", f"file://{tmp_path}/wh/events",
                           pa.schema([("id", pa.int64()), ("v", pa.string())]))
