"""`ingest status PATH`: partitions, directories, bucket files, compaction backlog,
transactions and (for a streamed table) Kafka progress and lag of a table, rendered from
`ingest.table.status.table_status` and, with `--bootstrap-servers`, `ingest.kafka.kafka_lag`."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from ingest.acid import DirectoryStatus, FileStatus, PartitionStatus
from ingest.cli._options import kafka_connection, metastore_option, storage_option
from ingest.cli._output import dumps, warnings_to_stderr
from ingest.errors import ConfigError
from ingest.table import (
    PartitionBacklog,
    StatusTotals,
    StreamProgress,
    TableStatus,
    open_table_or_files,
)
from ingest.txn import TransactionInfo

if TYPE_CHECKING:
    from ingest.kafka import KafkaConnection, PartitionLag

_KAFKA_TIMEOUT_S = 10.0


def _file_json(f: FileStatus) -> dict[str, Any]:
    return {
        "path": f.path,
        "bucket_id": f.bucket_id,
        "file_length": f.file_length,
        "readable_length": f.readable_length,
        "side_file": f.flush_lengths is not None,
        "flush_lengths": None if f.flush_lengths is None else list(f.flush_lengths),
        "rows": f.rows,
        "error": f.error,
    }


def _directory_json(d: DirectoryStatus) -> dict[str, Any]:
    return {
        "name": d.name,
        "kind": d.kind,
        "min_write_id": d.min_write_id,
        "max_write_id": d.max_write_id,
        "statement_id": d.statement_id,
        "status": d.status,
        "bytes": d.total_bytes,
        "rows": d.rows,
        "files": [_file_json(f) for f in d.files],
    }


def _txn_json(t: TransactionInfo) -> dict[str, Any]:
    return {
        "txn_id": t.txn_id, "write_id": t.write_id, "state": t.state, "agent": t.agent,
        "opened_at": t.opened_at, "heartbeat_at": t.heartbeat_at,
        "finished_at": t.finished_at, "reason": t.reason,
    }


def _totals_json(t: StatusTotals) -> dict[str, int]:
    return {"partitions": t.partitions, "directories": t.directories, "files": t.files,
            "bytes": t.bytes, "rows": t.rows, "chosen_rows": t.chosen_rows}


def _write_ids(d: DirectoryStatus) -> str:
    if d.min_write_id is None:
        return "-"
    text = str(d.min_write_id) if d.min_write_id == d.max_write_id else \
        f"{d.min_write_id}..{d.max_write_id}"
    return text if d.statement_id is None else f"{text} stmt {d.statement_id}"


def _backlog_json(p: PartitionStatus,
                  backlogs: Mapping[str, PartitionBacklog]) -> dict[str, Any] | None:
    if p.path not in backlogs:
        return None
    b, d = backlogs[p.path].backlog, backlogs[p.path].decision
    return {"deltas": b.deltas, "delete_deltas": b.delete_deltas, "base": b.base,
            "base_bytes": b.base_bytes, "delta_bytes": b.delta_bytes,
            "aborted_write_ids": b.aborted_write_ids,
            "initiator": {"kind": d.kind, "reason": d.reason}}


def _backlog_line(pb: PartitionBacklog) -> str:
    b, d = pb.backlog, pb.decision
    base = f"base {b.base} {b.base_bytes:,} bytes" if b.base else (
        f"no base ({b.base_bytes:,} bytes of original files)" if b.base_bytes else "no base")
    return (f"  Compaction backlog: {b.deltas} deltas, {b.delete_deltas} delete deltas, "
            f"{b.delta_bytes:,} bytes; {base}; {b.aborted_write_ids} aborted write ids. "
            f"Initiator: {d.kind or 'nothing'} ({d.reason})")


def _kafka_lag(status: TableStatus, kafka: KafkaConnection | None) -> list[PartitionLag] | None:
    """The broker's latest offsets against the table's committed ones, when asked for.

    Raises:
        ConfigError: the table has no committed Kafka offsets, or a topic is gone.
        IngestError: the broker cannot be reached.
    """
    if kafka is None:
        return None
    progress = status.progress
    if progress is None:
        raise ConfigError(
            f"Cannot show the Kafka lag of {status.table or status.layout.path}: no commit "
            "of it recorded Kafka offsets (it was not written by `ingest stream`)",
            hint="leave out --bootstrap-servers for a table that is not streamed")
    from ingest.kafka import kafka_lag  # Kafka only when asked for

    return kafka_lag(kafka, progress.topics, progress.offsets,
                     timeout_s=_KAFKA_TIMEOUT_S)


def _age_s(progress: StreamProgress) -> float | None:
    at = progress.last_commit_at
    return None if at is None else max(time.time() - at, 0.0)


def _stream_json(progress: StreamProgress | None,
                 lag: Sequence[PartitionLag] | None) -> dict[str, Any] | None:
    if progress is None:
        return None
    if lag is None:
        partitions = [{"topic": t, "partition": p, "committed_offset": o,
                       "latest_offset": None, "lag_records": None}
                      for (t, p), o in progress.offsets.items()]
    else:
        partitions = [{"topic": x.topic, "partition": x.partition,
                       "committed_offset": x.committed_offset, "latest_offset": x.latest_offset,
                       "lag_records": x.lag_records} for x in lag]
    return {"last_write_id": progress.last_write_id,
            "last_commit_at": progress.last_commit_at, "last_commit_age_s": _age_s(progress),
            "lag_records": None if lag is None else sum(x.lag_records for x in lag),
            "partitions": partitions,
            "skipped": [{"topic": t, "partition": p, "from_offset": a, "until_offset": b}
                        for (t, p), spans in progress.skipped.items() for a, b in spans]}


def _render_stream(progress: StreamProgress, lag: Sequence[PartitionLag] | None) -> None:
    at, age = progress.last_commit_at, _age_s(progress)
    when = "" if at is None or age is None else (
        f", {age:,.0f} s ago ({datetime.fromtimestamp(at, UTC):%Y-%m-%d %H:%M:%S} UTC)")
    click.echo(f"Kafka progress: last commit write id {progress.last_write_id}{when}")
    click.echo(f"  {'TOPIC':<30}{'PARTITION':>10}{'COMMITTED':>14}{'LATEST':>14}{'LAG':>12}")
    rows = ([(t, p, o, None, None) for (t, p), o in progress.offsets.items()] if lag is None
            else [(x.topic, x.partition, x.committed_offset, x.latest_offset, x.lag_records)
                  for x in lag])
    for topic, partition, committed, latest, behind in rows:
        click.echo(f"  {topic:<30}{partition:>10}{_number(committed):>14}{_number(latest):>14}"
                   f"{_number(behind):>12}")
    if lag is None:
        click.echo("  (latest offsets and lag: add --bootstrap-servers HOST:PORT)")
    else:
        click.echo(f"Kafka lag: {sum(x.lag_records for x in lag):,} records")
    for (topic, partition), spans in progress.skipped.items():
        click.echo(f"  Skipped (removed from Kafka before they were read): {topic}-{partition} "
                   + ", ".join(f"[{a:,}, {b:,})" for a, b in spans))
    click.echo("")


def _number(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _render_text(status: TableStatus, lag: Sequence[PartitionLag] | None = None) -> None:
    layout, table, backlogs = status.layout, status.table, status.backlogs
    click.echo(f"Table     {layout.path}" + (f"  ({table})" if table else ""))
    click.echo(f"Snapshot  {layout.snapshot}  (from {status.snapshot_source})")
    for p in layout.partitions:
        label = "/".join(f"{k}={'<null>' if v is None else v}" for k, v in p.values)
        click.echo("")
        click.echo(f"Partition {label or '(unpartitioned)'}  {p.path}")
        if not p.directories:
            click.echo("  (no data)")
            continue
        click.echo(f"  {'STATUS':<12}{'DIRECTORY':<40}{'WRITE IDS':<16}{'FILES':>6}"
                   f"{'BYTES':>14}{'ROWS':>12}")
        for d in p.directories:
            click.echo(f"  {d.status:<12}{d.name:<40}{_write_ids(d):<16}{len(d.files):>6}"
                       f"{d.total_bytes:>14,}{d.rows:>12,}")
            for f in d.files:
                name = f.path.rsplit("/", 1)[-1]
                side = ("no side file" if f.flush_lengths is None else
                        f"side file {list(f.flush_lengths)}")
                line = (f"      {name:<22} {f.file_length:>12,} bytes, readable "
                        f"{f.readable_length:,}, {side}, {f.rows:,} rows")
                click.echo(line + (f"  ERROR: {f.error}" if f.error else ""))
        if p.path in backlogs:
            click.echo(_backlog_line(backlogs[p.path]))
    click.echo("")
    if status.progress is not None:
        _render_stream(status.progress, lag)
    for state in ("open", "aborted"):
        rows = [t for t in status.transactions if t.state == state]
        if rows:
            click.echo(f"{state.capitalize()} transactions:")
            for t in rows:
                extra = f", reason: {t.reason}" if t.reason else ""
                click.echo(f"  txn {t.txn_id}  write id {t.write_id}  agent {t.agent or '-'}"
                           f"{extra}")
    totals = status.totals
    click.echo(f"Totals: {totals.partitions} partitions, {totals.directories} directories, "
               f"{totals.files} files, {totals.bytes:,} bytes, {totals.rows:,} events "
               f"({totals.chosen_rows:,} insert events in chosen directories)")


@click.command(
    "status",
    epilog="""\b
Examples:
  ingest status warehouse/events
  ingest status warehouse/events/dt=2026-11-21 --json
  ingest status warehouse/events --bootstrap-servers broker:9092""",
)
@click.argument("path")
@storage_option
@metastore_option
@click.option("--snapshot", metavar="DB.T:HWM:MINOPEN:OPEN:ABORTED",
              help="Judge directories by this valid write-id list. Default: the table's "
                   "snapshot from its metastore, else every write id on disk as committed.")
@kafka_connection(required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
def command(path: str, snapshot: str | None, as_json: bool, metastore: str | None,
            storage_options: dict[str, Any], kafka: KafkaConnection | None) -> None:
    """Show what is on disk under an ACID table and what a snapshot reads of it.

    Read-only; reads file tails and side files, never row data. Lists each partition's
    base/delta directories with their write ids and whether the snapshot chooses them, or
    they are obsolete or aborted; each bucket file's length, readable length (from its
    `_flush_length` side file), side-file entries and rows; each partition's compaction
    backlog (deltas, delete deltas, bytes, aborted write ids) and what `ingest compact
    --auto` would do with it; open and aborted transactions from the metastore; for a
    streamed table, the Kafka offsets its commits recorded and the last commit's age (with
    --bootstrap-servers, also the end a committed-only reader sees, the last stable offset,
    and the lag to it); and totals.
    """
    with warnings_to_stderr():
        status = open_table_or_files(path, metastore, storage_options).status(snapshot)
    lag = _kafka_lag(status, kafka)
    if not as_json:
        _render_text(status, lag)
        return
    layout = status.layout
    click.echo(dumps({
        "path": layout.path,
        "table": status.table,
        "snapshot": str(layout.snapshot),
        "snapshot_source": status.snapshot_source,
        "partitions": [
            {"path": p.path, "values": dict(p.values),
             "directories": [_directory_json(d) for d in p.directories],
             "compaction": _backlog_json(p, status.backlogs)}
            for p in layout.partitions
        ],
        "transactions": [_txn_json(t) for t in status.transactions],
        "stream": _stream_json(status.progress, lag),
        "totals": _totals_json(status.totals),
    }))
