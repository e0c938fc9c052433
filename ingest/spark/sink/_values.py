"""The parse step's one entry: a plan's record values -> rows, by the stream's value format.

JSON objects go to `_parse.parse_json_values`, Avro records to `_avro.decode_avro_values`;
both return `ParsedValues`, whose `new_by_field` --on-new-field judges (`_tasks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from ingest.spark.sink._avro import decode_avro_values
from ingest.spark.sink._parse import ParsedValues, parse_json_values

if TYPE_CHECKING:
    from ingest.spark.sink._tasks import TaskPlan


def parse_values(plan: TaskPlan, values: pa.Array, *, skip_tombstones: bool) -> ParsedValues:
    """Parse one batch of Kafka values into rows of `plan.parse_schema`.

    Raises:
        IngestError: Avro values, and the schema registry could not be asked.
    """
    if plan.avro is None:
        return parse_json_values(values, plan.parse_schema, skip_tombstones=skip_tombstones)
    return decode_avro_values(values, plan.parse_schema, plan.avro,
                              skip_tombstones=skip_tombstones)


__all__ = ["parse_values"]
