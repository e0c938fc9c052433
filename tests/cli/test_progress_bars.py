"""Progress bars of the long commands (compact, clean, verify, recover, load): drawn on stderr when
it is a terminal (a real pseudo-terminal here) with the amount done of the total, the rate and
the ETA, never with --quiet, and not when stderr is a pipe or a file, where the commands print
their lines as before."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from ingest.cli import _output
from ingest.cli._output import ProgressBar
from ingest.table import open_table
from ingest.table.write import create_table, load

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
        load(open_table(location), pa.table({"id": [i * 10 + d for d in range(len(DAYS))],
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


def rate_and_eta(screen: str, unit: str) -> re.Match[str] | None:
    """The amounts, rate and ETA a bar drew last: "3/3 partitions  1.5 partitions/s  ETA 0s"
    (`unit` "" for bytes: "4.0 MB/12.0 MB  2.0 MB/s  ETA 4s")."""
    amount, unit = r"[\d,.]+(?: [MkG]B)?", f" {unit}" if unit else ""
    found = list(re.finditer(rf"({amount})/({amount}){unit}  ({amount}){unit}/s  ETA (\w+)",
                             screen))
    return found[-1] if found else None


def test_the_bar_draws_on_a_terminal_and_is_silent_otherwise() -> None:
    terminal = _Terminal()
    bar = ProgressBar("Compacting", unit="partitions", quiet=False, stream=terminal)
    assert bar.active
    for done in (1, 2, 3):
        bar(done, 3, f"/wh/events/dt={DAYS[done - 1]}")
    bar.close()
    drawn = terminal.getvalue()
    assert "Compacting" in drawn and "100%" in drawn and "3/3 partitions" in drawn
    assert "events/dt=2026-11-03" in drawn  # the current partition, not the whole root
    last = rate_and_eta(drawn, "partitions")
    assert last is not None and last.group(4) == "0s", drawn  # done: nothing left

    for stream, quiet in ((_Terminal(), True), (io.StringIO(), False)):
        silent = ProgressBar("Compacting", unit="partitions", quiet=quiet, stream=stream)
        assert not silent.active
        silent(1, 3, "x")
        silent.close()
        assert stream.getvalue() == ""


def test_the_rate_and_the_eta_follow_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rate counts from the bar's start (or its first call, for a bar waiting behind
    another); the ETA is the rest at that rate; unknown before any progress."""
    now = [100.0]
    monkeypatch.setattr(_output.time, "monotonic", lambda: now[0])
    terminal = _Terminal()
    bar = ProgressBar("Verifying", unit="files", quiet=False, stream=terminal)
    bar(0, 40, "/wh/events/dt=x/bucket_00000")
    assert "-- files/s  ETA --" in terminal.getvalue()
    now[0] += 10
    bar(4, 40, "/wh/events/dt=x/bucket_00001")  # 0.4 files/s: 36 more take 90 s
    shown = rate_and_eta(terminal.getvalue(), "files")
    assert shown is not None and shown.group(1, 2, 3, 4) == ("4", "40", "0.4", "1m30s")
    now[0] += 40
    bar(20, 40, "/wh/events/dt=x/bucket_00002")  # 0.4 files/s still: 20 more take 50 s
    shown = rate_and_eta(terminal.getvalue(), "files")
    assert shown is not None and shown.group(3, 4) == ("0.4", "50s")
    bar.close()

    writing = ProgressBar("Writing", unit="rows", quiet=False, stream=(rows := _Terminal()),
                          rate_from="first-call")
    now[0] += 3600  # made long before its rows come: the time before counts for nothing
    writing(10_000, 3_000_000, "dt=a")
    now[0] += 10
    writing(30_000, 3_000_000, "dt=b")  # 2,000 rows/s: 2,970,000 more take 24m45s
    shown = rate_and_eta(rows.getvalue(), "rows")
    assert shown is not None
    assert shown.group(1, 2, 3, 4) == ("30,000", "3,000,000", "2,000", "24m45s")
    writing.close()


@pytest.mark.parametrize(("command", "label", "unit"), [
    (["compact"], "Compacting", "partitions"), (["clean"], "Cleaning", "partitions"),
    (["verify"], "Verifying", "files"), (["recover", "--no-backup"], "Recovering", "files")])
def test_long_commands_draw_a_bar_on_a_terminal_only(tmp_path: Path, command: list[str],
                                                     label: str, unit: str) -> None:
    location = make_table(tmp_path)
    if command == ["clean"]:
        code, _, _ = on_terminal(["compact", location, "-q"])  # something to clean
        assert code == 0
    code, out, screen = on_terminal([*command, location])
    assert code == 0, screen
    assert label in screen and "100%" in screen, screen
    # The amount done of the total, a rate and the ETA (nothing left at the end).
    last = rate_and_eta(screen, unit)
    assert last is not None, screen
    done, total, rate, eta = last.groups()
    assert done == total and int(total) >= len(DAYS) and float(rate.replace(",", "")) > 0
    assert eta == "0s", screen

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
    bar = ProgressBar("Reading", unit="bytes", quiet=False, stream=terminal)
    for done in (4_000_000, 8_000_000, 12_000_000):
        bar(done, 12_000_000, "/data/in/events.jsonl")
    bar(12_000_000, 12_000_000, "parsing")  # no bytes: the new item alone is drawn
    bar.close()
    drawn = terminal.getvalue()
    assert "12.0 MB/12.0 MB" in drawn and "MB/s" in drawn and "100%" in drawn
    shown = rate_and_eta(drawn, "")
    assert shown is not None and shown.group(4) == "0s", drawn
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
    assert "Writing" in screen and "30,000/30,000 rows" in screen and "100%" in screen
    for unit in ("", "rows"):  # bytes read, then rows written: each with its rate and ETA
        shown = rate_and_eta(screen, unit)
        assert shown is not None and shown.group(1) == shown.group(2), screen
        assert float(shown.group(3).replace(",", "").split()[0]) > 0 and shown.group(4) == "0s"

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
