"""One Thrift connection to a Hive Metastore: open with a timeout, learn the server, map errors.

Every call goes through `HmsConnection.call`, which turns transport and protocol failures into
`MetastoreError` naming the URI, and a method the server lacks into `UnknownMethodError`.
Hive's own exceptions (`NoSuchObjectException`, `TxnAbortedException`, ...) reach the caller
only when it names them in `expect=`; others become `MetastoreError` with the server's message.
A connection is not thread-safe: the heartbeat opens its own (Hive Streaming does the same).

The URI's options (`address.py`) choose the transport: with `auth=kerberos` a SASL GSSAPI one
(`sasl.py`, credentials from `kerberos.py`) instead of a plain one; with `tls=true` its socket
is a TLS one (`tls.py`), under SASL too when both are on, as Hive layers them.

Several hosts (`thrift://h1:9083,h2:9083`, metastores sharing one backing database): `connect`
tries them in the order given (Hive's hive.metastore.uri.selection=SEQUENTIAL; its default,
RANDOM, shuffles them), skipping one that refuses or does not answer within the connect
timeout, for up to `CONNECT_ROUNDS` rounds `CONNECT_RETRY_DELAY_S` apart;
the connection names the host it is on (`uri`) and keeps the whole list (`service_uri`). A
read-only call (`is_read_only`) cut off mid-flight moves the connection to a live host and is
sent once more; a write call cut off is never resent here: the connection is left broken and
the caller establishes the write's outcome first (`ingest.txn.hms._commit`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from ingest.errors import ConfigError, MetastoreError, UnknownMethodError
from ingest.txn.hms.thrift import _stubs
from ingest.txn.hms.thrift.address import (
    format_thrift_uri,
    parse_thrift_hosts,
    parse_thrift_options,
)

CONNECT_TIMEOUT_S = 10.0
"""How long opening the TCP connection may take."""
CALL_TIMEOUT_S = 60.0
"""How long one call may wait for its answer."""
DEFAULT_TXN_TIMEOUT_S = 300.0
"""Hive's default `hive.txn.timeout`, used when the server does not say."""
CONNECT_ROUNDS = 3
"""Rounds over a list of several hosts before `connect` gives up: Hive's default
`hive.metastore.connect.retries`. A single host is tried once (as before lists existed: a
caller that wants to wait, such as a session's reconnect, retries itself)."""
CONNECT_RETRY_DELAY_S = 1.0
"""The pause between two rounds: Hive's default `hive.metastore.client.connect.retry.delay`."""
_READ_ONLY = re.compile(r"(get_|show_|getVersion$|getName$|check_lock$|heartbeat)")

# A valid-transaction list that sees nothing as open: the argument of the probe below.
_EMPTY_TXN_LIST = "0:9223372036854775807::"
_START_HINT = ("check the host and port and that the metastore runs; scripts/hms.sh start "
               "starts a throwaway one and prints its URI")


class _QuietOpen(logging.Filter):
    """Drops what Thrift's `TSocket.open` logs as it fails: it raises the same failure,
    which becomes our MetastoreError; logged too, it reached stderr before the error (with
    no logging set up, Python prints it) and `--json` errors were no longer pure JSON."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.funcName != "open"


_THRIFT_SOCKET_LOG = logging.getLogger("thrift.transport.TSocket")
if not any(isinstance(f, _QuietOpen) for f in _THRIFT_SOCKET_LOG.filters):
    _THRIFT_SOCKET_LOG.addFilter(_QuietOpen())


@dataclass(frozen=True)
class ServerInfo:
    """What a connection learnt about the server when it opened.

    Attributes:
        uri: `thrift://host:port`, with the options' canonical query when there are any.
        version: what fb303 `getVersion` answers: the release on Hive 4 ("4.0.1"); Hive 2.3
            and 3.1 answer the constant "3.0".
        major: 4 for Hive 4 or later, 3 for a server that answered "3.0" and knows write ids.
        txn_timeout_s: the server's `hive.txn.timeout`: a transaction not heartbeated for this
            long is aborted by the server.
    """

    uri: str
    version: str
    major: int
    txn_timeout_s: float

    @property
    def heartbeat_interval_s(self) -> float:
        """Half the transaction timeout, as Hive's DbTxnManager heartbeats."""
        return self.txn_timeout_s / 2


def parse_time_s(text: str, default_unit_s: float = 1.0) -> float:
    """Seconds in a Hive time value such as "300s", "5m", "300" or "1500ms".

    Raises:
        ValueError: not a number with an optional unit.
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text.lower())
    if not match:
        raise ValueError(f"not a Hive time value: {text!r}")
    units = {"": default_unit_s, "d": 86400, "day": 86400, "days": 86400, "h": 3600,
             "hour": 3600, "hours": 3600, "m": 60, "min": 60, "mins": 60, "minute": 60,
             "minutes": 60, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
             "ms": 1e-3, "msec": 1e-3, "msecs": 1e-3, "millisecond": 1e-3,
             "milliseconds": 1e-3, "us": 1e-6, "usec": 1e-6, "microsecond": 1e-6,
             "microseconds": 1e-6, "ns": 1e-9, "nsec": 1e-9, "nanosecond": 1e-9,
             "nanoseconds": 1e-9}
    if match.group(2) not in units:
        raise ValueError(f"unknown time unit in {text!r}")
    return float(match.group(1)) * units[match.group(2)]


class HmsConnection:
    """An open connection to one Hive Metastore; use `connect` to make one.

    Attributes:
        uri: `thrift://host:port` of the host it is on, as messages name it, followed by the
            options' canonical query when there are any (`ThriftOptions.query`).
        service_uri: every host of the URI it was opened from, with the same query: what a
            connection opened again (a reconnect, a heartbeat's) connects to, so that it
            authenticates the same way and may move to another host. The same as `uri` for
            a single host.
        options: the options of the URI's query.
        info: the server's version and transaction timeout.
    """

    def __init__(self, uri: str, *, connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 call_timeout_s: float = CALL_TIMEOUT_S,
                 host: tuple[str, int] | None = None) -> None:
        """Open the transport to `host` (default: the URI's first)."""
        hosts = parse_thrift_hosts(uri)
        self.options = parse_thrift_options(uri)
        host_name, port = host or hosts[0]
        # The options stay in the URIs: reconnects and heartbeats connect again from them.
        self.service_uri = format_thrift_uri(hosts, self.options)
        self.uri = format_thrift_uri([(host_name, port)], self.options)
        self._connect_timeout_s = connect_timeout_s
        service, _, protocol, tsocket, ttransport, _ = _stubs.require()
        if self.options.tls:
            from ingest.txn.hms.thrift.tls import TlsSocket

            self._socket = TlsSocket(host_name, port, ca_file=self.options.tls_ca,
                                     location=self.uri)
        else:
            self._socket = tsocket.TSocket(host_name, port)
        self._socket.setTimeout(connect_timeout_s * 1000)
        if self.options.kerberos:
            self._transport = self._sasl_transport(host_name, connect_timeout_s)
        else:
            self._transport = ttransport.TBufferedTransport(self._socket)
        try:
            self._transport.open()
        except (ConfigError, MetastoreError):
            raise  # the TLS or SASL handshake's, already naming the cause
        except Exception as e:
            raise MetastoreError(f"Cannot reach the Hive Metastore at {self.uri}: {_reason(e)}",
                                 location=self.uri, hint=_START_HINT) from e
        # The first calls (connect's checks) keep the short timeout: a port that is not a
        # metastore may never answer; then every call gets the longer one.
        self._call_timeout_ms = call_timeout_s * 1000
        self._client: Any = service.Client(protocol.TBinaryProtocol(self._transport))
        self._broken: MetastoreError | None = None
        self.info = ServerInfo(self.uri, "?", 0, DEFAULT_TXN_TIMEOUT_S)

    def _sasl_transport(self, host: str, timeout_s: float) -> Any:
        from ingest.txn.hms.thrift import kerberos, sasl

        keytab = kerberos.client_keytab(self.options.client_keytab)
        credentials, identity = kerberos.client_credentials(
            keytab=keytab, principal=self.options.client_principal, location=self.uri,
            timeout_s=timeout_s)
        return sasl.SaslGssapiTransport(
            self._socket, service=kerberos.service_principal(self.options.principal, host),
            credentials=credentials, qop=self.options.qop, kdc_timeout_s=timeout_s,
            location=self.uri, identity=identity)

    def call(self, method: str, *args: Any, expect: tuple[type[BaseException], ...] = ()) -> Any:
        """Call one Thrift method of the metastore.

        Args:
            method: the Thrift method name, e.g. "open_txns".
            *args: its arguments (Thrift structs from `hive_metastore.ttypes`).
            expect: Hive exception classes (from ttypes) the caller handles; they pass through.

        Raises:
            UnknownMethodError: the server does not implement `method`.
            MetastoreError: the connection failed (it is unusable afterwards), the answer was
                not Thrift, or the server raised an exception not in `expect`.
        """
        return self.call_with(method, lambda client: getattr(client, method)(*args),
                              expect=expect)

    def call_with(self, method: str, body: Callable[[Any], Any], *,
                  expect: tuple[type[BaseException], ...] = ()) -> Any:
        """Run `body(client)` (the Thrift client) with `call`'s error mapping; for calls whose
        structs are newer than the stubs (`ingest.txn.hms.thrift.compact_api`).

        Raises:
            As `call`.
        """
        if self._broken is not None:
            raise MetastoreError(f"Cannot call {method} on the Hive Metastore at {self.uri}: "
                                 f"the connection failed earlier ({self._broken.message})",
                                 location=self.uri, hint="open a new connection")
        try:
            return self._call_once(method, body, expect)
        except MetastoreError as lost:
            if not self._failover_allowed(method, lost):
                raise
            try:
                self._move(connect(self.service_uri, avoid=self.uri,
                                   connect_timeout_s=self._connect_timeout_s,
                                   call_timeout_s=self._call_timeout_ms / 1000))
            except MetastoreError as e:
                lost.add_note(f"No other metastore host answered: {e.message}")
                raise lost from None
            return self._call_once(method, body, expect)

    def _failover_allowed(self, method: str, lost: MetastoreError) -> bool:
        """A read-only call, on a connection that was up (connect's own checks are not
        retried here) and broke under this call."""
        return (self._broken is lost and self.info.version != "?"
                and is_read_only(method))

    def _move(self, fresh: HmsConnection) -> None:
        """Take over `fresh`'s transport, host and server info (callers keep this object)."""
        self.uri, self.info = fresh.uri, fresh.info
        self._socket, self._transport, self._client = fresh._socket, fresh._transport, fresh._client
        self._call_timeout_ms = fresh._call_timeout_ms
        self._broken = None

    def _call_once(self, method: str, body: Callable[[Any], Any],
                   expect: tuple[type[BaseException], ...]) -> Any:
        app_error, thrift_error = _stubs.require()[5]
        try:
            return body(self._client)
        except expect:
            raise
        except app_error as e:
            if e.type == app_error.UNKNOWN_METHOD:
                raise UnknownMethodError(
                    f"The Hive Metastore at {self.uri} (version {self.info.version}) does not "
                    f"know the call {method}", location=self.uri, method=method) from e
            raise MetastoreError(f"The Hive Metastore at {self.uri} failed {method}: "
                                 f"{e.message or e}", location=self.uri) from e
        except thrift_error as e:
            if _is_hive_exception(e):
                raise MetastoreError(f"The Hive Metastore at {self.uri} refused {method}: "
                                     f"{_reason(e)}", location=self.uri) from e
            raise self._break(method, e) from e
        except (OSError, EOFError) as e:
            raise self._break(method, e) from e

    @property
    def broken(self) -> bool:
        """Whether the connection failed or was closed (every further call fails)."""
        return self._broken is not None

    def _break(self, method: str, e: BaseException) -> MetastoreError:
        # After a transport or protocol error the stream is out of step: never reuse it.
        if self.info.version == "?":  # it never answered like a metastore
            hint = ("is this port a Hive Metastore? It did not answer in its Thrift protocol"
                    if not isinstance(e, OSError) or "read 0 bytes" in str(e) else _START_HINT)
            if not self.options.kerberos and hint != _START_HINT:
                # A Kerberized metastore closes a connection that does not start with SASL.
                hint += ("; a Kerberized metastore (hive.metastore.sasl.enabled=true) closes a "
                         "plain connection like this: then add ?auth=kerberos&principal="
                         "hive/_HOST@REALM to the URI")
            if not self.options.tls and hint != _START_HINT:
                # A TLS metastore closes a connection whose first bytes are not TLS.
                hint += ("; if the metastore uses TLS (hive.metastore.use.SSL), add "
                         "?tls=true&tls_ca=CA.pem to the URI")
        else:
            hint = ("the metastore closed the connection or stopped answering: its log says "
                    "why (it drops the connection on some internal errors)")
        self._broken = MetastoreError(
            f"Lost the Hive Metastore at {self.uri} during {method}: {_reason(e)}",
            location=self.uri, hint=hint)
        self.close()
        return self._broken

    def close(self) -> None:
        """Close the socket; further calls raise MetastoreError."""
        try:
            self._transport.close()
        except OSError:
            pass  # closing a socket the peer already dropped: nothing left to release
        if self._broken is None:
            self._broken = MetastoreError("the connection was closed", location=self.uri)

    def __enter__(self) -> HmsConnection:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def is_read_only(method: str) -> bool:
    """Whether sending the Thrift call `method` twice is harmless: the reads (get_*, show_*,
    getVersion, check_lock) and heartbeats (they only move a time forward)."""
    return _READ_ONLY.match(method) is not None


def connect(uri: str, *, connect_timeout_s: float = CONNECT_TIMEOUT_S,
            call_timeout_s: float = CALL_TIMEOUT_S,
            info: ServerInfo | None = None, avoid: str | None = None) -> HmsConnection:
    """Open a connection, check that the server has write ids (Hive 3 or later), and learn its
    version and `hive.txn.timeout`. With several hosts, the first that answers, tried in
    the order given (see the module's docstring).

    Args:
        info: what an earlier connection to the same server learnt; given, it is taken as
            is and the server is not asked again (a heartbeat's connection per transaction
            then costs no calls; a server restarted meanwhile as another version is not
            noticed until a connection is opened without it).
        avoid: the `uri` of a host just lost: tried last in each round.

    Raises:
        ConfigError: the URI is not `thrift://host:port[?options]` or has bad options, the
            `hms` extra (or for Kerberos the `kerberos` extra) is missing, or Kerberos failed
            for the client's settings: no ticket and no keytab, a keytab that is unreadable,
            lacks the principal or holds old keys, a service principal the KDC does not know
            or the metastore cannot read, a qop the metastore does not offer; with tls=true,
            a tls_ca file that cannot be read or a certificate that does not verify (its CA,
            or a host name it does not list).
        MetastoreError: nothing answers there, the answer is not the metastore's Thrift
            protocol (or not SASL, with auth=kerberos; not TLS, with tls=true), the KDC does
            not answer, or the server is Hive 2 (no `get_valid_write_ids`).
    """
    hosts = parse_thrift_hosts(uri)
    if avoid is not None:
        hosts.sort(key=lambda h: format_thrift_uri([h], parse_thrift_options(uri)) == avoid)
    if len(hosts) == 1:
        return _connect_host(uri, hosts[0], connect_timeout_s, call_timeout_s, info)
    failures: dict[str, str] = {}
    for attempt in range(CONNECT_ROUNDS):
        if attempt:
            time.sleep(CONNECT_RETRY_DELAY_S)
        for host in hosts:
            try:
                return _connect_host(uri, host, connect_timeout_s, call_timeout_s, info)
            except MetastoreError as e:
                # A host that refuses, does not answer or is no metastore: the next one.
                failures[f"{host[0]}:{host[1]}"] = e.message
    listed = "; ".join(f"{h}: {why}" for h, why in failures.items())
    raise MetastoreError(f"Cannot reach any Hive Metastore of {uri} ({len(hosts)} hosts, "
                         f"{CONNECT_ROUNDS} rounds): {listed}", location=uri, hint=_START_HINT)


def _connect_host(uri: str, host: tuple[str, int], connect_timeout_s: float,
                  call_timeout_s: float, info: ServerInfo | None) -> HmsConnection:
    conn = HmsConnection(uri, connect_timeout_s=connect_timeout_s,
                         call_timeout_s=call_timeout_s, host=host)
    try:
        conn.info = info if info is not None and info.uri == conn.uri else _server_info(conn)
    except BaseException:
        conn.close()
        raise
    conn._socket.setTimeout(conn._call_timeout_ms)
    return conn


def _server_info(conn: HmsConnection) -> ServerInfo:
    t = _stubs.ttypes()
    version = str(conn.call("getVersion"))
    try:
        # Write ids (and this call) came with Hive 3.0 (HIVE-18192); Hive 2 answers
        # UNKNOWN_METHOD, and its ACID tables have no write ids for our directories.
        conn.call("get_valid_write_ids",
                  t.GetValidWriteIdsRequest(fullTableNames=[], validTxnList=_EMPTY_TXN_LIST))
    except UnknownMethodError as e:
        raise MetastoreError(
            f"Cannot use the Hive Metastore at {conn.uri}: it does not know get_valid_write_ids, "
            "so it is Hive 2.x or older, whose transactions have no write ids; Hive 3.0 or later "
            "is required", location=conn.uri,
            hint="point --metastore at a Hive 3.1 or 4.x metastore") from e
    leading = version.split(".", 1)[0]
    major = int(leading) if leading.isdigit() and int(leading) >= 4 else 3
    return ServerInfo(conn.uri, version, major, _txn_timeout_s(conn))


def _txn_timeout_s(conn: HmsConnection) -> float:
    t = _stubs.ttypes()
    try:
        text = conn.call("get_config_value", "hive.txn.timeout", f"{DEFAULT_TXN_TIMEOUT_S:g}s",
                         expect=(t.ConfigValSecurityException,))
        return parse_time_s(str(text))
    except (t.ConfigValSecurityException, ValueError):
        # A server that hides or garbles the value: Hive's default is what it then uses too.
        return DEFAULT_TXN_TIMEOUT_S


def _is_hive_exception(e: BaseException) -> bool:
    return type(e).__module__.startswith("hive_metastore")


def _reason(e: BaseException) -> str:
    message = str(getattr(e, "message", None) or str(e) or type(e).__name__).strip()
    inner = getattr(e, "inner", None)  # Thrift's "Could not connect" hides the errno there
    if isinstance(inner, OSError):
        message += f" ({inner.strerror or inner or type(inner).__name__})"
    return message
