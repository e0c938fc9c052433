"""A real Spark standalone cluster on 127.0.0.1: one master and N workers from pyspark's own jars.

Each daemon runs `pyspark/bin/spark-class` in its own session (process group), so killing a
worker's group takes its executor JVMs and their Python workers with it, and tearing down
kills exactly the processes started here. Readiness is polled from the master's JSON UI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
SPARK_SUBMIT = SPARK_HOME / "bin" / "spark-submit"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def daemon_env() -> dict[str, str]:
    """The environment of every daemon and of spark-submit: pyspark as SPARK_HOME, the venv's
    Python for every Python worker, and no PYTHONPATH, so executors find `ingest` only in what
    spark-submit ships (--py-files)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_CONF_DIR")}
    env.update(SPARK_HOME=str(SPARK_HOME), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_DAEMON_MEMORY="256m")
    return env


@dataclass
class Daemon:
    """One spark-class process, started in a new session; its output goes to `log_path`."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]
    webui_port: int
    work_dir: Path | None = None
    killed: bool = False

    def kill(self) -> None:
        """SIGKILL the daemon's whole process group (the JVM and whatever it started, even
        after the JVM itself has exited)."""
        if self.killed:
            return
        self.killed = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # the group is gone
            pass
        self.proc.wait(timeout=30)
        self.log.close()

    def tail(self, chars: int = 3000) -> str:
        """The end of the daemon's log, for failure messages."""
        return f"--- {self.name} ({self.log_path}) ---\n{self.log_path.read_text()[-chars:]}"


@dataclass
class SparkCluster:
    """A master and its workers; `url` is what `spark-submit --master` takes."""

    base: Path
    port: int
    master: Daemon
    free_port: Callable[[], int]
    cores: int
    memory: str
    workers: list[Daemon] = field(default_factory=list)
    started: int = 0

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def state(self) -> dict[str, Any]:
        """The master's JSON UI: workers, active and completed applications."""
        with urllib.request.urlopen(
                f"http://127.0.0.1:{self.master.webui_port}/json/", timeout=5) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state()["workers"] if w["state"] == "ALIVE"]

    def wait_for_workers(self, count: int, *, timeout_s: float) -> None:
        """Poll the master's JSON UI until it answers and `count` workers are ALIVE.

        Raises:
            RuntimeError: a daemon exited, or the workers did not register in time.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            for daemon in [self.master, *self.workers]:
                if daemon.proc.poll() is not None:
                    raise RuntimeError(f"{daemon.name} exited with {daemon.proc.returncode}\n"
                                       f"{daemon.tail()}")
            try:
                if len(self.alive_workers()) >= count:
                    return
            except OSError:  # the UI is not listening yet
                pass
            if time.monotonic() > deadline:
                logs = "\n".join(d.tail() for d in [self.master, *self.workers])
                raise RuntimeError(f"{count} workers not ALIVE in {timeout_s:.0f} s\n{logs}")
            time.sleep(0.5)

    def start_worker(self, slot: int | None = None) -> Daemon:
        """Start a worker with a fresh work dir, in `slot` of `workers` (replacing a dead
        one) or appended."""
        name = f"worker{self.started}"
        self.started += 1
        work_dir = self.base / name
        work_dir.mkdir()
        ui = self.free_port()
        worker = _start(name, [WORKER_CLASS, self.url, "--host", "127.0.0.1",
                               "--cores", str(self.cores), "--memory", self.memory,
                               "--webui-port", str(ui), "--work-dir", str(work_dir)],
                        self.base / "logs", ui, work_dir)
        if slot is None:
            self.workers.append(worker)
        else:
            self.workers[slot] = worker
        return worker

    def replace_dead_workers(self, *, timeout_s: float) -> None:
        """Start a new worker for each killed one and wait until all are ALIVE.

        Raises:
            RuntimeError: as `wait_for_workers`.
        """
        dead = [i for i, w in enumerate(self.workers) if w.proc.poll() is not None]
        for i in dead:
            self.start_worker(i)
        if dead:
            self.wait_for_workers(len(self.workers), timeout_s=timeout_s)

    def logs(self) -> str:
        return "\n".join(d.tail() for d in [self.master, *self.workers])

    def stop(self) -> None:
        """Kill every daemon started for this cluster (workers first), by process group."""
        for daemon in [*self.workers, self.master]:
            daemon.kill()


def _start(name: str, args: Sequence[str], log_dir: Path, webui_port: int,
           work_dir: Path | None = None) -> Daemon:
    log_path = log_dir / f"{name}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed by Daemon.kill
    proc = subprocess.Popen([str(SPARK_CLASS), *args], env=daemon_env(), stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    return Daemon(name, proc, log_path, log, webui_port, work_dir)


def start_cluster(base: Path, free_port: Callable[[], int], *, workers: int = 2, cores: int = 1,
                  memory: str = "1g", timeout_s: float = 120) -> SparkCluster:
    """Start a master and `workers` workers on 127.0.0.1 and wait until all are ALIVE.

    Args:
        base: a directory for the daemons' logs and the workers' work dirs.
        free_port: gives a free TCP port on 127.0.0.1 (master RPC, master and worker UIs).
        workers: how many workers.
        cores: cores each worker offers.
        memory: memory each worker offers to executors.
        timeout_s: how long to wait for the master and the workers.

    Raises:
        RuntimeError: a daemon exited or did not register in time (everything started is
            killed first).
    """
    (base / "logs").mkdir(parents=True, exist_ok=True)
    port, ui = free_port(), free_port()
    master = _start("master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port),
                               "--webui-port", str(ui)], base / "logs", ui)
    cluster = SparkCluster(base, port, master, free_port, cores, memory)
    try:
        # Workers started before the master listens wait 10 s before they retry.
        cluster.wait_for_workers(0, timeout_s=timeout_s)
        for _ in range(workers):
            cluster.start_worker()
        cluster.wait_for_workers(workers, timeout_s=timeout_s)
    except BaseException:
        cluster.stop()
        raise
    return cluster
