"""Options shared by several commands: `--property KEY=VALUE`, `--txn-timeout-s`,
`--metastore URL` and `--storage-option KEY=VALUE`.

Parsing them and handing them to the command as values (`metastore`, `storage_options`);
the command passes them to the table it opens. `$INGEST_METASTORE` and the metastore beside
the table stay the defaults, resolved by the table layer when no `--metastore` is given.
What a value means is the table layer's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ingest.errors import ConfigError
from ingest.io import storage

_F = TypeVar("_F", bound=Callable[..., Any])


def parse_properties(values: tuple[str, ...]) -> dict[str, str]:
    """`("k=v", ...)` as a dict, keys and values stripped.

    Raises:
        ConfigError: an item has no `=` or an empty key.
    """
    out = {}
    for item in values:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"Cannot use --property {item!r}: expected KEY=VALUE",
                              hint="for example --property orc.compress=ZLIB")
        out[key.strip()] = value.strip()
    return out


class Seconds(click.ParamType):
    """A finite number of seconds, at least 0 (click's FloatRange lets nan and inf pass)."""

    name = "SECONDS"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds < 0:
            self.fail(f"{value!r} must be a finite number of seconds, at least 0", param, ctx)
        return seconds


SECONDS = Seconds()


METASTORE_HELP = (
    "Metastore holding the table: sqlite:///abs/path.sqlite, postgresql://user@host/db "
    "(password from PGPASSWORD, ~/.pgpass or the URL) or thrift://host:9083 (a Hive "
    "Metastore)  [default: $INGEST_METASTORE, else found beside the table]")


def metastore_option(command: _F) -> _F:
    """Add `--metastore URL` to a command that finds its table's metastore by itself (reads,
    verify, recover), as its parameter `metastore` (None when not given): the command
    passes it on, and the table layer uses it instead of `$INGEST_METASTORE` or the search,
    never falling back to them when it does not list the table."""
    return click.option("--metastore", "metastore", metavar="URL",
                        help=METASTORE_HELP)(command)


STORAGE_OPTION_HELP = (
    "fsspec storage option for the table's bucket, e.g. endpoint_url=http://host:9000, "
    "key=..., secret=..., anon=false, client_kwargs={\"region_name\":\"us-east-1\"} "
    "(repeatable; a value is JSON when it parses, else a string). fsspec's own FSSPEC_S3_* "
    "environment applies too.")


def storage_option(command: _F) -> _F:
    """Add `--storage-option KEY=VALUE` (repeatable) to a command whose argument `path` (or
    `file`) names a table location; the command receives them parsed, as its parameter
    `storage_options` (a dict, empty when none was given), and passes them to the table it
    opens: they are that table's options. Values are never echoed. A location no
    filesystem serves (unknown scheme, backend not installed, no bucket) is a `ConfigError`;
    a failure of the storage service itself becomes a `StorageError` naming the bucket and
    endpoint."""

    @functools.wraps(command)
    def wrapper(*args: Any, storage_options: tuple[str, ...] = (), **kwargs: Any) -> Any:
        location = kwargs.get("path", kwargs.get("file"))
        if location is not None:
            storage.check_url(str(location))
        options = storage.parse_storage_options(storage_options)
        try:
            return command(*args, storage_options=options, **kwargs)
        except Exception as e:
            failure = None if location is None else (
                storage.describe_option_error(e, str(location), options)
                or storage.describe_failure(e, str(location), options))
            if failure is None:
                raise
            raise failure from e

    add = click.option("--storage-option", "storage_options", multiple=True,
                       metavar="KEY=VALUE", help=STORAGE_OPTION_HELP)
    return add(wrapper)  # type: ignore[return-value]


KAFKA_OPTION_HELP = (
    "Kafka client setting (repeatable; librdkafka's names), e.g. security.protocol=SASL_SSL, "
    "sasl.mechanism=SCRAM-SHA-512, sasl.username=..., sasl.password=..., "
    "ssl.ca.location=ca.pem. Wins over --kafka-config. Values are never echoed.")
KAFKA_CONFIG_HELP = (
    "Kafka client settings from a client.properties file (repeatable; later files win; a "
    "Java client's SASL/TLS settings are translated).")


def kafka_connection(*, required: bool) -> Callable[[_F], _F]:
    """Add `--bootstrap-servers`, `--kafka-option KEY=VALUE` and `--kafka-config FILE` to a
    command, which receives them as one parameter `kafka` (an `ingest.kafka.KafkaConnection`,
    or None when `required` is False and no `--bootstrap-servers` was given)."""

    def decorate(command: _F) -> _F:
        @functools.wraps(command)
        def wrapper(*args: Any, bootstrap_servers: str | None = None,
                    kafka_options: tuple[str, ...] = (), kafka_configs: tuple[str, ...] = (),
                    **kwargs: Any) -> Any:
            from ingest.kafka import KafkaConnection

            connection = None
            if bootstrap_servers is not None:
                connection = KafkaConnection.of(bootstrap_servers, options=kafka_options,
                                                config_files=kafka_configs)
            elif kafka_options or kafka_configs:
                raise ConfigError("--kafka-option and --kafka-config need --bootstrap-servers")
            return command(*args, kafka=connection, **kwargs)

        wrapped: Any = wrapper
        for option in reversed([
            click.option("--bootstrap-servers", required=required, metavar="HOST:PORT",
                         help="Kafka brokers, comma-separated."),
            click.option("--kafka-option", "kafka_options", multiple=True, metavar="KEY=VALUE",
                         help=KAFKA_OPTION_HELP),
            click.option("--kafka-config", "kafka_configs", multiple=True, metavar="FILE",
                         type=click.Path(dir_okay=False), help=KAFKA_CONFIG_HELP),
        ]):
            wrapped = option(wrapped)
        return wrapped  # type: ignore[no-any-return]

    return decorate
