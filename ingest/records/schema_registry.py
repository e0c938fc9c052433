"""A Confluent-compatible schema registry, through the client confluent-kafka ships.

Kafka values in Confluent's wire format are the magic byte 0, a 4-byte big-endian schema id
and the Avro binary body; the id names the writer's schema in the registry. One
`SchemaRegistryClient` per URL and process (`registry`), whose lookups by id are cached, so an
executor asks the registry once per schema id, not per record.

A registry that is unreachable, times out or answers 408, 429 or 5xx is asked again with
backoff (`RegistryRetry`: 5 attempts, 0.5 s doubling to 4 s between them, 4 s per request,
so at most about 28 s); then the call raises IngestError naming the registry and what was
asked. That fails the task and so the micro-batch: nothing of it is committed, no record is
dead-lettered for the registry's fault, and the restarted stream reads the batch again.
"""

from __future__ import annotations

import re
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ingest.errors import ConfigError, IngestError

MAGIC_BYTE = 0
HEADER_SIZE = 5  # the magic byte and a 4-byte big-endian schema id
_HEADER = struct.Struct(">bI")
# The registry's error codes for what does not exist (subject, version, schema).
_NOT_FOUND = (40401, 40402, 40403)
# HTTP statuses a registry may answer while it is overloaded or failing over: asked again.
_TRANSIENT_STATUS = (408, 429)

_T = TypeVar("_T")


@dataclass(frozen=True)
class RegistryRetry:
    """How long a failing registry is asked again before the call gives up.

    Attributes:
        attempts: requests in all (the first and the retries).
        first_wait_s: the wait after the first failure; each next wait is twice the last.
        timeout_s: how long one request may take (connecting, then each read).
    """

    attempts: int = 5
    first_wait_s: float = 0.5
    timeout_s: float = 4.0

    def bound_s(self) -> float:
        """The longest a call can take: every request timing out, and every wait."""
        waits = sum(self.first_wait_s * 2 ** i for i in range(self.attempts - 1))
        return self.attempts * self.timeout_s + waits


_clients: dict[tuple[str, tuple[tuple[str, str], ...]], SchemaRegistry] = {}
# The first part of the names SchemaRegistryClient takes besides its url and retries.
_SETTING_ROOTS = ("basic", "ssl", "bearer", "proxy", "cache")
_clients_lock = threading.Lock()


class SchemaRegistry:
    """A schema registry at one URL: Avro schemas by id and by subject, cached by the client."""

    def __init__(self, url: str, retry: RegistryRetry | None = None,
                 settings: tuple[tuple[str, str], ...] = ()) -> None:
        """Make the client; nothing is fetched yet.

        Args:
            url: the registry's base URL (Confluent's REST API under it).
            retry: how a failing registry is asked again (default `RegistryRetry()`).
            settings: the client's own settings (`--schema-registry-option`): basic auth
                (`basic.auth.user.info=USER:PASSWORD`), a CA file (`ssl.ca.location`), a
                client certificate (`ssl.certificate.location`, `ssl.key.location`), bearer
                auth (`bearer.auth.*`).

        Raises:
            ConfigError: the URL is not http(s)://..., a setting the client does not know, or
                confluent-kafka's schema-registry extra is missing.
        """
        try:
            from confluent_kafka.schema_registry import SchemaRegistryClient
        except ImportError as e:  # the extra brings authlib and httpx
            raise ConfigError(f"--schema-registry needs confluent-kafka's schema registry "
                              f"client, which cannot be imported: {e}",
                              hint="pip install 'confluent-kafka[schemaregistry]'") from e
        self.url = redact_userinfo(url)  # what messages show: never a password in the URL
        self.retry = retry or RegistryRetry()
        unknown = sorted(k for k, _ in settings if k.split(".")[0] not in _SETTING_ROOTS)
        if unknown:
            raise ConfigError(f"--schema-registry-option {', '.join(unknown)}: not a setting of "
                              "the schema registry client",
                              hint="basic.auth.user.info, ssl.ca.location, "
                                   "ssl.certificate.location, ssl.key.location, bearer.auth.*")
        conf: dict[str, Any] = dict(settings)
        try:
            # The client's own retries wait at random (up to 7 s in all by default) and its
            # requests have no timeout: ours, in `_ask`, are bounded and say what happened.
            self._client = SchemaRegistryClient({**conf, "url": url, "max.retries": 0,
                                                 "timeout": self.retry.timeout_s})
        except (ValueError, TypeError) as e:
            raise ConfigError(f"--schema-registry {self.url!r} with its options is not a "
                              f"registry client: {_scrubbed(str(e), url, settings)}",
                              hint="e.g. --schema-registry https://registry:8081 "
                                   "--schema-registry-option ssl.ca.location=ca.pem") from None

    def schema_by_id(self, schema_id: int) -> str | None:
        """The schema text registered under an id, or None when the registry has no such id.

        Raises:
            IngestError: the registry could not be asked (unreachable or failing after the
                retries, or another error than "not found"): a record must not be
                dead-lettered for the registry's failure.
        """
        what = f"read schema id {schema_id} from"
        try:
            return str(self._ask(what, lambda: self._client.get_schema(schema_id)).schema_str)
        except IngestError:
            raise
        except Exception as e:
            # Not cached here: a registry replica may learn the id later (callers remember
            # it for one batch).
            if _not_found(e):
                return None
            raise IngestError(f"Cannot {what} the schema registry at {self.url}: "
                              f"{_describe(e)}",
                              hint="check that the registry is up and the URL is right") from e

    def latest(self, subject: str) -> tuple[int, str]:
        """(schema id, schema text) of a subject's latest version.

        Raises:
            ConfigError: the registry has no such subject.
            IngestError: the registry could not be asked (after the retries).
        """
        try:
            registered = self._ask(f"read subject {subject!r} from",
                                   lambda: self._client.get_latest_version(subject))
        except IngestError:
            raise
        except Exception as e:
            if _not_found(e):
                raise ConfigError(f"The schema registry at {self.url} has no subject "
                                  f"{subject!r}", hint="value schemas are usually registered "
                                                       "as '<topic>-value'") from e
            raise IngestError(f"Cannot read subject {subject!r} from the schema registry at "
                              f"{self.url}: {_describe(e)}") from e
        if registered.schema_id is None:  # the client's type allows it; a registry never does
            raise IngestError(f"The schema registry at {self.url} gave subject {subject!r}'s "
                              "latest version without a schema id")
        return registered.schema_id, str(registered.schema.schema_str)

    def register(self, subject: str, schema_text: str) -> int:
        """Register an Avro schema under a subject; returns its id (the same for the same
        schema).

        Raises:
            IngestError: the registry refused it or could not be asked (after the retries).
        """
        from confluent_kafka.schema_registry import Schema
        schema = Schema(schema_text, "AVRO")
        try:
            # Registering again is harmless: the same schema keeps its id.
            return int(self._ask(f"register a schema under {subject!r} in",
                                 lambda: self._client.register_schema(subject, schema)))
        except IngestError:
            raise
        except Exception as e:
            raise IngestError(f"Cannot register a schema under {subject!r} at {self.url}: "
                              f"{_describe(e)}") from e

    def _ask(self, what: str, call: Callable[[], _T]) -> _T:
        """call(), asked again with backoff while the registry is unreachable or failing.

        Raises:
            IngestError: it still failed after `retry.attempts` requests.
            Exception: what call() raised when it is not transient (an answer such as 404).
        """
        started = time.monotonic()
        wait = self.retry.first_wait_s
        for attempt in range(1, self.retry.attempts + 1):
            try:
                return call()
            except Exception as e:
                if not _transient(e):
                    raise
                if attempt == self.retry.attempts:
                    raise IngestError(
                        f"Cannot {what} the schema registry at {self.url}: it was unreachable "
                        f"or failing for {attempt} attempts over "
                        f"{time.monotonic() - started:.1f} s; the last: {_describe(e)}",
                        hint="check that the registry is up and the URL is right; a stream "
                             "commits and dead-letters nothing of this micro-batch and reads "
                             "it again when started again") from e
            time.sleep(wait)
            wait *= 2
        raise AssertionError("unreachable")  # the loop returns or raises


def registry(url: str, settings: tuple[tuple[str, str], ...] = ()) -> SchemaRegistry:
    """The process's client for a registry URL and settings (one each, its caches shared by
    tasks).

    Raises:
        ConfigError: as `SchemaRegistry`.
    """
    key = (url, tuple(sorted(settings)))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = SchemaRegistry(url, settings=key[1])
        return client


def registry_settings(items: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """`--schema-registry-option KEY=VALUE` items as sorted pairs.

    Raises:
        ConfigError: an item that is not KEY=VALUE (its value never shown).
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--schema-registry-option {key.strip() or '(empty)'}: not "
                              "KEY=VALUE", hint="e.g. --schema-registry-option "
                                                "basic.auth.user.info=USER:PASSWORD")
        out[key.strip()] = value.strip()
    return tuple(sorted(out.items()))


def redact_userinfo(url: str) -> str:
    """The URL with a password in it (https://user:secret@host) masked."""
    return re.sub(r"(?<=://)([^/@:]*):[^/@]*@", r"\1:*****@", url)


def _scrubbed(text: str, url: str, settings: tuple[tuple[str, str], ...]) -> str:
    for secret in [v for _, v in settings if len(v) >= 3] + [url]:
        text = text.replace(secret, redact_userinfo(url) if secret == url else "*****")
    return text


def confluent_frame(schema_id: int, body: bytes) -> bytes:
    """A value in Confluent's wire format: magic byte 0, the schema id, the Avro body."""
    return _HEADER.pack(MAGIC_BYTE, schema_id) + body


def split_frame(value: bytes) -> tuple[int, memoryview] | str:
    """(schema id, Avro body) of a Confluent-framed value, or why it is not one."""
    if len(value) < HEADER_SIZE:
        return (f"the value is {len(value)} byte(s), shorter than the {HEADER_SIZE}-byte "
                "Confluent header (magic byte 0 and a 4-byte schema id)")
    if value[0] != MAGIC_BYTE:
        return (f"the value starts with byte 0x{value[0]:02x}, not Confluent's magic byte 0x00"
                " (is it framed by a schema registry serializer?)")
    return _HEADER.unpack_from(value)[1], memoryview(value)[HEADER_SIZE:]


def _not_found(e: Exception) -> bool:
    return (getattr(e, "http_status_code", None) == 404
            or getattr(e, "error_code", None) in _NOT_FOUND)


def _transient(e: Exception) -> bool:
    """Whether asking again may help: no answer at all (refused, reset, timed out), or an
    answer that says "not now"."""
    if _no_answer(e):
        return True
    status = getattr(e, "http_status_code", None)
    return isinstance(status, int) and (status >= 500 or status in _TRANSIENT_STATUS)


def _no_answer(e: Exception) -> bool:
    """Whether e is httpx's TransportError (refused, reset, timed out: no HTTP answer).

    By name: confluent-kafka's client runs on httpx or its successor httpx2, whichever is
    installed, and neither need be importable under the other's name.
    """
    return any(c.__name__ == "TransportError" and c.__module__.split(".")[0] in ("httpx", "httpx2")
               for c in type(e).__mro__)


def _describe(e: Exception) -> str:
    text: Any = getattr(e, "error_message", None) or str(e) or type(e).__name__
    status = getattr(e, "http_status_code", None)
    if isinstance(status, int) and status > 0:
        return f"HTTP {status}: {text}"
    if _no_answer(e):  # e.g. "ConnectError: [Errno 111] Connection refused"
        return f"{type(e).__name__}: {text}"
    return str(text)


__all__ = ["HEADER_SIZE", "MAGIC_BYTE", "RegistryRetry", "SchemaRegistry", "confluent_frame",
           "redact_userinfo", "registry", "registry_settings", "split_frame"]
