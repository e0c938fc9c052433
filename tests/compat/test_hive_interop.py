"""Our snapshot reader against Hive's own classes (Hive 2.3 from pyspark's jars).

(a) Tables written by Hive's `OrcRecordUpdater` read as Hive says they should, with and without
split-update, with a streaming writer still open (side file). (b) On tables we write, Hive's
`AcidUtils.getAcidState` chooses the same base and deltas as our `acid_state` for the same
snapshot. Hive 2.x has one id space (txn id == write id), so write-id lists convert 1:1.
"""

from __future__ import annotations

from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.orc as po
import pytest
from compat import javatools
from conftest import require
from support import SIMPLE_SCHEMA, simple_table, write_deletes

from ingest.acid import BucketFileOptions, BucketWriter, ValidWriteIdList
from ingest.acid.format.names import (
    encode_bucket_property,
    format_base,
    format_delta,
    write_compacted_marker,
)
from ingest.acid.read.directories import acid_state
from ingest.acid.read.reader import read_table
from ingest.errors import NotEnoughHistoryError

pytestmark = pytest.mark.java

LONG_MAX = 9223372036854775807
FS = fsspec.filesystem("file")


@pytest.fixture(autouse=True)
def _java() -> None:
    ok, why = javatools.available()
    require(ok, f"Java and pyspark's jars for the Hive tools ({why})")


def _hive_to_write_id_list(valid_txns: str) -> str:
    """Hive 2.x `hwm:minOpen[:exceptions]` (all exceptions aborted here) -> our string form."""
    hwm, _min_open, *exceptions = valid_txns.split(":")
    return f"default.ref:{hwm}:{LONG_MAX}::{','.join(exceptions)}"


@pytest.mark.parametrize("scenario", ["basic", "streaming_open"])
@pytest.mark.parametrize("transactional_properties", ["default", "legacy"])
def test_read_table_written_by_hive(tmp_path: Path, scenario: str,
                                    transactional_properties: str) -> None:
    table = tmp_path / "ref"
    manifest = javatools.hive_write_reference_table(
        table, scenario, transactional_properties=transactional_properties)
    assert manifest["expected_rows"].keys() == manifest["valid_txns"].keys()
    for name, valid_txns in manifest["valid_txns"].items():
        got = read_table(str(table), _hive_to_write_id_list(valid_txns), with_row_id=True)
        rows = sorted(({"id": r["id"], "value": r["value"]} for r in got.to_pylist()),
                      key=lambda r: r["id"])
        assert rows == manifest["expected_rows"][name], name

    # ROW__IDs are the ones Hive assigned (split-update gives the updated row a new one).
    got = read_table(str(table), _hive_to_write_id_list(manifest["valid_txns"]["all_committed"]),
                     with_row_id=True)
    row_ids = {r["id"]: r["row__id"] for r in got.to_pylist()}
    for txn in manifest["txns"]:
        for ins in txn["inserted"]:
            rid = ins["row_id"]
            if ins["row"]["id"] in row_ids and ins["row"]["id"] != 2:
                assert row_ids[ins["row"]["id"]] == {
                    "writeid": rid["originalTransaction"], "bucketid": rid["bucket"],
                    "rowid": rid["rowId"]}
        for up in txn["updated"]:
            key = "new_row_id" if transactional_properties == "default" else "old_row_id"
            rid = up[key]
            assert row_ids[up["row"]["id"]] == {
                "writeid": rid["originalTransaction"], "bucketid": rid["bucket"],
                "rowid": rid["rowId"]}


def _write(directory: Path, write_id: int, n: int = 2, *, statement_id: int = 0) -> None:
    with BucketWriter.create(str(directory / "bucket_00000"),
                             BucketFileOptions(write_id=write_id, row_schema=SIMPLE_SCHEMA,
                                               statement_id=statement_id)) as w:
        w.write(simple_table(range(write_id * 100, write_id * 100 + n)))


def _streaming(directory: Path, write_ids: range) -> None:
    path = str(directory / "bucket_00000")
    for i, wid in enumerate(write_ids):
        w = (BucketWriter.create(path, BucketFileOptions(write_id=wid,
                                                         row_schema=SIMPLE_SCHEMA)) if i == 0
             else BucketWriter.open_append(path, BucketFileOptions(write_id=wid)))
        w.write(simple_table(range(wid * 100, wid * 100 + 2)))
        w.flush()
        w.abandon()


@pytest.fixture
def our_tables(tmp_path: Path) -> list[Path]:
    """Two partitions written by us: one with a compacted base, one with statement ids and a
    minor-compacted delta; both with a streaming batch (side file), delete deltas, aborted
    and open write ids."""
    a = tmp_path / "t" / "p=a"
    _write(a / format_delta(1, 1, 0), 1)
    _write(a / format_delta(2, 2, 0), 2)
    base = a / format_base(3)
    _write(base, 3, 5)
    write_compacted_marker(FS, str(base))
    _write(a / format_delta(4, 4, 0), 4)
    _streaming(a / format_delta(5, 8, None), range(5, 9))
    write_deletes(
        str(a / format_delta(9, 9, 0, delete=True) / "bucket_00000"),
        pa.table({"originalTransaction": [3], "bucket": [encode_bucket_property(0, 0)],
                  "rowId": [1]}),
        write_id=9)
    _write(a / format_delta(9, 9, 0), 9)
    _write(a / format_delta(10, 10, 0), 10)
    _write(a / format_delta(11, 11, 0), 11)

    b = tmp_path / "t" / "p=b"
    _write(b / format_delta(1, 1, 0), 1)
    _write(b / format_delta(2, 2, 0), 2, statement_id=0)
    _write(b / format_delta(2, 2, 1), 2, statement_id=1)
    _write(b / format_delta(1, 2, None), 1)  # minor compaction of 1..2
    _write(b / format_delta(3, 3, 0), 3)
    _streaming(b / format_delta(4, 6, None), range(4, 7))
    _write(b / format_delta(7, 7, 0), 7)
    _write(b / format_delta(10, 10, 0), 10)

    c = tmp_path / "t" / "p=c"  # converted from a plain ORC table: original files + deltas
    c.mkdir(parents=True)
    for name in ("000000_0", "000000_0_copy_1", "000001_0"):
        po.write_table(simple_table(range(2)), str(c / name))
    _write(c / format_delta(1, 1, 0), 1)
    _write(c / format_delta(5, 5, 0), 5)
    d = tmp_path / "t" / "p=d"  # ... and after a major compaction made base_2
    d.mkdir(parents=True)
    po.write_table(simple_table(range(2)), str(d / "000000_0"))
    _write(d / format_delta(1, 1, 0), 1)
    _write(d / format_base(2), 1)  # compaction keeps the rows' own write ids
    write_compacted_marker(FS, str(d / format_base(2)))
    _write(d / format_delta(3, 3, 0), 3)
    return [a, b, c, d]


SNAPSHOTS = [
    "default.t:11::",  # everything committed
    "default.t:11:11:11:10",  # 10 aborted, 11 open
    "default.t:11:6:6:7,10",  # an open id inside the streaming batch, aborted after it
    "default.t:8:::5,6,7,8",  # the whole streaming batch aborted
    "default.t:9:9:9:",  # the delete delta's txn still open
    "default.t:4::",
    "default.t:3:::2",
    "default.t:2:1:1:",  # below the compacted base: not enough history on p=a
    "default.t:0::",
]


def test_hive_chooses_the_same_directories(our_tables: list[Path]) -> None:
    queries = [(str(part), s) for part in our_tables for s in SNAPSHOTS]
    results = javatools.hive_acid_state_many(queries, raise_on_error=False)
    for (part, snapshot), hive in zip(queries, results, strict=True):
        where = f"{Path(part).name} @ {snapshot}"
        snap = ValidWriteIdList.from_hive_string(snapshot)
        if "error" in hive:
            assert "Not enough history" in hive["error"], where
            with pytest.raises(NotEnoughHistoryError):
                acid_state(FS, part, snap)
            continue
        ours = acid_state(FS, part, snap)
        rel = javatools.relative_state(hive, part)
        assert (ours.base.name if ours.base else None) == rel["base"], where
        assert [d.name for d in ours.deltas] == rel["deltas"], where
        assert sorted(ours.obsolete) == sorted(rel["obsolete"]), where
        # Hive 2.3 keeps the filesystem's listing order; Hive 3 sorts by path as we do (§1.6).
        assert list(ours.original_files) == sorted(rel["original_files"]), where


def test_our_reader_follows_hives_choice(our_tables: list[Path]) -> None:
    """The rows we read for each snapshot come only from Hive's chosen directories."""
    for part in our_tables:
        for snapshot in SNAPSHOTS:
            snap = ValidWriteIdList.from_hive_string(snapshot)
            try:
                got = read_table(str(part), snap, with_row_id=True)
            except NotEnoughHistoryError:
                continue
            write_ids = {r["writeid"] for r in got["row__id"].to_pylist()}
            assert all(snap.is_valid(w) for w in write_ids), f"{part.name} @ {snapshot}"

