"""--on-new-field judged by field with arrays (`_newfields`) decides exactly what judging each
record on its own does: the same records dead-lettered with the same reasons, the same
fields, kinds, counts and first records reported, in one stage and through META_NEW_FIELDS.

The reference below is the per-record rule (`_fields.new_field_reason` per record); batches
mix kinds, nulls, bad records, names Hive cannot take, a computed partition column and
several topics and partitions. No Spark.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest

from ingest.records.fields import FieldSeen, new_field_reason
from ingest.records.json_values import parse_json_values
from ingest.records.new_fields import NewField, by_field, by_record, groups
from ingest.spark.options import SinkOptions
from ingest.spark.sink._results import NewFields
from ingest.spark.sink._tasks import (
    META_NEW_FIELDS,
    META_OFFSET,
    META_PARTITION,
    META_TOPIC,
    DeltaTarget,
    TaskPlan,
    judge_new_fields,
    new_fields_column,
    parsed_new_fields,
)

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string())])
NEW_VALUES: list[Any] = [1, 2.5, "s", True, {"a": 1}, [1], None]
NAMES = ["color", "size", "Value", "a-b", "dt", "zeta"]


def plan(policy: str, *, computed_partition: bool) -> TaskPlan:
    return TaskPlan(
        target=DeltaTarget("/nowhere/t", 1, "d"),
        dead_letter=DeltaTarget("/nowhere/dl", 1, "d"), row_schema=SCHEMA,
        parse_schema=SCHEMA, partition_column="dt" if computed_partition else None,
        partition_from="column" if computed_partition else "none", bucket_columns=(),
        bucket_count=0, append=False, close_files=True,
        options=SinkOptions(on_new_field=policy))  # type: ignore[arg-type]


def batch_of(records: list[bytes | None], rng: random.Random) -> pa.RecordBatch:
    n = len(records)
    return pa.record_batch({
        "key": pa.nulls(n, pa.binary()), "value": pa.array(records, pa.binary()),
        "topic": pa.array([rng.choice(["b", "a"]) for _ in range(n)]),
        "partition": pa.array([rng.randrange(3) for _ in range(n)], pa.int32()),
        "offset": pa.array([rng.randrange(1000) for _ in range(n)], pa.int64())})


def records(rng: random.Random, n: int, *, uniform: bool) -> list[bytes | None]:
    out: list[bytes | None] = []
    kinds = {name: rng.choice(NEW_VALUES[:-1]) for name in NAMES}
    for i in range(n):
        if rng.random() < 0.1:
            out.append(rng.choice([None, b"[1]", b'{"id": "x"}', b"{"]))
            continue
        record: dict[str, Any] = {"id": i, "value": "v"}
        for name in NAMES:
            if rng.random() < 0.3:
                record[name] = kinds[name] if uniform else rng.choice(NEW_VALUES)
        out.append(json.dumps(record).encode())
    return out


def per_record(policy: str, computed: bool, parsed: Any, batch: pa.RecordBatch
               ) -> tuple[list[int], list[tuple[int, str]], NewFields | None]:
    """The rule applied to one record at a time: (good, bad, what the written ones held)."""
    known = ["id", "value", *(["dt"] if computed else [])]
    good = set(parsed.good.to_pylist())
    holding = [(i, {k: v for k, v in f.items() if not (computed and k == "dt")})
               for i, f in parsed.new_fields if i in good]
    holding = [(i, f) for i, f in holding if f]
    dead = {i: r for i, f in holding if (r := new_field_reason(f, known, policy))}  # type: ignore[arg-type]
    bad = sorted([*parsed.bad, *dead.items()])
    written = [(i, f) for i, f in holding if i not in dead]
    where = list(zip(batch.column("topic").to_pylist(), batch.column("partition").to_pylist(),
                     batch.column("offset").to_pylist(), strict=True))
    seen: dict[str, FieldSeen] = {}
    for i, fields in written:
        for name, kind in fields.items():
            one = FieldSeen({kind: 1}, 1, *where[i])
            seen[name] = one if name not in seen else seen[name].merged(one)
    new = NewFields(dict(sorted(seen.items())), len(written)) if written else None
    return [i for i in sorted(good) if i not in dead], bad, new


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("policy", ["dead-letter", "evolve", "ignore", "fail"])
def test_judging_by_field_equals_judging_each_record(policy: str, seed: int) -> None:
    rng = random.Random(f"{policy}:{seed}")
    computed = seed % 2 == 0
    batch = batch_of(records(rng, 300, uniform=seed % 3 == 0), rng)
    p = plan(policy, computed_partition=computed)
    parsed = parse_json_values(batch.column("value"), SCHEMA)
    good, bad, new = per_record(policy, computed, parsed, batch)
    judged, reported = judge_new_fields(p, parsed, batch)
    assert judged.good.to_pylist() == good
    assert judged.rows.column("id").to_pylist() == good
    assert judged.bad == bad
    at, reasons = judged.bad_arrays()
    assert list(zip(at.to_pylist(), reasons.to_pylist(), strict=True)) == bad
    assert reported == new
    # Two stages: the parse stage's META_NEW_FIELDS text gives the write stage the same.
    n = batch.num_rows
    table = pa.table({META_NEW_FIELDS: new_fields_column(judged, n),
                      META_TOPIC: batch.column("topic"), META_PARTITION: batch.column("partition"),
                      META_OFFSET: batch.column("offset")})
    assert parsed_new_fields(table) == new


def test_by_field_and_by_record_are_each_others_inverse() -> None:
    rows = [(0, {"a": "integer", "b": "string"}), (3, {"a": "string"}), (7, {"b": "string"})]
    fields = by_field(rows)
    assert fields["b"].kind == "string"  # one kind: held once, not per record
    assert fields["a"].kind.to_pylist() == ["integer", "string"]
    assert by_record(fields) == rows


def test_many_new_fields_group_records_by_what_they_hold() -> None:
    names = [f"f{k:02d}" for k in range(30)]  # more than a 64-bit key holds
    rows = [(i, {name: "integer" for name in names[: i % 4 + 20]}) for i in range(8)]
    group, described = groups(by_field(rows), 9)
    assert described[0] == {}
    assert [described[g] for g in group[:8]] == [f for _, f in rows]
    assert group[8] == 0


def test_a_field_held_in_pieces_is_one_field_in_record_order() -> None:
    parsed = parse_json_values(pa.array([
        b'{"id": 1, "k": 1}', b'{"id": 2, "k": "x"}', b'{"id": 3, "k": 3}', b'{"id": 4}'],
        pa.binary()), SCHEMA)
    assert parsed.new_fields == [(0, {"k": "integer"}), (1, {"k": "string"}),
                                 (2, {"k": "integer"})]
    assert isinstance(parsed.new_by_field["k"], NewField)
    assert parsed.new_by_field["k"].at.to_pylist() == [0, 1, 2]
    assert replace(parsed, new_by_field={}).new_fields == []
