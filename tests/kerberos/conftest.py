"""Fixtures of the Kerberos tests: the session's throwaway realm (scripts/kdc.sh, 20-second
tickets), Kerberized Hive Metastores in it (scripts/hms.sh --kerberos), one per protection,
started once per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hms_server import Server
from kdc_server import Kdc, kdc, kerberized_hms, krb5_env  # noqa: F401 - fixtures


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
