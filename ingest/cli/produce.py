"""`ingest produce`: write sample events or a JSON Lines file to a Kafka topic."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from ingest.cli._options import kafka_connection
from ingest.errors import ConfigError
from ingest.kafka import KafkaConnection, produce_events, sample_events


def _jsonl_lines(path: Path) -> Iterator[bytes]:
    """Each non-blank line of a JSON Lines file, checked to be JSON, as its original bytes."""
    with path.open("rb") as f:
        for number, line in enumerate(f, start=1):
            line = line.strip()
            if not line:
                continue
            try:
                json.loads(line)
            except ValueError as e:
                raise ConfigError(f"Line {number} of {path} is not JSON: {e}",
                                  hint="--file takes JSON Lines: one JSON document per line") from e
            yield line


@click.command(
    "produce",
    epilog="""\b
Examples:
  ingest produce --bootstrap-servers 127.0.0.1:9092 --topic events --sample 1000 --partitions 3
  ingest produce --bootstrap-servers 127.0.0.1:9092 --topic events --file events.jsonl --json
  ingest produce --bootstrap-servers broker:9094 --kafka-config client.properties \\
      --topic events --sample 10""",
)
@kafka_connection(required=True)
@click.option("--topic", required=True, help="Topic to write to.")
@click.option("--sample", type=click.IntRange(min=0), metavar="N",
              help="Write N deterministic sample events (id, value, ts, dt).")
@click.option("--file", "file_", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              metavar="PATH.jsonl", help="Write each line of a JSON Lines file as one record.")
@click.option("--start-id", type=int, default=0, show_default=True,
              help="First sample id (with --sample).")
@click.option("--seed", type=int, default=0, show_default=True, help="Sample seed (with --sample).")
@click.option("--key-field", metavar="FIELD",
              help="Use this JSON field of each event as the record key.")
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True,
              help="Partitions of the topic if it has to be created.")
@click.option("--timeout-s", type=click.FloatRange(min=0, min_open=True), default=30.0,
              show_default=True, help="Bound on reaching the broker and on each delivery.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No progress or summary on stderr.")
def command(kafka: KafkaConnection, topic: str, sample: int | None, file_: Path | None,
            start_id: int, seed: int, key_field: str | None, partitions: int, timeout_s: float,
            as_json: bool, quiet: bool) -> None:
    """Write sample events or a JSON Lines file to a Kafka topic.

    Creates the topic if it does not exist; changes nothing on disk.
    """
    if (sample is None) == (file_ is None):
        raise click.UsageError("Give exactly one of --sample N or --file PATH.jsonl.")
    if file_ is not None:
        for _ in _jsonl_lines(file_):  # a bad line is a usage error before anything is sent
            pass
    events: Iterator[bytes | dict[str, Any]] = (
        sample_events(sample, start_id=start_id, seed=seed) if sample is not None
        else _jsonl_lines(file_) if file_ is not None else iter(()))

    def key_fn(event: bytes | dict[str, Any]) -> str | None:
        record = event if isinstance(event, dict) else json.loads(event)
        value = record.get(key_field) if isinstance(record, dict) and key_field else None
        return None if value is None else str(value)

    def progress(records: int) -> None:
        if not quiet:
            click.echo(f"produced {records:,} records to {topic}", err=True)

    started = time.monotonic()
    records = produce_events(kafka, topic, events=events,
                             key_fn=key_fn if key_field else None, partitions=partitions,
                             timeout_s=timeout_s, on_progress=progress)
    seconds = time.monotonic() - started
    if as_json:
        click.echo(json.dumps({"topic": topic, "records": records,
                               "bootstrap_servers": kafka.bootstrap_servers,
                               "seconds": round(seconds, 3)}))
    if not quiet:
        click.echo(f"Produced {records:,} records to topic {topic} on {kafka.bootstrap_servers} "
                   f"in {seconds:.1f} s.", err=True)
