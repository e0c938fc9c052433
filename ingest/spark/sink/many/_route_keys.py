"""The Spark task giving each record of a stream routed by field (`--route-field a.b`) its
routing key, or the reason it has none (docs/many-tables.md, "Routing").

The key is a pure function of the record (`RoutingRules.key_of`), so every attempt and every
task computes the same one; the driver claims the keys' tables and writes each table's rows
(`sink.py`). Runs on executors; never talks to the metastore.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa

from ingest.records import RoutingRules, Unrouted

ROUTE_KEY, ROUTE_ERROR = "__route_key", "__route_error"
ROUTE_DDL = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
             f"{ROUTE_KEY} STRING, {ROUTE_ERROR} STRING")


def route_keys_task(rules: RoutingRules, batches: Iterator[pa.RecordBatch]
                    ) -> Iterator[pa.RecordBatch]:
    """The Kafka columns of each input batch, with the record's routing key (null when it
    routes nowhere) and the reason it routes nowhere (null when it has a key)."""
    for batch in batches:
        keys: list[str | None] = []
        errors: list[str | None] = []
        for topic, value in zip(batch.column("topic").to_pylist(),
                                batch.column("value").to_pylist(), strict=True):
            key = rules.key_of(topic, _decoded(value))
            if isinstance(key, Unrouted):
                keys.append(None)
                errors.append(key.reason)
            else:
                keys.append(key)
                errors.append(None)
        yield pa.record_batch([*batch.columns, pa.array(keys, pa.string()),
                               pa.array(errors, pa.string())],
                              names=[*batch.schema.names, ROUTE_KEY, ROUTE_ERROR])


def _decoded(value: bytes | None) -> object:
    """The JSON value, or None when there is none (a tombstone, not JSON): such a record has
    no route field, and `key_of` says so."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


__all__ = ["ROUTE_DDL", "ROUTE_ERROR", "ROUTE_KEY", "route_keys_task"]
