"""The one pass of a many-table micro-batch (`_many_tasks`, docs/many-tables.md "Planning"),
run as a task outside Spark: one task writes each table's rows of a batch mixing routing keys,
each key's rows in offset order, records routed nowhere to the anchor with the reason, and a
bad record under on_bad_record="fail" leaves no file of any table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from ingest.acid import read_bucket_file
from ingest.spark.options import SinkOptions
from ingest.spark.sink._results import BadRecords, FileWritten, OffsetsRead, from_arrow
from ingest.spark.sink._tasks import DEAD_LETTER_SCHEMA, DeltaTarget, TaskPlan
from ingest.spark.sink.many._route_keys import ROUTE_ERROR, ROUTE_KEY
from ingest.spark.sink.many._tasks import PLAN_INDEX, ManyPlan, many_write_task, one_pass

SCHEMA = pa.schema([("id", pa.int64())])
DELTA = "delta_0000001_0000001_0000"


def _plan(root: Path, name: str, **options: Any) -> TaskPlan:
    return TaskPlan(target=DeltaTarget(str(root / name), 1, DELTA),
                    dead_letter=DeltaTarget(str(root / f"{name}__dead_letter"), 1, DELTA),
                    row_schema=SCHEMA, parse_schema=SCHEMA, partition_column=None,
                    partition_from="none", bucket_columns=(), bucket_count=0, append=False,
                    close_files=True, options=SinkOptions(**options))


def _anchor(root: Path) -> TaskPlan:
    anchor = DeltaTarget(str(root / "_unrouted"), 1, DELTA)
    return TaskPlan(target=anchor, dead_letter=anchor, row_schema=DEAD_LETTER_SCHEMA,
                    parse_schema=DEAD_LETTER_SCHEMA, partition_column=None,
                    partition_from="none", bucket_columns=(), bucket_count=0, append=False,
                    close_files=False, options=SinkOptions())


def _rows(records: list[tuple[str, int, bytes]], keys: list[str | None] | None = None,
          errors: list[str | None] | None = None) -> pa.RecordBatch:
    columns = {"key": pa.array([None] * len(records), pa.binary()),
               "value": pa.array([v for _, _, v in records], pa.binary()),
               "topic": pa.array([t for t, _, _ in records], pa.string()),
               "partition": pa.array([0] * len(records), pa.int32()),
               "offset": pa.array([o for _, o, _ in records], pa.int64())}
    if keys is not None:
        columns[ROUTE_KEY] = pa.array(keys, pa.string())
        columns[ROUTE_ERROR] = pa.array(errors, pa.string())
    return pa.record_batch(list(columns.values()), names=list(columns))


def _results(plan: ManyPlan, batches: list[pa.RecordBatch]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for batch in many_write_task(plan, iter(batches)):
        for index in set(batch.column(PLAN_INDEX).to_pylist()):
            part = batch.filter(pa.compute.equal(batch.column(PLAN_INDEX), index))
            out.setdefault(index, []).extend(from_arrow(part.drop_columns([PLAN_INDEX])))
    return out


def _written(results: list[Any], target: str) -> list[dict[str, Any]]:
    return [e["row"] for r in results if isinstance(r, FileWritten) and r.target == target
            for e in read_bucket_file(r.staging).to_pylist()]


def test_one_task_writes_each_topics_rows_to_its_table_and_the_rest_to_the_anchor(
        tmp_path: Path) -> None:
    a, b = _plan(tmp_path, "a"), _plan(tmp_path, "b")
    plan = ManyPlan((a, b), {"ta": 0, "tb": 1}, "topic", {"tc": "no route for topic tc"},
                    _anchor(tmp_path))
    mixed = _rows([("tb", 0, b'{"id": 10}'), ("ta", 0, b'{"id": 1}'), ("tc", 0, b'{"id": 99}'),
                   ("ta", 1, b"not json"), ("tb", 1, b'{"id": 11}'), ("ta", 2, b'{"id": 2}')])
    results = _results(plan, [mixed, _rows([("ta", 3, b'{"id": 3}')])])
    assert [r["id"] for r in _written(results[0], "table")] == [1, 2, 3]  # offset order
    assert [r["id"] for r in _written(results[1], "table")] == [10, 11]
    assert [r["offset"] for r in _written(results[0], "dead_letter")] == [1]
    assert not _written(results[1], "dead_letter")
    unrouted = _written(results[2], "dead_letter")
    assert [(r["topic"], r["error"]) for r in unrouted] == [("tc", "no route for topic tc")]
    reads = {i: sorted((r.topic, r.min_offset, r.max_offset) for r in rs
                       if isinstance(r, OffsetsRead)) for i, rs in results.items()}
    assert reads == {0: [("ta", 0, 3)], 1: [("tb", 0, 1)], 2: [("tc", 0, 0)]}


def test_by_field_a_record_without_a_key_goes_to_the_anchor_with_the_key_stages_reason(
        tmp_path: Path) -> None:
    plan = ManyPlan((_plan(tmp_path, "orders"),), {"orders": 0}, ROUTE_KEY, {},
                    _anchor(tmp_path))
    batch = _rows([("cdc", 0, b'{"id": 1}'), ("cdc", 1, b'{"id": 2}')], keys=["orders", None],
                  errors=[None, "no field source.table"])
    results = _results(plan, [batch])
    assert [r["id"] for r in _written(results[0], "table")] == [1]
    assert [r["error"] for r in _written(results[1], "dead_letter")] == ["no field source.table"]


def test_a_bad_record_under_fail_leaves_no_file_of_any_table(tmp_path: Path) -> None:
    a, b = _plan(tmp_path, "a", on_bad_record="fail"), _plan(tmp_path, "b", on_bad_record="fail")
    plan = ManyPlan((a, b), {"ta": 0, "tb": 1}, "topic")
    results = _results(plan, [_rows([("ta", 0, b'{"id": 1}')]), _rows([("tb", 0, b"{")])])
    assert list(results) == [1]
    assert [type(r) for r in results[1]] == [BadRecords]
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # table a's file went too


def test_a_key_the_plan_does_not_know_fails_the_task(tmp_path: Path) -> None:
    plan = ManyPlan((_plan(tmp_path, "a"),), {"ta": 0}, "topic")
    with pytest.raises(RuntimeError, match="routing key 'tx' has no table"):
        _results(plan, [_rows([("ta", 0, b'{"id": 1}'), ("tx", 0, b'{"id": 2}')])])
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_only_tables_needing_no_shuffle_run_in_one_pass(tmp_path: Path) -> None:
    from dataclasses import replace

    plain = _plan(tmp_path, "a")
    assert one_pass([plain, _plan(tmp_path, "b")]) and one_pass([])
    assert not one_pass([plain, replace(plain, bucket_count=4, bucket_columns=("id",))])
    assert not one_pass([replace(plain, partition_column="dt", partition_from="column")])


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _comparable(results: dict[int, list[Any]]) -> dict[int, list[Any]]:
    return {i: sorted(repr(r) for r in rs) for i, rs in results.items()}


MIXED = [("tb", 0, b'{"id": 10, "x": 1}'), ("ta", 0, b'{"id": 1}'), ("tc", 0, b'{"id": 99}'),
         ("ta", 1, b"not json"), ("tb", 1, b'{"id": "eleven"}'), ("ta", 2, b'{"id": 2}'),
         ("tb", 2, b'{"id": 12, "x": "s"}'), ("ta", 3, b'{"id": 3, "x": 2.5}'),
         ("tb", 3, b"[]"), ("ta", 4, b'{"id": 4, "y": true}'), ("tb", 4, b'{"id": 14}')]


@pytest.mark.parametrize("on_new_field", ["ignore", "dead-letter"])
def test_tables_sharing_one_parse_write_what_each_tables_own_parse_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_new_field: str) -> None:
    """One parse of a batch for all its tables gives each table the same files, dead letters
    (with their reasons), offsets and new fields as a parse per table (the path before)."""
    import ingest.spark.sink.many._tasks as many_tasks

    def run(root: Path) -> dict[int, list[Any]]:
        a = _plan(root, "a", on_new_field=on_new_field)
        b = _plan(root, "b", on_new_field=on_new_field)
        plan = ManyPlan((a, b), {"ta": 0, "tb": 1}, "topic", {"tc": "no route for topic tc"},
                        _anchor(root))
        return _results(plan, [_rows(MIXED), _rows(list(reversed(MIXED)))])

    parses: list[int] = []
    real = many_tasks.parse_batch
    monkeypatch.setattr(many_tasks, "parse_batch",
                        lambda p, b: parses.append(b.num_rows) or real(p, b))
    shared = run(tmp_path / "shared")
    assert parses == [len(MIXED)] * 2  # once per input batch, for both tables
    monkeypatch.setattr(many_tasks, "shared_parser", lambda plans: None)
    apart = run(tmp_path / "apart")
    assert parses == [len(MIXED)] * 2  # each table parsed its own rows
    assert _comparable(shared) == {i: sorted(r.replace("/apart/", "/shared/") for r in rs)
                                   for i, rs in _comparable(apart).items()}
    assert _files(tmp_path / "shared") == _files(tmp_path / "apart")
    dead_a = sorted(r["offset"] for r in _written(shared[0], "dead_letter"))
    dead_b = _written(shared[1], "dead_letter")
    assert all(r["topic"] == "tb" and r["error"] for r in dead_b)
    if on_new_field == "ignore":
        assert dead_a == [1, 1]  # "not json", in both batches
        assert sorted(r["offset"] for r in dead_b) == [1, 1, 3, 3]  # a string id; not an object
        assert sorted(r["id"] for r in _written(shared[0], "table")) == [1, 1, 2, 2, 3, 3, 4, 4]
    else:  # and the records holding a new field
        assert dead_a == [1, 1, 3, 3, 4, 4]
        assert sorted(r["offset"] for r in dead_b) == [0, 0, 1, 1, 2, 2, 3, 3]
        assert sorted(r["id"] for r in _written(shared[0], "table")) == [1, 1, 2, 2]


def test_a_table_failing_to_finish_leaves_no_file_of_any_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables finish side by side; one failing fails the task once every other finished, and
    no file of any table is left."""
    from ingest.spark.sink._tasks import TableWrite

    real = TableWrite.finish

    def finish(self: TableWrite) -> list[Any]:
        if self.plan.target.root.endswith("/c"):
            raise OSError("disk full")
        return real(self)

    monkeypatch.setattr(TableWrite, "finish", finish)
    plans = tuple(_plan(tmp_path, name) for name in "abcd")
    plan = ManyPlan(plans, {f"t{n}": i for i, n in enumerate("abcd")}, "topic")
    with pytest.raises(OSError, match="disk full"):
        _results(plan, [_rows([(f"t{n}", i, b'{"id": 1}') for i, n in enumerate("abcd")])])
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_two_keys_routed_to_one_table_write_one_file_key_after_key(tmp_path: Path) -> None:
    """Two routing keys of one table in a batch (two spellings of a route) are written by one
    writer, in turn: one file holding both keys' rows, each key's in offset order."""
    plan = ManyPlan((_plan(tmp_path, "a"), _plan(tmp_path, "b")), {"ta": 0, "tx": 0, "tb": 1},
                    "topic")
    batch = _rows([("ta", 0, b'{"id": 1}'), ("tx", 0, b'{"id": 100}'), ("tb", 0, b'{"id": 7}'),
                   ("tx", 1, b'{"id": 101}'), ("ta", 1, b'{"id": 2}')])
    results = _results(plan, [batch, _rows([("tx", 2, b'{"id": 102}'), ("ta", 2, b"{")])])
    files = [r for r in results[0] if isinstance(r, FileWritten) and r.target == "table"]
    assert len(files) == 1
    assert [r["id"] for r in _written(results[0], "table")] == [1, 2, 100, 101, 102]
    assert [r["offset"] for r in _written(results[0], "dead_letter")] == [2]
    assert [r["id"] for r in _written(results[1], "table")] == [7]
