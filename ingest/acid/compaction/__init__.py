"""Compaction and cleaning of one partition: the initiator's policy (which kind, if any), major
and minor compaction with the check of their output, and what a cleaner may remove.
"""

from ingest.acid.compaction.cleaning import (
    Candidate,
    CleaningPlan,
    CleanKind,
    Kept,
    check_cover,
    plan_cleaning,
    remove_candidate,
)
from ingest.acid.compaction.compact import (
    CompactionKind,
    CompactionPlan,
    CompactionResult,
    compact_partition,
    compactor_snapshot,
    finish_interrupted,
    plan_compaction,
)
from ingest.acid.compaction.initiator import (
    Backlog,
    CompactionThresholds,
    Decision,
    decide,
    measure_backlog,
)

__all__ = [
    "Backlog",
    "Candidate",
    "CleanKind",
    "CleaningPlan",
    "CompactionKind",
    "CompactionPlan",
    "CompactionResult",
    "CompactionThresholds",
    "Decision",
    "Kept",
    "check_cover",
    "compact_partition",
    "compactor_snapshot",
    "decide",
    "finish_interrupted",
    "measure_backlog",
    "plan_cleaning",
    "plan_compaction",
    "remove_candidate",
]
