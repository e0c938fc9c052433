"""Where a Hive Metastore is and how to talk to it, from a `thrift://` URI.

The host and port, and the options that ride in the query so that every command and
`INGEST_METASTORE` carry them: `thrift://host:9083?auth=kerberos&principal=hive/_HOST@REALM&
qop=auth-conf` asks for SASL GSSAPI (`sasl.py`, credentials from `kerberos.py`).
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

from ingest.errors import ConfigError

AUTH_MODES = ("none", "kerberos")
QOP_NAMES = ("auth", "auth-int", "auth-conf")
# Hadoop's names for the same (hadoop.rpc.protection), accepted as they are.
_QOP_ALIASES = {"authentication": "auth", "integrity": "auth-int", "privacy": "auth-conf"}
_KERBEROS_KEYS = ("principal", "qop", "client_principal", "client_keytab")
OPTION_KEYS = ("auth", *_KERBEROS_KEYS)
DEFAULT_PRINCIPAL = "hive/_HOST"
"""The metastore's principal when the URI names none: the realm is then krb5.conf's default."""


@dataclass(frozen=True)
class ThriftOptions:
    """The options of a `thrift://` URI's query.

    Attributes:
        auth: "none", or "kerberos" for SASL GSSAPI.
        principal: the metastore's Kerberos principal, `_HOST` standing for the host
            connected to (Hive's `hive.metastore.kerberos.principal`).
        qop: quality of protection: "auth", "auth-int" or "auth-conf" (the server's
            `hadoop.rpc.protection` authentication, integrity, privacy).
        client_principal: the client's principal; None: the keytab's first entry or the
            ticket cache's principal.
        client_keytab: the client's keytab; None: `KRB5_CLIENT_KTNAME`, else the ticket cache.
    """

    auth: str = "none"
    principal: str = DEFAULT_PRINCIPAL
    qop: str = "auth"
    client_principal: str | None = None
    client_keytab: str | None = None

    @property
    def kerberos(self) -> bool:
        return self.auth == "kerberos"

    def query(self) -> str:
        """The options as a canonical query ("" for a plain connection)."""
        if not self.kerberos:
            return ""
        pairs = [("auth", self.auth), ("principal", self.principal), ("qop", self.qop)]
        pairs += [(k, v) for k, v in (("client_principal", self.client_principal),
                                      ("client_keytab", self.client_keytab)) if v]
        return urllib.parse.urlencode(pairs, safe="/@:_")


def parse_thrift_options(uri: str) -> ThriftOptions:
    """The options in the query of a `thrift://` URI.

    Raises:
        ConfigError: an unknown option, one given twice or empty, a value not allowed, or a
            Kerberos option without auth=kerberos.
    """
    query = urllib.parse.urlsplit(uri.strip()).query
    if not query:
        return ThriftOptions()
    given: dict[str, str] = {}
    for key, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        where = f"Cannot use Hive Metastore URI {uri!r}"
        if key not in OPTION_KEYS:
            raise ConfigError(f"{where}: unknown option {key!r}",
                              hint=f"the options are {', '.join(OPTION_KEYS)}")
        if key in given:
            raise ConfigError(f"{where}: the option {key} is given twice")
        if not value.strip():
            raise ConfigError(f"{where}: the option {key} is empty")
        given[key] = value.strip()
    auth = given.get("auth", "none").lower()
    if auth not in AUTH_MODES:
        raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: auth={given['auth']} is not "
                          f"one of {', '.join(AUTH_MODES)}",
                          hint="auth=kerberos for a metastore with hive.metastore.sasl.enabled")
    stray = [k for k in _KERBEROS_KEYS if k in given]
    if auth != "kerberos" and stray:
        raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: {', '.join(stray)} "
                          f"{'needs' if len(stray) == 1 else 'need'} auth=kerberos",
                          hint="add auth=kerberos to the query")
    qop = given.get("qop", "auth").lower()
    qop = _QOP_ALIASES.get(qop, qop)
    if qop not in QOP_NAMES:
        raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: qop={given['qop']} is not "
                          f"one of {', '.join(QOP_NAMES)}",
                          hint="auth-conf for a metastore with hadoop.rpc.protection=privacy, "
                               "auth-int for integrity, auth for authentication")
    principal = given.get("principal", DEFAULT_PRINCIPAL)
    if not re.fullmatch(r"[^/@\s]+(/[^/@\s]+)?(@[^/@\s]+)?", principal):
        raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: principal={principal} is not "
                          "a Kerberos principal", hint="for example principal=hive/_HOST@REALM")
    return ThriftOptions(auth, principal, qop, given.get("client_principal"),
                         given.get("client_keytab"))


def parse_thrift_uri(uri: str) -> tuple[str, int]:
    """The host and port of `thrift://host:port`.

    Raises:
        ConfigError: another scheme, no host, or no valid port.
    """
    parsed = urllib.parse.urlsplit(uri.strip())
    example = "for example thrift://metastore.example.com:9083"
    if parsed.scheme != "thrift":
        raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: expected the scheme thrift://",
                          hint=example)
    try:
        port = parsed.port
    except ValueError as e:
        raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: the port is not a number "
                          "from 1 to 65535", hint=example) from e
    if not parsed.hostname or port is None or port == 0:
        raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: expected thrift://HOST:PORT",
                          hint=example)
    return parsed.hostname, port
