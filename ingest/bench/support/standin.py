"""CPU seconds of a local stand-in server (moto's S3 server) that a benchmark talks to.

A stand-in on the same cores as the job charges its own CPU to the job's wall time; a real
object store would not. The benchmark may be given the endpoint of a server it did not
start, so the server is found by the port it listens on: the socket's inode in
/proc/net/tcp{,6}, then the process holding that socket among /proc/PID/fd (Linux only).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

_PROC = Path("/proc")
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_LISTEN = "0A"
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the TCP sockets listening on `port` (any local address)."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (_PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # sl, local_address (hex ip:hex port), rem_address, st, ..., uid, timeout, inode
            if len(fields) > 9 and fields[3] == _LISTEN \
                    and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def listening_pid(port: int) -> int | None:
    """The process listening on TCP `port` on this machine, if this user can see it."""
    targets = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not targets:
        return None
    for proc in _PROC.iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in targets:
                    return int(proc.name)
        except OSError:
            continue  # another user's process, or it ended
    return None


def endpoint_pid(endpoint: str | None) -> int | None:
    """The local process serving `endpoint` (an http URL on this machine), else None."""
    if not endpoint:
        return None
    parts = urlsplit(endpoint)
    if parts.hostname not in _LOCAL_HOSTS or parts.port is None:
        return None
    return listening_pid(parts.port)


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` (all its threads); None if it is gone."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # Fields 14-15 (utime, stime) follow the name's closing ")".
    utime, stime = stat[stat.rindex(")") + 2:].split()[11:13]
    return (int(utime) + int(stime)) / _TICKS_PER_S


__all__ = ["endpoint_pid", "listening_pid", "process_cpu_s"]
