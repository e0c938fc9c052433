"""What the benchmarks share, none of it a benchmark: sample rows, timing and the one JSON
report line (`common.py`), CPU seconds and peak memory of a process tree (`cpu.py`,
`memory.py`), the sink's write task on records in memory (`parse_write.py`), a local stand-in
server's CPU (`standin.py`), the upsert benchmark's Delta and Iceberg baselines
(`upsert_baselines.py`) and S3 requests counted by kind (`s3_requests`, offered as a module).
"""

from ingest.bench.support import s3_requests
from ingest.bench.support.common import (
    median_seconds,
    median_seconds_interleaved,
    report,
    sample_rows,
)
from ingest.bench.support.cpu import tree_cpu_s
from ingest.bench.support.memory import PeakRss
from ingest.bench.support.parse_write import BATCH_ROWS, kafka_batches, parse_and_write
from ingest.bench.support.standin import endpoint_pid, listening_pid, process_cpu_s
from ingest.bench.support.upsert_baselines import Batch, deltalake_seconds, pyiceberg_seconds

__all__ = [
    "BATCH_ROWS",
    "Batch",
    "PeakRss",
    "deltalake_seconds",
    "endpoint_pid",
    "kafka_batches",
    "listening_pid",
    "median_seconds",
    "median_seconds_interleaved",
    "parse_and_write",
    "process_cpu_s",
    "pyiceberg_seconds",
    "report",
    "s3_requests",
    "sample_rows",
    "tree_cpu_s",
]
