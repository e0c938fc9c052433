"""Acceptance: 50+ micro-batches while the stream's maintenance compacts and cleans (retention
0: obsolete directories go as soon as no registered reader needs them) over and over, and a
reader process, registered while it reads, reads before, between and during them.

Every read must return exactly the rows of the write ids its snapshot holds committed: none
missing, none twice. Which write id committed each row comes from the final table's ROW__IDs
(compaction keeps them), checked against the sink's offset ranges in the metastore.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import wait_until

from ingest.acid import ValidWriteIdList
from ingest.acid.read.reader import read_table
from ingest.errors import TableNotFoundError
from ingest.kafka.produce import produce_events, sample_events
from ingest.spark.job import RunningStream, run_stream
from ingest.table import open_table
from ingest.table.core._definition import RETENTION_PROPERTY
from ingest.table.write import alter_table
from ingest.txn import Metastore, default_metastore_url

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")]

ROOT = Path(__file__).resolve().parents[2]
RECORDS, PER_BATCH = 1_500, 30

# The reader: a process of its own, reading the table through the metastore's snapshot in a
# loop until told to stop; one JSON line per read.
READER = """
import json, os, sys, time
from ingest.acid.read.reader import read_table
from ingest.errors import IngestError
from ingest.txn import Metastore
url, location, out, stop = sys.argv[1:]
with open(out, "w") as f:
    while not os.path.exists(stop):
        try:
            store = Metastore.open_for_reading(url)
            row_schema = store.get_table(location).row_schema
        except (IngestError, OSError):  # the stream has not created the table yet
            time.sleep(0.05)
            continue
        with store, store.reading(location, agent="test-reader") as snapshot:
            try:
                ids = read_table(location, snapshot, columns=["id"],
                                 row_schema=row_schema).column("id").to_pylist()
                line = {"snapshot": snapshot.to_hive_string(), "ids": ids}
            except Exception as e:
                line = {"snapshot": snapshot.to_hive_string(),
                        "error": f"{type(e).__name__}: {e}"}
        f.write(json.dumps(line) + "\\n")
        f.flush()
        time.sleep(0.2)  # the reader must not take a core from the stream on 2 cores
"""


def _lines(path: Path) -> int:
    """Whole lines the reader has written so far (0 before its file exists)."""
    return path.read_text().count("\n") if path.exists() else 0


def retention_zero(location: str) -> None:
    """Set the cleaner's retention to 0 once the stream has created the table."""
    deadline = time.monotonic() + 120
    while True:
        try:
            alter_table(open_table(location), properties={RETENTION_PROPERTY: "0"})
            return
        except TableNotFoundError:
            assert time.monotonic() < deadline, "the stream did not create its table"
            time.sleep(0.1)


def test_reads_see_exactly_the_committed_rows_while_compaction_runs(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    produce_events(kafka_broker, topic, events=sample_events(RECORDS),
                   key_fn=lambda e: str(e["id"]), partitions=3)  # type: ignore[index]
    location = str(warehouse / "events")
    url = default_metastore_url(location)
    reads_path, stop = warehouse / "reads.jsonl", warehouse / "stop-reader"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, url, location, str(reads_path), str(stop)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True)
    try:
        running = run_stream(
            spark, bootstrap_servers=kafka_broker, topic=topic, table=location,
            schema_ddl="id BIGINT, value STRING, ts TIMESTAMP",
            partition_by="cast(id % 2 as string)", checkpoint=str(warehouse / "checkpoint"),
            available_now=True, max_offsets_per_trigger=PER_BATCH, kafka_timeout_s=10,
            compact="auto", clean="auto", maintenance_interval_s=0,
            wait=False)
        assert isinstance(running, RunningStream) and running.maintenance is not None
        retention_zero(location)
        try:
            ended = running.await_termination(timeout_s=300)
        finally:
            summary = running.stop()
        assert ended, f"the stream did not finish in 300 s ({len(summary.reports)} batches)"
        stats = running.maintenance.stats
        # Two more reads: the second began after the stream stopped, so it reads the final
        # state (checked below with the others). A reader that died shows its error below.
        reads_so_far = _lines(reads_path)
        wait_until("two reads after the stream stopped",
                   lambda: reader.poll() is not None or _lines(reads_path) >= reads_so_far + 2)
    finally:
        stop.touch()
        _, reader_errors = reader.communicate(timeout=60)
    assert reader.returncode == 0, reader_errors[-2000:]

    print(f"stream: {summary.batches} micro-batches in {summary.seconds:.1f} s; {stats}")
    assert summary.batches >= 50 and summary.rows == RECORDS
    assert stats.errors == 0, stats.last_error
    assert stats.compactions >= 4  # each of the two partitions, repeatedly
    assert stats.cleans >= 4
    # Without the cleaner each micro-batch would leave a delta per partition on disk.
    on_disk = [d for d in Path(location).glob("*/*") if d.name.startswith(("base_", "delta_"))]
    assert len(on_disk) < summary.batches, sorted(d.name for d in on_disk)

    # Which write id committed each row: the final table's ROW__IDs (kept by compaction).
    with Metastore.open(url) as store:
        final_snapshot = store.snapshot(location)
        ranges = store.offset_ranges(location)
    final = read_table(location, final_snapshot, columns=["id"], with_row_id=True)
    ids = final.column("id").to_pylist()
    assert sorted(ids) == list(range(RECORDS))
    write_id_of = dict(zip(ids, final.column("row__id").combine_chunks().field("writeid")
                           .to_pylist(), strict=True))
    # The sink's progress agrees: each write id's offsets hold as many records as its rows.
    records_of: dict[int, int] = {}
    for write_id, r in ranges:
        records_of[write_id] = records_of.get(write_id, 0) + r.until_offset - r.from_offset
    rows_of: dict[int, int] = {}
    for w in write_id_of.values():
        rows_of[w] = rows_of.get(w, 0) + 1
    assert rows_of == records_of

    reads = [json.loads(line) for line in reads_path.read_text().splitlines()]
    assert not [r for r in reads if "error" in r]
    assert len(reads) >= 20
    assert sorted(reads[-1]["ids"]) == list(range(RECORDS)), "the last read, of the final state"
    partial = 0
    for read in reads:
        snapshot = ValidWriteIdList.from_hive_string(read["snapshot"])
        expected = sorted(i for i, w in write_id_of.items() if snapshot.is_valid(w))
        assert sorted(read["ids"]) == expected, f"read at {read['snapshot']}"
        partial += 0 < len(expected) < RECORDS
    assert partial >= 10  # reads happened while the stream and its compactions went on
