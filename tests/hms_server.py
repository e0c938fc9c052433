"""Throwaway Hive Metastores and Trino for the tests, started through the same scripts a user
runs (scripts/hms.sh, scripts/trino.sh) with a directory of the test's own, and stopped by
them (each server is its own process group). A server that cannot start skips its tests, or
fails them under INGEST_REQUIRE_ALL=1 (.ci/run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from external import require

ROOT = Path(__file__).resolve().parent.parent
HMS_SH = ROOT / "scripts" / "hms.sh"
TRINO_SH = ROOT / "scripts" / "trino.sh"

TXN_TIMEOUT_S = 20
"""The test metastores' hive.txn.timeout: short, so a test can watch the server abort an
unheartbeated transaction; writers heartbeat at half of it."""
REAPER_INTERVAL_S = 2
"""How often the test metastores look for timed-out transactions."""


@dataclass(frozen=True)
class Server:
    """A running server: its URI (thrift:// or http://), directory and log file."""

    uri: str
    directory: Path
    log: Path


def _script_env() -> dict[str, str]:
    env = dict(os.environ)
    # The scripts run python3 for small helpers and pyspark's jars (Hive 2) via $PYTHON.
    env["PYTHON"] = sys.executable
    env["HMS_TXN_TIMEOUT_S"] = str(TXN_TIMEOUT_S)
    env["HMS_REAPER_INTERVAL_S"] = str(REAPER_INTERVAL_S)
    env["TRINO_TXN_HEARTBEAT"] = "3s"
    return env


def _run(script: Path, args: list[str], what: str, log_name: str,
         directory: Path, timeout_s: float) -> str:
    try:
        done = subprocess.run(["bash", str(script), *args], capture_output=True, text=True,
                              timeout=timeout_s, env=_script_env())
    except subprocess.TimeoutExpired as e:
        subprocess.run(["bash", str(script), "stop", "--dir", str(directory)],
                       capture_output=True, timeout=60, env=_script_env())
        require(False, f"{what}: {script.name} start did not finish in {timeout_s:.0f} s "
                f"({e.stderr or ''})")
        raise AssertionError("unreachable") from e
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        log = directory / log_name
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        require(False, f"{what}: {script.name} start failed ({done.returncode}): "
                f"{done.stderr[-2000:]}{tail}")
    return lines[-1]


@contextmanager
def hms_server(version: str, *, start_args: tuple[str, ...] = (),
               backing_db: str | None = None) -> Iterator[Server]:
    """A Hive Metastore of `version` ("4", "3", or "2" from pyspark's jars) until the block ends;
    `start_args` go to `hms.sh start` as well (`--kerberos DIR --qop Q`). `backing_db`: a
    `postgresql://` URL its database lives in (several metastores started on the same one serve
    one metastore; scripts/hms.sh --backing-db)."""
    require(shutil.which("mvn") is not None or version == "2",
            "mvn (Maven) to fetch the Hive Metastore from Maven Central")
    require(shutil.which("java") is not None, "java on PATH")
    _require_client()
    directory = Path(tempfile.mkdtemp(prefix=f"ingest-hms{version}-"))
    args = [*start_args, *(["--backing-db", backing_db] if backing_db else [])]
    uri = _run(HMS_SH, ["start", "--version", version, "--dir", str(directory), *args],
               f"Hive Metastore {version} {' '.join(start_args)}".rstrip(), "hms.log",
               directory, 900)
    try:
        yield Server(uri, directory, directory / "hms.log")
    finally:
        subprocess.run(["bash", str(HMS_SH), "stop", "--dir", str(directory)],
                       capture_output=True, timeout=60, env=_script_env())
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def trino_server(thrift_uri: str, *, start_args: Sequence[str] = ()) -> Iterator[Server]:
    """Trino with a `hive` catalog on the metastore at `thrift_uri` until the block ends;
    `start_args` go to trino.sh start (e.g. --kerberos KDC_DIR)."""
    require(shutil.which("mvn") is not None, "mvn (Maven) to fetch Trino from Maven Central")
    try:
        import trino  # noqa: F401
    except ImportError:
        require(False, "the trino Python client (pip install 'ingest[test]')")
    directory = Path(tempfile.mkdtemp(prefix="ingest-trino-"))
    uri = _run(TRINO_SH, ["start", thrift_uri, "--dir", str(directory), *start_args],
               f"Trino {' '.join(start_args)}".rstrip(), "trino.log", directory, 1800)
    try:
        yield Server(uri, directory, directory / "trino.log")
    finally:
        subprocess.run(["bash", str(TRINO_SH), "stop", "--dir", str(directory)],
                       capture_output=True, timeout=90, env=_script_env())
        shutil.rmtree(directory, ignore_errors=True)


STARTED: list[Server] = []
"""The session's Hive 4 and 3.1 metastores started so far (what a test's tidying tidies)."""


@contextmanager
def _session_server(version: str) -> Iterator[Server]:
    with hms_server(version) as server:
        STARTED.append(server)
        try:
            yield server
        finally:
            STARTED.remove(server)


# Session fixtures, imported by tests/conftest.py so that tests/hms and tests/txn share one
# server per version (and per xdist group, tests/conftest.py).
@pytest.fixture(scope="session")
def hms4() -> Iterator[Server]:
    with _session_server("4") as server:
        yield server


@pytest.fixture(scope="session")
def hms3() -> Iterator[Server]:
    with _session_server("3") as server:
        yield server


def _require_client() -> None:
    try:
        import hive_metastore  # noqa: F401
        import thrift  # noqa: F401
    except ImportError:
        require(False, "the Hive Metastore client (pip install 'ingest[hms]')")


# A fresh Trino answers SELECT 1 before its node is active for the catalogs' queries: those
# fail with NO_NODES_AVAILABLE ("nodes is empty" for writes) for a few seconds.
_NOT_YET_SCHEDULABLE = ("NO_NODES_AVAILABLE", "nodes is empty")


def trino_query(trino: Server, sql: str, *, timeout_s: float = 60.0) -> list[list[object]]:
    """The rows of `sql` run by Trino on its `hive` catalog, retried while Trino's node is not
    yet schedulable (a deadline, then the error)."""
    import trino as client

    host, port = trino.uri.removeprefix("http://").split(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with client.dbapi.connect(host=host, port=int(port), user="ingest-test",
                                      catalog="hive") as conn:
                cursor = conn.cursor()
                cursor.execute(sql)
                return [list(row) for row in cursor.fetchall()]
        except client.exceptions.TrinoQueryError as e:
            if (not any(s in str(e) for s in _NOT_YET_SCHEDULABLE)
                    or time.monotonic() > deadline):
                raise
            time.sleep(1)


def create_plain_orc_table(uri: str, tmp_path: Path) -> str:
    """Register `<new db>.plain`, an external ORC table that is not transactional, at
    `tmp_path/ext/p` (as an engine that knows nothing of ACID would); returns the database."""
    import uuid

    from ingest.txn import hms
    from ingest.txn.hms.thrift import ttypes

    db = "n_" + uuid.uuid4().hex[:10]
    with hms.connect(uri) as conn:
        hms.create_database(conn, db, location=f"file://{tmp_path}/ext")
        t = ttypes()
        sd = t.StorageDescriptor(
            cols=[t.FieldSchema(name="id", type="bigint")], location=f"file:{tmp_path}/ext/p",
            inputFormat=hms.ORC_INPUT_FORMAT, outputFormat=hms.ORC_OUTPUT_FORMAT,
            serdeInfo=t.SerDeInfo(serializationLib=hms.ORC_SERDE, parameters={}),
            numBuckets=-1, bucketCols=[], sortCols=[], parameters={})
        conn.call("create_table", t.Table(tableName="plain", dbName=db, sd=sd,
                                          partitionKeys=[], parameters={"EXTERNAL": "TRUE"},
                                          tableType="EXTERNAL_TABLE"))
    return db


def register_hive_acid_table(uri: str, tmp_path: Path, columns: Sequence[tuple[str, str]]
                             ) -> tuple[str, str]:
    """Register `<new db>.t` as Hive's CREATE TABLE ... STORED AS ORC TBLPROPERTIES
    ('transactional'='true') does: no ingest property, no marker, the location chosen by the
    metastore (the new database's managed location, `tmp_path/db`). Returns (db.t, location)."""
    import uuid

    from ingest.txn import Metastore, hms

    db = f"tr_{uuid.uuid4().hex[:10]}"
    with hms.connect(uri) as conn:
        hms.create_database(conn, db, location=f"file://{tmp_path}/ext",
                            managed_location=f"file://{tmp_path}/db")
        hms.create_table(conn, hms.HiveTableSpec(
            f"{db}.t", tuple(hms.HiveColumn(name, kind) for name, kind in columns)))
    with Metastore.open(uri) as store:
        return f"{db}.t", store.get_table(f"{db}.t").location


@dataclass(frozen=True)
class MetastoreState:
    """What a metastore held before a test: its databases and its highest transaction id."""

    databases: frozenset[str]
    high_watermark: int


def metastore_state(uri: str) -> MetastoreState | None:
    """The databases and transaction high watermark of the metastore at `uri` (None when it
    does not answer: then `tidy_metastore` leaves it alone)."""
    from ingest.txn import hms

    try:
        with hms.connect(uri, connect_timeout_s=10) as conn:
            return MetastoreState(frozenset(conn.call("get_all_databases")),
                                  hms.txn_snapshot(conn).high_watermark)
    except Exception:  # noqa: BLE001 - a test may have stopped it; its own checks say so
        return None


def tidy_metastore(uri: str, before: MetastoreState | None) -> None:
    """After a test on the shared metastore at `uri`: abort the transactions opened since
    `before` that are still open, and drop (cascade, keeping files) the databases created
    since. `before` None: everything but `default` is the test's. Best effort: a server that
    does not answer is left as it is."""
    from ingest.txn import hms

    before = before or MetastoreState(frozenset({"default"}), 0)
    try:
        with hms.connect(uri, connect_timeout_s=10) as conn:
            for txn in hms.txn_snapshot(conn).open_txns:
                if txn > before.high_watermark:
                    hms.abort_txn(conn, txn)
            for db in sorted(set(conn.call("get_all_databases")) - before.databases
                             - {"default"}):
                conn.call("drop_database", db, False, True)
    except Exception:  # noqa: BLE001 - only tidying; the next test creates its own names
        pass


def wait_until_no_txn_is_open(uri: str, *, timeout_s: float = TXN_TIMEOUT_S * 4) -> None:
    """Until no transaction is open on the metastore at `uri`: Hive's cleaning rule counts
    every open transaction of the server as a reader of every table, so a test that checks
    what a cleaning removes first waits out any other client's (Trino's, one the server has
    yet to time out)."""
    from ingest.txn import hms

    deadline = time.monotonic() + timeout_s
    with hms.connect(uri) as conn:
        while (open_txns := hms.txn_snapshot(conn).open_txns):
            assert time.monotonic() < deadline, (
                f"transactions {list(open_txns)} still open on {uri} after {timeout_s:.0f} s")
            time.sleep(0.2)
