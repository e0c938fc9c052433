"""TLS on a Hive Metastore's Thrift port (the server's `hive.metastore.use.SSL`), opened as
Hive's own client opens it: the TCP connection, a TLS handshake on it, then Thrift. With
`auth=kerberos` too, SASL runs inside the TLS session (Hive's server accepts on an SSL server
socket and puts its SASL transport on each accepted connection; HiveMetaStoreClient puts its
SASL transport on its SSL socket), so `TlsSocket` stands where the plain socket stood.

The server's certificate must chain to a CA of the `tls_ca` file (PEM; without it, the
system's trust store) and name the host of the URI, a DNS name or an IP address of its
subjectAltName: Python's `ssl` checks both. The handshake runs under the socket's timeout,
the connect timeout. A failure is said in words that name its cause: a certificate the CA did
not sign or that names other hosts, or a `tls_ca` that cannot be read, is the user's setting
(ConfigError, exit 2); a server that does not answer in TLS is the server's (MetastoreError,
exit 3), as a SASL handshake's failures are split.
"""

from __future__ import annotations

import socket
import ssl

from thrift.transport.TSocket import TSocket

from ingest.errors import ConfigError, MetastoreError

_NAME_MISMATCHES = (62, 64)
"""OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and _IP_ADDRESS_MISMATCH: the certificate does not
name the host (a DNS name, an IP address)."""
_CA_HINT = ("set tls_ca= in the metastore URI to the PEM file of the CA that signed the "
            "metastore's certificate (the certificate in its hive.metastore.keystore.path)")


def client_context(ca_file: str | None, *, location: str) -> ssl.SSLContext:
    """A TLS client context that verifies the server's certificate and host name against
    the CA certificates in `ca_file` (PEM), or the system's trust store when it is None.

    Raises:
        ConfigError: `ca_file` is missing, unreadable, or holds no PEM certificate.
    """
    try:
        return ssl.create_default_context(cafile=ca_file)
    except ssl.SSLError as e:
        raise ConfigError(f"Cannot use the tls_ca file {ca_file} of the Hive Metastore URI "
                          f"{location}: it holds no PEM certificate ({e.reason or e})",
                          hint="tls_ca= names a PEM file of CA certificates (-----BEGIN "
                               "CERTIFICATE----- blocks)") from e
    except OSError as e:
        raise ConfigError(f"Cannot read the tls_ca file {ca_file} of the Hive Metastore URI "
                          f"{location}: {e.strerror or e}",
                          hint="check the path in tls_ca= and that this user may read it") from e


class TlsSocket(TSocket):  # type: ignore[misc]
    """Thrift's socket with a TLS handshake after the TCP connect.

    Args:
        host, port: where to connect; `host` is the name the certificate must carry.
        ca_file: the `tls_ca` option (None: the system's trust store).
        location: the metastore URI, for errors.
    """

    def __init__(self, host: str, port: int, *, ca_file: str | None, location: str) -> None:
        super().__init__(host, port)
        self._ca_file = ca_file
        self._location = location
        # Read at once: a bad tls_ca is named before anything connects.
        self._context = client_context(ca_file, location=location)

    def open(self) -> None:
        """Connect, then complete the TLS handshake within the socket's timeout.

        Raises:
            ConfigError: the certificate does not verify (CA, host name, validity).
            MetastoreError: the server does not complete a TLS handshake.
            Thrift's TTransportException: the TCP connection failed.
        """
        super().open()
        plain: socket.socket = self.handle
        try:
            self.setHandle(self._context.wrap_socket(plain, server_hostname=self.host))
        except ssl.SSLCertVerificationError as e:
            self._drop(plain)
            raise self._certificate_error(e) from e
        except (OSError, EOFError) as e:  # ssl.SSLError and timeouts are OSErrors
            self._drop(plain)
            raise MetastoreError(
                f"Cannot open TLS to the Hive Metastore at {self._location}: the server did "
                f"not complete a TLS handshake ({_reason(e)})", location=self._location,
                hint="is TLS on at the metastore (hive.metastore.use.SSL=true)? If it is not, "
                     "drop tls=true from the URI; if it is, its log says why") from e

    def _drop(self, plain: socket.socket) -> None:
        plain.close()
        self.setHandle(None)  # closed: isOpen is False and a new open may start again

    def _certificate_error(self, e: ssl.SSLCertVerificationError) -> ConfigError:
        said = e.verify_message or e.reason or str(e)
        where = f"Cannot open TLS to the Hive Metastore at {self._location}"
        if e.verify_code in _NAME_MISMATCHES:
            return ConfigError(
                f"{where}: its certificate does not name the host {self.host} ({said})",
                hint="connect with a host name or address the certificate lists in its "
                     "subjectAltName, or have the metastore's certificate name this host")
        trusted = (f"a CA of the tls_ca file {self._ca_file}" if self._ca_file
                   else "a CA of the system's trust store (no tls_ca= given)")
        return ConfigError(
            f"{where}: the certificate of {self.host} does not verify against {trusted} "
            f"({said})", hint=_CA_HINT)


def _reason(e: BaseException) -> str:
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "no answer within the connect timeout"
    return str(getattr(e, "reason", None) or e or type(e).__name__).strip()
