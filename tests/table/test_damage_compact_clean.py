"""Compaction and the cleaner check what they read: damaged committed input
is never compacted into a healthy-looking base, and a damaged compaction output never lets
the cleaner delete the inputs it hides, the last readable copy of their rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support import ok_json
from support import run_cli as run
from table.test_damage_every_reader import (
    DAMAGE,
    LOADS,
    ROWS,
    Capsys,
    files_on_disk,
    make_table,
)


@pytest.mark.parametrize("damage", ["file-removed", "directory-removed", "emptied"])
def test_damaged_input_fails_compaction_and_is_not_laundered(tmp_path: Path, capsys: Capsys,
                                                             damage: str) -> None:
    """§6: a committed delta directory (or bucket file) removed, then `compact --major`:
    it used to exit 0 with a base of the remaining rows, after which `verify` found
    nothing wrong. Now it fails naming the file, writes nothing, and verify still sees it."""
    table = make_table(tmp_path, capsys)
    damaged = DAMAGE[damage](table)
    before = files_on_disk(table)
    code, out, err = run(["compact", str(table), "--major"], capsys)
    assert code == 3, out + err
    assert str(damaged) in err and "nothing was written" in err, err
    assert files_on_disk(table) == before
    assert not list(table.rglob("base_*")) and not list(table.rglob(".compacting-*"))
    history = ok_json(["compactions", str(table)], capsys)["compactions"]
    assert history == []  # refused while planning: no compactor transaction was begun
    code, out, err = run(["verify", str(table)], capsys)
    assert code == 1 and str(damaged) in out + err, out + err


def compacted(tmp_path: Path, capsys: Capsys) -> tuple[Path, Path]:
    """The matrix table after `compact --major`: (table, dt=d0's base bucket file), with
    dt=d0's three input deltas still on disk."""
    table = make_table(tmp_path, capsys)
    ok_json(["compact", str(table), "--major"], capsys)
    (base,) = (table / "dt=d0").glob("base_*")
    assert len(list((table / "dt=d0").glob("delta_*"))) == 3
    return table, base / "bucket_00000"


def cut_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def footer_flipped(path: Path) -> None:
    """One byte flipped just before the postscript: the tail no longer hashes as recorded."""
    data = bytearray(path.read_bytes())
    data[len(data) - 1 - data[-1] - 3] ^= 0x01
    path.write_bytes(bytes(data))


def stripe_flipped(path: Path) -> None:
    """One byte flipped inside the first stripe (after the 3-byte "ORC"): the tail is intact,
    the stripe no longer hashes to its checksum."""
    data = bytearray(path.read_bytes())
    data[10] ^= 0x01
    path.write_bytes(bytes(data))


BASE_DAMAGE: dict[str, Callable[[Path], None]] = {
    "cut-half": cut_half, "footer-flipped": footer_flipped, "stripe-flipped": stripe_flipped}


@pytest.mark.parametrize("damage", sorted(BASE_DAMAGE))
def test_a_damaged_output_keeps_the_inputs_it_hides(tmp_path: Path, capsys: Capsys,
                                                    damage: str) -> None:
    """§6: a compaction output cut in half or with one byte flipped; `clean --retention 0`
    used to delete the three intact input deltas. Now it refuses, naming the output, and
    removes nothing at all; a dry run says the same."""
    table, base_file = compacted(tmp_path, capsys)
    BASE_DAMAGE[damage](base_file)
    before = files_on_disk(table)
    for args in (["--dry-run"], []):
        code, out, err = run(["clean", str(table), "--retention", "0", *args], capsys)
        assert code == 3, out + err
        assert str(base_file) in err and "nothing" in err, err
        assert files_on_disk(table) == before
    # The inputs still hold every row of dt=d0: a reader without the base would see them.
    assert len(list((table / "dt=d0").glob("delta_*"))) == 3


@pytest.mark.parametrize("damage", ["cut-half", "footer-flipped"])
@pytest.mark.parametrize("kind", ["--major", "--minor"])
def test_compact_does_not_call_a_damaged_output_nothing_to_compact(
        tmp_path: Path, capsys: Capsys, damage: str, kind: str) -> None:
    """`compact` on such a table used to say "nothing to compact"; its plan checks the base
    it would read against the manifest and fails naming it. (A byte changed inside a
    stripe under a sound tail is found when the base is read: by cat, verify, clean, and a
    compaction with work to do; planning reads tails only.)"""
    table, base_file = compacted(tmp_path, capsys)
    BASE_DAMAGE[damage](base_file)
    before = files_on_disk(table)
    code, out, err = run(["compact", str(table), kind], capsys)
    assert code == 3, out + err
    assert str(base_file) in err, err
    assert files_on_disk(table) == before


def test_an_intact_compacted_table_cleans_and_reads_every_row(tmp_path: Path,
                                                              capsys: Capsys) -> None:
    table, _ = compacted(tmp_path, capsys)
    report = ok_json(["clean", str(table), "--retention", "0"], capsys)
    assert report["directories"] == LOADS  # every input delta, in both partitions
    code, out, err = run(["cat", str(table), "--json"], capsys)
    assert code == 0, err
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == list(
        range(LOADS * ROWS))
    code, out, err = run(["verify", str(table)], capsys)
    assert code == 0, out + err
