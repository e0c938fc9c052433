"""`ingest compactions PATH`: a table's compaction history, like Hive's SHOW COMPACTIONS."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from typing import Any

import click

from ingest.cli._options import METASTORE_HELP, storage_option
from ingest.cli._output import dumps
from ingest.table import open_table_root
from ingest.table.maintain import compaction_history, shown_state
from ingest.txn import CompactionInfo


@click.command(
    "compactions",
    epilog="""\b
Examples:
  ingest compactions warehouse/events
  ingest compactions warehouse/events --json""",
)
@click.argument("path")
@storage_option
@click.option("--metastore", metavar="URL", help=METASTORE_HELP)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
def command(path: str, metastore: str | None, as_json: bool,
            storage_options: dict[str, Any]) -> None:
    """Show the compaction history of the table at PATH, oldest first.

    Read-only (the metastore is opened read-only). One line per compaction of one partition:
    its kind; its state ('working', 'ready for cleaning', 'succeeded', 'failed', or
    'attempted' when its compactor died while working); start time (UTC); duration; rows
    written; input and output directories.
    """
    # The history is the metastore's: no file is read.
    history = compaction_history(open_table_root(path, metastore, storage_options))
    now = time.time()
    if as_json:
        click.echo(dumps({"table": history.table, "location": history.location,
                          "compactions": [_as_dict(c, now) for c in history.compactions]}))
        return
    if not history.compactions:
        click.echo(f"{history.table}: no compactions recorded.")
        return
    click.echo(f"{'ID':>5}  {'PARTITION':<24}{'KIND':<7}{'STATE':<20}{'START (UTC)':<21}"
               f"{'DURATION':>10}{'ROWS':>12}")
    for c in history.compactions:
        rows = "-" if c.rows is None else f"{c.rows:,}"
        click.echo(f"{c.compaction_id:>5}  {c.partition or '(table)':<24}{c.kind:<7}"
                   f"{shown_state(c):<20}{_time(c.started_at):<21}"
                   f"{_duration(c, now):>10}{rows:>12}")
        if c.inputs:
            click.echo(f"       in:  {_names(c.inputs)}")
        if c.outputs:
            click.echo(f"       out: {_names(c.outputs)}")
        if c.error:
            click.echo(f"       error: {c.error}")
    click.echo(f"{len(history.compactions)} compactions of {history.table}.")


def _as_dict(c: CompactionInfo, now: float) -> dict[str, object]:
    return {"compaction_id": c.compaction_id, "partition": c.partition, "kind": c.kind,
            "state": shown_state(c), "recorded_state": c.state, "txn_id": c.txn_id,
            "txn_state": c.txn_state, "agent": c.agent,
            "highest_write_id": c.highest_write_id, "started_at": c.started_at,
            "finished_at": c.finished_at, "cleaned_at": c.cleaned_at,
            "duration_s": _seconds(c, now), "rows": c.rows, "inputs": list(c.inputs),
            "outputs": list(c.outputs), "error": c.error}


def _seconds(c: CompactionInfo, now: float) -> float:
    """Until it finished, or until now while it works."""
    return round((c.finished_at if c.finished_at is not None else now) - c.started_at, 3)


def _duration(c: CompactionInfo, now: float) -> str:
    text = f"{_seconds(c, now):.2f} s"
    return text if c.finished_at is not None else f"{text}+"


def _time(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _names(names: Sequence[str], shown: int = 4) -> str:
    head = ", ".join(names[:shown])
    return head if len(names) <= shown else f"{head}, ... ({len(names)} in all)"
