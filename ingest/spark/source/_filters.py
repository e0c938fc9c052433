"""Spark's pushed-down filters as pyarrow expressions, for the "hive-acid" reader.

A filter is accepted only when the expression gives exactly Spark's answer, nulls included
(SQL's three-valued logic: a null comparison drops the row, also under NOT); anything else is
handed back for Spark to evaluate. Each accepted filter also comes as an
`ingest.acid.predicate.conditions` tree where one can bound it, so partitions are pruned and
stripes skipped by their statistics (the expression still decides every row). Knows Spark's
`Filter` classes and Arrow types, no files.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from ingest.acid.predicate import conditions as bounds

# Beyond this many values an IN list is left to Spark (it becomes one OR term per value).
MAX_IN_VALUES = 1000

_COMPARISONS = {EqualTo: pc.equal, GreaterThan: pc.greater, GreaterThanOrEqual: pc.greater_equal,
                LessThan: pc.less, LessThanOrEqual: pc.less_equal}
_STRING_MATCH = {StringStartsWith: pc.starts_with, StringEndsWith: pc.ends_with,
                 StringContains: pc.match_substring}


@dataclass(frozen=True)
class PushedFilter:
    """One pushed filter (or the `where` option) as an expression, and the columns it reads.

    Attributes:
        expression: the exact filter.
        columns: the columns it reads.
        tree: the same filter as a condition tree, for pruning by bounds only (true wherever
            the expression is); None when it cannot be bounded (e.g. a LIKE).
    """

    expression: pc.Expression
    columns: tuple[str, ...]
    tree: bounds.Condition | None = None


def to_condition(spark_filter: Filter, schema: pa.Schema) -> PushedFilter | None:
    """The condition a Spark filter means on `schema`'s columns, or None if it cannot be
    pushed exactly (a nested column, a float or timestamp column, a literal of another type).
    """
    expression = _expression(spark_filter, schema)
    if expression is None:
        return None
    return PushedFilter(expression, _columns(spark_filter), _tree(spark_filter, schema))


_OPERATORS = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
              LessThanOrEqual: "<="}


def _tree(f: Filter, schema: pa.Schema) -> bounds.Condition | None:
    """The filter as a condition tree for pruning, or None when it has no bounds.

    Only called for filters `_expression` accepts. A null literal is left out of an IN list:
    its equality is never true, so the tree may only say "may match" more often, never less.
    """
    if isinstance(f, Not):
        inner = _tree(f.child, schema)
        return None if inner is None else bounds.Not(inner)
    field = _column(f, schema)
    if field is None:
        return None
    if isinstance(f, IsNull):
        return bounds.IsNull(field.name)
    if isinstance(f, IsNotNull):
        return bounds.IsNull(field.name, negate=True)
    if isinstance(f, EqualNullSafe):
        if f.value is None:
            return bounds.IsNull(field.name)
        value = _literal(f.value, field)
        # Never null, as `<=>` is: false for a null column value, also under NOT.
        return None if value is None else bounds.And(bounds.IsNull(field.name, negate=True),
                                                     bounds.Compare(field.name, "=", value))
    op = _OPERATORS.get(type(f))
    if op is not None:
        value = _literal(f.value, field)  # type: ignore[attr-defined]
        return None if value is None else bounds.Compare(field.name, op, value)
    if isinstance(f, In):
        values = [_literal(v, field) for v in f.value if v is not None]
        if not values or any(v is None for v in values):
            return None
        return bounds.In(field.name, tuple(v for v in values if v is not None))
    return None


def _columns(f: Filter) -> tuple[str, ...]:
    if isinstance(f, Not):
        return _columns(f.child)
    return (f.attribute[0],)  # type: ignore[attr-defined]


def _column(f: Filter, schema: pa.Schema) -> pa.Field | None:
    attribute: tuple[str, ...] = getattr(f, "attribute", ())
    if len(attribute) != 1 or attribute[0] not in schema.names:
        return None
    field = schema.field(attribute[0])
    t = field.type
    # Floats differ on NaN (Spark: NaN = NaN and NaN is the largest value; Arrow: never
    # equal); timestamps arrive as datetimes whose zone handling depends on the session.
    exact = (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_boolean(t)
             or pa.types.is_date32(t) or pa.types.is_decimal(t))
    return field if exact else None


def _literal(value: object, field: pa.Field) -> pa.Scalar | None:
    """`value` as a scalar of the column's type, or None when it is not exactly one."""
    t = field.type
    ok = ((pa.types.is_integer(t) and isinstance(value, int) and not isinstance(value, bool))
          or (pa.types.is_string(t) and isinstance(value, str))
          or (pa.types.is_boolean(t) and isinstance(value, bool))
          or (pa.types.is_date32(t) and isinstance(value, dt.date)
              and not isinstance(value, dt.datetime))
          or (pa.types.is_decimal(t) and isinstance(value, decimal.Decimal | int)
              and not isinstance(value, bool)))
    if not ok:
        return None
    try:
        return pa.scalar(value, t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None  # e.g. 2**40 against an INT column, or a decimal with more digits


def _expression(f: Filter, schema: pa.Schema) -> pc.Expression | None:
    if isinstance(f, Not):
        inner = _expression(f.child, schema)
        return None if inner is None else ~inner  # Kleene NOT: NOT null stays null
    field = _column(f, schema)
    if field is None:
        return None
    column = pc.field(field.name)
    if isinstance(f, IsNull):
        return column.is_null()
    if isinstance(f, IsNotNull):
        return column.is_valid()
    if isinstance(f, EqualNullSafe):
        if f.value is None:
            return column.is_null()
        value = _literal(f.value, field)
        # Never null: false for a null column value, as `<=>` is.
        return None if value is None else column.is_valid() & pc.equal(column, value)
    if isinstance(f, EqualTo | GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual):
        value = _literal(f.value, field)
        return None if value is None else _COMPARISONS[type(f)](column, value)
    if isinstance(f, In):
        return _in_list(column, field, f.value)
    if (isinstance(f, StringStartsWith | StringEndsWith | StringContains)
            and pa.types.is_string(field.type) and isinstance(f.value, str)):
        return _STRING_MATCH[type(f)](column, pattern=f.value)
    return None


def _in_list(column: pc.Expression, field: pa.Field, values: Sequence[object]
             ) -> pc.Expression | None:
    """`column IN (values)` as an OR of equalities: Kleene OR gives SQL's null answer (a null
    column value, or no match with a null in the list), which `is_in` does not."""
    if not values or len(values) > MAX_IN_VALUES:
        return None
    out: pc.Expression | None = None
    for v in values:
        scalar = pa.scalar(None, field.type) if v is None else _literal(v, field)
        if scalar is None:
            return None
        term = pc.equal(column, scalar)
        out = term if out is None else out | term
    return out


def conjunction(conditions: Sequence[PushedFilter]) -> pc.Expression | None:
    """The AND of the conditions, or None when there are none."""
    out: pc.Expression | None = None
    for c in conditions:
        out = c.expression if out is None else out & c.expression
    return out


def tree_conjunction(conditions: Sequence[PushedFilter]) -> bounds.Condition | None:
    """The AND of the conditions' trees, leaving out those without one (an AND with fewer
    terms may match more, never less), or None when none has a tree."""
    out: bounds.Condition | None = None
    for c in conditions:
        if c.tree is not None:
            out = c.tree if out is None else bounds.And(out, c.tree)
    return out


__all__ = ["MAX_IN_VALUES", "PushedFilter", "conjunction", "to_condition", "tree_conjunction"]
