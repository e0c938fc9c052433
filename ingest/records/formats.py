"""Value formats by name: a plan's record values -> rows, by the stream's value format.

A format is a decoder registered under the name `--value-format` gives (as metastores are
registered by URL scheme in `ingest/txn/registry.py`): `json` (`json_values.parse_json_values`)
and `avro` (`avro_values.decode_avro_values`, its settings an `AvroFormat`). Each returns
`ParsedValues`, whose `new_by_field` --on-new-field judges (`ingest/spark/sink/_tasks.py`).
A new format is one decoder module beside those two and one `register_value_format` call here.
"""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa

from ingest.errors import ConfigError
from ingest.records.avro_values import AvroFormat, decode_avro_values
from ingest.records.json_values import ParsedValues, parse_json_values


class ValueDecoder(Protocol):
    """Decodes one batch of Kafka values into rows of `schema`, with the format's settings."""

    def __call__(self, values: pa.Array, schema: pa.Schema, settings: Any, *,
                 skip_tombstones: bool) -> ParsedValues: ...


class ValuesPlan(Protocol):
    """What `parse_values` reads of a sink task's plan (`TaskPlan` has it)."""

    @property
    def parse_schema(self) -> pa.Schema: ...
    @property
    def avro(self) -> AvroFormat | None: ...


_DECODERS: dict[str, ValueDecoder] = {}


def register_value_format(name: str, decoder: ValueDecoder) -> None:
    """Make `decoder` the one for `--value-format NAME`."""
    _DECODERS[name] = decoder


def value_formats() -> tuple[str, ...]:
    """The registered format names, sorted."""
    return tuple(sorted(_DECODERS))


def decode_values(name: str, values: pa.Array, schema: pa.Schema, settings: Any = None, *,
                  skip_tombstones: bool) -> ParsedValues:
    """Decode one batch of Kafka values by the format registered as `name`.

    Raises:
        ConfigError: no format is registered under `name`.
        IngestError: Avro values, and the schema registry could not be asked.
    """
    decoder = _DECODERS.get(name)
    if decoder is None:
        raise ConfigError(f"unknown value format {name!r}",
                          hint=f"use one of {', '.join(value_formats())}")
    return decoder(values, schema, settings, skip_tombstones=skip_tombstones)


def parse_values(plan: ValuesPlan, values: pa.Array, *, skip_tombstones: bool) -> ParsedValues:
    """Parse one batch of Kafka values into rows of `plan.parse_schema`.

    Raises:
        IngestError: Avro values, and the schema registry could not be asked.
    """
    if plan.avro is None:
        return decode_values("json", values, plan.parse_schema, skip_tombstones=skip_tombstones)
    return decode_values("avro", values, plan.parse_schema, plan.avro,
                         skip_tombstones=skip_tombstones)


def _json(values: pa.Array, schema: pa.Schema, settings: Any, *,
          skip_tombstones: bool) -> ParsedValues:
    return parse_json_values(values, schema, skip_tombstones=skip_tombstones)


def _avro(values: pa.Array, schema: pa.Schema, settings: Any, *,
          skip_tombstones: bool) -> ParsedValues:
    return decode_avro_values(values, schema, settings, skip_tombstones=skip_tombstones)


register_value_format("json", _json)
register_value_format("avro", _avro)
