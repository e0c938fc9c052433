"""Fixtures of the Kerberos tests: the session's throwaway realm (scripts/kdc.sh, 20-second
tickets), Kerberized Hive Metastores in it (scripts/hms.sh --kerberos), one per protection,
started once per session, a Kerberized Kafka broker (scripts/kafka.sh --kerberos), and Trino
on the auth-conf Hive 4 as the realm's client (scripts/trino.sh --kerberos)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hms_server import Server, trino_server
from kdc_server import (  # noqa: F401 - fixtures
    Kdc,
    KerberizedKafka,
    kdc,
    kerberized_hms,
    kerberized_kafka_server,
    krb5_env,
)


@pytest.fixture(scope="session")
def hms4_kerberos(kdc: Kdc) -> Iterator[Server]:  # noqa: F811 - the imported fixture
    """Hive 4 with hadoop.rpc.protection=authentication (SASL qop auth)."""
    with kerberized_hms(kdc, qop="auth") as server:
        yield server


@pytest.fixture(scope="session")
def hms4_privacy(kdc: Kdc) -> Iterator[Server]:  # noqa: F811 - the imported fixture
    """Hive 4 with hadoop.rpc.protection=privacy (SASL qop auth-conf)."""
    with kerberized_hms(kdc, qop="privacy") as server:
        yield server


@pytest.fixture(scope="session")
def hms3_privacy(kdc: Kdc) -> Iterator[Server]:  # noqa: F811 - the imported fixture
    """Hive 3.1.3 with hadoop.rpc.protection=privacy."""
    with kerberized_hms(kdc, version="3", qop="privacy") as server:
        yield server


@pytest.fixture(scope="session")
def kerberized_kafka(kdc: Kdc,  # noqa: F811 - the imported fixture
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[KerberizedKafka]:
    """One Kerberized Kafka broker for the session (the kerberos folder runs on one worker)."""
    with kerberized_kafka_server(kdc, tmp_path_factory.mktemp("kafka-kerberos")) as server:
        yield server


@pytest.fixture(scope="session")
def kerberized_trino(kdc: Kdc,  # noqa: F811 - the imported fixture
                     hms4_privacy: Server) -> Iterator[Server]:
    """One Trino for the session (about a minute to start) whose hive catalog logs in to the
    auth-conf Hive 4 with the realm's client keytab."""
    with trino_server(hms4_privacy.uri, start_args=("--kerberos", str(kdc.directory))) as server:
        yield server
