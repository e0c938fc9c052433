"""Schema evolution of a table by Hive's rules: which column changes files written before
the change still read under, checked before the metastore records the new schema.

Mirrors Hive's ALTER TABLE ... ADD COLUMNS / CHANGE COLUMN on a transactional ORC table,
with the lossless conversions of Hive's `TypeInfoUtils.implicitConvertible` that ORC's
`SchemaEvolution` reads as implicit: integers widen, FLOAT to DOUBLE, DECIMAL gains precision
at the same scale, CHAR/VARCHAR to STRING (or a longer VARCHAR). Hive reads ACID files' row
columns by position (`orc.force.positional.evolution`), our reader by name; only appended
columns and widened types read the same both ways, so everything else is refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from ingest.acid.format import COMMENT_KEY, parse_schema, reserved_column_reason
from ingest.errors import ConfigError
from ingest.table.core._definition import ddl_type
from ingest.txn import TableDefinition

_INTEGERS = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_DECIMAL = re.compile(r"DECIMAL\((\d+),(\d+)\)")
_VARCHAR = re.compile(r"VARCHAR\((\d+)\)")
_CHAR = re.compile(r"CHAR\((\d+)\)")
_ALLOWED = ("TINYINT -> SMALLINT -> INT -> BIGINT, FLOAT -> DOUBLE, DECIMAL(p,s) -> "
            "DECIMAL(q,s) with q > p, CHAR/VARCHAR -> STRING, VARCHAR(n) -> VARCHAR(m) with m > n")


@dataclass(frozen=True)
class SchemaChange:
    """One column change: appended (`old_type` None) or widened, with Hive's type words."""

    kind: Literal["add", "widen"]
    column: str
    old_type: str | None
    new_type: str


def widening_problem(old_type: str, new_type: str) -> str | None:
    """Why Hive's ORC schema evolution cannot read a column written as `old_type` as
    `new_type` (Hive DDL spellings, e.g. ``INT``, ``DECIMAL(10,2)``), or None if it can."""
    if old_type in _INTEGERS and new_type in _INTEGERS:
        if _INTEGERS.index(new_type) < _INTEGERS.index(old_type):
            return (f"{old_type} -> {new_type} narrows the type: values already written may "
                    "not fit")
        return None
    if (old_type, new_type) == ("FLOAT", "DOUBLE"):
        return None
    if (old_type, new_type) == ("DOUBLE", "FLOAT"):
        return "DOUBLE -> FLOAT narrows the type: values already written would lose precision"
    old_dec, new_dec = _DECIMAL.fullmatch(old_type), _DECIMAL.fullmatch(new_type)
    if old_dec and new_dec:
        (p, s), (q, t) = map(int, old_dec.groups()), map(int, new_dec.groups())
        if s != t:
            return (f"{old_type} -> {new_type} changes the scale: Hive's ORC reader keeps "
                    "the scale of a DECIMAL fixed")
        if q < p:
            return f"{old_type} -> {new_type} narrows the precision: values may not fit"
        return None
    if (_CHAR.fullmatch(old_type) or _VARCHAR.fullmatch(old_type)) and new_type == "STRING":
        return None
    old_var, new_var = _VARCHAR.fullmatch(old_type), _VARCHAR.fullmatch(new_type)
    if old_var and new_var:
        if int(new_var.group(1)) < int(old_var.group(1)):
            return f"{old_type} -> {new_type} narrows the length: values may be cut"
        return None
    return f"{old_type} -> {new_type} is not a widening Hive's ORC schema evolution reads"


def evolve_schema(
    defn: TableDefinition,
    *,
    add_columns: str | None = None,
    change_columns: Sequence[str] = (),
    columns: str | None = None,
) -> tuple[pa.Schema, tuple[SchemaChange, ...]]:
    """The table's new row schema after the changes, checked by Hive's rules.

    Args:
        defn: the table as stored.
        add_columns: columns to append, e.g. ``"c BIGINT COMMENT 'x', d STRING"``.
        change_columns: ``"c NEWTYPE [COMMENT '...']"`` each: widen column c.
        columns: the whole new column list (Hive's REPLACE COLUMNS): the old columns in
            order, some widened, then new ones.

    Returns:
        The new row schema and the changes it makes (empty when nothing changes).

    Raises:
        ConfigError: a change Hive's rules refuse (drop, rename, reorder, narrowing, another
            type change, a partition or bucket column, a nested type), naming the column,
            why, and what to do instead; or a column list that does not parse.
    """
    old = defn.row_schema
    new = list(old)
    if columns is not None:
        new = _replaced(defn, parse_schema(columns))
    changed: dict[str, str] = {}
    for spec in change_columns:
        field = _changed_field(defn, spec)
        if field.name.lower() in changed:
            # Both cannot hold; taking the last one silently would hide a typo.
            raise _refuse(defn, f"column {field.name} is changed twice "
                          f"({changed[field.name.lower()]!r} and {spec!r})",
                          f"give one change of {field.name}, with the type it should have")
        changed[field.name.lower()] = spec
        index = [f.name.lower() for f in new].index(field.name.lower())
        new[index] = field
    if add_columns is not None:
        for field in parse_schema(add_columns):
            _check_new_name(defn, [f.name for f in new], field.name)
            new.append(field)
    schema = keep_comments(old, pa.schema(new, metadata=old.metadata))
    return schema, _changes(defn, schema)


def _refuse(defn: TableDefinition, what: str, hint: str) -> ConfigError:
    return ConfigError(f"Cannot alter the columns of table {defn.name}: {what}", hint=hint)


_NEW_TABLE = ("create a new table with `ingest create` and load the rows into it "
              "(`ingest cat --json` | `ingest load`)")


def _changed_field(defn: TableDefinition, spec: str) -> pa.Field:
    """The field `--change-column "c NEWTYPE"` gives; a rename (`"old new TYPE"`) is
    refused."""
    try:
        parsed = parse_schema(spec)
    except ConfigError:
        words = spec.split(None, 2)
        if len(words) == 3:
            try:
                parse_schema(f"{words[1]} {words[2]}")
            except ConfigError:
                pass
            else:
                raise _refuse(
                    defn, f"renaming column {words[0]} to {words[1]} is not supported: Hive "
                    "reads ACID files' columns by position and ingest by name, so rows "
                    "written before would read differently in each",
                    f"keep the name; to hold values under a new name, add a column with "
                    f"--add-columns \"{words[1]} {words[2]}\" and load them") from None
        raise
    if len(parsed) != 1:
        raise _refuse(defn, f"--change-column takes one column, got {parsed.names}",
                      "repeat --change-column for each column")
    field = parsed.field(0)
    names = [f.name.lower() for f in defn.row_schema]
    if field.name.lower() not in names:
        _check_not_layout(defn, field.name)
        raise _refuse(defn, f"it has no column {field.name} (its columns are "
                      f"{defn.row_schema.names})",
                      f"add it with --add-columns \"{spec}\"")
    return field.with_name(defn.row_schema.names[names.index(field.name.lower())])


def _check_not_reserved(defn: TableDefinition, name: str) -> None:
    reason = reserved_column_reason(name)
    if reason is not None:
        raise _refuse(defn, reason, "choose another name, e.g. row_id")


def _check_not_layout(defn: TableDefinition, name: str) -> None:
    if name.lower() in (c.lower() for c in defn.partition_columns):
        raise _refuse(
            defn, f"{name} is a partition column: its values are directory names "
            "(col=value), typed as strings, and cannot be changed in place", _NEW_TABLE)


def _check_new_name(defn: TableDefinition, names: Sequence[str], name: str) -> None:
    _check_not_layout(defn, name)
    _check_not_reserved(defn, name)
    if name.lower() in (n.lower() for n in names):
        raise _refuse(defn, f"column {name} already exists (Hive column names are "
                      "case-insensitive)",
                      "choose another name, or widen its type with --change-column")


def _replaced(defn: TableDefinition, given: pa.Schema) -> list[pa.Field]:
    """The new column list of a REPLACE COLUMNS, refused unless it keeps every old column
    in place (by name, any case) and only appends."""
    old = defn.row_schema.names
    lower = [n.lower() for n in given.names]
    missing = [n for n in old if n.lower() not in lower]
    if missing:
        extra = [n for n in given.names if n.lower() not in (o.lower() for o in old)]
        what = (f"it renames or drops {missing} (new names: {extra})" if extra
                else f"it drops {missing}")
        raise _refuse(
            defn, f"{what}: files written before hold every column, and Hive reads ACID "
            "files' columns by position, so later columns would shift into the wrong names",
            "keep every column (readers may select the columns they need); " + _NEW_TABLE)
    if [n.lower() for n in given.names[:len(old)]] != [n.lower() for n in old]:
        raise _refuse(
            defn, f"it reorders the columns {old} as {given.names}: Hive reads ACID files' "
            "columns by position, so values written before would appear under other names",
            "keep the existing order and append new columns at the end")
    fields = list(given)
    for i, name in enumerate(old):
        fields[i] = fields[i].with_name(name)
    for f in fields[len(old):]:
        _check_not_layout(defn, f.name)
        _check_not_reserved(defn, f.name)
    return fields


def _changes(defn: TableDefinition, new: pa.Schema) -> tuple[SchemaChange, ...]:
    """The changes from the stored schema to `new`, each type change checked."""
    old = defn.row_schema
    changes: list[SchemaChange] = []
    for i, before in enumerate(old):
        after = new.field(i)
        old_type, new_type = _type(before), _type(after)
        if old_type == new_type:
            continue
        if before.name in defn.bucket_columns:
            raise _refuse(
                defn, f"{before.name} is a bucket column: rows are placed in buckets by its "
                f"value's hash, which differs between {old_type} and {new_type} (Hive's "
                "bucketing version 2), so rows written before would sit in the wrong bucket",
                _NEW_TABLE)
        if "<" in old_type or "<" in new_type:
            raise _refuse(
                defn, f"column {before.name}: changing a nested type ({old_type} -> "
                f"{new_type}) is not supported", "add a new column with the new type instead")
        problem = widening_problem(old_type, new_type)
        if problem is not None:
            raise _refuse(
                defn, f"column {before.name}: {problem}. Allowed widenings: {_ALLOWED}",
                f"add a new column of type {new_type} with --add-columns and load its values")
        changes.append(SchemaChange("widen", before.name, old_type, new_type))
    changes += [SchemaChange("add", f.name, None, _type(f)) for f in list(new)[len(old):]]
    return tuple(changes)


def _type(field: pa.Field) -> str:
    """The Hive type of a column, without its comment."""
    meta = {k: v for k, v in (field.metadata or {}).items() if k != COMMENT_KEY}
    return ddl_type(field.with_metadata(meta) if meta else field.remove_metadata())


def keep_comments(old: pa.Schema, new: pa.Schema) -> pa.Schema:
    """`new` with each old column's comment where the change gave none."""
    fields = []
    for f in new:
        i = old.get_field_index(f.name)
        comment = (old.field(i).metadata or {}).get(COMMENT_KEY) if i >= 0 else None
        if comment is not None and COMMENT_KEY not in (f.metadata or {}):
            f = f.with_metadata({**(f.metadata or {}), COMMENT_KEY: comment})
        fields.append(f)
    return pa.schema(fields, metadata=new.metadata)


__all__ = ["SchemaChange", "evolve_schema", "keep_comments", "widening_problem"]
