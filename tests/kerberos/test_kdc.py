"""scripts/kdc.sh and the client's credentials: a throwaway realm whose keytabs work with no
kinit, tickets that really expire after --ticket-lifetime, and credentials that get new
tickets from the keytab by themselves across several lifetimes."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest
from kdc_server import KDC_SH, SHORT_TICKET_S, Kdc

from ingest.txn.hms.thrift import kerberos


def _handshake(initiator: object, kdc: Kdc) -> str:
    """Establish a context from `initiator` credentials to the metastore's principal,
    accepted here with its keytab; returns the name the acceptor saw."""
    import gssapi

    service = gssapi.Name(kdc.hive_principal, gssapi.NameType.kerberos_principal)
    client = gssapi.SecurityContext(name=service, creds=initiator, usage="initiate")
    acceptor_creds = gssapi.Credentials(usage="accept", store={"keytab": str(kdc.hive_keytab)})
    server = gssapi.SecurityContext(creds=acceptor_creds, usage="accept")
    token = client.step()
    while not (client.complete and server.complete):
        answer = server.step(token)
        if answer is not None:
            token = client.step(answer)
    return str(server.initiator_name)


def test_kdc_sh_prints_the_realm_and_keytabs_that_work_without_kinit(krb5_env: Kdc) -> None:
    kdc = krb5_env
    printed = dict(line.split("=", 1) for line in
                   (kdc.directory / "kdc.env").read_text().splitlines())
    assert list(printed) == ["KRB5_CONFIG", "REALM", "CLIENT_PRINCIPAL", "CLIENT_KEYTAB",
                             "HIVE_PRINCIPAL", "HIVE_KEYTAB", "KAFKA_PRINCIPAL", "KAFKA_KEYTAB"]
    assert printed["HIVE_PRINCIPAL"] == f"hive/127.0.0.1@{kdc.realm}"
    assert printed["KAFKA_PRINCIPAL"] == f"kafka/localhost@{kdc.realm}"
    conf = kdc.krb5_config.read_text()
    for setting in ("dns_lookup_kdc = false", "rdns = false", "udp_preference_limit = 1",
                    f"ticket_lifetime = {SHORT_TICKET_S}"):
        assert setting in conf
    assert kerberos.keytab_principals(str(kdc.client_keytab)) == [kdc.client_principal]
    assert kerberos.keytab_principals(str(kdc.hive_keytab)) == [kdc.hive_principal]
    # No kinit: credentials from the keytab alone, into a memory cache.
    creds, what = kerberos.client_credentials(keytab=str(kdc.client_keytab), principal=None,
                                              location="test", timeout_s=10)
    assert what == f"keytab {kdc.client_keytab} as {kdc.client_principal}"
    assert _handshake(creds, kdc) == kdc.client_principal
    assert 0 < creds.lifetime <= SHORT_TICKET_S  # the realm's short tickets


def test_start_refuses_a_bad_lifetime_and_stop_removes_the_process(tmp_path: Path) -> None:
    done = subprocess.run(["bash", str(KDC_SH), "start", "--dir", str(tmp_path / "k"),
                           "--ticket-lifetime", "soon"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0 and "--ticket-lifetime" in done.stderr


@pytest.mark.slow
def test_tickets_renew_from_the_keytab_across_three_lifetimes(krb5_env: Kdc) -> None:
    """Every few seconds a new connection's credentials and a security context, for more than
    three ticket lifetimes: each succeeds, including those after the first tickets expired,
    and the tickets' remaining lifetime goes up again (new ones from the keytab) each time
    it ran low."""
    kdc = krb5_env
    start = time.monotonic()
    first_expiry = None
    renewals, last_lifetime, contexts_after_expiry = 0, None, 0
    while time.monotonic() - start < 3 * SHORT_TICKET_S + 8:
        creds, _ = kerberos.client_credentials(keytab=str(kdc.client_keytab), principal=None,
                                               location="test", timeout_s=10)
        lifetime = creds.lifetime
        if first_expiry is None:
            first_expiry = time.monotonic() + lifetime
        if last_lifetime is not None and lifetime > last_lifetime:
            renewals += 1
        last_lifetime = lifetime
        assert _handshake(creds, kdc) == kdc.client_principal
        if time.monotonic() > first_expiry:
            contexts_after_expiry += 1
        time.sleep(3)  # pacing: the point is the clock passing the tickets' end
    assert renewals >= 3
    assert contexts_after_expiry >= 10


def test_a_principal_missing_from_the_keytab_is_named(krb5_env: Kdc) -> None:
    from ingest.errors import ConfigError

    with pytest.raises(ConfigError, match=r"holds no key for nobody@.*hive/127\.0\.0\.1"):
        kerberos.client_credentials(keytab=str(krb5_env.hive_keytab),
                                    principal=f"nobody@{krb5_env.realm}", location="test",
                                    timeout_s=10)


def test_service_principal_replaces_host_in_lower_case() -> None:
    assert kerberos.service_principal("hive/_HOST@R.ORG", "MS1.Example.COM") == \
        "hive/ms1.example.com@R.ORG"
    assert kerberos.service_principal("hive/_HOST", "h") == "hive/h"
    assert kerberos.service_principal("hive/fixed@R", "h") == "hive/fixed@R"
    assert kerberos.service_principal("_HOST@R", "h") == "_HOST@R"


def test_a_file_that_is_not_a_keytab_is_refused(tmp_path: Path) -> None:
    from ingest.errors import ConfigError

    bogus = tmp_path / f"{uuid.uuid4().hex}.keytab"
    bogus.write_bytes(b"not a keytab")
    with pytest.raises(ConfigError, match="is not a Kerberos keytab"):
        kerberos.keytab_principals(str(bogus))
