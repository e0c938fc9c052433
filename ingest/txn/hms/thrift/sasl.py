"""A Thrift client transport that authenticates with SASL GSSAPI (Kerberos, RFC 4752), as a
Kerberized Hive Metastore (`hive.metastore.sasl.enabled`) expects.

The wire format is Thrift's SASL transport: during the handshake every message is a status
byte (START, OK, BAD, ERROR, COMPLETE), a 4-byte big-endian length and a payload; the client
opens with START carrying the mechanism name and then OK carrying its first GSSAPI token.
Once the Kerberos context is established, the server offers its security layers in a wrapped
4-byte message (a bitmask of qualities of protection and its largest buffer) and the client
answers with the one it chose and its own buffer size, wrapped too. After the handshake each
Thrift write is one frame: a 4-byte length and the bytes, wrapped by GSSAPI for `auth-int`
(integrity) and `auth-conf` (integrity and encryption; the server's
`hadoop.rpc.protection=privacy`), as they are.
"""

from __future__ import annotations

import struct
from typing import Any

from thrift.transport.TTransport import TTransportBase

from ingest.errors import ConfigError, IngestError, MetastoreError
from ingest.txn.hms.thrift import kerberos

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5
_STATUS_NAMES = {START: "START", OK: "OK", BAD: "BAD", ERROR: "ERROR", COMPLETE: "COMPLETE"}
MECHANISM = b"GSSAPI"

QOPS = {"auth": 1, "auth-int": 2, "auth-conf": 4}
"""The qualities of protection by their SASL names, with their bit in the security-layer
offer (RFC 4752 section 3.3)."""
HADOOP_PROTECTION = {"auth": "authentication", "auth-int": "integrity", "auth-conf": "privacy"}
"""The same as the metastore's `hadoop.rpc.protection` names them."""

_MAX_BUFFER = 0xFFFFFF
"""The largest wrapped frame this client accepts, as it tells the server (3 bytes)."""
_MAX_HANDSHAKE_PAYLOAD = 1 << 20
_TLS_ALERT = b"\x15\x03"
"""A TLS record's first bytes when it is an alert (content type 21, version 3.x): what a TLS
server answers to a handshake that is not TLS."""
_MAX_FRAME = 1 << 30


class SaslGssapiTransport(TTransportBase):  # type: ignore[misc]
    """Thrift over `socket` (an unopened TSocket) after a SASL GSSAPI handshake.

    Args:
        socket: the underlying transport.
        service: the metastore's principal, `_HOST` already replaced.
        credentials: the client's `gssapi.Credentials`.
        qop: "auth", "auth-int" or "auth-conf".
        kdc_timeout_s: how long getting the service ticket from the KDC may take.
        location: the metastore URI and `identity` where the client's credentials came
            from, both for errors.
    """

    def __init__(self, socket: Any, *, service: str, credentials: Any, qop: str,
                 kdc_timeout_s: float, location: str, identity: str) -> None:
        if qop not in QOPS:
            raise ValueError(f"unknown qop {qop!r}")
        self._socket = socket
        self._service = service
        self._credentials = credentials
        self._qop = qop
        self._kdc_timeout_s = kdc_timeout_s
        self._location = location
        self._identity = identity
        self._context: Any = None
        self._wrap = False
        self._send_limit = 0
        self._read_buffer = b""
        self._read_at = 0
        self._write_buffer: list[bytes] = []
        self._open = False

    # -- the handshake ----------------------------------------------------------------------

    def open(self) -> None:
        """Connect the socket and authenticate.

        Raises:
            ConfigError: the handshake failed for the user's settings (credentials, principal,
                qop); the socket is closed again.
            MetastoreError: it failed for the server or the network.
            Thrift's TTransportException or OSError: the TCP connection failed.
        """
        self._socket.open()
        try:
            self._handshake()
        except IngestError:
            self._socket.close()
            raise
        except Exception as e:
            # Past the TCP connect, a failure is the handshake's: a server that closes or
            # never answers is most often one without SASL (or Thrift's transport errors).
            self._socket.close()
            if type(e).__module__.startswith("gssapi"):
                raise self._error(f"Kerberos failed during the SASL handshake with the Hive "
                                  f"Metastore: {kerberos.gss_reason(e)}",
                                  "check the metastore's log", config=False) from e
            if not _is_transport_error(e):
                raise
            raise self._error(
                f"The server did not complete a SASL handshake ({_reason(e)})",
                "is this metastore Kerberized (hive.metastore.sasl.enabled=true)? If it is "
                "not, drop auth=kerberos from the URI; if it is, its log says why it closed "
                "the connection", config=False) from e
        self._open = True

    def _handshake(self) -> None:
        gssapi = kerberos.require_gssapi()
        flags = [gssapi.RequirementFlag.mutual_authentication,
                 gssapi.RequirementFlag.integrity, gssapi.RequirementFlag.confidentiality]
        target = gssapi.Name(self._service, gssapi.NameType.kerberos_principal)
        context = gssapi.SecurityContext(name=target, creds=self._credentials, flags=flags,
                                         usage="initiate")
        try:
            # The first step asks the KDC for a ticket to the metastore.
            token = kerberos.within(self._kdc_timeout_s, context.step)
        except TimeoutError as e:
            raise self._error(f"Cannot get a Kerberos ticket for {self._service}: the KDC did "
                              f"not answer within {self._kdc_timeout_s:g} s",
                              kerberos.KDC_SILENT_HINT, config=False) from e
        except gssapi.exceptions.GSSError as e:
            raise self._ticket_error(e) from e
        self._send(START, MECHANISM)
        self._send(OK, token or b"")
        while not context.complete:
            status, payload = self._receive()
            try:
                token = context.step(payload)
            except gssapi.exceptions.GSSError as e:
                raise self._error(
                    f"The Hive Metastore's Kerberos answer could not be checked: "
                    f"{kerberos.gss_reason(e)}",
                    "check that principal= names the metastore's own principal "
                    "(its hive.metastore.kerberos.principal)", config=True) from e
            if status == COMPLETE and not context.complete:
                raise self._error("The Hive Metastore ended the SASL handshake before Kerberos "
                                  "was done", "check the metastore's log", config=False)
            self._send(OK, token or b"")
        self._context = context
        self._security_layer()

    def _security_layer(self) -> None:
        context = self._context
        status, payload = self._receive()
        offer = context.unwrap(payload).message
        if status != OK or len(offer) != 4:
            raise self._error("The Hive Metastore sent no valid SASL security-layer offer",
                              "check the metastore's log", config=False)
        offered = offer[0]
        server_max = int.from_bytes(offer[1:4], "big")
        bit = QOPS[self._qop]
        if not offered & bit:
            names = [name for name, b in QOPS.items() if offered & b]
            raise self._error(
                f"The Hive Metastore does not offer qop={self._qop}; it offers "
                f"{', '.join(names) or 'none'}",
                f"set qop= in the metastore URI to {' or '.join(names) or 'what it offers'} "
                f"(the server's hadoop.rpc.protection: "
                f"{', '.join(HADOOP_PROTECTION[n] for n in names)})", config=True)
        # No authorization id: the server then authorizes the authenticated principal.
        answer = bytes([bit]) + (_MAX_BUFFER if bit != 1 else 0).to_bytes(3, "big")
        self._send(COMPLETE, context.wrap(answer, False).message)
        status, payload = self._receive()
        if status != COMPLETE:
            raise self._error(f"The Hive Metastore answered {_STATUS_NAMES.get(status)} where "
                              "the SASL handshake should be COMPLETE", "check the metastore's log",
                              config=False)
        self._wrap = bit != 1
        if self._wrap and server_max:
            encrypt = bit == 4
            self._send_limit = max(1, int(context.get_wrap_size_limit(server_max, encrypt)))

    def _error(self, message: str, hint: str, *, config: bool) -> IngestError:
        """The error of a failed handshake: a ConfigError when the user's settings are the
        cause, else a MetastoreError."""
        said = (f"Cannot authenticate to the Hive Metastore at {self._location} with "
                f"Kerberos ({self._identity}): {message}")
        if config:
            return ConfigError(said, hint=hint)
        return MetastoreError(said, location=self._location, hint=hint)

    def _ticket_error(self, e: BaseException) -> IngestError:
        reason = kerberos.gss_reason(e)
        lower = reason.lower()
        if lower.startswith("server") and "not found in kerberos database" in lower:
            return self._error(f"The KDC does not know the metastore principal {self._service} "
                               f"({reason})",
                               "check principal= in the metastore URI: Hive's "
                               "hive.metastore.kerberos.principal, with _HOST standing for the "
                               "host name in the URI", config=True)
        if kerberos.kdc_unreachable(e):
            return self._error(f"Cannot get a Kerberos ticket for {self._service}: {reason}",
                               kerberos.credential_hint(e), config=False)
        return self._error(f"Cannot get a Kerberos ticket for {self._service}: {reason}",
                           kerberos.credential_hint(e), config=True)

    def _send(self, status: int, payload: bytes) -> None:
        self._socket.write(struct.pack(">BI", status, len(payload)) + payload)
        self._socket.flush()

    def _receive(self) -> tuple[int, bytes]:
        head = self._socket.readAll(5)
        status, length = struct.unpack(">BI", head)
        if head[:2] == _TLS_ALERT:
            raise self._error("The server at this port answered with a TLS alert",
                              "the metastore uses TLS (hive.metastore.use.SSL): add "
                              "tls=true&tls_ca=CA.pem to the URI", config=True)
        if status not in _STATUS_NAMES or length > _MAX_HANDSHAKE_PAYLOAD:
            raise self._error("The server at this port did not answer in Thrift's SASL protocol",
                              "is this metastore Kerberized (hive.metastore.sasl.enabled)? "
                              "Drop auth=kerberos from the URI if it is not", config=True)
        payload = self._socket.readAll(length) if length else b""
        if status in (BAD, ERROR):
            said = payload.decode("utf-8", "replace").strip() or "no reason given"
            raise self._error(
                f"The Hive Metastore refused the Kerberos handshake: {said}",
                "check that principal= in the metastore URI is the metastore's "
                "hive.metastore.kerberos.principal (a ticket for another principal cannot be "
                "read by it), that the clocks agree, and the metastore's log", config=True)
        if status not in (OK, COMPLETE):
            raise self._error(f"The Hive Metastore sent SASL status {_STATUS_NAMES[status]} "
                              "during the handshake", "check the metastore's log", config=False)
        return status, payload

    # -- Thrift's transport interface -------------------------------------------------------

    def isOpen(self) -> bool:  # noqa: N802 - Thrift's name
        return self._open and bool(self._socket.isOpen())

    def close(self) -> None:
        self._open = False
        self._socket.close()

    def read(self, sz: int) -> bytes:
        if self._read_at >= len(self._read_buffer):
            self._read_frame()
        chunk = self._read_buffer[self._read_at:self._read_at + sz]
        self._read_at += len(chunk)
        return chunk

    def _read_frame(self) -> None:
        (length,) = struct.unpack(">I", self._socket.readAll(4))
        if length > _MAX_FRAME:
            raise EOFError(f"a SASL frame of {length} bytes: the stream is out of step")
        data = self._socket.readAll(length) if length else b""
        if self._wrap:
            unwrapped = self._context.unwrap(data)
            if self._qop == "auth-conf" and not unwrapped.encrypted:
                raise EOFError("the metastore sent a frame without encryption under auth-conf")
            data = unwrapped.message
        self._read_buffer, self._read_at = data, 0

    def write(self, buf: bytes) -> None:
        self._write_buffer.append(bytes(buf))

    def flush(self) -> None:
        data = b"".join(self._write_buffer)
        self._write_buffer = []
        if not self._wrap:
            self._socket.write(struct.pack(">I", len(data)) + data)
        else:
            encrypt = self._qop == "auth-conf"
            step = self._send_limit or len(data) or 1
            frames = []
            for at in range(0, max(len(data), 1), step):
                wrapped = self._context.wrap(data[at:at + step], encrypt).message
                frames.append(struct.pack(">I", len(wrapped)) + wrapped)
            self._socket.write(b"".join(frames))
        self._socket.flush()


def _is_transport_error(e: BaseException) -> bool:
    return isinstance(e, (OSError, EOFError)) or type(e).__name__ == "TTransportException"


def _reason(e: BaseException) -> str:
    return str(getattr(e, "message", None) or e or type(e).__name__).strip()
