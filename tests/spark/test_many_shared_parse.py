"""One parse shared by a many-table task's tables (`_shared_parse`): the part of the batch's
outcome a run of rows gets is what parsing those rows alone gives."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from ingest.records import parse_values
from ingest.spark.options import SinkOptions
from ingest.spark.sink._tasks import DeltaTarget, TaskPlan
from ingest.spark.sink.many._shared_parse import parse_batch, rows_of, shared_parser

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
VALUES = [b'{"id": 1, "x": 1}', None, b"not json", b'{"id": 2, "x": "s", "y": [1]}',
          b'{"id": "two"}', b"", b'{"id": 3}', b'{"id": 4, "x": 2.5}', b"[]",
          b'{"id": 5, "name": "n", "y": null}', None, b'{"id": 6, "z": {"a": 1}}']


def _plan(tmp_path: Path, schema: pa.Schema = SCHEMA, **options: object) -> TaskPlan:
    target = DeltaTarget(str(tmp_path / "t"), 1, "delta_0000001_0000001_0000")
    return TaskPlan(target=target, dead_letter=target, row_schema=schema, parse_schema=schema,
                    partition_column=None, partition_from="none", bucket_columns=(),
                    bucket_count=0, append=False, close_files=True,
                    options=SinkOptions(**options))  # type: ignore[arg-type]


def _outcome(parsed: object) -> tuple[object, ...]:
    p = parsed  # a ParsedValues
    return (p.rows.to_pylist(), p.good.to_pylist(), p.bad, p.skipped,  # type: ignore[attr-defined]
            {n: (f.at.to_pylist(), f.kinds().to_pylist())
             for n, f in p.new_by_field.items()},  # type: ignore[attr-defined]
            [a.to_pylist() for a in p.bad_arrays()])  # type: ignore[attr-defined]


@pytest.mark.parametrize("on_tombstone", ["dead-letter", "skip"])
@pytest.mark.parametrize("start, end", [(0, 12), (0, 3), (2, 9), (5, 6), (9, 12), (4, 4)])
def test_a_run_of_rows_gets_what_parsing_it_alone_gives(
        tmp_path: Path, start: int, end: int, on_tombstone: str) -> None:
    plan = _plan(tmp_path, on_tombstone=on_tombstone)
    batch = pa.record_batch({"value": pa.array(VALUES, pa.binary())})
    alone = parse_values(plan, batch.column("value").slice(start, end - start),
                         skip_tombstones=on_tombstone == "skip")
    assert _outcome(rows_of(parse_batch(plan, batch), start, end)) == _outcome(alone)


def test_only_plans_parsing_alike_share_a_parse(tmp_path: Path) -> None:
    from dataclasses import replace

    plan = _plan(tmp_path)
    assert shared_parser([plan, replace(plan, target=DeltaTarget("x", 2, "d"))]) is plan
    assert shared_parser([]) is None
    other = pa.schema([("id", pa.int64())])
    assert shared_parser([plan, replace(plan, parse_schema=other)]) is None
    assert shared_parser([plan, _plan(tmp_path, on_tombstone="dead-letter")]) is None
    assert shared_parser([plan, replace(plan, input="parsed")]) is None
    # Under evolve each table's own records give a new field's kind, so its column's type.
    evolving = _plan(tmp_path, on_new_field="evolve")
    assert shared_parser([evolving, replace(evolving, target=DeltaTarget("x", 2, "d"))]) is None
