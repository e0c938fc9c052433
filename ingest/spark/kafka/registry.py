"""A Confluent-compatible schema registry, through the client confluent-kafka ships.

Kafka values in Confluent's wire format are the magic byte 0, a 4-byte big-endian schema id
and the Avro binary body; the id names the writer's schema in the registry. One
`SchemaRegistryClient` per URL and process (`registry`), whose lookups by id are cached, so an
executor asks the registry once per schema id, not per record.
"""

from __future__ import annotations

import struct
import threading
from typing import Any

from ingest.errors import ConfigError, IngestError

MAGIC_BYTE = 0
HEADER_SIZE = 5  # the magic byte and a 4-byte big-endian schema id
_HEADER = struct.Struct(">bI")
# The registry's error codes for what does not exist (subject, version, schema).
_NOT_FOUND = (40401, 40402, 40403)

_clients: dict[str, SchemaRegistry] = {}
_clients_lock = threading.Lock()


class SchemaRegistry:
    """A schema registry at one URL: Avro schemas by id and by subject, cached by the client."""

    def __init__(self, url: str) -> None:
        """Make the client; nothing is fetched yet.

        Raises:
            ConfigError: the URL is not http(s)://..., or confluent-kafka's schema-registry
                extra is missing.
        """
        try:
            from confluent_kafka.schema_registry import SchemaRegistryClient
        except ImportError as e:  # the extra brings authlib and httpx
            raise ConfigError(f"--schema-registry needs confluent-kafka's schema registry "
                              f"client, which cannot be imported: {e}",
                              hint="pip install 'confluent-kafka[schemaregistry]'") from e
        self.url = url
        try:
            self._client = SchemaRegistryClient({"url": url})
        except (ValueError, TypeError) as e:
            raise ConfigError(f"--schema-registry {url!r} is not a registry URL: {e}",
                              hint="e.g. --schema-registry http://registry:8081") from e

    def schema_by_id(self, schema_id: int) -> str | None:
        """The schema text registered under an id, or None when the registry has no such id.

        Raises:
            IngestError: the registry could not be asked (unreachable, or another error than
                "not found"): a record must not be dead-lettered for the registry's failure.
        """
        try:
            return str(self._client.get_schema(schema_id).schema_str)
        except Exception as e:
            # Not cached here: a registry replica may learn the id later (callers remember
            # it for one batch).
            if _not_found(e):
                return None
            raise IngestError(f"Cannot read schema id {schema_id} from the schema registry at "
                              f"{self.url}: {_describe(e)}",
                              hint="check that the registry is up and the URL is right") from e

    def latest(self, subject: str) -> tuple[int, str]:
        """(schema id, schema text) of a subject's latest version.

        Raises:
            ConfigError: the registry has no such subject.
            IngestError: the registry could not be asked.
        """
        try:
            registered = self._client.get_latest_version(subject)
        except Exception as e:
            if _not_found(e):
                raise ConfigError(f"The schema registry at {self.url} has no subject "
                                  f"{subject!r}", hint="value schemas are usually registered "
                                                       "as '<topic>-value'") from e
            raise IngestError(f"Cannot read subject {subject!r} from the schema registry at "
                              f"{self.url}: {_describe(e)}") from e
        return int(registered.schema_id), str(registered.schema.schema_str)

    def register(self, subject: str, schema_text: str) -> int:
        """Register an Avro schema under a subject; returns its id (the same for the same
        schema).

        Raises:
            IngestError: the registry refused it or could not be asked.
        """
        from confluent_kafka.schema_registry import Schema
        try:
            return int(self._client.register_schema(subject, Schema(schema_text, "AVRO")))
        except Exception as e:
            raise IngestError(f"Cannot register a schema under {subject!r} at {self.url}: "
                              f"{_describe(e)}") from e


def registry(url: str) -> SchemaRegistry:
    """The process's client for a registry URL (one per URL, its caches shared by tasks).

    Raises:
        ConfigError: as `SchemaRegistry`.
    """
    with _clients_lock:
        client = _clients.get(url)
        if client is None:
            client = _clients[url] = SchemaRegistry(url)
        return client


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


def _describe(e: Exception) -> str:
    text: Any = getattr(e, "error_message", None) or str(e) or type(e).__name__
    return str(text)


__all__ = ["HEADER_SIZE", "MAGIC_BYTE", "SchemaRegistry", "confluent_frame", "registry",
           "split_frame"]
