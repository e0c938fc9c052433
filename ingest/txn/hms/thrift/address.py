"""Where a Hive Metastore is and how to talk to it, from a `thrift://` URI.

The hosts and ports (one, or several serving one backing database, in the order of Hive's
`hive.metastore.uris`: `thrift://h1:9083,h2:9083`), and the options that ride in the query so
that every command and `INGEST_METASTORE` carry them:
`thrift://host:9083?auth=kerberos&principal=hive/_HOST@REALM&qop=auth-conf`
asks for SASL GSSAPI (`sasl.py`, credentials from `kerberos.py`), and
`thrift://host:9083?tls=true&tls_ca=/etc/ssl/hms-ca.pem` for TLS (`tls.py`; Hive's
`hive.metastore.use.SSL`), alone or under SASL as Hive layers them.
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
_TLS_KEYS = ("tls", "tls_ca")
OPTION_KEYS = ("auth", *_KERBEROS_KEYS, *_TLS_KEYS)
_BOOLEANS = {"true": True, "false": False}
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
        tls: TLS on the socket, under SASL when both are on (the server's
            `hive.metastore.use.SSL`).
        tls_ca: a PEM file of the CA certificates to trust; None: the system's trust store.
    """

    auth: str = "none"
    principal: str = DEFAULT_PRINCIPAL
    qop: str = "auth"
    client_principal: str | None = None
    client_keytab: str | None = None
    tls: bool = False
    tls_ca: str | None = None

    @property
    def kerberos(self) -> bool:
        return self.auth == "kerberos"

    def query(self) -> str:
        """The options as a canonical query ("" for a plain connection)."""
        pairs: list[tuple[str, str]] = []
        if self.kerberos:
            pairs += [("auth", self.auth), ("principal", self.principal), ("qop", self.qop)]
            pairs += [(k, v) for k, v in (("client_principal", self.client_principal),
                                          ("client_keytab", self.client_keytab)) if v]
        if self.tls:
            pairs += [("tls", "true"), *([("tls_ca", self.tls_ca)] if self.tls_ca else [])]
        return urllib.parse.urlencode(pairs, safe="/@:_")


def parse_thrift_options(uri: str) -> ThriftOptions:
    """The options in the query of a `thrift://` URI.

    Raises:
        ConfigError: an unknown option, one given twice or empty, a value not allowed, a
            Kerberos option without auth=kerberos, or tls_ca without tls=true.
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
    tls = _BOOLEANS.get(given.get("tls", "false").lower())
    if tls is None:
        raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: tls={given['tls']} is not "
                          "true or false",
                          hint="tls=true for a metastore with hive.metastore.use.SSL=true")
    if "tls_ca" in given and not tls:
        raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: tls_ca needs tls=true",
                          hint="add tls=true to the query")
    return ThriftOptions(auth, principal, qop, given.get("client_principal"),
                         given.get("client_keytab"), tls, given.get("tls_ca"))


_EXAMPLE = "for example thrift://metastore.example.com:9083 or thrift://h1:9083,h2:9083"


def parse_thrift_hosts(uri: str) -> list[tuple[str, int]]:
    """The hosts and ports of `thrift://host:port[,host:port...]`, in the order given (the
    order connections try them, as Hive does with hive.metastore.uri.selection=SEQUENTIAL).

    Raises:
        ConfigError: another scheme, or an entry with no host, no valid port, or given
            twice, the bad entry named.
    """
    parsed = urllib.parse.urlsplit(uri.strip())
    if parsed.scheme != "thrift":
        raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: expected the scheme thrift://",
                          hint=_EXAMPLE)
    if parsed.path not in ("", "/") or parsed.fragment:
        raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: expected thrift://HOST:PORT "
                          "with nothing after the port but ?options", hint=_EXAMPLE)
    hosts: list[tuple[str, int]] = []
    entries = parsed.netloc.split(",")
    for entry in entries:
        host, port = _host_port(uri, entry, several=len(entries) > 1)
        if (host, port) in hosts:
            raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: {entry!r} is listed twice",
                              hint="list each metastore host once")
        hosts.append((host, port))
    return hosts


def _host_port(uri: str, entry: str, *, several: bool) -> tuple[str, int]:
    where = (f"Cannot use Hive Metastore URI {uri!r}: the entry {entry.strip()!r}" if several
             else f"Cannot use Hive Metastore URI {uri!r}")
    if not entry.strip():
        raise ConfigError(f"Cannot use Hive Metastore URI {uri!r}: an entry of the host list is "
                          "empty", hint=_EXAMPLE)
    if "@" in entry:
        raise ConfigError(f"{where} has user information, which a metastore does not take",
                          hint=_EXAMPLE)
    match = re.fullmatch(r"\s*(\[[0-9a-fA-F:.]+\]|[^:\[\]\s]+)?(?::(\S*))?\s*", entry)
    if match is None or not match.group(1) or match.group(2) is None:
        raise ConfigError(f"{where}: expected HOST:PORT" if several
                          else f"{where}: expected thrift://HOST:PORT", hint=_EXAMPLE)
    text = match.group(2)
    if not text.isdigit() or not 0 < int(text) <= 65535:
        raise ConfigError(f"{where}: the port is not a number from 1 to 65535", hint=_EXAMPLE)
    return match.group(1).strip("[]").lower(), int(text)


def parse_thrift_uri(uri: str) -> tuple[str, int]:
    """The host and port of `thrift://host:port`; of a list, the first.

    Raises:
        ConfigError: as `parse_thrift_hosts`.
    """
    return parse_thrift_hosts(uri)[0]


def format_thrift_uri(hosts: list[tuple[str, int]], options: ThriftOptions) -> str:
    """`thrift://host:port[,host:port...]`, followed by the options' canonical query when there
    are any: what a connection opened again from it (a reconnect, a heartbeat's) needs."""
    query = options.query()
    netloc = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in hosts)
    return f"thrift://{netloc}" + (f"?{query}" if query else "")
