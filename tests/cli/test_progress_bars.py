"""Progress bars of the long commands (compact, clean, verify, recover): drawn on stderr when
it is a terminal (a real pseudo-terminal here), never with --quiet, and not when stderr is a
pipe or a file, where the commands print their lines as before."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from ingest.cli._output import ProgressBar
from ingest.table import create_table, load

ROOT = Path(__file__).resolve().parents[2]
DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]
PROPERTIES = {"ingest.cleaner.retention.seconds": "0"}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def make_table(tmp_path: Path) -> str:
    location = str(tmp_path / "events")
    create_table(location, "id BIGINT, value STRING", partitioned_by=("dt",),
                 properties=PROPERTIES)
    for i in range(2):
        load(location, pa.table({"id": [i * 10 + d for d in range(len(DAYS))],
                                 "value": ["v"] * len(DAYS), "dt": DAYS}))
    return location


def on_terminal(args: list[str]) -> tuple[int, str, str]:
    """Run `ingest ARGS` with stderr on a pseudo-terminal; (exit code, stdout, terminal)."""
    master, slave = os.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    proc = subprocess.Popen([sys.executable, "-m", "ingest", *args], stdout=subprocess.PIPE,
                            stderr=slave, env=env)
    os.close(slave)
    screen = bytearray()
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: every holder of the terminal closed it
            break
        if not chunk:
            break
        screen += chunk
    os.close(master)
    out = proc.stdout.read().decode() if proc.stdout else ""
    return proc.wait(timeout=120), out, screen.decode(errors="replace")


def test_the_bar_draws_on_a_terminal_and_is_silent_otherwise() -> None:
    terminal = _Terminal()
    bar = ProgressBar("Compacting", quiet=False, stream=terminal)
    assert bar.active
    for done in (1, 2, 3):
        bar(done, 3, f"/wh/events/dt={DAYS[done - 1]}")
    bar.close()
    drawn = terminal.getvalue()
    assert "Compacting" in drawn and "100%" in drawn and "3/3" in drawn
    assert "events/dt=2026-11-03" in drawn  # the current partition, not the whole root

    for stream, quiet in ((_Terminal(), True), (io.StringIO(), False)):
        silent = ProgressBar("Compacting", quiet=quiet, stream=stream)
        assert not silent.active
        silent(1, 3, "x")
        silent.close()
        assert stream.getvalue() == ""


@pytest.mark.parametrize(("command", "label"), [
    (["compact"], "Compacting"), (["clean"], "Cleaning"), (["verify"], "Verifying"),
    (["recover", "--no-backup"], "Recovering")])
def test_long_commands_draw_a_bar_on_a_terminal_only(tmp_path: Path, command: list[str],
                                                     label: str) -> None:
    location = make_table(tmp_path)
    if command == ["clean"]:
        code, _, _ = on_terminal(["compact", location, "-q"])  # something to clean
        assert code == 0
    code, out, screen = on_terminal([*command, location])
    assert code == 0, screen
    assert label in screen and "100%" in screen, screen

    code, out, quiet_screen = on_terminal([*command, location, "-q"])
    assert code == 0 and label not in quiet_screen and "%" not in quiet_screen

    piped = subprocess.run([sys.executable, "-m", "ingest", *command, location],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert piped.returncode == 0, piped.stderr
    assert "%" not in piped.stderr and "\r" not in piped.stderr
    if command == ["clean"]:  # without a bar, a line per partition as before
        assert all(f"dt={day}" in piped.stderr for day in DAYS), piped.stderr
