"""Kafka data loss before a micro-batch (docs/invariants.md 8.12): the offsets retention
removed from a topic partition between the stream's committed end and the broker's earliest
offset. The single-table sink measures it against its table's committed ends, the many-table
sink against its anchor's."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from ingest.errors import IngestError
from ingest.txn import OffsetRange

log = logging.getLogger(__name__)

EarliestFn = Callable[[Sequence[tuple[str, int]]], Mapping[tuple[str, int], int]]


def lost_ranges(planned: Sequence[OffsetRange] | None, committed: Mapping[tuple[str, int], int],
                earliest_fn: EarliestFn | None, *, fail: bool, batch_id: int,
                of: str, by: str = "the table") -> tuple[OffsetRange, ...]:
    """The ranges lost before micro-batch `batch_id`: for each topic partition it plans that
    `of` (the table or stream's name, for the messages; `by` says who commits) committed
    before, from that end up to the broker's earliest offset (capped at the planned end).

    Raises:
        IngestError: some were lost and `fail`: every lost range named, nothing written.
    """
    if earliest_fn is None or not planned:
        return ()
    known = {(r.topic, r.partition): r for r in planned if (r.topic, r.partition) in committed}
    if not known:
        return ()
    earliest = earliest_fn(sorted(known))
    lost = []
    for key, r in sorted(known.items()):
        start, low = committed[key], earliest.get(key)
        if low is not None and start < low:
            lost.append(OffsetRange(key[0], key[1], start, min(low, r.until_offset)))
    if lost and fail:
        raise IngestError(
            f"Kafka data loss before micro-batch {batch_id} of {of}: "
            + "; ".join(f"{r.topic}-{r.partition} offsets [{r.from_offset}, "
                        f"{r.until_offset}) ({r.until_offset - r.from_offset:,})" for r in lost)
            + f" were removed from Kafka (retention) before {by} committed them; nothing of "
            "the micro-batch was written",
            hint="to go on without them, restart with --fail-on-data-loss false (they are "
                 "counted and shown by `ingest status`); or re-produce them")
    for r in lost:
        log.warning("Kafka data loss: %s-%d offsets [%d, %d) were removed before %s committed "
                    "them; skipped (--fail-on-data-loss false)", r.topic, r.partition,
                    r.from_offset, r.until_offset, of)
    return tuple(lost)


__all__ = ["EarliestFn", "lost_ranges"]
