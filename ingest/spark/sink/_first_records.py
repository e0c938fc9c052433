"""A plain-Avro stream's first records, decoded on the driver before anything is written.

Plain Avro binary carries no schema id: an --avro-schema that is not the writers' schema
(other fields, another order of fields of other types) makes every record bad, and the
stream would dead-letter the whole topic with exit 0. So the first micro-batch that holds
records, while the table holds none of the stream's offsets yet, has a few of its records
decoded here; when not one of them decodes the stream stops before its first transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from ingest.errors import ConfigError
from ingest.records import AvroFormat, plain_start_problem

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# Enough records that one bad producer's record among good ones does not stop the stream.
SAMPLE_RECORDS = 20


def check_plain_avro_start(batch_df: DataFrame, avro: AvroFormat | None, schema: pa.Schema,
                           table: str) -> bool:
    """Decode some of the micro-batch's records (a partition's first ones) by the
    --avro-schema against `schema` (the table's row columns: a writer field the table lacks
    is a new field, not a failure); True once checked (it held records), False when it held
    none (check the next one).

    Raises:
        ConfigError: not one of them decodes: the --avro-schema is not the writers' schema.
    """
    if avro is None or avro.writer_schema is None:  # not Avro, or framed with a schema id
        return True
    rows = batch_df.select("value", "topic", "partition", "offset").limit(
        SAMPLE_RECORDS).collect()
    if not rows:
        return False
    values = pa.array([r["value"] for r in rows], pa.binary())
    problem = plain_start_problem(values, schema, avro)
    if problem is None:
        return True
    first = rows[0]
    raise ConfigError(
        f"Refusing to stream into {table}: its values are plain Avro, and from "
        f"{first['topic']}-{first['partition']} offset {first['offset']} on {problem}; the "
        "--avro-schema is not the schema the producers wrote with (plain Avro names no "
        "writer schema, so the reader's must be exactly the writers'). Nothing was written",
        hint="give the producers' exact schema (--avro-schema FILE), or have them frame "
             "values with a schema registry (--schema-registry URL) or Avro single-object "
             "encoding")
