"""What the read plan hands the merger so a file is not looked at twice: sizes and side files
from the directory listing, and the committed tail the manifest check hashed; and the merge's
filter of the row struct's fields (rows with deletes), which must equal pyarrow's filter."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pyarrow as pa
import pytest

import ingest
from ingest.acid.format import ValidWriteIdList, side_file_path
from ingest.acid.read import merge
from ingest.acid.read.merge import _filter
from ingest.acid.read.plan import Partition, plan_partition
from ingest.acid.read.tails import SideFileWarning
from ingest.orc import read_tail, tail_from_bytes
from ingest.table import Table
from ingest.table.write import create_table


def _upserted(tmp_path: Path) -> Table:
    location = str(tmp_path / "wh" / "t")
    create_table(location, "id BIGINT, value STRING", buckets=2, bucketed_by=["id"])
    t = ingest.open_table(location)
    t.load(pa.table({"id": pa.array(range(40), pa.int64()),
                     "value": [f"v{i}" for i in range(40)]}))
    t.apply_changes([{"op": "u", "after": {"id": 1, "value": "one"}},
                     {"op": "d", "before": {"id": 2}},
                     {"op": "c", "after": {"id": 100, "value": "new"}}], key=["id"])
    return t


def test_the_plan_hands_each_committed_tail_to_the_read(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    t = _upserted(tmp_path)
    plan = t.scan().plan_files()
    fs = fsspec.filesystem("file")
    lengths, tails = plan.read_lengths(), plan.read_tails()
    files = [f for task in plan.tasks for f in task.files]
    assert len(files) == 6 and set(tails) == set(lengths) == {f.path for f in files}
    for f in files:
        assert f.size == fs.size(f.path) == lengths[f.path] and f.side_file is False
        tail = tail_from_bytes(tails[f.path], lengths[f.path], path=f.path)
        assert tail.footer == read_tail(fs, f.path, lengths[f.path]).footer
    read: list[str] = []
    real = merge.read_tail
    monkeypatch.setattr(merge, "read_tail", lambda fs, path, length, **kw: (
        read.append(path), real(fs, path, length, **kw))[1])
    rows = {r["id"]: r["value"] for r in t.to_arrow().to_pylist()}
    assert len(rows) == 40 and rows[1] == "one" and 2 not in rows and rows[100] == "new"
    # Only the row schema's look at the newest data file reads a tail; the merge reads none.
    assert len(read) <= 1


def test_a_listed_side_file_is_still_read(tmp_path: Path) -> None:
    t = _upserted(tmp_path)
    fs = fsspec.filesystem("file")
    root = t.location.removeprefix("file://")
    delta = next(p for p in sorted(Path(root).glob("delta_*/bucket_*")))
    size = delta.stat().st_size
    # A side file that says the whole file is readable: listed, so its length is asked for.
    Path(side_file_path(str(delta))).write_bytes(size.to_bytes(8, "big"))
    snapshot = ValidWriteIdList.all_committed("t", 2)
    _, files = plan_partition(fs, Partition(root), snapshot)
    by_path = {f.path: f for f in files}
    listed = by_path[str(delta)]
    assert listed.side_file is True and listed.size == size
    assert listed.listed_without_side_file is None
    others = [f for f in files if f.path != str(delta)]
    assert others and all(f.side_file is False and f.listed_without_side_file == f.size
                          for f in others)
    assert merge.read_length(fs, str(delta), snapshot) == size
    # A side file stopping below committed rows is read and named, as before the listing
    # knew it (the file's own footer past it is read up to).
    Path(side_file_path(str(delta))).write_bytes((0).to_bytes(8, "big"))
    with pytest.warns(SideFileWarning, match="its side file stops at 0 bytes"):
        assert merge.read_length(fs, str(delta), snapshot) == size


def _batch(struct_nulls: bool) -> pa.RecordBatch:
    row = pa.StructArray.from_arrays(
        [pa.array([1, None, 3, 4, 5], pa.int64()), pa.array(["a", "b", None, "d", "e"])],
        names=["id", "value"],
        mask=pa.array([False, False, True, False, False]) if struct_nulls else None)
    return pa.RecordBatch.from_arrays([pa.array([7, 7, 7, 7, 7], pa.int64()), row],
                                      names=["rowId", "row"])


@pytest.mark.parametrize("struct_nulls", [False, True])
def test_filtering_the_row_fields_equals_filtering_the_struct(struct_nulls: bool) -> None:
    batch = _batch(struct_nulls)
    mask = pa.array([True, False, True, True, False])
    got = _filter(batch, mask)
    assert got.schema == batch.schema
    assert got.to_pylist() == batch.filter(mask).to_pylist()
    assert got.num_rows == 3
