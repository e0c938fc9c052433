"""The dead-letter table next to a streaming target: where records that do not parse go.

`<table>__dead_letter` at `<table location>__dead_letter`, an unpartitioned ACID table with the
raw record and the reason (docs/invariants.md, 6). Its rows commit in the same transaction as the
good rows of their micro-batch. Knows table names and the schema; the sink writes the rows.
"""

from __future__ import annotations

import pyarrow as pa

from ingest.spark.sink._tasks import DEAD_LETTER_SCHEMA

SUFFIX = "__dead_letter"
DEAD_LETTER_DDL = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                   "error STRING")


def dead_letter_location(table_location: str) -> str:
    """`<table location>__dead_letter`, beside the target (same metastore)."""
    return table_location.rstrip("/") + SUFFIX


def dead_letter_name(table_name: str) -> str:
    """`<db.table>__dead_letter`."""
    return table_name + SUFFIX


def dead_letter_schema() -> pa.Schema:
    """key binary, value binary, topic string, partition int, offset bigint, error string."""
    return DEAD_LETTER_SCHEMA


__all__ = [
    "DEAD_LETTER_DDL",
    "SUFFIX",
    "dead_letter_location",
    "dead_letter_name",
    "dead_letter_schema",
]
