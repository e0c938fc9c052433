"""`ingest upsert PATH --input FILE --key COL`: keyed upserts or Debezium changes, one write id."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import click

from ingest.cli._options import storage_option
from ingest.cli._output import dumps, progress
from ingest.cli.load import write_options
from ingest.table import open_table_root
from ingest.table.write import upsert_file


@click.command(
    "upsert",
    epilog="""\b
Examples:
  ingest upsert warehouse/users --input users.jsonl --key id
  ingest upsert warehouse/users --input cdc.jsonl --key id --cdc-format debezium \\
      --order-by updated_at""",
)
@click.argument("path")
@storage_option
@click.option("--input", "input_path", required=True, metavar="FILE",
              help="Rows (JSON Lines, CSV or Parquet), each the new row of its key; with "
                   "--cdc-format, change events, one JSON object a line.")
@click.option("--key", "key", required=True, metavar="COL[,COL]",
              help="The key columns. The table must be bucketed by them (CLUSTERED BY a "
                   "subset of the key) and its partition columns must be among them.")
@click.option("--cdc-format", type=click.Choice(["debezium"]),
              help="Read change events: Debezium envelopes (op c/r/u upsert 'after', d "
                   "deletes the row 'before' names), or Kafka records {\"key\", \"value\"} "
                   "whose null value (a tombstone) deletes the key.")
@click.option("--order-by", "order_by", metavar="COL",
              help="A row column ordering a key's events (ties: c < r < u < d); an event "
                   "older than the stored row's value is skipped.  [default: input order]")
@click.option("--format", "format_", type=click.Choice(["jsonl", "csv", "parquet"]),
              help="Input format without --cdc-format  [default: from the file extension]")
@click.option("--missing-columns", type=click.Choice(["error", "null"]), default="error",
              show_default=True,
              help="A table column the rows lack altogether: refuse (error) or write NULL "
                   "(null). Change events always take a missing column as NULL.")
@write_options
def command(path: str, input_path: str, key: str, cdc_format: str | None,
            order_by: str | None, format_: str | None, missing_columns: str,
            metastore: str | None, as_json: bool, quiet: bool,
            storage_options: dict[str, Any]) -> None:
    """Make each row of FILE the current row of its key in the table at PATH, as one
    transaction.

    Changes the disk: for write id W, writes delete_delta_W_W_0000 directories naming the
    replaced and deleted rows' ROW__IDs and delta_W_W_0000 directories with the new rows
    (Hive's split-update), and commits them together. Within FILE the last event per key
    wins; an update that changes nothing writes nothing; when nothing changes, nothing is
    committed. Bad input (a null key, an envelope without op) is refused naming its line
    before anything is written.
    """
    columns = [c.strip() for c in key.split(",") if c.strip()]
    progress(f"Upserting {input_path} into {path} by key {', '.join(columns)}",
             quiet=quiet or as_json)
    started = time.monotonic()
    table = open_table_root(path, metastore, storage_options)
    result = upsert_file(table, input_path, key=columns,
                         cdc_format=cdc_format,  # type: ignore[arg-type]
                         order_by=order_by, format=format_,  # type: ignore[arg-type]
                         missing_columns=missing_columns)  # type: ignore[arg-type]
    seconds = time.monotonic() - started
    counts = result.counts
    if as_json:
        click.echo(dumps({
            "table": result.table, "location": result.location, "input": input_path,
            "key": columns, "write_id": result.write_id, **asdict(counts),
            "partitions": list(result.partitions), "files": list(result.files),
            "seconds": round(seconds, 3),
        }))
        return
    summary = (f"{counts.inserted:,} inserted, {counts.updated:,} updated, "
               f"{counts.deleted:,} deleted, {counts.unchanged:,} unchanged, "
               f"{counts.stale:,} stale, {counts.absent:,} deletes of absent keys")
    if result.write_id is None:
        click.echo(f"{counts.events:,} events for {counts.keys:,} keys changed nothing in "
                   f"{result.table} ({summary}); nothing written.")
    else:
        click.echo(f"Upserted {counts.events:,} events for {counts.keys:,} keys into "
                   f"{result.table} (write id {result.write_id}): {summary}; "
                   f"{len(result.files)} files, {seconds:.1f} s.")
