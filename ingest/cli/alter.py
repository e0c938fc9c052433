"""`ingest alter PATH --property KEY=VALUE`: change a table's properties in its metastore."""

from __future__ import annotations

from typing import Any

import click

from ingest.cli._options import METASTORE_HELP, parse_properties, storage_option
from ingest.cli._output import dumps
from ingest.table import open_table_root


@click.command(
    "alter",
    epilog="""\b
Examples:
  ingest alter warehouse/events --property orc.compress=SNAPPY
  ingest alter warehouse/events --property orc.compress=ZLIB --json""",
)
@click.argument("path")
@storage_option
@click.option("--property", "properties", multiple=True, required=True, metavar="KEY=VALUE",
              help="Table property to set, e.g. orc.compress=SNAPPY (repeatable); checked as "
                   "`ingest create` checks it.")
@click.option("--metastore", metavar="URL", help=METASTORE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
def command(path: str, properties: tuple[str, ...], metastore: str | None,
            as_json: bool, storage_options: dict[str, Any]) -> None:
    """Set properties of the table at PATH (Hive's ALTER TABLE ... SET TBLPROPERTIES).

    Changes the metastore only, never a data file; later loads and micro-batches use the
    new values (e.g. orc.compress picks their codec). Other properties are kept.
    """
    changes = parse_properties(properties)  # a bad --property: exit 2 before any lookup
    result = open_table_root(path, metastore, storage_options).alter(changes)
    defn = result.table
    if as_json:
        click.echo(dumps({
            "table": defn.name, "location": defn.location, "properties": defn.properties,
            "changed": [{"key": k, "old": old, "new": new} for k, old, new in result.changed],
        }))
        return
    if not result.changed:
        click.echo(f"Table {defn.name} already has those properties; nothing changed.")
    for key, old, new in result.changed:
        click.echo(f"Altered table {defn.name}: {key} "
                   f"{'(unset)' if old is None else old} -> {new}")
