"""CPU seconds of this process and every process below it (Linux /proc), for benchmarks
whose work runs in child processes (Spark's JVM and its Python workers).

On a machine shared with other work, wall time measures the scheduler as much as the code;
CPU seconds of the process tree are what the code itself spent.
"""

from __future__ import annotations

import os
from pathlib import Path

from ingest.bench.support.memory import descendants

_PROC = Path("/proc")
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu_s() -> float | None:
    """User and system CPU seconds of this process and its descendants, including the
    children they have waited for; None where /proc is missing (not Linux)."""
    if not _PROC.is_dir():
        return None
    total = 0
    for pid in [os.getpid(), *descendants(os.getpid())]:
        try:
            stat = (_PROC / str(pid) / "stat").read_text()
        except OSError:
            continue  # ended meanwhile: counted in its parent's children's time
        # Fields 14-17 (utime, stime, cutime, cstime) follow the name's closing ")".
        total += sum(int(v) for v in stat[stat.rindex(")") + 2:].split()[11:15])
    return total / _TICKS_PER_S


__all__ = ["tree_cpu_s"]
