"""Peak resident memory of this process and its descendants (Linux /proc), for benchmarks.

`PeakRss` resets the kernel's high-water mark (VmHWM) of this process and of every
descendant on entry (writing 5 to /proc/PID/clear_refs), so the figures cover only the
`with` block, and samples every descendant's VmHWM from a thread meanwhile: a process that
ends inside the block (a Python worker) still counts if it lived past one sample.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

_PROC = Path("/proc")


def _children_by_parent() -> dict[int, list[int]]:
    """Every process's children, from the parent pid in /proc/PID/stat."""
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # ended meanwhile
        # The name (field 2) is in parentheses and may hold spaces: the ppid follows the last ")".
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def descendants(pid: int) -> list[int]:
    """Pids of every process below `pid` (children, their children, ...)."""
    children = _children_by_parent()
    found: list[int] = []
    todo = list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, ()))
    return found


def hwm_mb(pid: int) -> float | None:
    """The process's peak resident set (VmHWM) in MiB; None once it has ended."""
    try:
        for line in (_PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _name(pid: int) -> str:
    try:
        return (_PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return ""


def _reset_hwm(pid: int) -> bool:
    """Sets the process's VmHWM to its current RSS; False where the kernel refuses."""
    try:
        (_PROC / str(pid) / "clear_refs").write_text("5")
    except OSError:
        return False
    return True


@dataclass
class PeakRss:
    """Peak RSS in MiB over a `with` block: this Python process, its JVM child (a name of
    "java", i.e. Spark's driver) and the largest Python process below it (Spark's Python
    daemon and the workers it forks).

    Attributes:
        python_mb: this process's peak.
        jvm_mb: the largest peak among descendants named java (0 without one).
        worker_mb: the largest peak among descendants named python* (0 without one).
        python_start_mb: this process's resident set on entry (with `scoped`), what it held
            before the block.
        scoped: whether every high-water mark was reset on entry; if not, a figure may
            include what a process used before the block.
    """

    interval_s: float = 0.2
    python_mb: float = 0.0
    jvm_mb: float = 0.0
    worker_mb: float = 0.0
    python_start_mb: float = 0.0
    scoped: bool = True
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def __enter__(self) -> PeakRss:
        me = os.getpid()
        self.scoped = all([_reset_hwm(pid) for pid in (me, *descendants(me))])
        self.python_start_mb = hwm_mb(me) or 0.0
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="bench-peak-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        """Reads the high-water marks now and keeps the largest of each kind."""
        me = os.getpid()
        self.python_mb = max(self.python_mb, hwm_mb(me) or 0.0)
        for pid in descendants(me):
            name = _name(pid)
            if name == "java":
                self.jvm_mb = max(self.jvm_mb, hwm_mb(pid) or 0.0)
            elif name.startswith("python"):
                self.worker_mb = max(self.worker_mb, hwm_mb(pid) or 0.0)
