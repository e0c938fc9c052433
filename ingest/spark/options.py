"""The streaming job's options, declared once: each field's name, type, default, help and bounds.

`run_stream` takes a `StreamOptions`, `AcidSink` its `SinkOptions` part. `ingest stream` (click)
and `jobs/kafka_to_acid.py` (argparse) build their flags from `option_specs`, so a flag's name,
default and help text exist only here. Knows neither Spark nor click.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from functools import cached_property
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pyarrow as pa

from ingest.acid.format import COMMENT_KEY, parse_schema, to_ddl
from ingest.errors import ConfigError
from ingest.io import parse_storage_options, storage
from ingest.kafka import DEFAULT_STARTING_OFFSETS, DEFAULT_TIMEOUT_MS, KafkaConnection
from ingest.records import (
    OnNewField,
    RoutingRules,
    TableTemplate,
    TopicSelection,
    Unrouted,
    check_topic_name,
    merge_routes,
    parse_field_path,
    parse_routes,
    parse_routes_file,
)
from ingest.txn import normalize_location

OnBadRecord = Literal["dead-letter", "fail"]
OnTombstone = Literal["skip", "dead-letter"]
Maintenance = Literal["auto", "off"]
# Hive's initiator default (hive.compactor.delta.num.threshold): deltas before a compaction.
FileLayout = Literal["partition", "task"]
StreamMode = Literal["append", "upsert", "cdc"]
CdcFormat = Literal["debezium"]
ValueFormat = Literal["json", "avro"]
LogFormat = Literal["text", "json"]
KafkaSource = Literal["python", "jvm"]
TrueFalse = Literal["true", "false"]


def _option(default: Any = MISSING, *, help: str, flag: str | None = None,
            metavar: str | None = None, minimum: float | None = None,
            minimum_open: bool = False, secret: bool = False, kw_only: bool = False) -> Any:
    """A dataclass field that is also a flag: `--<field name with dashes>` unless `flag` says;
    a `secret` one is left out of the options' repr (it may hold credentials); a `kw_only`
    one may have a default before required fields (its flag keeps its place)."""
    return field(default=default, repr=not secret, kw_only=kw_only, metadata={
        "help": help, "flag": flag, "metavar": metavar, "minimum": minimum,
        "minimum_open": minimum_open})


@dataclass(frozen=True)
class OptionSpec:
    """One flag, as the command-line front ends declare it.

    Attributes:
        name: the field name (nested option groups flattened): the keyword argument of
            `run_stream` and the parameter name of the click option.
        flag: e.g. "--bootstrap-servers".
        type: str, int, float or bool (bool: a switch, off unless given).
        required: no default; the flag must be given.
        default: the default value (None when required or when there is none).
        choices: the allowed values of a Literal field, else ().
        minimum: lower bound of a number, or None.
        minimum_open: the bound itself is not allowed (x > minimum).
        help: one sentence.
        metavar: the value's placeholder in help output, or None for the type's.
        multiple: the flag may be repeated; the value is a tuple of the given strings.
    """

    name: str
    flag: str
    type: type
    required: bool
    default: Any
    choices: tuple[str, ...]
    minimum: float | None
    minimum_open: bool
    help: str
    metavar: str | None
    multiple: bool = False


@dataclass(frozen=True)
class SinkOptions:
    """The AcidSink's options (the sink's part of `StreamOptions`)."""

    txns_per_delta: int = _option(
        1, minimum=1, help="Micro-batches per delta directory (>1: local/HDFS only).")
    flush_rows: int = _option(
        100_000, minimum=1, help="Rows per intermediate footer and side-file entry.")
    on_bad_record: OnBadRecord = _option(
        "dead-letter", help="Unparsable records: to <table>__dead_letter, or stop the query.")
    on_tombstone: OnTombstone = _option(
        "skip", help="Records with no value (tombstones of compacted topics): skip them or "
                     "dead-letter them; counted either way.")
    file_layout: FileLayout = _option(
        "partition", help="Who writes a micro-batch's files: 'partition' encodes the rows "
                          "as ORC in the parse tasks and shuffles them so one writer takes "
                          "each table partition and bucket (fewer files, one shuffle); 'task' "
                          "lets every Kafka read task write its own file per table partition "
                          "(no shuffle: a little faster on many small micro-batches, a file "
                          "per task).")
    writer_split_rows: int = _option(
        1_000_000, minimum=1, help="With --file-layout partition on an unbucketed table: a "
                                   "table partition's rows may be split among several write "
                                   "tasks in groups of this many rows of one Kafka read task, "
                                   "so a large micro-batch still writes in parallel.")
    one_task_records: int = _option(
        20_000, minimum=0, help="A micro-batch that would be shuffled (--file-layout partition, "
                                "or a bucketed table; not --mode upsert|cdc) and holds at most "
                                "this many Kafka records (its offset ranges say so before it "
                                "is read) is read, parsed and written by one task, whose files "
                                "are already one per table partition and bucket: no shuffle, "
                                "no second Spark job. 0: always shuffle.")

    mode: StreamMode = _option(
        "append", help="'append' adds every record as a row; 'upsert' makes each record the "
                       "current row of its --key (a tombstone deletes the key its Kafka record "
                       "key names, a JSON object of the key columns); 'cdc' applies Debezium "
                       "change events (op c/r/u upsert 'after', d deletes 'before', a "
                       "tombstone deletes).")
    key: str | None = _option(
        None, metavar="COL[,COL]", help="The key columns of --mode upsert|cdc (the table must "
                                        "be bucketed by them; partition columns among them).")
    route_keys: tuple[str, ...] = _option(
        (), flag="--route-key", metavar="ROUTEKEY=COL[,COL]", help=(
            "With several tables and --mode upsert|cdc: the key columns of the table a routing "
            "key (a topic, or a --route-field value) routes to (repeatable), instead of --key, "
            "the default of every routed table. A --route whose key has neither is refused "
            "before the stream starts; a --table-template table with none routes nowhere."))
    cdc_format: CdcFormat = _option(
        "debezium", help="The change-event format of --mode cdc.")
    order_by: str | None = _option(
        None, metavar="COL", help="With --mode upsert|cdc: a column ordering a key's events "
                                  "(ties: c < r < u < d); an event older than the stored row "
                                  "is skipped. Default: Kafka (partition, offset) order.")
    value_format: ValueFormat = _option(
        "json", help="Record values: 'json' objects, or 'avro' binary records (with "
                     "--avro-schema FILE, or --schema-registry URL for Confluent's framing: "
                     "magic byte 0, a 4-byte schema id, the Avro body). Avro writer schemas "
                     "resolve to the table's columns: fields missing are null, extra fields "
                     "go by --on-new-field.")
    avro_schema: str | None = _option(
        None, metavar="FILE", help="With --value-format avro: the writers' Avro schema (a "
                                   ".avsc JSON file, read once on the driver) of values in "
                                   "plain Avro binary, or in Avro's single-object encoding "
                                   "(bytes C3 01 and the writer schema's fingerprint, "
                                   "checked: a value of another schema is dead-lettered). "
                                   "WARNING: plain Avro carries no schema id, so a FILE that "
                                   "is not the producers' exact schema can go unnoticed: "
                                   "fields {id, a, b} read as {id, b, a} (same types) commit "
                                   "every row with a and b swapped. Prefer single-object "
                                   "encoding or --schema-registry.")
    schema_registry: str | None = _option(
        None, metavar="URL", help="With --value-format avro: a Confluent-compatible schema "
                                  "registry (http://host:8081) giving each value's writer "
                                  "schema by the id in its header.")
    schema_registry_options: tuple[str, ...] = _option(
        (), flag="--schema-registry-option", metavar="KEY=VALUE", secret=True, help=(
            "Schema registry client setting (repeatable): basic.auth.user.info=USER:PASSWORD, "
            "ssl.ca.location=ca.pem, ssl.certificate.location and ssl.key.location (a client "
            "certificate), bearer.auth.*; reaches the executors, never echoed."))

    on_new_field: OnNewField = _option(
        "dead-letter", help="A record with a top-level field the table has no column for: "
                            "'dead-letter' keeps the whole record in <table>__dead_letter "
                            "with the field named (nothing is dropped silently); 'fail' stops "
                            "the query before committing the micro-batch; 'ignore' drops the "
                            "field (counted); 'evolve' adds a nullable column for it (BIGINT, "
                            "DOUBLE, BOOLEAN or STRING by its JSON values; objects and arrays "
                            "as STRING holding JSON) before writing the micro-batch. In a "
                            "stream of several tables it applies per table: each table gets "
                            "the columns of its own records' new fields.")
    evolve_types: tuple[str, ...] = _option(
        (), flag="--evolve-type", metavar="FIELD=TYPE", help=(
            "With --on-new-field evolve: the Hive type of a new field's column instead of the "
            "inferred one (repeatable), e.g. tags=ARRAY<STRING> or price=DECIMAL(10,2). A "
            "FIELD that is already a column must have that type (a column an earlier run "
            "added); another type is refused (widen it with `ingest alter`)."))

    def __post_init__(self) -> None:
        """Raises: ConfigError: a value is out of its bounds or not one of its choices, or
        the keyed options do not fit --mode, or an --evolve-type does not parse."""
        object.__setattr__(self, "evolve_types", tuple(self.evolve_types or ()))
        object.__setattr__(self, "route_keys", tuple(self.route_keys or ()))
        _check(self)
        self._check_value_format()
        self.evolve_type_map  # noqa: B018 (parsing is the check)
        if self.mode == "append":
            given = [f for f, v in (("--key", self.key), ("--route-key", self.route_keys),
                                    ("--order-by", self.order_by)) if v]
            if given:
                verb = "apply" if len(given) > 1 else "applies"
                raise ConfigError(f"{' and '.join(given)} {verb} to --mode upsert or cdc, not "
                                  "to --mode append", hint="add --mode upsert or --mode cdc")
            return
        self.route_key_map  # noqa: B018 (parsing is the check)
        if not self.key_columns and not self.route_keys:
            raise ConfigError(f"--mode {self.mode} needs --key: the columns that name a row",
                              hint=f"e.g. --mode {self.mode} --key id (or --key id,dt)")
        if self.txns_per_delta > 1:
            raise ConfigError(
                f"Cannot use --txns-per-delta {self.txns_per_delta} with --mode {self.mode}: "
                "a keyed micro-batch writes a delete_delta and a delta of its own write id, "
                "which a transaction batch's shared files cannot hold",
                hint="use --txns-per-delta 1 (the default) with --mode upsert or cdc")
        if self.on_tombstone != "skip":
            raise ConfigError(f"Cannot use --on-tombstone {self.on_tombstone} with --mode "
                              f"{self.mode}: a tombstone deletes its key there",
                              hint="leave --on-tombstone at its default")

    def _check_value_format(self) -> None:
        """Raises: ConfigError: Avro options that do not fit --value-format or --mode."""
        if self.schema_registry_options and self.schema_registry is None:
            raise ConfigError("--schema-registry-option needs --schema-registry URL")
        given = [f for f, v in (("--avro-schema", self.avro_schema),
                                ("--schema-registry", self.schema_registry)) if v]
        if self.value_format == "json":
            if given:
                raise ConfigError(f"{' and '.join(given)} apply to --value-format avro, not "
                                  "json", hint="add --value-format avro")
            return
        if len(given) != 1:
            raise ConfigError("--value-format avro needs one of --avro-schema FILE (plain Avro "
                              "binary) and --schema-registry URL (Confluent's framing), "
                              f"{'not both' if given else 'got neither'}")
        if self.mode != "append":
            raise ConfigError(f"--value-format avro applies to --mode append, not --mode "
                              f"{self.mode} (keyed changes are read as JSON)",
                              hint="stream Avro values with --mode append")

    @property
    def key_columns(self) -> tuple[str, ...]:
        """`--key` split at commas (empty in append mode)."""
        return tuple(c.strip() for c in (self.key or "").split(",") if c.strip())

    @property
    def route_key_map(self) -> dict[str, tuple[str, ...]]:
        """`--route-key ROUTEKEY=COLS` items: each routing key's key columns.

        Raises:
            ConfigError: an item is not ROUTEKEY=COL[,COL], or names a routing key twice.
        """
        out: dict[str, tuple[str, ...]] = {}
        for item in self.route_keys:
            key, sep, cols = item.rpartition("=")
            columns = tuple(c.strip() for c in cols.split(",") if c.strip())
            if not sep or not key or not columns:
                raise ConfigError(f"--route-key {item!r} is not ROUTEKEY=COL[,COL]",
                                  hint="e.g. --route-key inventory.orders=id")
            if key in out:
                raise ConfigError(f"--route-key names routing key {key!r} twice")
            out[key] = columns
        return out

    def key_of(self, routing_key: str) -> tuple[str, ...]:
        """The key columns of the table `routing_key` routes to: its --route-key, else
        --key (empty: none given, or append mode)."""
        return self.route_key_map.get(routing_key, self.key_columns)

    @property
    def evolve_type_map(self) -> dict[str, str]:
        """`--evolve-type FIELD=TYPE` items by field name, each type a Hive type (checked).

        Raises:
            ConfigError: an item is not FIELD=TYPE, names a field twice, or TYPE is not a
                Hive type, or --evolve-type is given without --on-new-field evolve.
        """
        if self.evolve_types and self.on_new_field != "evolve":
            raise ConfigError(f"--evolve-type applies to --on-new-field evolve, not "
                              f"--on-new-field {self.on_new_field}",
                              hint="add --on-new-field evolve")
        return parse_evolve_types(self.evolve_types)

    @property
    def keyed(self) -> bool:
        """Whether the sink applies keyed changes (--mode upsert or cdc)."""
        return self.mode != "append"


def _storage_items(value: Any) -> tuple[str, ...]:
    """`storage_options` as `KEY=VALUE` items: from the flags, or a dict as Python callers
    (and `open_table`) give them.

    Raises:
        ConfigError: a single string instead of a list of items.
    """
    if isinstance(value, Mapping):
        return tuple(f"{k}={v if isinstance(v, str) else json.dumps(v)}"
                     for k, v in value.items())
    if isinstance(value, str):
        raise ConfigError("storage_options must be a dict or a list of KEY=VALUE items, "
                          "not one string", hint='e.g. storage_options={"endpoint_url": '
                                                 '"http://host:9000"}')
    return tuple(value or ())


METASTORE_HELP = (
    "Metastore of the table: sqlite:///abs/path.sqlite, postgresql://user@host/db when "
    "several hosts share it (password from PGPASSWORD, ~/.pgpass or the URL), or "
    "thrift://host:9083, a Hive Metastore (default: $INGEST_METASTORE, else beside the "
    "table).")


@dataclass(frozen=True)
class TableOptions:
    """Where the table of a job on one table lives (`jobs/recover.py`, `jobs/compact.py`):
    its metastore and its storage options, declared as the stream's are.

    Attributes:
        metastore: the metastore URL; None: `$INGEST_METASTORE`, else beside the table.
        storage_options: `--storage-option` items, KEY=VALUE (parsed by `storage`).
    """

    metastore: str | None = _option(None, metavar="URL", help=METASTORE_HELP)
    storage_options: tuple[str, ...] = _option(
        (), flag="--storage-option", metavar="KEY=VALUE", secret=True, help=(
            "fsspec storage option for the table's bucket (repeatable; a value is JSON when "
            "it parses), e.g. endpoint_url=http://host:9000. fsspec's FSSPEC_S3_* "
            "environment applies too."))

    @property
    def storage(self) -> dict[str, Any]:
        """`--storage-option` as fsspec options.

        Raises:
            ConfigError: an item that is not KEY=VALUE.
        """
        return parse_storage_options(self.storage_options)


@dataclass(frozen=True)
class StreamOptions:
    """Everything `ingest stream` and `jobs/kafka_to_acid.py` take (besides the Spark master).

    Build one with `StreamOptions(...)` (the sink's options as `sink=SinkOptions(...)`) or
    from flat flag values with `StreamOptions.from_flags`.
    """

    bootstrap_servers: str = _option(metavar="HOST:PORT", help="Kafka brokers, comma-separated.")
    topic: str | None = _option(None, metavar="TOPIC[,TOPIC]", kw_only=True, help=(
        "Topic to read; several, comma-separated, make a stream of several tables (routed by "
        "--table-template or --route). One of --topic and --topic-pattern is required."))
    table: str | None = _option(None, metavar="PATH", kw_only=True, help=(
        "Table root (path or URL) of a stream of one topic; required then. A stream of "
        "several tables names them by --table-template or --route instead."))
    topic_pattern: str | None = _option(None, metavar="REGEX", kw_only=True, help=(
        "Read every topic whose whole name matches this regular expression (Kafka's "
        "internal __ topics never), topics created later too, from their first record; a "
        "stream of several tables. Matched with Python's re module, while Kafka's own "
        "clients use Java regex: constructs the two read otherwise (\\p{...}, \\Q...\\E, "
        "nested classes, && in a class, (?<name>...)) are refused."))
    table_template: str | None = _option(None, metavar="PATH", kw_only=True, help=(
        "With several tables: the table of each topic, e.g. 'wh/{topic}' ({field} with "
        "--route-field), in the last path name. The topic is made a table name: lower case, "
        "'.', '-' and any other character outside a-z, 0-9 and _ become _, t_ in front of a "
        "name not starting with a letter, a name over 128 characters cut and ended with a "
        "hash (the whole last path name stays within 128); two topics making the same name, "
        "or a name of another route's table, the --unrouted-table or a dead-letter table "
        "(<table>__dead_letter), are refused before the stream starts, and a topic first "
        "seen later that would meet one routes nowhere."))
    routes: tuple[str, ...] = _option((), flag="--route", metavar="TOPIC=TABLE", kw_only=True,
                                      help=(
        "With several tables: send TOPIC's records (with --route-field: records whose field "
        "holds TOPIC) to the table at TABLE (repeatable; wins over --table-template; several "
        "topics may share a table; locations are compared normalised, so wh/t and wh/t/ are "
        "one table; the --unrouted-table and a dead-letter table are refused)."))
    routes_file: str | None = _option(None, flag="--routes", metavar="FILE", kw_only=True, help=(
        "--route items from a file, one TOPIC=TABLE per line ('#' starts a comment line); a "
        "topic routed by both is refused."))
    route_field: str | None = _option(None, metavar="FIELD", kw_only=True, help=(
        "With several tables: route each record by the string at this path of its JSON "
        "value (dots between names), e.g. source.table of a Debezium envelope, instead of by "
        "its topic."))
    unrouted_table: str | None = _option(None, metavar="PATH", kw_only=True, help=(
        "With several tables (required then): the stream's own table of records that route "
        "to no table, with the reason (each table keeps its <table>__dead_letter for records "
        "it cannot parse); it also holds the stream's progress."))
    max_new_tables_per_batch: int = _option(100, minimum=1, metavar="N", kw_only=True, help=(
        "With several tables: create at most N tables on first use in one micro-batch; the "
        "records of further new routing keys (a --route-field of many values) route nowhere "
        "with the reason, each key logged once, and get their table in a later "
        "micro-batch."))
    schema_ddl: str | None = _option(None, flag="--schema", metavar="DDL", kw_only=True, help=(
        'Hive columns of the records, e.g. "id BIGINT, value STRING". A stream of one table '
        "needs it, except with --value-format avro, whose writers' schema (--avro-schema, or "
        "the registry's <topic>-value subject) then gives them. With several tables it is "
        "optional and gives the columns of "
        "the tables the stream creates on first use (a table found keeps its own columns), "
        "unless --route-schema gives a route's; without either (and without a registry "
        "subject <topic>-value with --value-format avro), a routing key whose table does "
        "not exist routes nowhere with the reason."))
    route_schemas: tuple[str, ...] = _option(
        (), flag="--route-schema", metavar="ROUTEKEY=DDL|@FILE", kw_only=True, help=(
            "With several tables: the Hive columns of the table a routing key (a topic, or a "
            "--route-field value) routes to (repeatable), as a column list or @FILE holding "
            "one; used to create that table on first use instead of --schema, and to check "
            "it when found (other columns are refused: at start if the table exists then, "
            "else at its first use)."))
    checkpoint: str = _option(metavar="DIR", help=(
        "Spark checkpoint directory (Kafka offsets live there)."))
    trigger: str = _option("60", help="Seconds between micro-batches (60, 30s, 2min).")
    available_now: bool = _option(False, help="Process what the topic holds now, then stop.")
    starting_offsets: str = _option(DEFAULT_STARTING_OFFSETS, help=(
        "earliest, latest, or Spark's JSON offsets."))
    partition_by: str | None = _option(None, metavar="EXPR", help=(
        '"dt" (a JSON field) or Spark SQL giving a dt column.'))
    metastore: str | None = _option(None, metavar="URL", help=METASTORE_HELP)
    sink: SinkOptions = field(default_factory=SinkOptions)
    max_offsets_per_trigger: int | None = _option(
        None, minimum=1, help="Cap on records per micro-batch.")
    kafka_timeout_s: float = _option(
        DEFAULT_TIMEOUT_MS / 1000, minimum=0, minimum_open=True,
        help="Bound on reaching the broker and on reads.")
    kafka_options: tuple[str, ...] = _option(
        (), flag="--kafka-option", metavar="KEY=VALUE", secret=True, help=(
            "Kafka client setting (repeatable; librdkafka's names, e.g. "
            "security.protocol=SASL_SSL, sasl.mechanism=SCRAM-SHA-512, sasl.username=..., "
            "ssl.ca.location=ca.pem); used by every Kafka client of the stream, on the driver "
            "and the executors, and given to --kafka-source jvm in the Java client's names. "
            "Wins over --kafka-config."))
    kafka_config: tuple[str, ...] = _option(
        (), flag="--kafka-config", metavar="FILE", help=(
            "Kafka client settings from a client.properties file (repeatable, later files "
            "win; a Java client's SASL/TLS settings are translated, JKS truststores refused "
            "with the PEM setting to use). Keep the file readable by the job's user only."))
    fail_on_data_loss: TrueFalse = _option(
        "true", help=(
            "Records the table has not committed that Kafka no longer holds (removed by "
            "retention): 'true' stops the stream naming every lost range; 'false' goes on "
            "without them with a warning, counted in the metrics and shown by `ingest "
            "status`."))
    compact: Maintenance = _option("auto", help=(
        "Compact the partitions the stream writes (the dead-letter table's too; with several "
        "tables, of every table a micro-batch wrote and of the stream's own) on a driver "
        "thread, never delaying a commit: 'auto' compacts what `ingest compact --auto` would "
        "(each table's compactor thresholds); 'off' leaves it to `ingest compact` or "
        "jobs/compact.py."))
    clean: Maintenance = _option("auto", help=(
        "After compacting, remove directories no reader needs any more ('off': leave them "
        "to `ingest clean`)."))
    maintenance_interval_s: float = _option(
        60.0, minimum=0, help="Least seconds between two compaction and cleaning runs.")
    buckets: int = _option(
        8, minimum=1, help="Buckets of a table --mode upsert|cdc creates (bucketed by the "
                           "key's row columns); an existing table keeps its own.")
    metrics_port: int | None = _option(
        None, minimum=1, metavar="PORT", help=(
            "Serve Prometheus metrics on this port of the driver (http://HOST:PORT/metrics): "
            "rows, records, dead letters, bytes and files, batch and commit seconds, the last "
            "commit's time and Kafka lag per partition. With several tables each is labelled "
            "by the table written (offsets and lag by the topic's table; micro-batches and "
            "records routed nowhere by --unrouted-table's). Default: off."))
    metrics_host: str | None = _option(
        None, metavar="HOST", help=(
            "With --metrics-port: the address the metrics server binds, e.g. 127.0.0.1 (this "
            "host only) or one interface's address. Default: 0.0.0.0, every interface, so "
            "that a Prometheus in another container or on another host can scrape the driver "
            "(docker/compose.yaml's does)."))
    storage_options: tuple[str, ...] = _option(
        (), flag="--storage-option", metavar="KEY=VALUE", secret=True, help=(
            "fsspec storage option for the table's bucket (repeatable; a value is JSON when "
            "it parses), e.g. endpoint_url=http://host:9000; reaches the driver and the "
            "executors. fsspec's FSSPEC_S3_* environment applies too."))
    log_format: LogFormat = _option(
        "text", help="The job's log lines on stderr, one per micro-batch (batch id, write id, "
                     "rows committed (with several tables, per table), seconds, offsets, Kafka "
                     "lag (per topic)) and its warnings: "
                     "sentences, or one JSON object per line for a log shipper.")
    commit_offsets_to_group: str | None = _option(
        None, metavar="GROUP", help=(
            "After each table commit, also commit its Kafka offsets (with several tables, every "
            "topic's) to this consumer group (from the driver), so Kafka's own lag tools see "
            "the stream; the table stays the "
            "source of truth, and a failed group commit is logged and counted, never fatal."))
    kafka_source: KafkaSource = _option("python", help=(
        "Kafka source: 'python', ingest's (confluent-kafka; nothing to download), or 'jvm', "
        "Spark's own (spark-sql-kafka-0-10 must be on the classpath, e.g. spark-submit "
        "--packages). Either way the offsets commit with the data; keep one per checkpoint."))

    def __post_init__(self) -> None:
        """Raises: ConfigError: a bad trigger, topic or broker list, storage option, or a
        value out of bounds."""
        object.__setattr__(self, "storage_options", _storage_items(self.storage_options))
        _check(self)
        object.__setattr__(self, "routes", tuple(self.routes or ()))
        object.__setattr__(self, "route_schemas", tuple(self.route_schemas or ()))
        # Several tables: a found table keeps its own columns, so --schema is needed only to
        # create tables (`route_schema_map` and many_job say what happens without it).
        if (self.schema_ddl is None and self.sink.value_format != "avro"
                and not self.many_tables):
            raise ConfigError("--schema is required: the Hive columns of the records",
                              hint='e.g. --schema "id BIGINT, value STRING" (with '
                                   "--value-format avro it may come from the Avro schema)")
        if self.many_tables:
            self._check_many_tables()
        else:
            self._check_one_table()
        for server in self.bootstrap_servers.split(","):
            m = _SERVER.fullmatch(server.strip())
            if not m or not 0 < int(m.group(1)) < 65536:
                raise ConfigError(
                    f"--bootstrap-servers {self.bootstrap_servers!r}: {server.strip()!r} is "
                    "not HOST:PORT", hint="e.g. --bootstrap-servers broker1:9092,broker2:9092")
        parse_storage_options(self.storage_options)
        connection = self.connection  # a bad setting or file: refused before anything starts
        if connection.kerberos:
            self._check_kerberos(connection)
        if self.metrics_port is not None and self.metrics_port > 65535:
            raise ConfigError(f"--metrics-port must be a TCP port (1-65535), got "
                              f"{self.metrics_port}")
        if self.metrics_host is not None and self.metrics_port is None:
            raise ConfigError("--metrics-host applies to --metrics-port, which is not given",
                              hint="add --metrics-port PORT, or leave out --metrics-host")
        if self.metrics_host is not None and not self.metrics_host.strip():
            raise ConfigError("--metrics-host needs an address, got an empty one",
                              hint="e.g. --metrics-host 127.0.0.1")
        group = self.commit_offsets_to_group
        if group is not None and not group.strip():
            raise ConfigError("--commit-offsets-to-group needs a Kafka consumer group id, got "
                              f"{group!r}", hint="e.g. --commit-offsets-to-group ingest-events")
        interval_s, available_now = self.schedule
        if interval_s <= 0 and not available_now:
            raise ConfigError(f"--trigger must be a positive number of seconds, got {interval_s:g}")

    def _check_one_table(self) -> None:
        """Raises: ConfigError: --topic or --table missing, or --topic not a topic name."""
        if self.topic is None:
            raise ConfigError("--topic (or --topic-pattern) is required: the topic to read",
                              hint="e.g. --topic events")
        check_topic_name(self.topic)
        if self.sink.route_keys:
            raise ConfigError("--route-key applies to a stream of several tables; a stream of "
                              "one topic takes --key", hint="e.g. --key id")
        if self.route_schemas:
            raise ConfigError("--route-schema applies to a stream of several tables; a stream "
                              "of one topic takes --schema", hint='e.g. --schema "id BIGINT"')
        if self.sink.keyed and not self.sink.key_columns:
            raise ConfigError(f"--mode {self.sink.mode} needs --key: the columns that name a "
                              "row", hint=f"e.g. --mode {self.sink.mode} --key id")
        if self.table is None:
            raise ConfigError("--table is required: the table the topic streams into",
                              hint="e.g. --table ./wh/events; for a table per topic give "
                                   "--table-template 'wh/{topic}' and an --unrouted-table")

    def _check_many_tables(self) -> None:
        """Raises: ConfigError: --table given, no --unrouted-table, --route-field with
        Avro values, or routing rules that do not hold (`routing`)."""
        if self.table is not None:
            raise ConfigError(
                f"--table applies to a stream of one topic; this stream has several tables "
                f"({self._many_reason})", hint="give each topic's table by --route TOPIC=TABLE "
                                               "or --table-template 'wh/{topic}'")
        if self.unrouted_table is None:
            raise ConfigError(
                f"A stream of several tables ({self._many_reason}) needs --unrouted-table "
                "PATH: the table of records that route to no table, which also holds the "
                "stream's progress", hint="e.g. --unrouted-table wh/_unrouted")
        if self.route_field is not None and self.sink.value_format != "json":
            raise ConfigError("--route-field reads JSON values, not --value-format "
                              f"{self.sink.value_format}", hint="route Avro values by topic")
        self._check_many_tables_built()
        self.routing  # noqa: B018 (building the rules is the check)
        self.route_schema_map  # noqa: B018 (parsing is the check)

    def _check_many_tables_built(self) -> None:
        """Refuse, before anything starts, the options a stream of several tables does not
        run yet (the sink's and the job's; docs/many-tables.md, Status).

        Raises:
            ConfigError: naming every such option given.
        """
        sink = self.sink
        given = [what for what, on in (
            (f"--txns-per-delta {sink.txns_per_delta}", sink.txns_per_delta > 1),
            # Registry-framed Avro runs (routed by topic: each topic's `<topic>-value`
            # subject gives its new table's columns); plain Avro has one writer schema.
            ("--value-format avro with --avro-schema (give --schema-registry)",
             sink.value_format == "avro" and sink.schema_registry is None)) if on]
        if given:
            raise ConfigError(
                f"A stream of several tables ({self._many_reason}) cannot use "
                f"{', '.join(given)} yet (docs/many-tables.md, Status)",
                hint="leave them out, or stream each topic into its table with --topic and "
                     "--table")
        if sink.keyed:
            assert self.routing is not None
            keyless = sorted(k for k in self.routing.routes if not sink.key_of(k))
            if keyless:
                raise ConfigError(
                    f"--mode {sink.mode} needs the key of every routed table, but "
                    f"{', '.join(f'--route {k}' for k in keyless)} has none",
                    hint="add --route-key KEY=COLS for each, or --key COLS for all")

    @property
    def many_tables(self) -> bool:
        """Whether this is a stream of several tables (routing options, several topics or a
        pattern); else a stream of one topic into one table."""
        return bool(self._many_reason)

    @property
    def _many_reason(self) -> str:
        """The first option that makes a stream of several tables, as a phrase, or ""."""
        given = [(self.topic_pattern, "--topic-pattern"), (self.table_template,
                 "--table-template"), (self.routes, "--route"), (self.routes_file, "--routes"),
                 (self.route_field, "--route-field"),
                 (self.unrouted_table, "--unrouted-table")]
        for value, flag in given:
            if value:
                return f"{flag} is given"
        if self.topic is not None and "," in self.topic:
            return "--topic names several topics"
        return ""

    @cached_property
    def routing(self) -> RoutingRules | None:
        """The routing rules of a stream of several tables (None for one table), built once;
        the routes file is read here, on the driver. Every location (routes, template,
        --unrouted-table) is normalised (`normalize_location`: absolute, no trailing slash),
        so two spellings of one table are one, and checked as a URL fsspec can open.

        Raises:
            ConfigError: the selection, a route, the routes file, the template or the field
                path does not hold, a location is not a usable URL, two topics' template
                names meet, or a route or template table is reserved (`RoutingRules`).
        """
        if not self.many_tables:
            return None
        selection = TopicSelection.of(self.topic, self.topic_pattern)
        field_path = None if self.route_field is None else parse_field_path(self.route_field)
        routes = parse_routes(self.routes)
        if self.routes_file is not None:
            routes = merge_routes(routes, parse_routes_file(
                _read_text(self.routes_file, "--routes"), path=self.routes_file),
                path=self.routes_file)
        placeholder = "topic" if field_path is None else "field"
        template = None
        if self.table_template is not None:
            TableTemplate.parse(self.table_template, placeholder=placeholder)  # as given
            template = TableTemplate.parse(
                _location(self.table_template, "--table-template"), placeholder=placeholder)
            storage.check_url(template.location("a"))
        routes = {key: _location(location, f"--route {key}={location}")
                  for key, location in routes.items()}
        for location in routes.values():
            storage.check_url(location)
        anchor = (None if self.unrouted_table is None
                  else _location(self.unrouted_table, "--unrouted-table"))
        return RoutingRules(selection, routes, template, field_path, anchor=anchor)

    @cached_property
    def route_schema_map(self) -> dict[str, str]:
        """`--route-schema ROUTEKEY=DDL|@FILE` items: each routing key's Hive columns, as a
        column list (a file's read here, on the driver), parsed and written back in one
        spelling (`to_ddl`).

        Raises:
            ConfigError: an item is not ROUTEKEY=DDL, names a key twice, a file cannot be
                read, the columns do not parse, the key routes nowhere by the rules (not
                selected, no route and no template), or two keys of one table give it
                different columns.
        """
        out: dict[str, str] = {}
        rules = self.routing
        by_location: dict[str, str] = {}  # table location -> the first key giving its columns
        for item in self.route_schemas:
            key, sep, spec = item.partition("=")
            key, spec = key.strip(), spec.strip()
            if not sep or not key or not spec:
                raise ConfigError(f"--route-schema {item!r} is not ROUTEKEY=DDL or "
                                  "ROUTEKEY=@FILE",
                                  hint='e.g. --route-schema orders="id BIGINT, total DOUBLE"')
            if key in out:
                raise ConfigError(f"--route-schema names routing key {key!r} twice")
            flag = f"--route-schema {key}"
            ddl = _read_text(spec[1:], flag) if spec.startswith("@") else spec
            try:
                out[key] = to_ddl(parse_schema(ddl))
            except ConfigError as e:
                raise ConfigError(f"{flag}: {e.message}", hint=e.hint) from None
            if rules is None:
                continue
            found = rules.table_of(key)
            if isinstance(found, Unrouted):
                raise ConfigError(f"{flag}: routing key {key!r} routes to no table: "
                                  f"{found.reason}",
                                  hint="give it a --route, or leave out its --route-schema")
            first = by_location.setdefault(found.location, key)
            if first != key and out[first] != out[key]:
                raise ConfigError(
                    f"--route-schema {first} and {flag} give table {found.location!r} "
                    f"different columns ({out[first]}) and ({out[key]})",
                    hint="give the keys of one table one schema")
        return out

    @property
    def table_root(self) -> str:
        """The table of a stream of one topic (--table).

        Raises:
            ConfigError: a stream of several tables (`routing`, `unrouted_table`).
        """
        self._one_table_only()
        assert self.table is not None
        return self.table

    @property
    def topic_name(self) -> str:
        """The topic of a stream of one topic (--topic).

        Raises:
            ConfigError: a stream of several tables (`routing`, `unrouted_table`).
        """
        self._one_table_only()
        assert self.topic is not None
        return self.topic

    def _one_table_only(self) -> None:
        if self.many_tables:
            raise ConfigError(
                f"This stream has several tables ({self._many_reason}): it has no one --table "
                "or --topic (its tables are routed, its anchor is --unrouted-table)")

    def _check_kerberos(self, connection: KafkaConnection) -> None:
        """Kerberos (GSSAPI) reaches Kafka through Spark's source only; the group commit is
        a Python client's."""
        if self.kafka_source != "jvm":
            connection.check_python_client()
        if self.commit_offsets_to_group is not None:
            raise ConfigError(
                "--commit-offsets-to-group cannot commit to a Kerberized Kafka (sasl.mechanism="
                "GSSAPI): the group's commits use the Python Kafka client, which has no Kerberos",
                hint="leave out --commit-offsets-to-group (the table holds the offsets: "
                     "`ingest status`), or commit through a SCRAM, PLAIN or OAUTHBEARER listener")

    @property
    def storage(self) -> dict[str, Any]:
        """`--storage-option` as fsspec options (parsed; checked when the options are built)."""
        return parse_storage_options(self.storage_options)

    @property
    def connection(self) -> KafkaConnection:
        """The Kafka connection: --bootstrap-servers, --kafka-config, --kafka-option."""
        return KafkaConnection.of(self.bootstrap_servers, options=self.kafka_options,
                                  config_files=self.kafka_config)

    @property
    def metrics_bind_host(self) -> str:
        """The address the metrics server binds: --metrics-host, else every interface."""
        return (self.metrics_host or "0.0.0.0").strip()

    @property
    def schedule(self) -> tuple[float, bool]:
        """(seconds between micro-batches, available-now): `--trigger available-now` is too."""
        interval_s, now = stream_trigger(self.trigger)
        return interval_s, self.available_now or now

    @classmethod
    def from_flags(cls, values: Mapping[str, Any]) -> StreamOptions:
        """Build from flat values keyed by `OptionSpec.name`; missing ones take the default.

        Raises:
            ConfigError: a value is out of its bounds, or the trigger does not parse.
            TypeError: a name is not an option.
        """
        used: set[str] = set()
        options = _build(cls, values, used)
        unknown = sorted(set(values) - used)
        if unknown:
            raise TypeError(f"Not stream options: {', '.join(unknown)}")
        assert isinstance(options, StreamOptions)
        return options


def _location(text: str, flag: str) -> str:
    """A table location normalised (`normalize_location`), or an error naming the flag.

    Raises:
        ConfigError: it cannot be a location.
    """
    try:
        return normalize_location(text)
    except ValueError as e:
        raise ConfigError(f"{flag}: {text!r} is not a table location: {e}") from None


def _read_text(path: str, flag: str) -> str:
    """A small local file the driver reads (a routes file).

    Raises:
        ConfigError: it cannot be read.
    """
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"Cannot read {flag} {path}: {e}") from None


def parse_evolve_types(items: tuple[str, ...]) -> dict[str, str]:
    """`FIELD=TYPE` items as {field: Hive type}; each type checked by the DDL parser.

    Raises:
        ConfigError: an item is not FIELD=TYPE, a field is named twice, or TYPE is not a Hive
            type.
    """
    out: dict[str, str] = {}
    for item in items:
        name, sep, kind = item.partition("=")
        name, kind = name.strip(), kind.strip()
        if not sep or not name or not kind:
            raise ConfigError(f"--evolve-type {item!r} is not FIELD=TYPE",
                              hint="e.g. --evolve-type tags=ARRAY<STRING>")
        if name in out:
            raise ConfigError(f"--evolve-type names field {name!r} twice")
        try:
            column = parse_schema(f"`{name.replace('`', '``')}` {kind}")
        except ConfigError as e:
            raise ConfigError(f"--evolve-type {item!r}: {kind!r} is not a Hive type ({e})",
                              hint="e.g. BIGINT, DOUBLE, STRING, DECIMAL(10,2), "
                                   "ARRAY<STRING>, STRUCT<a:BIGINT>") from None
        # The type as Hive spells it (upper case, canonical), without the column's name.
        out[name] = to_ddl(pa.schema([column.field(0).with_name("c")])).split(" ", 1)[1]
    return out


def check_evolve_types(evolve_types: Mapping[str, str], columns: pa.Schema,
                       partition_columns: tuple[str, ...], *, table: str) -> None:
    """Refuse an --evolve-type naming an existing column with another type: it types only a
    new field's column, so it would be silently ignored. The same type is kept (the column
    an earlier run of the stream added, the stream restarted with the same options).

    Raises:
        ConfigError: the field is a partition column, or a column of another type.
    """
    by_name = {f.name.lower(): f for f in columns}
    for name, kind in evolve_types.items():
        if name.lower() in (c.lower() for c in partition_columns):
            raise ConfigError(f"--evolve-type {name}={kind}: {name} is the partition column of "
                              f"{table}, not a new field", hint="leave it out")
        found = by_name.get(name.lower())
        if found is None:
            continue
        plain = found.with_metadata({k: v for k, v in (found.metadata or {}).items()
                                     if k != COMMENT_KEY}).with_name("c")
        have = to_ddl(pa.schema([plain])).split(" ", 1)[1]
        if have != kind:
            raise ConfigError(
                f"--evolve-type {name}={kind}: {table} already has column {found.name} "
                f"{have}; --evolve-type types only the column of a new field",
                hint=f"leave it out, or give --evolve-type {name}={have}; to widen the "
                     f"column: `ingest alter --change-column \"{found.name} {kind}\"`")


_SERVER = re.compile(r"(?:[A-Za-z][A-Za-z0-9_]*://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})")


def stream_trigger(value: str) -> tuple[float, bool]:
    """Parse a trigger flag: seconds ("60", "60s", "2min") or "available-now".

    Raises:
        ConfigError: the value is neither.
    """
    text = value.strip().lower()
    if text in ("available-now", "availablenow", "once"):
        return 0.0, True
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|sec|seconds?|m|min|minutes?)?", text)
    if not m:
        raise ConfigError(f"Cannot parse trigger {value!r}: expected seconds like 60, 30s or 2min")
    seconds = float(m.group(1)) * (60 if (m.group(2) or "s").startswith("m") else 1)
    return seconds, False


def option_specs(cls: type = StreamOptions) -> list[OptionSpec]:
    """The flags of an options dataclass, in declaration order (option groups flattened)."""
    hints = get_type_hints(cls)
    out: list[OptionSpec] = []
    for f in fields(cls):
        kind = hints[f.name]
        if is_dataclass(kind):
            out += option_specs(kind)  # type: ignore[arg-type]
            continue
        multiple = get_origin(kind) is tuple
        base, choices = (str, ()) if multiple else _base_type(kind)
        meta = f.metadata
        required = f.default is MISSING
        out.append(OptionSpec(
            name=f.name, flag=meta["flag"] or "--" + f.name.replace("_", "-"), type=base,
            required=required, default=None if required else f.default, choices=choices,
            minimum=meta["minimum"], minimum_open=meta["minimum_open"], help=meta["help"],
            metavar=meta["metavar"], multiple=multiple))
    return out


def add_arguments(parser: argparse.ArgumentParser, cls: type = StreamOptions) -> None:
    """Add the options of `cls` to an argparse parser (dest = `OptionSpec.name`)."""
    for spec in option_specs(cls):
        shown = spec.required or spec.default is None or spec.type is bool
        text = (spec.help if shown else f"{spec.help} (default: {spec.default})").replace(
            "%", "%%")
        if spec.type is bool:
            parser.add_argument(spec.flag, dest=spec.name, action="store_true", help=text)
            continue
        if spec.multiple:
            parser.add_argument(spec.flag, dest=spec.name, action=_AppendToTuple, default=(),
                                metavar=spec.metavar, help=spec.help.replace("%", "%%"))
            continue
        parser.add_argument(spec.flag, dest=spec.name, type=_argparse_type(spec),
                            required=spec.required, default=spec.default,
                            choices=spec.choices or None, metavar=spec.metavar, help=text)


class _AppendToTuple(argparse.Action):
    """A repeated flag collected as a tuple (click's `multiple=True`, default `()`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, (*(getattr(namespace, self.dest, None) or ()), values))


def _argparse_type(spec: OptionSpec) -> Callable[[str], Any]:
    convert = spec.type

    def parse(text: str) -> Any:
        value = convert(text)
        if not _within(spec, value):
            raise argparse.ArgumentTypeError(f"must be {_bound(spec)}, got {text}")
        return value

    parse.__name__ = convert.__name__  # argparse names the type in "invalid int value"
    return parse


def _base_type(kind: Any) -> tuple[type, tuple[str, ...]]:
    if get_origin(kind) is Literal:
        return str, tuple(get_args(kind))
    args = [a for a in get_args(kind) if a is not type(None)]
    if args:  # X | None
        return _base_type(args[0])
    return kind, ()


def _within(spec: OptionSpec, value: Any) -> bool:
    if spec.minimum is None or value is None:
        return True
    return bool(value > spec.minimum if spec.minimum_open else value >= spec.minimum)


def _bound(spec: OptionSpec) -> str:
    return f"{'greater than' if spec.minimum_open else 'at least'} {spec.minimum:g}"


def _check(options: object) -> None:
    by_name = {f.name: f for f in fields(options)}  # type: ignore[arg-type]
    for spec in option_specs(type(options)):
        if spec.name not in by_name:  # a nested group checks itself
            continue
        value = getattr(options, spec.name)
        if spec.choices and value not in spec.choices:
            raise ConfigError(f"{spec.flag} must be {' or '.join(spec.choices)}, got {value!r}")
        if not _within(spec, value):
            raise ConfigError(f"{spec.flag} must be {_bound(spec)}, got {value}")


def _build(cls: type, values: Mapping[str, Any], used: set[str]) -> Any:
    hints = get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if is_dataclass(hints[f.name]):
            kwargs[f.name] = _build(hints[f.name], values, used)
        elif f.name in values:
            kwargs[f.name] = values[f.name]
            used.add(f.name)
    return cls(**kwargs)


__all__ = [
    "FileLayout",
    "CdcFormat",
    "LogFormat",
    "Maintenance",
    "OnBadRecord",
    "OnNewField",
    "OnTombstone",
    "OptionSpec",
    "SinkOptions",
    "StreamMode",
    "StreamOptions",
    "TableOptions",
    "ValueFormat",
    "add_arguments",
    "option_specs",
    "check_evolve_types",
    "parse_evolve_types",
    "stream_trigger",
]
