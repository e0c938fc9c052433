"""Records without the metastore, Spark or Kafka clients: shaping what arrives into rows.

Values (DECIMAL and TIMESTAMP, `values`), input files (`input`), change events and Debezium
(`changes`), Avro schemas as Hive columns (`avro_schema`), splitting rows by partition and
bucket (`split`, shared by the CLI and the sink), Kafka record values decoded by format
(`formats`: `json_values` for JSON, `avro_values` for Avro, by name), new top-level fields and
what --on-new-field makes of them (`fields`, `new_fields`), the schema registry client with
Confluent's framing (`schema_registry`) and a many-topic stream's routing rules (`routing`).
Knows Arrow, JSON and Avro; imports only `ingest.io`, `ingest.orc`, `ingest.acid` and the
shared leaves.
"""

from ingest.records.avro_schema import (
    AvroField,
    avro_fields,
    avro_to_arrow,
    avro_to_ddl,
    hive_type_to_arrow,
    load_avro_schema,
    read_avro_schema_file,
)
from ingest.records.avro_values import (
    AvroFormat,
    AvroOptions,
    avro_format,
    check_writer_schema,
    plain_start_problem,
)
from ingest.records.changes import (
    OP_RANK,
    CdcFormat,
    ChangeBatch,
    check_cdc_format,
    from_debezium,
    from_debezium_arrow,
    from_rows,
    read_debezium_file,
    unwrap_debezium,
)
from ingest.records.fields import FieldSeen, OnNewField, column_type, merge_fields, new_columns
from ingest.records.formats import (
    ValueDecoder,
    decode_values,
    parse_values,
    register_value_format,
    value_formats,
)
from ingest.records.input import InputFormat, ProgressFn, read_input
from ingest.records.json_values import ParsedValues, parse_json_values
from ingest.records.new_fields import (
    NewField,
    NewFieldsByName,
    as_text,
    dead_letters,
    fields_seen,
    from_text,
    holding,
    kept,
    types_from_text,
)
from ingest.records.routing import (
    INTERNAL_TOPIC_PREFIX,
    Routed,
    RoutingRules,
    TableTemplate,
    TopicSelection,
    Unrouted,
    check_topic_name,
    claim_tables,
    clean_table_name,
    location_table_name,
    merge_routes,
    parse_field_path,
    parse_routes,
    parse_routes_file,
    table_name_for,
)
from ingest.records.schema_registry import (
    RegistryRetry,
    SchemaRegistry,
    confluent_frame,
    redact_userinfo,
    registry,
    registry_settings,
    split_frame,
)
from ingest.records.split import partition_path, split_rows
from ingest.records.values import (
    WIDE_DECIMAL,
    describe_decimal_error,
    outside_nanoseconds,
    to_decimal,
    to_nanosecond_timestamp,
    to_timestamp,
)

__all__ = [
    "AvroField",
    "AvroFormat",
    "AvroOptions",
    "CdcFormat",
    "ChangeBatch",
    "FieldSeen",
    "InputFormat",
    "OP_RANK",
    "OnNewField",
    "ParsedValues",
    "ProgressFn",
    "RegistryRetry",
    "Routed",
    "RoutingRules",
    "SchemaRegistry",
    "TableTemplate",
    "INTERNAL_TOPIC_PREFIX",
    "TopicSelection",
    "Unrouted",
    "ValueDecoder",
    "WIDE_DECIMAL",
    "as_text",
    "avro_fields",
    "avro_format",
    "avro_to_arrow",
    "avro_to_ddl",
    "check_cdc_format",
    "check_topic_name",
    "check_writer_schema",
    "claim_tables",
    "clean_table_name",
    "column_type",
    "confluent_frame",
    "dead_letters",
    "decode_values",
    "describe_decimal_error",
    "fields_seen",
    "from_debezium",
    "from_debezium_arrow",
    "from_rows",
    "from_text",
    "hive_type_to_arrow",
    "holding",
    "kept",
    "NewField",
    "NewFieldsByName",
    "load_avro_schema",
    "merge_fields",
    "merge_routes",
    "new_columns",
    "outside_nanoseconds",
    "parse_field_path",
    "parse_json_values",
    "parse_routes",
    "parse_routes_file",
    "parse_values",
    "partition_path",
    "plain_start_problem",
    "read_avro_schema_file",
    "read_debezium_file",
    "read_input",
    "redact_userinfo",
    "register_value_format",
    "registry",
    "registry_settings",
    "split_frame",
    "split_rows",
    "location_table_name",
    "table_name_for",
    "to_decimal",
    "to_nanosecond_timestamp",
    "to_timestamp",
    "types_from_text",
    "unwrap_debezium",
    "value_formats",
]
