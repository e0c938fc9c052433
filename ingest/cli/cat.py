"""`ingest cat PATH`: the rows a snapshot of an ACID table sees, as JSON lines.

Reads through the Python API (`ingest.open_table`, or the files as on disk when no metastore
lists the table: `ingest.table.locate`).
"""

from __future__ import annotations

from typing import Any

import click

from ingest.cli._options import metastore_option, storage_option
from ingest.cli._output import dumps, rows, warnings_as_they_come
from ingest.table import open_table_or_files


@click.command(
    "cat",
    epilog="""\b
Examples:
  ingest cat warehouse/events --limit 10
  ingest cat warehouse/events/dt=2026-11-21 --row-id --snapshot "default.events:20:15:15,18:16\"""",
)
@click.argument("path")
@storage_option
@metastore_option
@click.option("--snapshot", metavar="DB.T:HWM:MINOPEN:OPEN:ABORTED",
              help="Read as of this valid write-id list (Hive's string form). Default: the "
                   "table's current snapshot from its metastore; without a metastore, every "
                   "write id on disk counts as committed (with a warning).")
@click.option("--columns", metavar="A,B", help="Only these row or partition columns, in order.")
@click.option("--row-id", "row_id", is_flag=True,
              help="Add Hive's ROW__ID as `row__id` {writeid, bucketid, rowid}.")
@click.option("--limit", type=click.IntRange(min=0), metavar="N", help="Stop after N rows.")
@click.option("--json", "as_json", is_flag=True,
              help="Errors as JSON on stderr (rows are always JSON lines).")
def command(path: str, snapshot: str | None, columns: str | None, row_id: bool,
            limit: int | None, as_json: bool, metastore: str | None,
            storage_options: dict[str, Any]) -> None:
    """Print every row a snapshot of an ACID table sees, one JSON object per line.

    Changes no table: the snapshot is registered in the metastore while rows are read, so
    `ingest clean` keeps what they come from, and unregistered at the end. PATH is a table
    root, one partition directory, or an unpartitioned table holding base_/delta_ directories.
    Partition columns come last, as strings. Rows of aborted or open transactions, rows past
    a bucket file's last flush length and deleted rows are left out, as Hive's readers do.
    """
    names = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    table = open_table_or_files(path, metastore, storage_options)
    with warnings_as_they_come():
        for batch in table.to_batches(names, snapshot=snapshot, limit=limit,
                                      with_row_id=row_id):
            for row in rows(batch):
                click.echo(dumps(row))
