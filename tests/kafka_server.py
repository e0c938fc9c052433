"""A real Apache Kafka broker for the tests: Kafka 4.1.1 in KRaft mode, one node (broker and
controller), as its own process group on loopback, started by scripts/kafka.sh.

Its listeners: PLAINTEXT, SSL (server certificate), MTLS (SSL, client certificate required),
SASL_SSL (SCRAM-SHA-512) and SASL_PLAINTEXT (PLAIN); users `alice` and `admin` (a super user)
with random passwords per broker, a throwaway CA, and the StandardAuthorizer allowing everyone
where no ACL matches (a test can DENY User:alice). Topics are not created on first use
(auto.create.topics.enable=false): `create_topic` makes one and waits for its leaders.
scripts/fetch-servers.sh lays its jars out under $INGEST_SERVERS (default
~/.cache/ingest/servers)/kafka-4.1.1; missing that (or openssl, or Java) skips the tests, or
fails them under INGEST_REQUIRE_ALL=1.

`apache_kafka` is one broker per session (per xdist worker: about 10 s to start), shared:
tests use topics of their own. `own_apache_kafka` is a broker of one test's own, for a test
that restarts or kills it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from external import require

KAFKA_VERSION = "4.1.1"
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "kafka.sh"
START_TIMEOUT_S = 180  # scripts/kafka.sh's own deadline; about 10 s on an idle machine
STOP_TIMEOUT_S = 60
TOPIC_TIMEOUT_S = 60
LISTENERS = ("PLAINTEXT", "SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT")


def kafka_home() -> Path:
    """Where scripts/fetch-servers.sh lays Kafka out."""
    root = Path(os.environ.get("INGEST_SERVERS", Path.home() / ".cache" / "ingest" / "servers"))
    return root / f"kafka-{KAFKA_VERSION}"


def _running(pid: int) -> bool:
    """Whether the process lives (a zombie, killed but not reaped yet, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class ApacheKafka:
    """A running Kafka broker of scripts/kafka.sh in `directory`: its listeners, files and
    credentials, as the script prints them."""

    plaintext: str
    ssl: str
    mtls: str
    sasl_ssl: str
    sasl_plaintext: str
    bootstrap: str
    ca: str
    client_cert: str
    client_key: str
    truststore: str
    truststore_password: str
    user: str
    password: str
    admin_user: str
    admin_password: str

    def __init__(self, directory: Path) -> None:
        """Start it in `directory` and wait until it answers a metadata request; skips (fails
        under INGEST_REQUIRE_ALL=1) when Kafka, openssl or Java is missing, fails when it does
        not start."""
        home = kafka_home()
        require((home / ".complete").exists(),
                f"Apache Kafka {KAFKA_VERSION} in {home} (scripts/fetch-servers.sh kafka)")
        require(shutil.which("openssl") is not None, "openssl (the Kafka broker's certificates)")
        require(shutil.which("java") is not None, "java on PATH (the Kafka broker)")
        self.dir = directory
        self.log = directory / "server.log"
        self._start()

    def _start(self) -> None:
        # PYTHON: the script's wait asks the broker for metadata through confluent_kafka.
        env = {**os.environ, "PYTHON": sys.executable}
        try:
            done = subprocess.run(["bash", str(SCRIPT), "start", "--dir", str(self.dir)],
                                  capture_output=True, text=True, env=env,
                                  stdin=subprocess.DEVNULL, timeout=START_TIMEOUT_S + 120)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"scripts/kafka.sh start did not return: {e.stderr!r}")
        if done.returncode != 0:
            pytest.fail(f"scripts/kafka.sh start failed ({done.returncode}):\n{done.stderr}")
        values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
        self.values = values
        for listener in LISTENERS:
            setattr(self, listener.lower(), values[listener])
        self.bootstrap = values["BOOTSTRAP"]
        self.ca = values["CA"]
        self.client_cert = values["CLIENT_CERT"]
        self.client_key = values["CLIENT_KEY"]
        self.truststore = values["TRUSTSTORE"]
        self.truststore_password = values["TRUSTSTORE_PASSWORD"]
        self.user = values["SASL_USER"]
        self.password = values["SASL_PASSWORD"]
        self.admin_user = values["ADMIN_USER"]
        self.admin_password = values["ADMIN_PASSWORD"]
        self.pid = int((self.dir / "pid").read_text())

    def stop(self) -> None:
        """Stop it (SIGTERM: a controlled shutdown; SIGKILL after 30 s). Its directory stays,
        for restart() and for reading its log."""
        if not (self.dir / "pid").exists():
            return
        done = subprocess.run(["bash", str(SCRIPT), "stop", "--dir", str(self.dir)],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=STOP_TIMEOUT_S)
        if done.returncode != 0:
            pytest.fail(f"scripts/kafka.sh stop failed ({done.returncode}):\n{done.stderr}")

    def restart(self) -> None:
        """Stop it and start it again on the same ports, data and credentials, and wait until
        it answers. After kill() the broker's registration must first time out on the
        controller (broker.session.timeout.ms, 9 s): about 15 s then."""
        self.stop()
        self._start()

    def kill(self) -> None:
        """SIGKILL its process group, as a crash would, and wait until it is gone."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while _running(self.pid):
            if time.monotonic() > deadline:
                pytest.fail(f"Kafka broker {self.pid} still runs {STOP_TIMEOUT_S} s after SIGKILL")
            time.sleep(0.05)

    def client_config(self, listener: str = "PLAINTEXT") -> dict[str, str]:
        """librdkafka (confluent_kafka) settings for a client of `listener`: one of PLAINTEXT,
        SSL, MTLS, SASL_SSL, SASL_PLAINTEXT; the SASL ones as alice."""
        if listener not in LISTENERS:
            raise ValueError(f"unknown listener {listener!r} (expected one of {LISTENERS})")
        config = {"bootstrap.servers": getattr(self, listener.lower())}
        if listener == "PLAINTEXT":
            return {**config, "security.protocol": "PLAINTEXT"}
        if listener == "SASL_PLAINTEXT":
            return {**config, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                    "sasl.username": self.user, "sasl.password": self.password}
        config["ssl.ca.location"] = self.ca
        if listener == "SSL":
            return {**config, "security.protocol": "SSL"}
        if listener == "MTLS":
            return {**config, "security.protocol": "SSL",
                    "ssl.certificate.location": self.client_cert,
                    "ssl.key.location": self.client_key}
        return {**config, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": self.user, "sasl.password": self.password}

    def admin(self) -> Any:
        """A confluent_kafka AdminClient on the PLAINTEXT listener (a super user)."""
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.client_config("PLAINTEXT"))

    def create_topic(self, name: str, partitions: int = 1,
                     config: dict[str, str] | None = None) -> None:
        """Create a topic and wait until its metadata shows all its partitions with leaders."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()
        futures = admin.create_topics([NewTopic(name, num_partitions=partitions,
                                                replication_factor=1, config=config or {})],
                                      operation_timeout=TOPIC_TIMEOUT_S)
        futures[name].result(timeout=TOPIC_TIMEOUT_S)
        deadline = time.monotonic() + TOPIC_TIMEOUT_S
        while True:
            topic = admin.list_topics(topic=name, timeout=10).topics.get(name)
            if (topic is not None and topic.error is None
                    and len(topic.partitions) == partitions
                    and all(p.leader >= 0 and p.error is None
                            for p in topic.partitions.values())):
                return
            if time.monotonic() > deadline:
                pytest.fail(f"topic {name} has no leader for all {partitions} partitions in "
                            f"{TOPIC_TIMEOUT_S} s: {topic and topic.partitions}")
            time.sleep(0.1)


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """One Kafka broker for the session (per xdist worker); tests use topics of their own."""
    server = ApacheKafka(tmp_path_factory.mktemp("apache-kafka"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_apache_kafka(tmp_path: Path) -> Iterator[ApacheKafka]:
    """A Kafka broker of this test's own (it may restart or kill it)."""
    directory = tmp_path / "apache-kafka"
    directory.mkdir()
    server = ApacheKafka(directory)
    try:
        yield server
    finally:
        server.stop()
