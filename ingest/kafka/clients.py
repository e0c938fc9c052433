"""Every Kafka client of the package, made from one `KafkaConnection`, and what their errors mean.

A librdkafka client reports a broken connection (a wrong password, an untrusted certificate,
a plaintext client on a TLS port) only through its error callback, while the call that waits
for the broker just times out. `Client` keeps what the callback saw, and `Client.wait` turns
it into a sentence naming the cause and the setting to check: at once for what retrying cannot
mend (authentication, TLS, the wrong protocol), after `UNREACHABLE_S` for a broker that does
not answer, so a command against a misconfigured cluster ends within seconds, not after the
whole `--kafka-timeout-s`.
"""

from __future__ import annotations

import importlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from ingest.errors import ConfigError, IngestError, KafkaConnectError
from ingest.kafka.connection import KafkaConnection

log = logging.getLogger(__name__)

# How long a broker that refuses connections or cannot be resolved may take to answer before
# a call gives up (a call has its own, usually longer, timeout for everything else).
UNREACHABLE_S = 10.0
# Slices of a blocking call, so the error callback's news is looked at in between.
_SLICE_S = 0.5

_T = TypeVar("_T")


class Client:
    """A librdkafka client with its error callback's findings.

    Attributes:
        handle: the confluent-kafka Consumer, Producer or AdminClient.
        connection: what it was made from.
    """

    def __init__(self, connection: KafkaConnection, factory: Callable[[dict[str, Any]], Any],
                 config: dict[str, Any], *, reached: bool = False) -> None:
        """`reached`: the broker answered this connection before (a client made for a stream
        that is running): it is counted as answered from the start, so a broker restart is
        waited out (`wait`) even before the client's own first answer."""
        self.connection = connection
        self._lock = threading.Lock()
        self._fatal: IngestError | None = None
        self._unreachable: str | None = None
        # Whether a call of `wait` ever succeeded: a broker that stops answering a client it
        # answered before is restarting or failing over, not misconfigured.
        self._answered = reached
        # A TLS listener closes a plaintext client's first request without a word; librdkafka
        # only logs it (never through error_cb), so its log lines are watched for that.
        self._closed_at_hello = 0
        logger = config.get("logger")
        if isinstance(logger, logging.Logger):
            config["logger"] = _LogWatch(logger, self)
        config = {**config, "error_cb": self._on_error}
        self._factory, self._config = factory, config
        try:
            self.handle = factory(config)
        except Exception as e:  # KafkaException, ValueError, TypeError: a bad setting
            raise ConfigError(
                f"Kafka refuses the client settings for {connection.bootstrap_servers}: "
                f"{_scrub(str(e), connection)}",
                hint="check --kafka-option and --kafka-config (librdkafka's setting names)"
            ) from None

    def _on_error(self, error: Any) -> None:
        with self._lock:
            if self._fatal is not None:  # known already: no second TLS probe (explain)
                return
        cause = explain(self.connection, error)
        with self._lock:
            if cause is None:
                return
            if isinstance(cause, str):
                self._unreachable = cause
            elif self._fatal is None:
                self._fatal = cause

    @property
    def answered(self) -> bool:
        """Whether the broker answered this client (or, `reached`, its connection) before."""
        return self._answered

    def check(self) -> None:
        """Raise what the callback found that retrying cannot mend.

        Raises:
            KafkaConnectError: authentication, TLS or protocol failure.
        """
        with self._lock:
            if self._fatal is not None:
                raise self._fatal

    def renew(self) -> None:
        """Put a new librdkafka client of the same settings in place of `handle`.

        A client that got a metadata response listing no broker (a broker answers so while
        it shuts down) may never reach any broker again (librdkafka 2.16: neither its learned
        brokers nor a re-bootstrap), however long the broker has been back; a new client
        starts from the bootstrap servers.
        """
        old, self.handle = self.handle, self._factory(self._config)
        close = getattr(old, "close", None)
        if close is not None:
            close()

    def wait(self, what: str, call: Callable[[float], _T], *, timeout_s: float) -> _T:
        """Run `call(slice_timeout)` until it returns, in slices, failing fast on what the
        error callback saw.

        `call` raises KafkaException (or returns) for one slice; a retriable error is tried
        again until `timeout_s`, by a new client (`renew`) every UNREACHABLE_S when this one
        was answered before: `call` must use `handle` as it is at each call. Between slices
        the client is polled so that its error callback runs: never `wait` on a consumer
        that has an assignment (a poll would take its records).

        Raises:
            KafkaConnectError: authentication, TLS or protocol failure (at once), or no
                broker answered within UNREACHABLE_S a client that was never answered (one
                that was, a long-lived client of a stream, waits a broker restart out
                until `timeout_s`).
            IngestError: `what` did not succeed within `timeout_s`.
        """
        from confluent_kafka import KafkaException

        started = time.monotonic()
        deadline = started + timeout_s
        renew_at = started + UNREACHABLE_S
        last: Exception | None = None
        while True:
            remaining = deadline - time.monotonic()
            try:
                result = call(max(0.05, min(_SLICE_S, remaining)))
                self._answered = True
                return result
            except KafkaException as e:
                last = e
                error = e.args[0] if e.args else None
                if error is not None and hasattr(error, "retriable") and not is_retriable(error):
                    self.check()
                    raise IngestError(f"Cannot {what} on Kafka at "
                                      f"{self.connection.bootstrap_servers}: "
                                      f"{_describe(e, self.connection)}") from None
            self.handle.poll(0)  # runs the error callback
            self.check()
            now = time.monotonic()
            with self._lock:
                unreachable = self._unreachable
            bound = min(UNREACHABLE_S, timeout_s)
            if unreachable is not None and self._closed_at_hello >= 2 and not self._answered \
                    and self.connection.protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
                raise KafkaConnectError(
                    f"Cannot {what} on Kafka at {self.connection.bootstrap_servers}: the broker "
                    f"closes the connection at the first request, as a TLS listener does with "
                    f"a client of security.protocol={self.connection.protocol}",
                    hint="set security.protocol=SSL or SASL_SSL (with ssl.ca.location) for a "
                         "TLS listener, or check --bootstrap-servers")
            if unreachable is not None and not self._answered and now - started >= bound:
                raise KafkaConnectError(
                    f"Cannot {what} on Kafka at {self.connection.bootstrap_servers}: no "
                    f"broker answered within {bound:g} s ({unreachable})",
                    hint="check that the brokers run and that host and port are the "
                         "listener's (--bootstrap-servers)")
            if self._answered and renew_at <= now < deadline:
                self.renew()
                renew_at = now + UNREACHABLE_S
            if now >= deadline:
                reason = "no answer" if last is None else _describe(last, self.connection)
                raise IngestError(
                    f"Cannot {what} on Kafka at {self.connection.bootstrap_servers} within "
                    f"{timeout_s:g} s: {reason}",
                    hint="check that the broker is running and reachable, or raise "
                         "--kafka-timeout-s")

    def close(self) -> None:
        close = getattr(self.handle, "close", None)
        if close is not None:
            close()


class _LogWatch(logging.LoggerAdapter):  # type: ignore[type-arg]
    """librdkafka's logger, counting for its client the connections a broker closed while
    the client asked its first question (ApiVersion): what a TLS listener does to a
    plaintext client."""

    def __init__(self, logger: logging.Logger, client: Client) -> None:
        super().__init__(logger, {})
        self._client = client

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        text = str(msg) % args if args else str(msg)
        if "Disconnected" in text and "APIVERSION_QUERY" in text:
            self._client._closed_at_hello += 1
        super().log(level, msg, *args, **kwargs)


def _codes(*names: str) -> tuple[int, ...]:
    from confluent_kafka import KafkaError

    return tuple(getattr(KafkaError, n) for n in names if hasattr(KafkaError, n))


_WAITED_OUT = ("_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_WAIT_COORD",
               "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "_UNKNOWN_PARTITION",
               "REQUEST_TIMED_OUT", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE",
               "COORDINATOR_LOAD_IN_PROGRESS", "_LEADER_NOT_AVAILABLE")


def is_retriable(error: Any) -> bool:
    """Whether a client waits a KafkaError out (a broker restarting, a leader moving): what
    librdkafka marks retriable, and the codes of _WAITED_OUT whether or not it does."""
    return bool(error.retriable()) or error.code() in _codes(*_WAITED_OUT)




def explain(connection: KafkaConnection, error: Any) -> KafkaConnectError | str | None:
    """What a librdkafka error means for the connection: a KafkaConnectError for what retrying
    cannot mend, a short text for an unreachable broker, None for the rest."""
    from confluent_kafka import KafkaError

    code = error.code()
    text = _scrub(error.str(), connection)
    low = text.lower()
    servers = connection.bootstrap_servers
    settings = dict(connection.settings)
    mechanism = settings.get("sasl.mechanism", "")
    if code == KafkaError._AUTHENTICATION or "authentication" in low and "sasl" in low:
        if "unsupported sasl mechanism" in low or "mechanism" in low and "not enabled" in low:
            return KafkaConnectError(
                f"The Kafka brokers at {servers} do not offer SASL mechanism "
                f"{mechanism or '(none set)'}: {text}",
                hint="set sasl.mechanism to one the listener enables (SCRAM-SHA-512, "
                     "SCRAM-SHA-256, PLAIN, OAUTHBEARER)")
        return KafkaConnectError(
            f"SASL authentication to Kafka at {servers} failed "
            f"(mechanism {mechanism or 'unset'}, user "
            f"{settings.get('sasl.username', '(none)')!r}): {text}",
            hint="check sasl.username and sasl.password (and sasl.mechanism) in --kafka-option "
                 "or --kafka-config")
    if code == KafkaError._SSL or "ssl handshake" in low or "certificate" in low:
        if "verify failed" in low or "self-signed" in low or "issuer" in low:
            # librdkafka says "certificate verify failed" for an unknown CA, an expired
            # certificate and another host's certificate alike: OpenSSL's reason is asked.
            cause, hint = _verify_failure(connection, text) or _UNTRUSTED
        elif "alert" in low or "certificate required" in low:
            cause, hint = _refused(settings, low)  # the broker ended the handshake
        elif "expired" in low:
            cause, hint = _EXPIRED
        elif "mismatch" in low or "hostname" in low:
            cause, hint = _MISMATCH
        else:
            cause, hint = ("the TLS handshake failed",
                           "check security.protocol and the ssl.* settings")
        return KafkaConnectError(f"Cannot connect to Kafka at {servers} over TLS: {cause} "
                                 f"({text})", hint=hint)
    if "incorrect security.protocol" in low or "might be caused by incorrect" in low:
        return KafkaConnectError(
            f"Kafka at {servers} speaks another security protocol than "
            f"security.protocol={connection.protocol}: {text}",
            hint="set security.protocol to the listener's (PLAINTEXT, SSL, SASL_PLAINTEXT or "
                 "SASL_SSL)")
    if code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE):
        return text
    return None


_UNTRUSTED = ("the broker's certificate is not signed by a trusted CA",
              "give the CA that signed it as ssl.ca.location=ca.pem")
_EXPIRED = ("the broker's certificate has expired",
            "renew the broker's certificate (or check this machine's clock)")
_MISMATCH = ("the broker's certificate does not name the host connected to",
             "connect by a name the certificate holds (--bootstrap-servers), or set "
             "ssl.endpoint.identification.algorithm=none (not advised)")
# The broker a librdkafka TLS error is about: "ssl://host:port/..." or "sasl_ssl://...".
_TLS_BROKER = re.compile(r"\b(?:sasl_)?ssl://(\[[^\]]*\]|[^\s:/\[]+):(\d+)/")
_PROBE_TIMEOUT_S = 5.0


def _verify_failure(connection: KafkaConnection, text: str) -> tuple[str, str] | None:
    """Why the broker's certificate fails verification, as OpenSSL says it: one TLS handshake
    by Python's ssl with the client's CA and host-name check (cause, hint), or None when the
    probe cannot tell (the broker is gone, the CA is given in a way it cannot load)."""
    import os
    import socket
    import ssl

    m = _TLS_BROKER.search(text)
    if m is None:
        return None
    host, port = m.group(1).strip("[]"), int(m.group(2))
    settings = dict(connection.settings)
    location = settings.get("ssl.ca.location", "")
    try:
        if location and location != "probe":
            directory = os.path.isdir(location)
            context = ssl.create_default_context(cafile=None if directory else location,
                                                 capath=location if directory else None)
        else:  # librdkafka's default: the system's CAs (or ssl.ca.pem)
            context = ssl.create_default_context(cadata=settings.get("ssl.ca.pem") or None)
        context.check_hostname = settings.get(
            "ssl.endpoint.identification.algorithm", "https").lower() != "none"
        with socket.create_connection((host, port), timeout=_PROBE_TIMEOUT_S) as raw, \
                context.wrap_socket(raw, server_hostname=host):
            return None  # verifies: the failure was something else
    except ssl.SSLCertVerificationError as e:
        code, reason = e.verify_code, e.verify_message
    except (OSError, ValueError):  # ssl.SSLError is an OSError
        return None
    if code in (9, 10):  # X509_V_ERR_CERT_NOT_YET_VALID, X509_V_ERR_CERT_HAS_EXPIRED
        return f"{_EXPIRED[0]} ({reason})", _EXPIRED[1]
    if code in (62, 64):  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
        return f"{_MISMATCH[0]}, {host} ({reason})", _MISMATCH[1]
    return f"{_UNTRUSTED[0]} ({reason})", _UNTRUSTED[1]


def _refused(settings: dict[str, str], low: str) -> tuple[str, str]:
    """The broker ended the TLS handshake with an alert: (cause, hint), about this client's
    certificate when it has one (its expiry read from the file: the alert rarely says)."""
    certificate = settings.get("ssl.certificate.location")
    if not (certificate or "ssl.certificate.pem" in settings
            or "ssl.keystore.location" in settings):
        return ("the broker refused the TLS handshake (it may require a client certificate)",
                "give ssl.certificate.location and ssl.key.location (mutual TLS), or check "
                "ssl.ca.location")
    expired = _expired_on(certificate)
    if expired is not None or "expired" in low:
        return (f"the broker refused this client's certificate: it expired"
                f"{'' if expired is None else ' on ' + expired}",
                "renew the client certificate (ssl.certificate.location)")
    return ("the broker refused this client's certificate (not signed by a CA the broker "
            "trusts, or not a client certificate)",
            "check ssl.certificate.location and ssl.key.location (or ssl.keystore.location)")


def _expired_on(path: str | None) -> str | None:
    """When the certificate in the PEM file `path` expired, or None (valid, or unreadable)."""
    import ssl

    if not path:
        return None
    try:  # the standard library's only decoder of a certificate file (no cryptography here)
        not_after = ssl._ssl._test_decode_cert(path)["notAfter"]  # type: ignore[attr-defined]
        return str(not_after) if ssl.cert_time_to_seconds(not_after) < time.time() else None
    except Exception:  # not PEM, no such file, another interpreter: nothing to add
        return None


def _describe(e: Exception, connection: KafkaConnection) -> str:
    """A KafkaException's sentence (librdkafka's text, not the KafkaError repr), scrubbed."""
    error = e.args[0] if e.args else None
    text = error.str() if error is not None and hasattr(error, "str") else str(e)
    return _scrub(text, connection)


def _scrub(text: str, connection: KafkaConnection) -> str:
    """Text with every secret value of the connection masked (an error may echo a setting)."""
    from ingest.kafka.connection import REDACTED, is_secret

    for name, value in connection.settings:
        if is_secret(name) and value and len(value) >= 3:
            text = text.replace(value, REDACTED)
    return text


def _resolve_callbacks(config: dict[str, Any]) -> dict[str, Any]:
    """`oauth_cb=module:function` as the function (a setting can only be text)."""
    spec = config.get("oauth_cb")
    if isinstance(spec, str):
        module, _, name = spec.partition(":")
        try:
            config["oauth_cb"] = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError) as e:
            raise ConfigError(f"Kafka setting oauth_cb={spec!r} does not name a function: {e}",
                              hint="oauth_cb=package.module:function, importable on the "
                                   "driver and the executors") from None
    return config


def _base(connection: KafkaConnection, logger_name: str) -> dict[str, Any]:
    return _resolve_callbacks({**connection.client_config(),
                               "logger": logging.getLogger(logger_name)})


def consumer(connection: KafkaConnection, *, group_id: str | None = None,
             logger_name: str = "ingest.kafka.librdkafka", reached: bool = False,
             **settings: Any) -> Client:
    """A consumer (in a throw-away group unless `group_id`), reading committed records only
    unless the connection sets `isolation.level`; nothing is committed automatically.
    `reached`: see `Client`.

    Raises:
        ConfigError: librdkafka refuses a setting.
    """
    from confluent_kafka import Consumer

    config = {"group.id": group_id or f"ingest-{uuid.uuid4().hex}",
              "enable.auto.commit": False, "isolation.level": "read_committed",
              **settings, **_base(connection, logger_name)}
    return Client(connection, Consumer, config, reached=reached)


def producer(connection: KafkaConnection, *, logger_name: str = "ingest.kafka.librdkafka",
             **settings: Any) -> Client:
    """A producer.

    Raises:
        ConfigError: librdkafka refuses a setting.
    """
    from confluent_kafka import Producer

    return Client(connection, Producer, {**settings, **_base(connection, logger_name)})


def admin(connection: KafkaConnection, *, logger_name: str = "ingest.kafka.librdkafka",
          reached: bool = False, **settings: Any) -> Client:
    """An admin client. `reached`: see `Client`.

    Raises:
        ConfigError: librdkafka refuses a setting.
    """
    from confluent_kafka.admin import AdminClient

    config = {**settings, **_base(connection, logger_name)}
    config.pop("isolation.level", None)  # a consumer's setting; the admin client warns
    return Client(connection, AdminClient, config, reached=reached)


__all__ = ["UNREACHABLE_S", "Client", "admin", "consumer", "explain",
           "producer", "is_retriable"]
