"""Named crash points for fault-injection tests.

`crash_point("writer.after_stripes")` kills the current process with SIGKILL when the
environment variable INGEST_CRASH_AT names that point (a comma-separated list may name
several). With INGEST_CRASH_SKIP=N and INGEST_CRASH_COUNTER=<file>, the first N hits of an
armed point, counted across every process (Spark's Python workers included), pass; the next
one kills. Costs one dictionary lookup when unset; never set it outside tests.
"""

from __future__ import annotations

import os
import signal

ENV_VAR = "INGEST_CRASH_AT"
SKIP_VAR = "INGEST_CRASH_SKIP"
COUNTER_VAR = "INGEST_CRASH_COUNTER"

# Every point a test may arm; crash_point refuses unknown names so typos cannot hide.
CRASH_POINTS = frozenset({
    "writer.after_stripes",       # stripes written, no footer yet
    "writer.after_footer",        # footer written and flushed, side-file entry not yet
    "writer.after_side_file",     # side-file entry written, transaction not committed
    "sink.before_commit",         # all files of a micro-batch written, commit not started
    "sink.after_evolve",          # columns for new fields added, the micro-batch not rewritten
    "metastore.during_commit",    # inside the metastore's commit, before it is durable
    "compaction.before_commit",   # compacted directory written, not yet committed
    "compact.after_write",        # compaction output complete under hidden names
    "compact.between_renames",    # minor: delta_A_B renamed, delete_delta_A_B still hidden
    "compact.after_rename",       # every output in place, the metastore not yet told
    "compact.during_record",      # inside the metastore transaction recording the compaction
    "compact.after_record",       # compaction recorded and its transaction committed
    "clean.midway_directory",     # first file of an obsolete directory removed, others not
    "clean.before_record",        # directories removed, compaction history not yet updated
    "clean.after_record",         # compaction history updated, dead readers not yet forgotten
})


def crash_point(name: str) -> None:
    """SIGKILL this process if INGEST_CRASH_AT names `name`."""
    armed = os.environ.get(ENV_VAR)
    if not armed:
        return
    if name not in CRASH_POINTS:
        raise ValueError(f"unknown crash point {name!r}; known: {sorted(CRASH_POINTS)}")
    if name in armed.split(",") and _hits_exhausted():
        os.kill(os.getpid(), signal.SIGKILL)


def _hits_exhausted() -> bool:
    skip = int(os.environ.get(SKIP_VAR, "0"))
    if skip <= 0:
        return True
    counter = os.environ[COUNTER_VAR]
    # O_APPEND of one byte is atomic, so concurrent processes count each hit once.
    fd = os.open(counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"x")
    finally:
        os.close(fd)
    return os.path.getsize(counter) > skip
