"""`ingest alter PATH --property KEY=VALUE --add-columns ... --change-column ...`: change a
table's properties and columns in its metastore."""

from __future__ import annotations

from typing import Any

import click

from ingest.acid.format import to_ddl
from ingest.cli._options import METASTORE_HELP, parse_properties, storage_option
from ingest.cli._output import dumps
from ingest.table import open_table_root


@click.command(
    "alter",
    epilog="""\b
Examples:
  ingest alter warehouse/events --property orc.compress=SNAPPY
  ingest alter warehouse/events --add-columns "source STRING COMMENT 'origin', n INT"
  ingest alter warehouse/events --change-column "n BIGINT" --json""",
)
@click.argument("path")
@storage_option
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="Table property to set, e.g. orc.compress=SNAPPY (repeatable); checked as "
                   "`ingest create` checks it.")
@click.option("--add-columns", metavar="COLUMNS",
              help="Append nullable columns: \"c TYPE [COMMENT '...'], ...\" (Hive's ADD "
                   "COLUMNS); rows written before read them as null.")
@click.option("--change-column", "change_columns", multiple=True, metavar="'C NEWTYPE'",
              help="Widen column C's type (repeatable), as Hive's ORC schema evolution "
                   "allows: TINYINT->SMALLINT->INT->BIGINT, FLOAT->DOUBLE, DECIMAL(p,s)->"
                   "DECIMAL(q>p,s), CHAR/VARCHAR->STRING. Renames and narrowing are refused.")
@click.option("--replace-columns", "replace_columns", metavar="COLUMNS",
              help="The whole new column list (Hive's REPLACE COLUMNS): only appended "
                   "columns and widened types are accepted; a drop, rename or reorder is "
                   "refused.")
@click.option("--metastore", metavar="URL", help=METASTORE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
def command(path: str, properties: tuple[str, ...], add_columns: str | None,
            change_columns: tuple[str, ...], replace_columns: str | None,
            metastore: str | None, as_json: bool, storage_options: dict[str, Any]) -> None:
    """Set properties or change columns of the table at PATH (Hive's ALTER TABLE).

    Changes the metastore only, never a data file; later loads and micro-batches use the
    new values (e.g. orc.compress picks their codec, new columns are written). Files
    written before read under the new columns: added ones as null, widened values widened.
    On a Hive Metastore the columns change there, partitions included (CASCADE).
    """
    if not (properties or add_columns is not None or change_columns
            or replace_columns is not None):
        raise click.UsageError("give --property, --add-columns, --change-column or "
                               "--replace-columns")
    changes = parse_properties(properties)  # a bad --property: exit 2 before any lookup
    result = open_table_root(path, metastore, storage_options).alter(
        changes, add_columns=add_columns, change_columns=change_columns,
        columns=replace_columns)
    defn = result.table
    if as_json:
        click.echo(dumps({
            "table": defn.name, "location": defn.location, "properties": defn.properties,
            "columns": to_ddl(defn.row_schema),
            "changed": [{"key": k, "old": old, "new": new} for k, old, new in result.changed],
            "columns_changed": [{"kind": c.kind, "column": c.column, "old_type": c.old_type,
                                 "new_type": c.new_type} for c in result.columns_changed],
        }))
        return
    if not result.changed and not result.columns_changed:
        click.echo(f"Table {defn.name} already has those properties and columns; nothing "
                   "changed.")
    for c in result.columns_changed:
        if c.kind == "add":
            click.echo(f"Altered table {defn.name}: added column {c.column} {c.new_type}")
        else:
            click.echo(f"Altered table {defn.name}: column {c.column} {c.old_type} -> "
                       f"{c.new_type}")
    for key, old, new in result.changed:
        click.echo(f"Altered table {defn.name}: {key} "
                   f"{'(unset)' if old is None else old} -> {new}")
