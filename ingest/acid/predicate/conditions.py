"""A parsed WHERE condition as a tree: one pyarrow Expression for exact filtering, and the
outcomes it may have over a set of rows known only by per-column bounds (a partition's values,
a stripe's ORC statistics). Kleene (SQL) logic throughout: a row matches only when the
condition is true, never when it is null. Knows no ORC bytes and no file layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

Outcome = bool | None  # None: SQL's unknown (a null operand)
_ALL: frozenset[Outcome] = frozenset({True, False, None})

_COMPARE = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
            ">": pc.greater, ">=": pc.greater_equal}


@dataclass(frozen=True)
class Domain:
    """What a set of values of one column may hold.

    Attributes:
        low, high: bounds of the non-null values as `value_key` gives them (inclusive), or
            None when not known.
        has_values: some value is not null.
        has_null: some value may be null.
    """

    low: Any = None
    high: Any = None
    has_values: bool = True
    has_null: bool = True

    @classmethod
    def exactly(cls, value: Any) -> Domain:
        """One known value (None: null), e.g. a partition's value."""
        if value is None:
            return cls(None, None, has_values=False, has_null=True)
        return cls(value, value, has_values=True, has_null=False)

    @property
    def bounded(self) -> bool:
        return self.low is not None and self.high is not None


UNKNOWN = Domain()


def value_key(scalar: pa.Scalar) -> Any:
    """A Python value that orders as the column's values do, to compare with bounds.

    Strings and binaries compare as bytes (ORC and Arrow order them bytewise), dates as days
    since the epoch, timestamps as integers in their own unit (UTC for a zoned type).
    """
    t = scalar.type
    if pa.types.is_timestamp(t):
        return scalar.cast(pa.int64()).as_py()
    if pa.types.is_date32(t):
        return scalar.cast(pa.int32()).as_py()
    value = scalar.as_py()
    return value.encode("utf-8") if isinstance(value, str) else value


class Condition:
    """Base of the tree; `&`, `|` and `~` build And, Or and Not nodes."""

    def __and__(self, other: Condition) -> Condition:
        return And(self, other)

    def __or__(self, other: Condition) -> Condition:
        return Or(self, other)

    def __invert__(self) -> Condition:
        return Not(self)

    def expression(self) -> pc.Expression:
        """The condition as a pyarrow compute Expression (for `Table.filter`)."""
        raise NotImplementedError

    def outcomes(self, domains: Mapping[str, Domain]) -> frozenset[Outcome]:
        """Every value the condition may take on some row, given each column's domain
        (a column not in `domains` may hold anything)."""
        raise NotImplementedError

    def may_match(self, domains: Mapping[str, Domain]) -> bool:
        """False only when no row with these domains can satisfy the condition."""
        return True in self.outcomes(domains)


@dataclass(frozen=True, eq=False)
class Compare(Condition):
    """`column op value` with op one of = != < <= > >=."""

    column: str
    op: str
    value: pa.Scalar

    def expression(self) -> pc.Expression:
        result: pc.Expression = _COMPARE[self.op](pc.field(self.column), self.value)
        return result

    def outcomes(self, domains: Mapping[str, Domain]) -> frozenset[Outcome]:
        d = domains.get(self.column, UNKNOWN)
        out: set[Outcome] = {None} if d.has_null else set()
        if not d.has_values:
            return frozenset(out)
        v = value_key(self.value)
        if not d.bounded or v is None:
            return frozenset(out | {True, False})
        lo, hi = d.low, d.high
        try:
            can_true, can_false = {
                "=": (lo <= v <= hi, not lo == hi == v),
                "!=": (not lo == hi == v, lo <= v <= hi),
                "<": (lo < v, hi >= v),
                "<=": (lo <= v, hi > v),
                ">": (hi > v, lo <= v),
                ">=": (hi >= v, lo < v),
            }[self.op]
        except TypeError:  # bounds of another kind than the value: know nothing
            return frozenset(out | {True, False})
        if can_true:
            out.add(True)
        if can_false:
            out.add(False)
        return frozenset(out)


@dataclass(frozen=True, eq=False)
class In(Condition):
    """`column IN (values)`; a null column value gives null (so NOT IN never matches it)."""

    column: str
    values: tuple[pa.Scalar, ...]

    def expression(self) -> pc.Expression:
        kinds = {v.type for v in self.values}
        # Decimal literals each carry their own precision: let pyarrow find one that fits all.
        value_set = pa.array([v.as_py() for v in self.values],
                             type=self.values[0].type if len(kinds) == 1 else None)
        # is_in gives false, not null, for a null input; SQL's `NULL IN (...)` is null.
        result: pc.Expression = pc.if_else(pc.field(self.column).is_null(),
                                           pa.scalar(None, pa.bool_()),
                                           pc.field(self.column).isin(value_set))
        return result

    def outcomes(self, domains: Mapping[str, Domain]) -> frozenset[Outcome]:
        out: frozenset[Outcome] = frozenset()
        for value in self.values:
            out |= Compare(self.column, "=", value).outcomes(domains)
        return out


@dataclass(frozen=True, eq=False)
class IsNull(Condition):
    """`column IS NULL` (negate: IS NOT NULL); never null itself."""

    column: str
    negate: bool = False

    def expression(self) -> pc.Expression:
        field = pc.field(self.column)
        result: pc.Expression = field.is_valid() if self.negate else field.is_null()
        return result

    def outcomes(self, domains: Mapping[str, Domain]) -> frozenset[Outcome]:
        d = domains.get(self.column, UNKNOWN)
        out = set()
        if d.has_null:
            out.add(not self.negate)
        if d.has_values:
            out.add(self.negate)
        return frozenset(out)


@dataclass(frozen=True, eq=False)
class IsTrue(Condition):
    """A bare BOOLEAN column used as a condition."""

    column: str

    def expression(self) -> pc.Expression:
        return pc.field(self.column)

    def outcomes(self, domains: Mapping[str, Domain]) -> frozenset[Outcome]:
        return Compare(self.column, "=", pa.scalar(True)).outcomes(domains)


@dataclass(frozen=True, eq=False)
class And(Condition):
    left: Condition
    right: Condition

    def expression(self) -> pc.Expression:
        return self.left.expression() & self.right.expression()

    def outcomes(self, domains: Mapping[str, Domain]) -> frozenset[Outcome]:
        a, b = self.left.outcomes(domains), self.right.outcomes(domains)
        return frozenset(_and(x, y) for x in a for y in b)


@dataclass(frozen=True, eq=False)
class Or(Condition):
    left: Condition
    right: Condition

    def expression(self) -> pc.Expression:
        return self.left.expression() | self.right.expression()

    def outcomes(self, domains: Mapping[str, Domain]) -> frozenset[Outcome]:
        a, b = self.left.outcomes(domains), self.right.outcomes(domains)
        return frozenset(_or(x, y) for x in a for y in b)


@dataclass(frozen=True, eq=False)
class Not(Condition):
    inner: Condition

    def expression(self) -> pc.Expression:
        return ~self.inner.expression()

    def outcomes(self, domains: Mapping[str, Domain]) -> frozenset[Outcome]:
        return frozenset(None if x is None else not x for x in self.inner.outcomes(domains))


def _and(x: Outcome, y: Outcome) -> Outcome:
    if x is False or y is False:
        return False
    if x is None or y is None:
        return None
    return True


def _or(x: Outcome, y: Outcome) -> Outcome:
    if x is True or y is True:
        return True
    if x is None or y is None:
        return None
    return False


__all__ = ["UNKNOWN", "And", "Compare", "Condition", "Domain", "In", "IsNull", "IsTrue", "Not",
           "Or", "value_key"]
