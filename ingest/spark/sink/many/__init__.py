"""The room of `ManyTableSink`: a micro-batch of several topics written into several tables in
one transaction (docs/many-tables.md). The driver's half is `sink` (routing, planning, the
commit) and `_job` (the one Spark job); the executors' half, which Spark's Python workers
import module by module, is `_tasks` (one pass writing every table), `_route_keys` (each
record's routing key, by field) and `_unrouted` (records routed nowhere, to the anchor).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ingest.lazy import lazy_names

if TYPE_CHECKING:
    from ingest.spark.sink.many.sink import ManyBatchReport, ManyTableSink

# Loaded on first use (ingest/lazy.py): a worker importing `_tasks` must not load the driver.
__getattr__ = lazy_names(__name__, {"ManyTableSink": "sink", "ManyBatchReport": "sink"})

__all__ = ["ManyBatchReport", "ManyTableSink"]
