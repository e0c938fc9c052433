"""`ingest create PATH --schema ...`: create a transactional table and register it."""

from __future__ import annotations

from typing import Any

import click

from ingest.acid.format import MAX_BUCKET_COUNT, to_ddl
from ingest.cli._options import parse_properties, storage_option
from ingest.cli._output import dumps
from ingest.errors import ConfigError
from ingest.records import avro_to_ddl, read_avro_schema_file, registry, registry_settings
from ingest.table.write import create_table
from ingest.txn import default_metastore_url, redact_url


@click.command(
    "create",
    epilog="""\b
Examples:
  ingest create warehouse/events --schema "id BIGINT, value STRING, dt STRING" --partitioned-by dt
  ingest create warehouse/users --schema "id BIGINT, name STRING" --buckets 4 --bucketed-by id
  ingest create warehouse/events --schema-from-avro events.avsc
  ingest create warehouse/events --schema-from-avro events-value --schema-registry http://registry:8081""",
)
@click.argument("path")
@storage_option
@click.option("--schema", "schema_ddl", metavar="COLUMNS",
              help='Hive column list, e.g. "id BIGINT, value STRING, dt STRING".')
@click.option("--schema-from-avro", "avro_source", metavar="FILE|SUBJECT",
              help="Take the columns from an Avro record schema instead of --schema, mapped "
                   "as Hive's AvroSerDe does: a .avsc FILE, or with --schema-registry the "
                   "latest version of SUBJECT (e.g. events-value).")
@click.option("--schema-registry", metavar="URL",
              help="Confluent-compatible schema registry for --schema-from-avro SUBJECT, "
                   "e.g. http://registry:8081.")
@click.option("--schema-registry-option", "registry_options", multiple=True, metavar="KEY=VALUE",
              help="Schema registry client setting (repeatable): "
                   "basic.auth.user.info=USER:PASSWORD, ssl.ca.location=ca.pem, "
                   "ssl.certificate.location, ssl.key.location; never echoed.")
@click.option("--partitioned-by", multiple=True, metavar="COLUMN",
              help="Partition column, outermost first (repeat or comma-separate); values are "
                   "strings.")
@click.option("--buckets", type=click.IntRange(0, MAX_BUCKET_COUNT), default=0, show_default=True,
              help="Number of buckets (0: unbucketed); needs --bucketed-by.")
@click.option("--bucketed-by", multiple=True, metavar="COLUMN",
              help="Column hashed into buckets (repeat or comma-separate).")
@click.option("--name", metavar="[DB.]TABLE",
              help="Table name  [default: the directory name, in database default]")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="Table property, e.g. orc.compress=ZLIB (repeatable); change it later "
                   "with `ingest alter`.")
@click.option("--metastore", metavar="URL",
              help="Metastore to register in: sqlite:///abs/path.sqlite or "
                   "postgresql://user@host/db (password from PGPASSWORD, ~/.pgpass or the URL)"
                   "  [default: $INGEST_METASTORE, else _ingest_metastore.sqlite beside the "
                   "table]")
@click.option("--adopt", is_flag=True,
              help="PATH already holds ACID data (base_/delta_ directories) that no metastore "
                   "lists: make it the new table's committed rows; write ids continue above "
                   "the highest one on disk. Without it such a PATH is refused.")
@click.option("--json", "as_json", is_flag=True, help="Print the table as one JSON document.")
def command(path: str, schema_ddl: str | None, avro_source: str | None,
            schema_registry: str | None, registry_options: tuple[str, ...],
            partitioned_by: tuple[str, ...], buckets: int,
            bucketed_by: tuple[str, ...], name: str | None, properties: tuple[str, ...],
            metastore: str | None, adopt: bool, as_json: bool,
            storage_options: dict[str, Any]) -> None:
    """Create an empty Hive ACID (transactional ORC) table at PATH.

    Changes the disk: creates the PATH directory and records the table in the metastore
    (creating the metastore file if needed). Writes no data files. Refuses a PATH that
    already holds ACID data unless --adopt is given.
    """
    schema_ddl = _columns(schema_ddl, avro_source, schema_registry, registry_options)
    defn = create_table(path, schema_ddl, name=name, partitioned_by=partitioned_by,
                        buckets=buckets, bucketed_by=bucketed_by,
                        properties=parse_properties(properties), metastore=metastore, adopt=adopt,
                        storage_options=storage_options)
    metastore_url = redact_url(metastore or default_metastore_url(defn.location))
    if as_json:
        click.echo(dumps({
            "table": defn.name, "location": defn.location,
            "columns": to_ddl(defn.row_schema),
            "partitioned_by": list(defn.partition_columns),
            "buckets": defn.bucket_count, "bucketed_by": list(defn.bucket_columns),
            "properties": defn.properties, "metastore": metastore_url,
        }))
        return
    layout = []
    if defn.partition_columns:
        layout.append(f"partitioned by {', '.join(defn.partition_columns)}")
    if defn.bucket_count:
        layout.append(f"{defn.bucket_count} buckets on {', '.join(defn.bucket_columns)}")
    click.echo(f"Created table {defn.name} at {defn.location} ({to_ddl(defn.row_schema)}"
               + "".join(f"; {x}" for x in layout) + f"); metastore {metastore_url}")


def _columns(schema_ddl: str | None, avro_source: str | None,
             schema_registry: str | None, registry_options: tuple[str, ...] = ()) -> str:
    """The column list: --schema, or the Avro schema of --schema-from-avro as Hive columns."""
    if (schema_ddl is None) == (avro_source is None):
        raise ConfigError("Give the columns with exactly one of --schema and --schema-from-avro"
                          + (", not both" if schema_ddl else ""),
                          hint='e.g. --schema "id BIGINT, value STRING" or '
                               "--schema-from-avro events.avsc")
    if avro_source is None:
        if schema_registry is not None:
            raise ConfigError("--schema-registry applies to --schema-from-avro SUBJECT")
        assert schema_ddl is not None
        return schema_ddl
    if schema_registry is not None:
        schema_id, text = registry(schema_registry,
                                   registry_settings(registry_options)).latest(avro_source)
        return avro_to_ddl(text, what=f"subject {avro_source!r} (schema id {schema_id})")
    text = read_avro_schema_file(
        avro_source, hint="give a .avsc file, or a subject with --schema-registry URL")
    return avro_to_ddl(text, what=avro_source)
