"""Which Kafka offset ranges a micro-batch planned, and so how many records it holds at
most, known before a task reads one.

foreachBatch hands the sink a micro-batch already planned down to its input partitions (an
RDD whose root is Spark's `DataSourceRDD`): one Kafka offset range each, whichever source read
it (or, packed, several small ones). ingest's `ingest-kafka` source ships its ranges as pickled
`KafkaInputPartition`s or `PackedInputPartition`s (`PythonStreamingInputPartition`), Spark's
JVM `kafka` source as `KafkaBatchInputPartition`s with an `offsetRange`. The ranges' lengths,
summed, bound the records (fewer when retention removed some, and for commit markers and
aborted records). The ranges themselves are what the
table records as read: a gap Kafka made inside them (markers, aborted records, compaction) is
then not mistaken for skipped records. It knows Spark's plan and the two sources'
partitions, not the sink.
"""

from __future__ import annotations

import io
import logging
import pickle
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ingest.spark.kafka import KafkaInputPartition, PackedInputPartition
from ingest.txn import OffsetRange

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
    ranges = planned_ranges(batch_df)
    return None if ranges is None else sum(r.until_offset - r.from_offset for r in ranges)


def planned_ranges(batch_df: DataFrame) -> list[OffsetRange] | None:
    """The offset range each Kafka partition of `batch_df` was planned to read, one per topic
    partition (a partition split among tasks merged), sorted; None when the plan does not say.

    Never raises.
    """
    try:
        rdd = batch_df._jdf.queryExecution().logical().rdd()
        for _ in range(_MAX_DEPTH):
            if rdd.getClass().getSimpleName() == _SOURCE_RDD:
                return _ranges(rdd.inputPartitions())
            dependencies = rdd.dependencies()
            if dependencies.size() != 1:
                return None
            rdd = dependencies.apply(0).rdd()
        return None
    except Exception as e:  # py4j errors, another Spark's plan: just not known
        log.debug("Cannot read the micro-batch's offset ranges from its plan: %s", e)
        return None


def _ranges(input_partitions: Any) -> list[OffsetRange] | None:
    """The ranges of a DataSourceRDD's input partitions (each an Option of one, or a Seq)."""
    merged: dict[tuple[str, int], OffsetRange] = {}
    for i in range(input_partitions.size()):
        entry = input_partitions.apply(i)
        parts = [entry.get()] if entry.getClass().getSimpleName() == "Some" else (
            [] if entry.getClass().getSimpleName() == "None$" else
            [entry.apply(j) for j in range(entry.size())])
        for part in parts:
            ranges = _partition_ranges(part)
            if ranges is None:
                return None
            for found in ranges:
                key = (found.topic, found.partition)
                known = merged.get(key)
                merged[key] = found if known is None else OffsetRange(
                    found.topic, found.partition, min(known.from_offset, found.from_offset),
                    max(known.until_offset, found.until_offset))
    return [merged[k] for k in sorted(merged)]


def _partition_ranges(part: Any) -> list[OffsetRange] | None:
    """The ranges of one input partition of either Kafka source, or None for another kind."""
    if part.getClass().getSimpleName() == _PYTHON_PARTITION:
        ours = _KafkaPartitionOnly(io.BytesIO(bytes(part.pickedPartition()))).load()
        if isinstance(ours, PackedInputPartition):
            return list(ours.ranges)
        if not isinstance(ours, KafkaInputPartition):
            return None
        return [ours.offsets]
    offsets = part.offsetRange()  # Spark's KafkaBatchInputPartition (AttributeError else)
    begin, until = int(offsets.fromOffset()), int(offsets.untilOffset())
    if not 0 <= begin <= until:
        return None
    tp = offsets.topicPartition()
    return [OffsetRange(str(tp.topic()), int(tp.partition()), begin, until)]


def cover(seen: Sequence[OffsetRange], planned: Sequence[OffsetRange] | None
          ) -> tuple[OffsetRange, ...]:
    """Each topic partition's range as read: from the lowest to the highest offset of the
    planned range and of the records seen (a task never reads outside its plan, but a plan
    that could not be read back leaves the records' own range)."""
    out: dict[tuple[str, int], OffsetRange] = {}
    for r in [*seen, *(planned or ())]:
        key = (r.topic, r.partition)
        known = out.get(key)
        out[key] = r if known is None else OffsetRange(
            r.topic, r.partition, min(known.from_offset, r.from_offset),
            max(known.until_offset, r.until_offset))
    return tuple(out[k] for k in sorted(out))


class _KafkaPartitionOnly(pickle.Unpickler):
    """Unpickles ingest's Kafka input partitions and nothing else (what the driver's Python
    unpickles here came from Spark, but only our own classes are expected)."""

    ALLOWED = {(c.__module__, c.__name__): c
               for c in (KafkaInputPartition, PackedInputPartition, OffsetRange)}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return self.ALLOWED[(module, name)]
        raise pickle.UnpicklingError(f"not a Kafka input partition: {module}.{name}")


def after_loss(ranges: Sequence[OffsetRange], lost: Sequence[OffsetRange]
               ) -> tuple[OffsetRange, ...]:
    """The ranges with what was lost cut from their start: a range the JVM source planned
    from below the broker's earliest offset was not read there, so the table records the
    gap (`ingest verify` and `ingest status` show it as records skipped)."""
    ends = {(r.topic, r.partition): r.until_offset for r in lost}
    out = []
    for r in ranges:
        end = ends.get((r.topic, r.partition))
        if end is not None and r.from_offset < end:
            r = OffsetRange(r.topic, r.partition, min(end, r.until_offset), r.until_offset)
        out.append(r)
    return tuple(out)


__all__ = ["after_loss", "cover", "planned_ranges", "planned_records"]
