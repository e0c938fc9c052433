"""A throwaway MIT Kerberos realm for the tests, started through scripts/kdc.sh (the script a
user runs) in a directory of the test's own and stopped by it. Without the KDC's binaries
(Debian's krb5-kdc, krb5-admin-server, krb5-user) the tests that need it are skipped, or fail
under INGEST_REQUIRE_ALL=1 (.ci/run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from external import require
from hms_server import Server, hms_server
from kafka_server import SCRIPT as KAFKA_SH
from kafka_server import kafka_home

ROOT = Path(__file__).resolve().parent.parent
KDC_SH = ROOT / "scripts" / "kdc.sh"
SHORT_TICKET_S = 20
"""The lifetime of the session realm's tickets: short, so a test sees them expire and renew."""


@dataclass(frozen=True)
class Kdc:
    """A running realm: what `kdc.sh start` printed, and its directory."""

    directory: Path
    krb5_config: Path
    realm: str
    client_principal: str
    client_keytab: Path
    hive_principal: str
    hive_keytab: Path
    kafka_principal: str
    kafka_keytab: Path

    @classmethod
    def from_lines(cls, directory: Path, text: str) -> Kdc:
        values = dict(line.split("=", 1) for line in text.strip().splitlines() if "=" in line)
        return cls(directory, Path(values["KRB5_CONFIG"]), values["REALM"],
                   values["CLIENT_PRINCIPAL"], Path(values["CLIENT_KEYTAB"]),
                   values["HIVE_PRINCIPAL"], Path(values["HIVE_KEYTAB"]),
                   values["KAFKA_PRINCIPAL"], Path(values["KAFKA_KEYTAB"]))


def _kdc_binaries() -> bool:
    return all(shutil.which(tool) or Path("/usr/sbin", tool).exists()
               for tool in ("krb5kdc", "kdb5_util", "kadmin.local"))


@contextmanager
def kdc_server(*, ticket_lifetime_s: int = SHORT_TICKET_S) -> Iterator[Kdc]:
    """A realm whose tickets last `ticket_lifetime_s` until the block ends."""
    require(_kdc_binaries(), "MIT Kerberos KDC (apt-get install krb5-kdc krb5-admin-server "
            "krb5-user)")
    directory = Path(tempfile.mkdtemp(prefix="ingest-kdc-"))
    try:
        done = subprocess.run(["bash", str(KDC_SH), "start", "--dir", str(directory),
                               "--ticket-lifetime", str(ticket_lifetime_s)],
                              capture_output=True, text=True, timeout=120)
        require(done.returncode == 0, f"scripts/kdc.sh start failed ({done.returncode}): "
                f"{done.stderr[-2000:]}")
        yield Kdc.from_lines(directory, done.stdout)
    finally:
        subprocess.run(["bash", str(KDC_SH), "stop", "--dir", str(directory)],
                       capture_output=True, timeout=60)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def kdc() -> Iterator[Kdc]:
    """The session's realm, with tickets of SHORT_TICKET_S seconds. Tests point MIT krb5 at
    it with KRB5_CONFIG (read again by every call), e.g. through `krb5_env`."""
    with kdc_server() as realm:
        yield realm


@pytest.fixture
def krb5_env(kdc: Kdc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Kdc:
    """The session realm for this test's Kerberos calls, and no other credentials: no client
    keytab from the environment and a ticket cache that does not exist."""
    try:
        import gssapi  # noqa: F401
    except ImportError:
        require(False, "python-gssapi (pip install 'ingest[kerberos]'; needs libkrb5-dev)")
    monkeypatch.setenv("KRB5_CONFIG", str(kdc.krb5_config))
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/no-ticket-cache")
    monkeypatch.delenv("KRB5_CLIENT_KTNAME", raising=False)
    return kdc


def with_keytab(uri: str, kdc: Kdc) -> str:
    """A Kerberized metastore's `uri` with the client's keytab named in its query."""
    return f"{uri}&client_keytab={kdc.client_keytab}"


def kerberized_hms(kdc: Kdc, *, version: str = "4", qop: str = "auth"
                   ) -> AbstractContextManager[Server]:
    """A Hive Metastore of `version` with SASL GSSAPI in `kdc`'s realm (hms.sh --kerberos),
    `qop` its hadoop.rpc.protection (auth or privacy); its URI carries auth=kerberos, the
    principal and the qop, but no client keytab."""
    return hms_server(version, start_args=("--kerberos", str(kdc.directory), "--qop", qop))


@dataclass(frozen=True)
class KerberizedKafka:
    """An Apache Kafka broker of scripts/kafka.sh --kerberos in the session realm: its
    GSSAPI listener (SASL_PLAINTEXT, as localhost:port) and its PLAINTEXT one (for producing
    and creating topics with the Python client, which has no Kerberos)."""

    directory: Path
    gssapi: str
    plaintext: str
    principal: str


@contextmanager
def kerberized_kafka_server(kdc: Kdc, directory: Path) -> Iterator[KerberizedKafka]:
    """An Apache Kafka broker with a GSSAPI listener in `kdc`'s realm (scripts/kafka.sh
    --kerberos) in `directory`, until the block ends."""
    require((kafka_home() / ".complete").exists(),
            f"Apache Kafka in {kafka_home()} (scripts/fetch-servers.sh kafka)")
    require(shutil.which("java") is not None, "java on PATH (the Kafka broker)")
    done = subprocess.run(["bash", str(KAFKA_SH), "start", "--dir", str(directory),
                           "--kerberos", str(kdc.directory)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTHON": sys.executable}, timeout=400)
    if done.returncode != 0:
        pytest.fail(f"scripts/kafka.sh start --kerberos failed ({done.returncode}):\n"
                    f"{done.stderr[-3000:]}")
    values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    try:
        yield KerberizedKafka(directory, values["SASL_GSSAPI"], values["PLAINTEXT"],
                              values["KAFKA_PRINCIPAL"])
    finally:
        subprocess.run(["bash", str(KAFKA_SH), "stop", "--dir", str(directory)],
                       capture_output=True, stdin=subprocess.DEVNULL, timeout=90)
