"""`ingest delete PATH --where ...`: delete matching rows by writing delete events."""

from __future__ import annotations

import time
from typing import Any

import click

from ingest.cli._options import storage_option
from ingest.cli._output import dumps, progress
from ingest.cli.load import write_options
from ingest.table import open_table_root


@click.command(
    "delete",
    epilog="""\b
Examples:
  ingest delete warehouse/events --where "id = 3" --dry-run
  ingest delete warehouse/events --where "dt = '2026-01-01' AND value IS NULL\"""",
)
@click.argument("path")
@storage_option
@click.option("--where", "where", required=True, metavar="CONDITION",
              help="Rows to delete: comparisons (= <> < <= > >=), IN (...), BETWEEN, "
                   "IS [NOT] NULL, AND/OR/NOT; strings in 'single quotes', "
                   "DATE '2026-01-31', TIMESTAMP '2026-01-31 12:00:00'.")
@click.option("--dry-run", is_flag=True,
              help="Only count the rows that would be deleted; write nothing.")
@write_options
def command(path: str, where: str, dry_run: bool, metastore: str | None, as_json: bool,
            quiet: bool, storage_options: dict[str, Any]) -> None:
    """Delete the rows of the table at PATH that match --where, as one transaction.

    Changes the disk unless --dry-run: writes delete_delta_W_W_0000 directories holding
    the deleted rows' ids (data files are never rewritten; compaction drops the rows later)
    and commits write id W. When no row matches, nothing is written or committed.
    """
    progress(f"{'Counting' if dry_run else 'Deleting'} rows of {path} where {where}",
             quiet=quiet or as_json)
    started = time.monotonic()
    result = open_table_root(path, metastore, storage_options).delete(where, dry_run=dry_run)
    seconds = time.monotonic() - started
    if as_json:
        click.echo(dumps({
            "table": result.table, "location": result.location, "where": result.where,
            "dry_run": result.dry_run, "rows_deleted": result.rows_deleted,
            "write_id": result.write_id, "partitions": list(result.partitions),
            "files": list(result.files), "seconds": round(seconds, 3),
        }))
    elif dry_run:
        click.echo(f"Would delete {result.rows_deleted:,} rows from {result.table} "
                   "(dry run: nothing written).")
    elif result.write_id is None:
        click.echo(f"No rows of {result.table} match {where!r}; nothing written.")
    else:
        click.echo(f"Deleted {result.rows_deleted:,} rows from {result.table} (write id "
                   f"{result.write_id}): {len(result.files)} delete files, {seconds:.1f} s.")
