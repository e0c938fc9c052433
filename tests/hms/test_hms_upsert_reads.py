"""Keyed writes over a Hive Metastore 4.0.1 (docs/format.md §24) read by the engines that
query it: a table upserted (`Table.upsert`) and fed Debezium changes (`Table.apply_changes`),
i.e. partitions holding a delete_delta and a delta of one write id, reads back exactly, with
the same ROW__IDs, through Trino 476's SELECT and Hive 4's row and vectorized ACID readers —
and again after a major compaction, after keyed writes over its base, and after a minor
compaction of those."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hms.hive4 import read_rows, read_rows_vectorized
from hms_server import Server, trino_query

import ingest
from ingest.table import Table
from ingest.table.write import create_table
from ingest.txn import hms

pytestmark = [pytest.mark.hms, pytest.mark.trino, pytest.mark.java, pytest.mark.slow]

Row = tuple[str, int, str | None, int]  # (dt, id, value, v)


def _ours(t: Table) -> tuple[list[Row], list[tuple[int, int, int, str, int]]]:
    """Our reader's rows, sorted, and their ROW__IDs (writeid, bucketid, rowid, dt, id)."""
    found = t.to_arrow(with_row_id=True).to_pylist()
    rows = sorted((r["dt"], r["id"], r["value"], r["v"]) for r in found)
    ids = sorted((r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"],
                  r["dt"], r["id"]) for r in found)
    return rows, ids


def _check(t: Table, name: str, uri: str, trino: Server, want: dict[tuple[str, int], Any],
           when: str) -> None:
    """Ours, Trino's SELECT and both Hive 4 readers read exactly `want`; Hive 4's ROW__IDs
    are ours."""
    expected = sorted((dt, i, r["value"], r["v"]) for (dt, i), r in want.items())
    rows, ids = _ours(t)
    assert rows == expected, f"ours, {when}"
    trino = sorted((str(r[0]), int(r[1]), r[2], int(r[3])) for r in trino_query(
        trino, f"SELECT dt, id, value, v FROM {name}"))
    assert trino == expected, f"Trino, {when}"
    with hms.connect(uri) as conn:
        hive = read_rows(conn, name)
        vectorized = read_rows_vectorized(conn, name)
    assert sorted((r["dt"], r["id"], r["value"], r["v"]) for r in hive) == expected, \
        f"Hive 4's row reader, {when}"
    assert sorted((r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"],
                   r["dt"], r["id"]) for r in hive) == ids, f"ROW__IDs, {when}"
    assert sorted((r["dt"], r["id"], r["value"], r["v"]) for r in vectorized) == expected, \
        f"Hive 4's vectorized reader, {when}"


def _directories(location: str, dt: str) -> list[str]:
    return sorted(p.name for p in (Path(location) / f"dt={dt}").iterdir()
                  if p.is_dir() and not p.name.startswith((".", "_")))


def test_trino_and_hive4_read_upserted_and_cdc_tables_exactly(
        hms4: Server, trino_on_hms4: Server, tmp_path: Path) -> None:
    location = str(tmp_path / "wh" / "keyed")
    name = f"up_{uuid.uuid4().hex[:10]}.keyed"
    create_table(location, "id BIGINT, value STRING, v BIGINT", name=name,
                 partitioned_by=["dt"], buckets=2, bucketed_by=["id"], metastore=hms4.uri)
    t = ingest.open_table(location, metastore=hms4.uri)
    key = ["id", "dt"]
    model: dict[tuple[str, int], dict[str, Any]] = {}
    # 1. A plain load: 12 rows in each of two partitions (write id 1).
    for dt in ("a", "b"):
        t.load(pa.table({"id": pa.array(range(12), pa.int64()), "value": [f"{dt}{i}" for i in
                                                                       range(12)],
                         "v": pa.array([1] * 12, pa.int64()), "dt": [dt] * 12}))
        model.update({(dt, i): {"value": f"{dt}{i}", "v": 1} for i in range(12)})
    # 2. An upsert: updates in both partitions and new keys, one write id.
    changes = [*({"id": i, "value": f"u{i}", "v": 2, "dt": "a"} for i in range(0, 12, 3)),
               *({"id": i, "value": f"n{i}", "v": 1, "dt": "b"} for i in (20, 21)),
               {"id": 5, "value": "b5-new", "v": 2, "dt": "b"}]
    result = t.upsert(changes, key=key, order_by="v")
    for c in changes:
        model[(c["dt"], c["id"])] = {"value": c["value"], "v": c["v"]}
    w = result.write_id
    assert w is not None and (result.counts.updated, result.counts.inserted) == (5, 2)
    # 3. Debezium changes: deletes, a tombstone, an update, a stale update, a re-insert.
    result = t.apply_changes([
        {"op": "d", "before": {"id": 1, "dt": "a", "v": 1}, "after": None},
        {"key": {"id": 2, "dt": "b"}, "value": None},
        {"op": "u", "before": None, "after": {"id": 4, "value": "again", "v": 3, "dt": "b"}},
        {"op": "u", "before": None, "after": {"id": 3, "value": "stale", "v": 1, "dt": "a"}},
        {"op": "d", "before": {"id": 20, "dt": "b", "v": 1}, "after": None},
        {"op": "c", "before": None, "after": {"id": 20, "value": "back", "v": 5, "dt": "b"}},
    ], key=key, order_by="v")
    del model[("a", 1)], model[("b", 2)]
    model[("b", 4)] = {"value": "again", "v": 3}
    model[("b", 20)] = {"value": "back", "v": 5}
    assert (result.counts.deleted, result.counts.stale, result.counts.updated) == (2, 1, 2)
    w2 = result.write_id
    assert w2 is not None
    # Split-update on disk: a delete_delta and a delta of each write id, in both partitions.
    for dt, writes in (("a", (w, w2)), ("b", (w, w2))):
        names = _directories(location, dt)
        for write_id in writes:
            if dt == "a" and write_id == w2:  # only a delete (id 1) here
                assert f"delete_delta_{write_id:07d}_{write_id:07d}_0000" in names
                continue
            assert {f"delta_{write_id:07d}_{write_id:07d}_0000",
                    f"delete_delta_{write_id:07d}_{write_id:07d}_0000"} <= set(names), names
    _check(t, name, hms4.uri, trino_on_hms4, model, "after the keyed writes")
    # 4. A major compaction folds the delete events into a base.
    report = t.compact("major")
    assert all(p.result is not None for p in report.partitions), report
    assert any(n.startswith("base_") for n in _directories(location, "a"))
    _check(t, name, hms4.uri, trino_on_hms4, model, "after a major compaction")
    # 5. More keyed writes over the base (delete events of its rows), two write ids in each
    # partition, then a minor compaction of those deltas and delete deltas. (A minor right
    # after the major, at the same high-water mark, the metastore refuses until the major is
    # cleaned.)
    t.apply_changes([{"op": "d", "before": {"id": 0, "dt": "a"}, "after": None},
                     {"op": "u", "before": None,
                      "after": {"id": 6, "value": "over-base", "v": 9, "dt": "a"}},
                     {"op": "u", "before": None,
                      "after": {"id": 8, "value": "b8", "v": 6, "dt": "b"}}],
                    key=key, order_by="v")
    t.upsert([{"id": 7, "value": "b7", "v": 4, "dt": "b"},
              {"id": 30, "value": "b30", "v": 1, "dt": "b"},
              {"id": 9, "value": "a9", "v": 5, "dt": "a"}], key=key, order_by="v")
    del model[("a", 0)]
    model[("a", 6)] = {"value": "over-base", "v": 9}
    model[("b", 8)] = {"value": "b8", "v": 6}
    model[("a", 9)] = {"value": "a9", "v": 5}
    model[("b", 7)] = {"value": "b7", "v": 4}
    model[("b", 30)] = {"value": "b30", "v": 1}
    _check(t, name, hms4.uri, trino_on_hms4, model, "after keyed writes over the base")
    report = t.compact("minor")
    assert all(p.result is not None for p in report.partitions), report
    _check(t, name, hms4.uri, trino_on_hms4, model, "after a minor compaction")
