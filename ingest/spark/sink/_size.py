"""How many Kafka records a micro-batch holds, known before a task reads one.

foreachBatch hands the sink a micro-batch already planned down to its input partitions (an
RDD whose root is Spark's `DataSourceRDD`): one Kafka offset range each, whichever source read
it. ingest's `ingest-kafka` source ships its ranges as pickled `KafkaInputPartition`s
(`PythonStreamingInputPartition`), Spark's JVM `kafka` source as `KafkaBatchInputPartition`s
with an `offsetRange`. The ranges' lengths, summed, bound the records (fewer when retention
removed some). It knows Spark's plan and the two sources' partitions, not the sink.
"""

from __future__ import annotations

import io
import logging
import pickle
from typing import TYPE_CHECKING, Any

from ingest.spark.kafka import KafkaInputPartition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

_SOURCE_RDD = "DataSourceRDD"
_PYTHON_PARTITION = "PythonStreamingInputPartition"
# Walking down from the micro-batch's RDD to its source: a few map steps, never more.
_MAX_DEPTH = 16


def planned_records(batch_df: DataFrame) -> int | None:
    """The Kafka records `batch_df` (a foreachBatch micro-batch) reads at most, from the
    offset ranges of its input partitions; None when its plan does not say (another source,
    a union of sources, a Spark that plans otherwise).

    Never raises: an unknown size only means the micro-batch is not known to be small.
    """
    try:
        rdd = batch_df._jdf.queryExecution().logical().rdd()
        for _ in range(_MAX_DEPTH):
            if rdd.getClass().getSimpleName() == _SOURCE_RDD:
                return _records(rdd.inputPartitions())
            dependencies = rdd.dependencies()
            if dependencies.size() != 1:
                return None
            rdd = dependencies.apply(0).rdd()
        return None
    except Exception as e:  # py4j errors, another Spark's plan: just not known
        log.debug("Cannot read the micro-batch's offset ranges from its plan: %s", e)
        return None


def _records(input_partitions: Any) -> int | None:
    """Records in a DataSourceRDD's input partitions (each an Option of one, or a Seq)."""
    total = 0
    for i in range(input_partitions.size()):
        entry = input_partitions.apply(i)
        parts = [entry.get()] if entry.getClass().getSimpleName() == "Some" else (
            [] if entry.getClass().getSimpleName() == "None$" else
            [entry.apply(j) for j in range(entry.size())])
        for part in parts:
            records = _partition_records(part)
            if records is None:
                return None
            total += records
    return total


def _partition_records(part: Any) -> int | None:
    """Records of one input partition of either Kafka source, or None for another kind."""
    if part.getClass().getSimpleName() == _PYTHON_PARTITION:
        ours = _KafkaPartitionOnly(io.BytesIO(bytes(part.pickedPartition()))).load()
        if not isinstance(ours, KafkaInputPartition):
            return None
        return ours.until_offset - ours.from_offset
    offsets = part.offsetRange()  # Spark's KafkaBatchInputPartition (AttributeError else)
    begin, until = int(offsets.fromOffset()), int(offsets.untilOffset())
    return until - begin if 0 <= begin <= until else None


class _KafkaPartitionOnly(pickle.Unpickler):
    """Unpickles ingest's Kafka input partition and nothing else (what the driver's Python
    unpickles here came from Spark, but only our own class is expected)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == (KafkaInputPartition.__module__, KafkaInputPartition.__name__):
            return KafkaInputPartition
        raise pickle.UnpicklingError(f"not a Kafka input partition: {module}.{name}")


__all__ = ["planned_records"]
