"""`ingest compact PATH [--major|--minor|--auto] [--partition dt=...]`: compact a table's
partitions."""

from __future__ import annotations

from typing import Any

import click

from ingest.acid.compaction import Backlog
from ingest.cli._options import storage_option
from ingest.cli._output import dumps, progress, progress_bar
from ingest.cli.load import write_options
from ingest.table import open_table_root
from ingest.table.maintain import PartitionCompaction


@click.command(
    "compact",
    epilog="""\b
Examples:
  ingest compact warehouse/events --dry-run
  ingest compact warehouse/events --auto
  ingest compact warehouse/events --minor --partition dt=2026-01-01 --json""",
)
@click.argument("path")
@storage_option
@click.option("--major", is_flag=True,
              help="Write a new base_N per partition: every visible row, deleted and aborted "
                   "rows gone (default).")
@click.option("--minor", is_flag=True,
              help="Fold the deltas into one delta_min_max and the delete deltas into one "
                   "delete_delta_min_max.")
@click.option("--auto", is_flag=True,
              help="Let the initiator choose per partition from the table's thresholds "
                   "(delta count, delta bytes over base bytes, aborted write ids); partitions "
                   "that need nothing are left alone.")
@click.option("--partition", "partitions", multiple=True, metavar="COL=VALUE",
              help="Compact only this partition (a=1/b=2 for several levels); repeatable. "
                   "Default: every partition.")
@click.option("--dry-run", is_flag=True,
              help="Only show what would be read and written; write nothing.")
@write_options
def command(path: str, major: bool, minor: bool, auto: bool, partitions: tuple[str, ...],
            dry_run: bool, metastore: str | None, as_json: bool, quiet: bool,
            storage_options: dict[str, Any]) -> None:
    """Compact the table at PATH as of the compactor's snapshot (below the lowest open
    write id: open transactions' deltas are left alone). Each partition's compaction is
    recorded in the metastore's history (`ingest compactions PATH`).

    Changes the disk unless --dry-run: writes new base or delta directories under a hidden
    name and renames them into place. Inputs are never changed or removed; readers stop
    using them at once and a cleaner may delete them later. Prints one line per partition.
    --major, --minor and --auto exclude each other.
    """
    kind = _kind(major=major, minor=minor, auto=auto)
    progress(f"{'Planning' if dry_run else 'Running'} {kind} compaction of {path}",
             quiet=quiet or as_json)
    table = open_table_root(path, metastore, storage_options)
    with progress_bar("Compacting" if not dry_run else "Planning", unit="partitions",
                      quiet=quiet or as_json) as bar:
        report = table.compact(kind, partitions=list(partitions) or None,  # type: ignore[arg-type]
                               dry_run=dry_run, on_progress=bar)
    if as_json:
        click.echo(dumps({
            "table": report.table, "location": report.location, "kind": report.kind,
            "snapshot": report.snapshot, "dry_run": report.dry_run,
            "partitions": [_as_dict(p) for p in report.partitions],
        }))
        return
    if not report.partitions:
        click.echo(f"{report.table} has no data: nothing to compact.")
    for p in report.partitions:
        click.echo(_line(p, dry_run=dry_run))
    done = sum(1 for p in report.partitions if p.result is not None)
    verb = "would be compacted (dry run: nothing written)" if dry_run else "compacted"
    click.echo(f"{done} of {len(report.partitions)} partitions {verb} "
               f"({report.kind}, snapshot {report.snapshot}).")


def _kind(*, major: bool, minor: bool, auto: bool) -> str:
    """The one kind of compaction asked for (major when none is).

    Raises:
        click.UsageError: more than one was given.
    """
    given = [k for k, on in (("major", major), ("minor", minor), ("auto", auto)) if on]
    if len(given) > 1:
        raise click.UsageError(
            f"{' and '.join('--' + k for k in given)} exclude each other: give one kind of "
            "compaction (default --major)")
    return given[0] if given else "major"


def _as_dict(p: PartitionCompaction) -> dict[str, object]:
    r = p.result
    if r is None:
        return {"partition": p.partition, "compacted": False, "kind": p.kind,
                "reason": p.reason, "backlog": _backlog(p.backlog)}
    return {"partition": p.partition, "compacted": True, "kind": p.kind, "reason": p.reason,
            "compaction_id": p.compaction_id, "backlog": _backlog(p.backlog),
            "high_watermark": r.plan.snapshot.high_watermark,
            "inputs": list(r.plan.inputs), "outputs": list(r.plan.outputs), "rows": r.rows,
            "input_bytes": r.input_bytes, "output_bytes": r.output_bytes,
            "seconds": round(r.seconds, 3)}


def _backlog(b: Backlog | None) -> dict[str, object] | None:
    if b is None:
        return None
    return {"deltas": b.deltas, "delete_deltas": b.delete_deltas, "base": b.base,
            "base_bytes": b.base_bytes, "delta_bytes": b.delta_bytes,
            "aborted_write_ids": b.aborted_write_ids}


def _line(p: PartitionCompaction, *, dry_run: bool) -> str:
    name = p.partition or "(table)"
    why = f" [{p.reason}]" if p.reason and p.reason != "requested" else ""
    r = p.result
    if r is None:
        return f"{name}: nothing to compact{why}"
    outputs = ", ".join(r.plan.outputs)
    if dry_run:
        return (f"{name}: would read {len(r.plan.inputs)} dirs ({r.input_bytes:,} bytes) "
                f"into {outputs}{why}")
    return (f"{name}: {len(r.plan.inputs)} dirs -> {outputs}: {r.rows:,} rows, "
            f"{r.input_bytes:,} -> {r.output_bytes:,} bytes, {r.seconds:.2f} s{why}")
