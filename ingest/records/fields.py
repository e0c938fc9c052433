"""New top-level fields in a stream's records: what --on-new-field does with one, and which
column a new field becomes under `evolve`.

Knows field names and value kinds, not the value format: the decoders (`json_values`
for JSON, `avro_values`) report a batch's unknown fields by field (`new_fields`), which applies
`new_field_reason` once per group of records holding the same fields (on executors); the
driver takes `new_columns` per micro-batch. Kinds are JSON's: integer, number, boolean,
string, object, array, null; a typed format (Avro) also reports each field's exact type.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ingest.acid.format import reserved_column_reason

# What --on-new-field does with a record holding a top-level field the table lacks.
OnNewField = Literal["dead-letter", "fail", "ignore", "evolve"]
KINDS = ("integer", "number", "boolean", "string", "object", "array", "null")
# Hive's identifier: a new field outside it would need backquotes in every reader's SQL.
_COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SIMPLE = {"integer": "BIGINT", "number": "DOUBLE", "boolean": "BOOLEAN", "string": "STRING",
           "object": "STRING", "array": "STRING"}


def json_kind(value: Any) -> str:
    """The JSON kind of a value `json.loads` returned."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def unknown_fields(fields: Mapping[str, str], known: Collection[str]) -> dict[str, str]:
    """The entries of `fields` (name -> kind) whose name is not in `known` (exact match, as
    the parser matches names)."""
    return {name: kind for name, kind in fields.items() if name not in known}


def new_field_reason(unknown: Mapping[str, str], known: Collection[str],
                     policy: OnNewField) -> str | None:
    """Why a record with these unknown top-level fields goes to the dead-letter table, or
    None when it is written (its unknown fields dropped, or added as columns by `evolve`).

    Under `dead-letter` every such record is dead-lettered; under `evolve` only one whose
    field cannot become a column: a name that differs from a column only in case (Hive's
    names are case-insensitive), is not a Hive identifier or is reserved (ROW__ID). `fail`
    and `ignore` keep the record: the driver stops the query, or counts it.
    """
    if not unknown or policy in ("fail", "ignore"):
        return None
    if policy == "dead-letter":
        listed = ", ".join(f"{name!r} (a JSON {kind})" for name, kind in sorted(unknown.items()))
        return (f"new field {listed} is not a column of the table (--on-new-field "
                "dead-letter; add it with `ingest alter --add-columns`, or stream with "
                "--on-new-field evolve)")
    lowered = {name.lower(): name for name in known}
    for name in sorted(unknown):
        if name.lower() in lowered:
            return (f"new field {name!r} differs from column {lowered[name.lower()]!r} only in "
                    "case, and Hive column names are case-insensitive, so it cannot be added "
                    "(rename the field in the producer)")
        if not _COLUMN_NAME.fullmatch(name):
            return (f"new field {name!r} is not a Hive column name (letters, digits and _, "
                    "not starting with a digit), so it cannot be added")
        reserved = reserved_column_reason(name)
        if reserved is not None:
            return f"new field {name!r} cannot be added: {reserved}"
    return None


@dataclass(frozen=True)
class FieldSeen:
    """A new field as the tasks of a micro-batch saw it.

    Attributes:
        kinds: how many of its values had each JSON kind (name order).
        records: how many records held it.
        topic, partition, offset: the first record (lowest) that held it.
        types: the exact Hive types a typed format (Avro writer schemas) declared for it,
            sorted; empty for JSON.
    """

    kinds: dict[str, int]
    records: int
    topic: str
    partition: int
    offset: int
    types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", tuple(self.types))  # a list, after JSON

    def merged(self, other: FieldSeen) -> FieldSeen:
        first = min((self.topic, self.partition, self.offset),
                    (other.topic, other.partition, other.offset))
        kinds = {k: self.kinds.get(k, 0) + other.kinds.get(k, 0)
                 for k in sorted({*self.kinds, *other.kinds})}
        return FieldSeen(kinds, self.records + other.records, *first,
                         types=tuple(sorted({*self.types, *other.types})))


def merge_fields(*seen: Mapping[str, FieldSeen]) -> dict[str, FieldSeen]:
    """One FieldSeen per name over several tasks' reports."""
    out: dict[str, FieldSeen] = {}
    for one in seen:
        for name, f in one.items():
            out[name] = f if name not in out else out[name].merged(f)
    return dict(sorted(out.items()))


# Ties between kinds of one field go to the first group here (STRING holds the most).
_GROUPS = ("string", "object", "array", "numeric", "boolean")


def column_type(kinds: Mapping[str, int] | Collection[str],
                override: str | None = None, types: Collection[str] = ()) -> str | None:
    """The Hive type of the column a new field becomes: `override` (--evolve-type) when
    given; else the one exact type a typed format declared (`types`: an Avro writer
    schema's type as `ingest create --schema-from-avro` maps it: int INT, long BIGINT,
    float FLOAT, decimal DECIMAL(p,s), timestamp-millis TIMESTAMP, record STRUCT<...>);
    else, conservatively from the values' kinds (also when writer schemas disagree):
    BIGINT when its values are integers, DOUBLE when they are numbers, BOOLEAN, STRING for
    strings, objects and arrays (JSON text); when the
    values' kinds are mixed, the kind most of them have decides (integers and numbers
    counting together), so the fewer conflicting values are dead-lettered, and a tie goes
    to STRING; None when the field only held nulls (no type to infer: not added yet).

    Args:
        kinds: how many values had each JSON kind (or just the kinds, each counted once).
        override: the type --evolve-type gives the field.
        types: the exact types the format declared for it.
    """
    if override is not None:
        return override
    if len(set(types)) == 1:
        return next(iter(types))
    counts = dict(kinds) if isinstance(kinds, Mapping) else dict.fromkeys(kinds, 1)
    counts.pop("null", None)
    counts = {k: v for k, v in counts.items() if v > 0}
    if not counts:
        return None
    groups: dict[str, int] = {}
    for kind, count in counts.items():
        group = "numeric" if kind in ("integer", "number") else kind
        groups[group] = groups.get(group, 0) + count
    best = max(groups.values())
    group = next(g for g in _GROUPS if groups.get(g) == best)
    if group == "numeric":
        return "DOUBLE" if "number" in counts else "BIGINT"
    return _SIMPLE[group]


def new_columns(seen: Mapping[str, FieldSeen], known: Collection[str],
                overrides: Mapping[str, str]) -> list[tuple[str, str]]:
    """(name, Hive type) of the columns to add for a micro-batch's new fields, in name order:
    those not yet columns (a column another writer added meanwhile is not added twice), that
    can be columns (`new_field_reason`), and held a value that is not null; of two names
    differing only in case, the one of the earliest record."""
    lowered = {name.lower() for name in known}
    # Two spellings of one name (Hive's names ignore case): the earliest record's one wins;
    # records of the other are dead-lettered when the micro-batch is written again.
    ordered = sorted(seen.items(), key=lambda kv: (kv[1].topic, kv[1].partition,
                                                   kv[1].offset, kv[0]))
    out: list[tuple[str, str]] = []
    for name, f in ordered:
        if (name.lower() in lowered or not _COLUMN_NAME.fullmatch(name)
                or reserved_column_reason(name) is not None):
            continue
        kind = column_type(f.kinds, overrides.get(name), f.types)
        if kind is not None:
            lowered.add(name.lower())
            out.append((name, kind))
    return sorted(out)


__all__ = [
    "KINDS",
    "FieldSeen",
    "column_type",
    "json_kind",
    "merge_fields",
    "new_columns",
    "new_field_reason",
    "unknown_fields",
]
