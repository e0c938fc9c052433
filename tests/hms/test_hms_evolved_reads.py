"""An evolved table read by the engines that query the Hive Metastore (docs/format.md §25), on
Hive 4.0.1 and 3.1.3: files written before `ingest alter` added a column and widened INT to
BIGINT and FLOAT to DOUBLE, beside files written after, read back exactly as our reader reads
them — the added column as NULL in old rows, old values widened — through Trino 476's SELECT
and Hive 4's row and vectorized ACID readers (which take the columns from the metastore, as a
Hive query does, and map each file's ORC schema onto them); and again after a major
compaction, whose base holds the new schema."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pytest
from hms.hive4 import read_rows, read_rows_vectorized
from hms_server import Server, trino_query
from support import ok_json

import ingest
from ingest.table import Table
from ingest.table.write import create_table
from ingest.txn import hms

pytestmark = [pytest.mark.hms, pytest.mark.trino, pytest.mark.java, pytest.mark.slow]

Row = tuple[str, int, float | None, str | None, str | None]  # (dt, id, f, value, note)

F32 = float(pa.array([0.1], pa.float32()).cast(pa.float64())[0].as_py())
"""FLOAT 0.1 widened to DOUBLE: the float's own value (0.10000000149011612), not 0.1 — what
Hive's ORC schema evolution (a float column read into a double vector) gives."""


@pytest.fixture(params=["4", "3"], ids=["hive4", "hive3"])
def engines(request: pytest.FixtureRequest) -> tuple[Server, Server]:
    """(the metastore, Trino on it), on Hive 4 and Hive 3.1."""
    return (request.getfixturevalue(f"hms{request.param}"),
            request.getfixturevalue(f"trino_on_hms{request.param}"))


def _check(t: Table, name: str, uri: str, trino: Server, expected: list[Row],
           when: str) -> None:
    """Ours, Trino's SELECT and both Hive 4 readers read exactly `expected`, with the
    evolved column types."""
    ours = t.to_arrow()
    assert [(f.name, f.type) for f in ours.schema] == [
        ("id", pa.int64()), ("f", pa.float64()), ("value", pa.string()),
        ("note", pa.string()), ("dt", pa.string())], when
    assert sorted((r["dt"], r["id"], r["f"], r["value"], r["note"])
                  for r in ours.to_pylist()) == expected, f"ours, {when}"
    described = trino_query(trino, f"DESCRIBE {name}")
    assert [(c[0], c[1]) for c in described] == [
        ("id", "bigint"), ("f", "double"), ("value", "varchar"), ("note", "varchar"),
        ("dt", "varchar")], f"Trino's columns, {when}"
    assert described[3][3] == "added", f"the added column's comment in Trino, {when}"
    got = trino_query(trino, f"SELECT dt, id, f, value, note FROM {name}")
    assert sorted(tuple(r) for r in got) == expected, f"Trino, {when}"  # type: ignore[misc]
    with hms.connect(uri) as conn:
        hive = read_rows(conn, name)
        vectorized = read_rows_vectorized(conn, name)
    for reader, rows in (("row", hive), ("vectorized", vectorized)):
        assert sorted((r["dt"], r["id"], r["f"], r["value"], r["note"]) for r in rows) == \
            expected, f"Hive 4's {reader} reader, {when}"


def _file_types(location: str) -> set[tuple[str, ...]]:
    """The (id, f) types of the row struct of every bucket file of the table's partitions."""
    found = set()
    for path in Path(location).glob("dt=*/*/bucket_*"):
        if path.name.endswith("_flush_length"):
            continue
        row = orc.ORCFile(str(path)).schema.field("row").type
        found.add((str(row.field("id").type), str(row.field("f").type)))
    return found


def test_trino_and_hive4_read_old_and_new_files_of_an_evolved_table(
        engines: tuple[Server, Server], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    metastore, trino = engines
    location = str(tmp_path / "wh" / "evolved")
    name = f"ev_{uuid.uuid4().hex[:10]}.evolved"
    create_table(location, "id INT, f FLOAT, value STRING", name=name, partitioned_by=["dt"],
                 metastore=metastore.uri)
    t = ingest.open_table(location, metastore=metastore.uri)
    # Before the change: INT and FLOAT files in partitions a and b (write ids 1 and 2).
    t.load(pa.table({"id": pa.array([1, 2**31 - 1, -2**31], pa.int32()),
                     "f": pa.array([1.5, 0.1, None], pa.float32()),
                     "value": ["a1", "a2", None], "dt": ["a", "a", "b"]}))
    t.load(pa.table({"id": pa.array([3], pa.int32()), "f": pa.array([-2.25], pa.float32()),
                     "value": ["b3"], "dt": ["b"]}))
    changed = ok_json(["alter", location, "--add-columns", "note STRING COMMENT 'added'",
                       "--change-column", "id BIGINT", "--change-column", "f DOUBLE",
                       "--metastore", metastore.uri], capsys)
    assert changed["columns"] == "id BIGINT, f DOUBLE, value STRING, note STRING COMMENT 'added'"
    # After it: BIGINT and DOUBLE files beside the old ones (a, b) and in a new partition (c).
    t = ingest.open_table(location, metastore=metastore.uri)
    t.load(pa.table({"id": [2**40, 4, 5], "f": [1e300, 0.1, None],
                     "value": ["a-new", "b-new", "c5"], "note": ["x", None, "z"],
                     "dt": ["a", "b", "c"]}))
    assert _file_types(location) == {("int32", "float"), ("int64", "double")}
    expected: list[Row] = sorted([
        ("a", 1, 1.5, "a1", None), ("a", 2**31 - 1, F32, "a2", None),
        ("b", -2**31, None, None, None), ("b", 3, -2.25, "b3", None),
        ("a", 2**40, 1e300, "a-new", "x"), ("b", 4, 0.1, "b-new", None),
        ("c", 5, None, "c5", "z")])
    _check(t, name, metastore.uri, trino, expected, "old and new files")
    # A major compaction rewrites a and b under the new schema.
    report = t.compact("major")
    assert all(p.result is not None for p in report.partitions), report
    _check(t, name, metastore.uri, trino, expected, "after a major compaction")
    bases = [p for p in Path(location).glob("dt=*/base_*/bucket_*")
             if not p.name.endswith("_flush_length")]
    assert bases and all(
        str(orc.ORCFile(str(p)).schema.field("row").type) ==
        "struct<id: int64, f: double, value: string, note: string>" for p in bases), bases
