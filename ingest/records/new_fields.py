"""A batch's new top-level fields by field, as arrays: which records hold each (with a value
that is not null) and its JSON kind there, so --on-new-field costs no Python per record.

The decoders fill it (`json_values` from the columns pyarrow inferred, `avro_values` per
writer schema); the sink's tasks (`ingest/spark/sink/_tasks.py`) apply the policy of `fields`
over it. Records are grouped by the fields and kinds they hold (usually one group per batch),
and the policy, its reasons and the META_NEW_FIELDS text are made once per group.
Knows Arrow and JSON kinds, not the formats.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.records.fields import KINDS, FieldSeen, OnNewField, new_field_reason

_KIND_CODE = {kind: code for code, kind in enumerate(KINDS, start=1)}  # 0: not held
_KINDS = pa.array(KINDS, pa.string())


@dataclass(frozen=True)
class NewField:
    """The records of a batch that hold one new top-level field.

    Attributes:
        at: their indices into the batch, ascending (int64).
        kind: the JSON kind of the field's value in all of them, or each one's (a string
            array aligned with `at`) when kinds differ between records.
    """

    at: pa.Array
    kind: str | pa.Array

    def kinds(self) -> pa.Array:
        """Each record's kind, aligned with `at`."""
        if isinstance(self.kind, str):
            return pa.repeat(pa.scalar(self.kind, pa.string()), len(self.at))
        return self.kind


NewFieldsByName = dict[str, NewField]


def by_field(records: Iterable[tuple[int, Mapping[str, str]]]) -> NewFieldsByName:
    """The columnar form of (index, {name: kind}) of single records, ascending by index."""
    at: dict[str, list[int]] = {}
    kinds: dict[str, list[str]] = {}
    for i, fields in records:
        for name, kind in fields.items():
            at.setdefault(name, []).append(i)
            kinds.setdefault(name, []).append(kind)
    out: NewFieldsByName = {}
    for name in sorted(at):
        first = kinds[name][0]
        one = all(kind == first for kind in kinds[name])
        out[name] = NewField(pa.array(at[name], pa.int64()),
                             first if one else pa.array(kinds[name], pa.string()))
    return out


def by_record(fields: Mapping[str, NewField]) -> list[tuple[int, dict[str, str]]]:
    """(index, {name: kind}) of each record holding a new field, ascending by index."""
    out: dict[int, dict[str, str]] = {}
    for name in sorted(fields):
        f = fields[name]
        for i, kind in zip(f.at.to_pylist(), f.kinds().to_pylist(), strict=True):
            out.setdefault(i, {})[name] = kind
    return sorted(out.items())


def joined(pieces: list[NewField]) -> NewField:
    """One field's pieces (disjoint sets of records) as one."""
    if len(pieces) == 1:
        return pieces[0]
    at = pa.concat_arrays([p.at.cast(pa.int64()) for p in pieces])
    first = pieces[0].kind
    kind: str | pa.Array = first if isinstance(first, str) and all(
        p.kind == first for p in pieces) else pa.concat_arrays([p.kinds() for p in pieces])
    positions = at.to_numpy()
    if len(positions) > 1 and not bool(np.all(positions[1:] > positions[:-1])):
        order = pa.array(np.argsort(positions, kind="stable"))
        at = at.take(order)
        kind = kind if isinstance(kind, str) else kind.take(order)
    return NewField(at, kind)


def merged(*parts: Mapping[str, NewField]) -> NewFieldsByName:
    """Several pieces of one batch's new fields (disjoint sets of records) as one, by name."""
    pieces: dict[str, list[NewField]] = {}
    for part in parts:
        for name, f in part.items():
            pieces.setdefault(name, []).append(f)
    return {name: joined(pieces[name]) for name in sorted(pieces)}


def kept(fields: Mapping[str, NewField], keep: np.ndarray,
         drop: Collection[str] = ()) -> NewFieldsByName:
    """The fields (those not in `drop`) of the records whose `keep` (bool per batch record)
    is set; a field no such record holds is left out."""
    out: NewFieldsByName = {}
    for name, f in fields.items():
        if name in drop:
            continue
        mask = keep[f.at.to_numpy()]
        if mask.all():
            out[name] = f
        elif mask.any():
            selected = pa.array(mask)
            out[name] = NewField(f.at.filter(selected), f.kind if isinstance(f.kind, str)
                                 else f.kind.filter(selected))
    return out


def holding(fields: Mapping[str, NewField], n: int) -> np.ndarray:
    """Which of n records hold at least one of the fields (bool per record)."""
    mask = np.zeros(n, dtype=bool)
    for f in fields.values():
        mask[f.at.to_numpy()] = True
    return mask


def groups(fields: Mapping[str, NewField], n: int
           ) -> tuple[np.ndarray, list[dict[str, str]]]:
    """Group n records by the fields and kinds they hold: each record's group (an index
    into the second list), and each group's {name: kind}; group 0 holds nothing."""
    names = sorted(fields)
    if len(names) == 1 and isinstance(fields[names[0]].kind, str):  # the common case
        group = np.zeros(n, dtype=np.int64)
        group[fields[names[0]].at.to_numpy()] = 1
        return group, [{}, {names[0]: fields[names[0]].kind}]
    if len(names) > 21:  # past what a 64-bit key holds: rows compared whole
        return _groups_of_rows(fields, names, n)
    key = np.zeros(n, dtype=np.int64)
    for j, name in enumerate(names):
        key[fields[name].at.to_numpy()] |= _codes(fields[name]) << (3 * j)
    # Key 0 (holds nothing) sorts first, so it is group 0 when some record has it.
    unique, group = np.unique(np.concatenate([[0], key]), return_inverse=True)
    described = [{name: KINDS[code - 1] for j, name in enumerate(names)
                  if (code := (k >> (3 * j)) & 7)} for k in unique.tolist()]
    return np.asarray(group, dtype=np.int64).reshape(-1)[1:], described


def _codes(f: NewField) -> np.ndarray | int:
    """The kind code (1..7) of each record holding `f`, or the one they share."""
    if isinstance(f.kind, str):
        return _KIND_CODE[f.kind]
    return pc.index_in(f.kind, value_set=_KINDS).to_numpy(zero_copy_only=False).astype(
        np.int64) + 1


def _groups_of_rows(fields: Mapping[str, NewField], names: list[str], n: int
                    ) -> tuple[np.ndarray, list[dict[str, str]]]:
    codes = np.zeros((n + 1, len(names)), dtype=np.int8)  # row 0: holds nothing
    for j, name in enumerate(names):
        codes[fields[name].at.to_numpy() + 1, j] = _codes(fields[name])
    unique, group = np.unique(codes, axis=0, return_inverse=True)
    described = [{names[j]: KINDS[code - 1] for j, code in enumerate(row) if code}
                 for row in unique.tolist()]
    return np.asarray(group, dtype=np.int64).reshape(-1)[1:], described


@dataclass(frozen=True)
class DeadLetters:
    """The records of a batch that --on-new-field dead-letters.

    Attributes:
        mask: bool per record of the batch.
        records: (index, reason) of each, ascending.
        at, reasons: the same as arrays (int64 indices, string reasons).
    """

    mask: np.ndarray
    records: list[tuple[int, str]]
    at: pa.Array
    reasons: pa.Array


def dead_letters(fields: Mapping[str, NewField], n: int, known: Collection[str],
                 policy: OnNewField) -> DeadLetters | None:
    """The records of n the policy dead-letters, each with `new_field_reason` of the fields
    and kinds it holds (made once per group of records holding the same), or None."""
    if not fields or policy in ("fail", "ignore"):
        return None
    group, described = groups(fields, n)
    reasons = [new_field_reason(d, known, policy) if d else None for d in described]
    mask = np.array([r is not None for r in reasons])[group]
    at = np.flatnonzero(mask)
    if len(at) == 0:
        return None
    # Each record's reason is its group's one string object, shared, not a copy; the mask
    # keeps only records whose group has a reason (no None).
    each = cast(list[str], [reasons[1]] * len(at) if len(described) == 2 else list(
        map(reasons.__getitem__, group[at].tolist())))
    return DeadLetters(mask, list(zip(at.tolist(), each, strict=True)), pa.array(at),
                       pa.array(reasons, pa.string()).take(pa.array(group[at])))


def fields_seen(fields: Mapping[str, NewField], topic: pa.Array, partition: pa.Array,
                offset: pa.Array, *, types: Mapping[str, tuple[str, ...]] | None = None
                ) -> dict[str, FieldSeen]:
    """Each field's kinds, records and first record (lowest topic, partition, offset), given
    the batch's topic, partition and offset of each record, and the exact types a typed
    format declared for it (`types`, by name)."""
    types = types or {}
    out: dict[str, FieldSeen] = {}
    for name in sorted(fields):
        f = fields[name]
        if isinstance(f.kind, str):
            kinds = {f.kind: len(f.at)}
        else:
            counts = pc.value_counts(f.kind)
            kinds = dict(sorted(zip(counts.field("values").to_pylist(),
                                    counts.field("counts").to_pylist(), strict=True)))
        out[name] = FieldSeen(kinds, len(f.at), *_first(f.at, topic, partition, offset),
                              types=types.get(name, ()))
    return out


def _first(at: pa.Array, topic: pa.Array, partition: pa.Array, offset: pa.Array
           ) -> tuple[str, int, int]:
    """The lowest (topic, partition, offset) of the records at `at`."""
    offsets = offset.take(at)
    partitions = partition.take(at)
    bounds = pc.min_max(topic)
    if bounds["min"] == bounds["max"]:  # one topic (usual): no strings to take
        lowest = bounds["min"]
    else:
        topics = topic.take(at)
        lowest = pc.min(topics)
        mine = pc.equal(topics, lowest)
        partitions, offsets = partitions.filter(mine), offsets.filter(mine)
    low_partition = pc.min(partitions)
    offsets = offsets.filter(pc.equal(partitions, low_partition))
    return lowest.as_py(), low_partition.as_py(), pc.min(offsets).as_py()


def as_text(fields: Mapping[str, NewField], n: int,
            types: Mapping[str, tuple[str, ...]] | None = None) -> pa.Array:
    """Each of n records' new fields as JSON text ({name: kind}, names sorted), or null;
    with the exact types a typed format declared for some of them (`types`), the pair
    [{name: kind}, {name: [types]}]."""
    if not fields:
        return pa.nulls(n, pa.string())
    group, described = groups(fields, n)
    types = types or {}
    texts = []
    for d in described:
        typed = {name: list(types[name]) for name in sorted(d) if types.get(name)}
        texts.append(None if not d else json.dumps([d, typed] if typed else d,
                                                   sort_keys=True))
    return pa.array(texts, pa.string()).take(pa.array(group))


def types_from_text(texts: pa.Array) -> dict[str, tuple[str, ...]]:
    """The exact types `as_text` wrote beside records' new fields, by name (sorted)."""
    out: dict[str, set[str]] = {}
    for text in pc.unique(texts.drop_null()).to_pylist():
        described = json.loads(text)
        if isinstance(described, list):
            for name, declared in described[1].items():
                out.setdefault(name, set()).update(declared)
    return {name: tuple(sorted(t)) for name, t in sorted(out.items())}


def from_text(texts: pa.Array) -> NewFieldsByName:
    """The new fields of records given as `as_text` wrote them (null: none)."""
    encoded = pc.dictionary_encode(texts)
    ids = encoded.indices
    by_name: dict[str, dict[int, str]] = {}  # name -> text id -> kind
    for text_id, text in enumerate(encoded.dictionary.to_pylist()):
        described = json.loads(text)
        if isinstance(described, list):  # [{name: kind}, {name: [types]}]
            described = described[0]
        for name, kind in described.items():
            by_name.setdefault(name, {})[text_id] = kind
    out: NewFieldsByName = {}
    for name in sorted(by_name):
        kinds = by_name[name]
        held = pc.fill_null(pc.is_in(ids, value_set=pa.array(list(kinds), ids.type)), False)
        at = pc.indices_nonzero(held).cast(pa.int64())
        if len(set(kinds.values())) == 1:
            out[name] = NewField(at, next(iter(kinds.values())))
        else:
            each = pa.array([kinds.get(i) for i in range(len(encoded.dictionary))], pa.string())
            out[name] = NewField(at, each.take(ids.take(at)))
    return out


__all__ = [
    "DeadLetters",
    "NewField",
    "NewFieldsByName",
    "as_text",
    "types_from_text",
    "by_field",
    "by_record",
    "dead_letters",
    "fields_seen",
    "from_text",
    "groups",
    "holding",
    "joined",
    "kept",
    "merged",
]
