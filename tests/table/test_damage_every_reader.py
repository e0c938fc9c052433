"""Committed data damaged on disk, read through every read path.

A table of six 500-row loads over two partitions; one committed bucket file, its directory or
its partition is cut, emptied, removed or its tail changed. Every reader plans from the
metastore's committed-file manifest, so each one either returns the committed rows exactly
or fails naming the damage, exits non-zero and deletes nothing. Never rows missing with exit 0.
Compaction and the cleaner read too: they refuse, write no output and remove no input.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from support import ok_json
from support import run_cli as run

import ingest
from ingest.errors import CorruptFileError

Capsys = pytest.CaptureFixture[str]
LOADS = 6
ROWS = 500


def make_table(tmp_path: Path, capsys: Capsys) -> Path:
    """Six loads of 500 rows; load k goes to partition dt=d{k % 2}: write id k + 1."""
    table = tmp_path / "wh" / "events"
    ok_json(["create", str(table), "--schema", "id BIGINT, value STRING, dt STRING",
             "--partitioned-by", "dt"], capsys)
    for k in range(LOADS):
        src = tmp_path / f"in{k}.jsonl"
        src.write_text("".join(json.dumps({"id": i, "value": f"v{i}", "dt": f"d{k % 2}"}) + "\n"
                               for i in range(k * ROWS, (k + 1) * ROWS)))
        ok_json(["load", str(table), "--input", str(src)], capsys)
    return table


def delta_of(table: Path, load: int) -> Path:
    (found,) = (table / f"dt=d{load % 2}").glob(f"delta_{load + 1:07d}_{load + 1:07d}_*")
    return found


def cut_half(table: Path) -> Path:
    path = delta_of(table, 2) / "bucket_00000"
    os.truncate(path, path.stat().st_size // 2)
    return path


def emptied(table: Path) -> Path:
    path = delta_of(table, 2) / "bucket_00000"
    os.truncate(path, 0)
    return path


def file_removed(table: Path) -> Path:
    path = delta_of(table, 2) / "bucket_00000"
    path.unlink()
    return path


def tail_changed(table: Path) -> Path:
    """One byte flipped just before the postscript (inside the footer)."""
    path = delta_of(table, 2) / "bucket_00000"
    data = bytearray(path.read_bytes())
    postscript_at = len(data) - 1 - data[-1]
    data[postscript_at - 3] ^= 0x01
    path.write_bytes(bytes(data))
    return path


def directory_removed(table: Path) -> Path:
    directory = delta_of(table, 2)
    shutil.rmtree(directory)
    return directory


def partition_removed(table: Path) -> Path:
    partition = table / "dt=d1"
    shutil.rmtree(partition)
    return partition


DAMAGE: dict[str, Callable[[Path], Path]] = {
    "cut-half": cut_half, "emptied": emptied, "file-removed": file_removed,
    "tail-changed": tail_changed, "directory-removed": directory_removed,
    "partition-removed": partition_removed,
}


def files_on_disk(table: Path) -> dict[str, int]:
    return {str(p.relative_to(table)): p.stat().st_size
            for p in sorted(table.rglob("*")) if p.is_file()}


def read_api(table: Path, capsys: Capsys) -> tuple[int, str]:
    try:
        rows = ingest.open_table(str(table)).to_arrow().num_rows
    except CorruptFileError as e:
        return 3, str(e)
    return 0, f"{rows} rows"


def read_batches_api(table: Path, capsys: Capsys) -> tuple[int, str]:
    try:
        rows = sum(b.num_rows for b in ingest.open_table(str(table)).to_batches())
    except CorruptFileError as e:
        return 3, str(e)
    return 0, f"{rows} rows"


def plan_api(table: Path, capsys: Capsys) -> tuple[int, str]:
    try:
        tasks = ingest.open_table(str(table)).scan().plan_files().tasks
    except CorruptFileError as e:
        return 3, str(e)
    return 0, f"{len(tasks)} tasks"


def cat(table: Path, capsys: Capsys) -> tuple[int, str]:
    code, out, err = run(["cat", str(table)], capsys)
    return code, err if code else f"{len(out.splitlines())} rows"


def cat_partition(table: Path, capsys: Capsys) -> tuple[int, str]:
    """Reading only the damaged partition (or the one that was removed)."""
    code, out, err = run(["cat", str(table / "dt=d0")], capsys)
    return code, err if code else f"{len(out.splitlines())} rows"


def delete(table: Path, capsys: Capsys) -> tuple[int, str]:
    code, out, err = run(["delete", str(table), "--where", "id >= 0"], capsys)
    return code, err if code else out


def verify(table: Path, capsys: Capsys) -> tuple[int, str]:
    code, out, err = run(["verify", str(table)], capsys)
    return code, out + err


def compact_major(table: Path, capsys: Capsys) -> tuple[int, str]:
    code, out, err = run(["compact", str(table), "--major"], capsys)
    return code, err if code else out


def compact_minor(table: Path, capsys: Capsys) -> tuple[int, str]:
    code, out, err = run(["compact", str(table), "--minor"], capsys)
    return code, err if code else out


def clean(table: Path, capsys: Capsys) -> tuple[int, str]:
    code, out, err = run(["clean", str(table), "--retention", "0"], capsys)
    return code, err if code else out


READERS: dict[str, Callable[[Path, Capsys], tuple[int, str]]] = {
    "to_arrow": read_api, "to_batches": read_batches_api, "plan_files": plan_api,
    "cat": cat, "delete": delete, "verify": verify, "compact-major": compact_major,
    "compact-minor": compact_minor, "clean": clean,
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_committed_data_is_named_never_lost(tmp_path: Path, capsys: Capsys,
                                                    damage: str, reader: str) -> None:
    table = make_table(tmp_path, capsys)
    damaged = DAMAGE[damage](table)
    before = files_on_disk(table)
    code, said = READERS[reader](table, capsys)
    assert code != 0, f"{reader} exited 0 on {damage}: {said}"
    assert str(damaged) in said, said
    assert files_on_disk(table) == before, "a failed read changed the table"


@pytest.mark.parametrize("damage", ["file-removed", "directory-removed"])
def test_a_partition_without_damage_still_reads(tmp_path: Path, capsys: Capsys,
                                                damage: str) -> None:
    """Damage in dt=d0 fails reads of dt=d0, and reads of dt=d1 alone return its rows."""
    table = make_table(tmp_path, capsys)
    DAMAGE[damage](table)
    code, said = cat_partition(table, capsys)
    assert code == 3 and "dt=d0" in said, said
    code, out, err = run(["cat", str(table / "dt=d1"), "--json"], capsys)
    assert code == 0, err
    ids = sorted(json.loads(line)["id"] for line in out.splitlines())
    assert ids == [i for k in (1, 3, 5) for i in range(k * ROWS, (k + 1) * ROWS)]


def test_an_intact_table_reads_every_row_through_every_reader(tmp_path: Path,
                                                              capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys)
    assert read_api(table, capsys) == (0, f"{LOADS * ROWS} rows")
    assert read_batches_api(table, capsys) == (0, f"{LOADS * ROWS} rows")
    # One task per partition and bucket: two partitions of one bucket each.
    assert plan_api(table, capsys) == (0, "2 tasks")
    assert cat(table, capsys) == (0, f"{LOADS * ROWS} rows")
    assert verify(table, capsys)[0] == 0
