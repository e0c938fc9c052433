"""The stream's columns from its Avro writers' schema when `--schema` is not given.

With `--value-format avro`, `--schema` may be left out: the columns are then the Hive mapping
(`ingest.records.avro_to_ddl`, Hive's AvroSerDe rules) of the `--avro-schema` file, or of the
latest schema of subject `<topic>-value` in the `--schema-registry` (Confluent's default
TopicNameStrategy). Runs on the driver, before anything is created.
"""

from __future__ import annotations

from dataclasses import replace

from ingest.records import avro_to_ddl, read_avro_schema_file, registry, registry_settings
from ingest.spark.options import StreamOptions


def with_avro_columns(options: StreamOptions) -> StreamOptions:
    """`options` with `schema_ddl` filled from the Avro schema when it was not given.

    Raises:
        ConfigError: the schema file cannot be read, the registry has no `<topic>-value`
            subject, or the schema has a field without a Hive type.
        IngestError: the registry cannot be reached.
    """
    if options.schema_ddl is not None:
        return options
    sink = options.sink
    if sink.avro_schema is not None:
        text = read_avro_schema_file(sink.avro_schema, option="--avro-schema")
        ddl = avro_to_ddl(text, what=f"--avro-schema {sink.avro_schema}")
    else:
        assert sink.schema_registry is not None  # StreamOptions checked it
        subject = f"{options.topic_name}-value"
        schema_id, text = registry(sink.schema_registry, registry_settings(
            sink.schema_registry_options)).latest(subject)
        ddl = avro_to_ddl(text, what=f"subject {subject!r} (schema id {schema_id})")
    return replace(options, schema_ddl=ddl)


__all__ = ["with_avro_columns"]
