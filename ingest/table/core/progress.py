"""How far a streamed table got in its Kafka topics: the committed end offset of each topic
partition (from the offset ranges its commits recorded with their sink progress) and when the
last of those commits happened. Read-only; knows the metastore, not Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ingest.txn import Metastore, TableIdentifier, TopicPartitionKey


@dataclass(frozen=True)
class StreamProgress:
    """A streamed table's committed Kafka position.

    Attributes:
        offsets: the next offset to read of each topic partition a commit read, i.e. the
            highest `until_offset` of its committed ranges; sorted by (topic, partition).
        last_write_id: the write id of the last commit that recorded offsets.
        last_commit_at: when that transaction committed (seconds since the epoch), or None
            when the metastore does not say.
        skipped: offset ranges between committed ranges that no commit read, by topic
            partition: records Kafka removed before they were read (a stream run with
            --fail-on-data-loss false). Markers, aborted records and a compacted topic's
            gaps lie inside the planned ranges a stream records, so they are not here.
    """

    offsets: dict[TopicPartitionKey, int]
    last_write_id: int
    last_commit_at: float | None
    skipped: dict[TopicPartitionKey, list[tuple[int, int]]] = field(default_factory=dict)

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics the table's commits read, sorted."""
        return tuple(sorted({t for t, _ in self.offsets}))


def stream_progress(store: Metastore, table: TableIdentifier) -> StreamProgress | None:
    """The committed Kafka position of `table`, or None when no commit recorded offsets (a
    table that was never streamed into).

    Raises:
        TableNotFoundError: no such table.
        MetastoreError: the metastore failed.
    """
    ranges = store.offset_ranges(table)
    if not ranges:
        return None
    offsets: dict[TopicPartitionKey, int] = {}
    by_partition: dict[TopicPartitionKey, list[tuple[int, int]]] = {}
    for _, r in ranges:
        key = (r.topic, r.partition)
        offsets[key] = max(offsets.get(key, r.until_offset), r.until_offset)
        if r.until_offset > r.from_offset:
            by_partition.setdefault(key, []).append((r.from_offset, r.until_offset))
    skipped: dict[TopicPartitionKey, list[tuple[int, int]]] = {}
    for key, spans in sorted(by_partition.items()):
        spans.sort()
        end = spans[0][1]
        for start, until in spans[1:]:
            if start > end:
                skipped.setdefault(key, []).append((end, start))
            end = max(end, until)
    last_write_id = max(write_id for write_id, _ in ranges)
    finished = [t.finished_at for t in store.transactions(table, states=("committed",))
                if t.write_id == last_write_id]
    return StreamProgress(dict(sorted(offsets.items())), last_write_id,
                          finished[0] if finished else None, skipped)


__all__ = ["StreamProgress", "stream_progress"]
