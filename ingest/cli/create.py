"""`ingest create PATH --schema ...`: create a transactional table and register it."""

from __future__ import annotations

from typing import Any

import click

from ingest.acid.format import MAX_BUCKET_COUNT, to_ddl
from ingest.cli._options import parse_properties, storage_option
from ingest.cli._output import dumps
from ingest.table import create_table
from ingest.txn import default_metastore_url, redact_url


@click.command(
    "create",
    epilog="""\b
Examples:
  ingest create warehouse/events --schema "id BIGINT, value STRING, dt STRING" --partitioned-by dt
  ingest create warehouse/users --schema "id BIGINT, name STRING" --buckets 4 --bucketed-by id""",
)
@click.argument("path")
@storage_option
@click.option("--schema", "schema_ddl", required=True, metavar="COLUMNS",
              help='Hive column list, e.g. "id BIGINT, value STRING, dt STRING".')
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
def command(path: str, schema_ddl: str, partitioned_by: tuple[str, ...], buckets: int,
            bucketed_by: tuple[str, ...], name: str | None, properties: tuple[str, ...],
            metastore: str | None, adopt: bool, as_json: bool,
            storage_options: dict[str, Any]) -> None:
    """Create an empty Hive ACID (transactional ORC) table at PATH.

    Changes the disk: creates the PATH directory and records the table in the metastore
    (creating the metastore file if needed). Writes no data files. Refuses a PATH that
    already holds ACID data unless --adopt is given.
    """
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
