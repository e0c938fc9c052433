"""`ingest dump FILE`: the events of one ACID bucket file, like `hive --orcfiledump -d`."""

from __future__ import annotations

from typing import Any

import click

from ingest.acid import inspect_bucket_file, read_events
from ingest.cli._options import storage_option
from ingest.cli._output import dumps, rows
from ingest.io import storage


@click.command("dump")
@click.argument("file")
@storage_option
@click.option("--meta", is_flag=True, help="Print stripes, user metadata and flush lengths "
              "instead of the events.")
@click.option("--json", "as_json", is_flag=True, help="Errors as JSON on stderr (output is "
              "always JSON).")
def command(file: str, meta: bool, as_json: bool, storage_options: dict[str, Any]) -> None:
    """Print every event of one ACID bucket file as a JSON line.

    Read-only. Honours the `_flush_length` side file: only events below the last complete
    flush length are shown, as Hive's readers see them.

    \b
    Examples:
      ingest dump warehouse/events/delta_0000001_0000001_0000/bucket_00000
      ingest dump --meta warehouse/events/delta_0000002_0000004/bucket_00000
    """
    fs = storage.url_to_fs(file, storage_options)[0]
    info = inspect_bucket_file(file, fs=fs)
    if meta:
        tail = info.tail
        click.echo(dumps({
            "path": info.path,
            "file_length": info.file_length,
            "readable_length": info.readable_length,
            "flush_lengths": None if info.flush_lengths is None else list(info.flush_lengths),
            "rows": info.number_of_rows,
            "compression": tail.compression if tail else None,
            "stripes": [
                {"offset": s.offset, "length": s.length, "rows": s.number_of_rows}
                for s in (tail.stripes if tail else [])
            ],
            "user_metadata": {k: v.decode("utf-8", "replace")
                              for k, v in (tail.user_metadata if tail else {}).items()},
        }))
        return
    for batch in read_events(info.path, fs=fs, length=info.readable_length):
        for row in rows(batch):
            click.echo(dumps(row))
