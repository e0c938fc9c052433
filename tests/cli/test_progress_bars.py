"""Progress bars of the long commands (compact, clean, verify, recover, load): drawn on stderr when
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


def test_a_bar_with_a_unit_shows_amounts_and_the_rate() -> None:
    terminal = _Terminal()
    bar = ProgressBar("Reading", quiet=False, stream=terminal, unit="bytes")
    for done in (4_000_000, 8_000_000, 12_000_000):
        bar(done, 12_000_000, "/data/in/events.jsonl")
    bar(12_000_000, 12_000_000, "parsing")  # no bytes: the new item alone is drawn
    bar.close()
    drawn = terminal.getvalue()
    assert "12.0 MB/12.0 MB" in drawn and "MB/s" in drawn and "100%" in drawn
    last = drawn.split("\r")[-1]  # the line as it stays on the screen
    assert "in/events.jsonl" in drawn and "100%" in last and "parsing" in last


def test_load_draws_reading_and_writing_bars_on_a_terminal_only(tmp_path: Path) -> None:
    """`ingest load`: bytes read (then parsing), then rows written with their rate, on a
    terminal; nothing with -q or --json, or when stderr is not a terminal."""
    location = str(tmp_path / "events")
    create_table(location, "id BIGINT, value STRING", partitioned_by=("dt",))
    rows = 30_000
    source = tmp_path / "events.jsonl"
    source.write_text("".join(f'{{"id":{i},"value":"v{i}","dt":"{DAYS[i % 3]}"}}\n'
                              for i in range(rows)))

    code, out, screen = on_terminal(["load", location, "--input", str(source)])
    assert code == 0, screen
    assert "Loaded 30,000 rows" in out
    size = f"{source.stat().st_size / 1e6:.1f} MB"  # 1.4 MB
    assert "Reading" in screen and f"{size}/{size}" in screen and "parsing" in screen, screen
    assert "Writing" in screen and "30,000/30,000 rows" in screen and "rows/s" in screen
    assert "100%" in screen

    for flag in ("-q", "--json"):
        code, out, quiet_screen = on_terminal(["load", location, "--input", str(source), flag])
        assert code == 0 and "Reading" not in quiet_screen and "%" not in quiet_screen
        assert "Writing" not in quiet_screen, quiet_screen

    piped = subprocess.run([sys.executable, "-m", "ingest", "load", location, "--input",
                            str(source)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert piped.returncode == 0, piped.stderr
    assert "%" not in piped.stderr and "\r" not in piped.stderr
    assert piped.stderr.startswith("Loading "), piped.stderr
