"""A small SQL WHERE language, checked against a table schema, as a pyarrow compute Expression.

Grammar: comparisons (= != <> < <= > >=) between a column and a literal, [NOT] IN (...),
IS [NOT] NULL, [NOT] BETWEEN, bare BOOLEAN columns, AND/OR/NOT and parentheses; literals are
numbers, 'strings', DATE '...', TIMESTAMP '...', TRUE/FALSE. SQL's three-valued logic is kept
(a null column value never matches, not even under NOT), which `ingest delete` relies on.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.predicate.conditions import Compare, Condition, In, IsNull, IsTrue
from ingest.acid.predicate.lexer import Dialect, Token, TokenCursor, syntax_error, tokenize
from ingest.errors import ConfigError

# SQL strings ('it''s'), not Hive's backslash escapes: a backslash in a value is itself.
_DIALECT = Dialect(punctuation=("<>", "!=", "<=", ">=", "=", "<", ">", "(", ")", ",", "+", "-"))
_KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "TRUE", "FALSE",
                       "DATE", "TIMESTAMP"})
_COMPARE = frozenset({"=", "!=", "<>", "<", "<=", ">", ">="})
_FLIPPED = {"=": "=", "!=": "!=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_INT_RANGES = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}
_STRAY_HINT = ("quote strings with single quotes ('abc') and names with backquotes "
               "(`my col`)")
_EXAMPLE = "for example: id = 3 AND dt >= '2026-01-01' OR value IN ('a', 'b')"


def _keyword(tok: Token) -> str | None:
    """The keyword a token is (upper case), or None for anything else, e.g. a column name."""
    upper = tok.text.upper()
    return upper if tok.kind == "word" and upper in _KEYWORDS else None


def _is_comparison(tok: Token) -> bool:
    return tok.kind == "punct" and tok.text in _COMPARE


@dataclass(frozen=True)
class _Literal:
    kind: str  # int, float, string, date, timestamp, bool, null
    value: Any
    text: str
    pos: int


@dataclass(frozen=True)
class Predicate:
    """A parsed WHERE text.

    Attributes:
        text: the text as given.
        expression: the filter, to pass to `pyarrow.Table.filter` or a dataset scan.
        columns: the schema's names of the columns it reads, in order of first use.
        condition: the same filter as a tree, for pruning partitions and stripes by bounds.
    """

    text: str
    expression: pc.Expression
    columns: tuple[str, ...]
    condition: Condition | None = None


# Deepest nesting of parentheses and NOTs a condition may have: the parser and every walk of
# the condition tree recurse once per level, so a few hundred levels would exhaust Python's
# recursion limit; no hand-written condition comes near 100.
MAX_CONDITION_NESTING = 100


def _balanced(terms: list[Condition], join: Callable[[Condition, Condition], Condition],
              ) -> Condition:
    """`a OP b OP c ...` as a balanced tree: a chain of thousands of ORs (generated
    conditions) stays shallow for every recursive walk; AND and OR are associative."""
    while len(terms) > 1:
        paired = [join(terms[i], terms[i + 1]) for i in range(0, len(terms) - 1, 2)]
        terms = paired + ([terms[-1]] if len(terms) % 2 else [])
    return terms[0]


class _Parser(TokenCursor):
    def __init__(self, text: str, schema: pa.Schema, option: str) -> None:
        self.text = text
        self.schema = schema
        self.option = option
        self.depth = 0
        super().__init__(tokenize(text, _DIALECT, subject=option, hint=_STRAY_HINT))
        self.columns: list[str] = []

    def error(self, what: str, pos: int, hint: str | None = None) -> ConfigError:
        return syntax_error(self.option, self.text, what, pos, hint or _EXAMPLE)

    def expect_punct(self, text: str, after: str) -> None:
        if not self.take_punct(text):
            raise self.error(f"expected {text!r} after {after}, found {self.tok.describe()}",
                             self.tok.pos)

    # ------------------------------------------------------------------ grammar
    def parse(self) -> Condition:
        if self.tok.kind == "end":
            raise self.error("expected a condition", 0)
        expr = self.or_expr()
        if self.tok.kind != "end":
            raise self.error(f"unexpected {self.tok.describe()}", self.tok.pos,
                             "combine conditions with AND / OR; " + _EXAMPLE)
        return expr

    def or_expr(self) -> Condition:
        terms = [self.and_expr()]
        while self.take_word("OR"):
            terms.append(self.and_expr())
        return _balanced(terms, lambda a, b: a | b)

    def and_expr(self) -> Condition:
        terms = [self.not_expr()]
        while self.take_word("AND"):
            terms.append(self.not_expr())
        return _balanced(terms, lambda a, b: a & b)

    def not_expr(self) -> Condition:
        tok = self.tok
        if self.take_word("NOT"):
            with self.nested(tok.pos):
                return ~self.not_expr()
        return self.primary()

    @contextmanager
    def nested(self, pos: int) -> Iterator[None]:
        """One level deeper, at most MAX_CONDITION_NESTING."""
        if self.depth >= MAX_CONDITION_NESTING:
            raise self.error(f"the condition nests parentheses and NOTs more than "
                             f"{MAX_CONDITION_NESTING} levels deep", pos,
                             f"write it with at most {MAX_CONDITION_NESTING} levels")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def primary(self) -> Condition:
        tok = self.tok
        if self.take_punct("("):
            if self.tok.kind == "end" or self.tok.text == ")":
                raise self.error(f"expected a condition after '(', found {self.tok.describe()}",
                                 self.tok.pos)
            with self.nested(tok.pos):
                expr = self.or_expr()
            self.expect_punct(")", f"the condition opened at position {tok.pos}")
            return expr
        if self.is_literal_start():
            # `3 < id`: a literal on the left, flipped to `id > 3`.
            literal = self.literal(after=None)
            op = self.tok
            if not _is_comparison(op):
                raise self.error(f"expected a comparison (=, <>, <, <=, >, >=) after "
                                 f"{literal.text!r}, found {op.describe()}", op.pos)
            self.i += 1
            name, field = self.column()
            return self.compare(name, field, _FLIPPED[op.text], literal)
        name, field = self.column()
        return self.condition(name, field)

    def column(self) -> tuple[str, pa.Field]:
        tok = self.tok
        if tok.kind == "quoted":
            wanted = tok.value
        elif tok.kind == "word" and _keyword(tok) is None:
            wanted = tok.text
        else:
            raise self.error(f"expected a column name, found {tok.describe()}", tok.pos,
                             f"columns are: {', '.join(self.schema.names)}")
        self.i += 1
        field = self.resolve(wanted, tok.pos)
        if field.name not in self.columns:
            self.columns.append(field.name)
        return field.name, field

    def resolve(self, wanted: str, pos: int) -> pa.Field:
        if wanted in self.schema.names:
            return self.schema.field(wanted)
        matches = [f for f in self.schema if f.name.lower() == wanted.lower()]
        if len(matches) == 1:
            return matches[0]
        raise self.error(f"unknown column {wanted!r}", pos,
                         f"columns are: {', '.join(self.schema.names)}")

    def condition(self, name: str, field: pa.Field) -> Condition:
        tok = self.tok
        if _is_comparison(tok):
            self.i += 1
            return self.compare(name, field, tok.text, self.literal(after=tok.text))
        if self.take_word("IS"):
            negate = self.take_word("NOT")
            if not self.take_word("NULL"):
                raise self.error(f"expected NULL after IS{' NOT' if negate else ''}, found "
                                 f"{self.tok.describe()}", self.tok.pos)
            return IsNull(name, negate=negate)
        if pa.types.is_boolean(field.type) and (
                tok.kind == "end" or _keyword(tok) in ("AND", "OR") or tok.text == ")"):
            return IsTrue(name)  # a bare BOOLEAN column is a condition
        negate = self.take_word("NOT")
        if self.take_word("IN"):
            expr = self.in_list(name, field)
        elif self.take_word("BETWEEN"):
            low = self.literal(after="BETWEEN")
            if not self.take_word("AND"):
                raise self.error(f"expected AND after BETWEEN {low.text}, found "
                                 f"{self.tok.describe()}", self.tok.pos,
                                 "write: x BETWEEN 1 AND 10")
            high = self.literal(after="AND")
            expr = self.compare(name, field, ">=", low) & self.compare(name, field, "<=", high)
        else:
            expected = "IN or BETWEEN after NOT" if negate else (
                "a comparison (=, <>, <, <=, >, >=), IN, BETWEEN or IS [NOT] NULL after "
                f"column {name!r}")
            raise self.error(f"expected {expected}, found {self.tok.describe()}", self.tok.pos)
        return ~expr if negate else expr

    def in_list(self, name: str, field: pa.Field) -> Condition:
        self.expect_punct("(", "IN")
        values = [self.typed(field, self.literal(after="("))]
        while self.take_punct(","):
            values.append(self.typed(field, self.literal(after=",")))
        self.expect_punct(")", "the IN list")
        return In(name, tuple(values))

    def compare(self, name: str, field: pa.Field, op: str, literal: _Literal) -> Condition:
        return Compare(name, "!=" if op == "<>" else op, self.typed(field, literal))

    # ------------------------------------------------------------------ literals
    def is_literal_start(self) -> bool:
        tok = self.tok
        if tok.kind in ("number", "string"):
            return True
        if tok.kind == "punct" and tok.text in ("+", "-"):
            return True
        return _keyword(tok) in ("TRUE", "FALSE", "NULL", "DATE", "TIMESTAMP")

    def literal(self, *, after: str | None) -> _Literal:
        tok = self.tok
        where = f" after {after!r}" if after else ""
        if not self.is_literal_start():
            found = tok.describe()
            hint = None
            if _is_comparison(tok):
                hint = f"write the operator once, e.g. id {after} 3"
            elif tok.kind in ("word", "quoted") and _keyword(tok) is None:
                hint = (f"write strings in single quotes ('{tok.text.strip('`')}'); "
                        "a comparison must have a column on one side and a value on the other")
            raise self.error(f"expected a value{where}, found {found}"
                             if tok.kind != "end" else f"expected a value{where}", tok.pos, hint)
        self.i += 1
        if tok.kind == "punct":  # a sign
            number = self.tok
            if number.kind != "number":
                raise self.error(f"expected a number after {tok.text!r}, found "
                                 f"{number.describe()}", number.pos)
            self.i += 1
            return self.number(tok.text + number.text, tok.pos)
        if tok.kind == "number":
            return self.number(tok.text, tok.pos)
        if tok.kind == "string":
            return _Literal("string", tok.value, tok.text, tok.pos)
        keyword = _keyword(tok)
        if keyword in ("TRUE", "FALSE"):
            return _Literal("bool", keyword == "TRUE", tok.text, tok.pos)
        if keyword == "NULL":
            return _Literal("null", None, tok.text, tok.pos)
        # DATE '...' / TIMESTAMP '...'
        value = self.tok
        if value.kind != "string":
            raise self.error(f"expected a quoted value after {keyword}, found "
                             f"{value.describe()}", value.pos,
                             f"write {keyword} '2026-01-31'" if keyword == "DATE"
                             else f"write {keyword} '2026-01-31 12:00:00'")
        self.i += 1
        text = value.value
        parsed = self.parse_temporal(keyword or "", text, value.pos)
        return _Literal(str(keyword).lower(), parsed, f"{tok.text} {value.text}", tok.pos)

    def number(self, text: str, pos: int) -> _Literal:
        if re.fullmatch(r"[+-]?[0-9]+", text):
            return _Literal("int", int(text), text, pos)
        return _Literal("float", decimal.Decimal(text), text, pos)

    def parse_temporal(self, keyword: str, text: str, pos: int) -> dt.date:
        try:
            if keyword == "DATE":
                return dt.date.fromisoformat(text)
            return dt.datetime.fromisoformat(text)
        except ValueError as e:
            example = "'2026-01-31'" if keyword == "DATE" else "'2026-01-31 12:00:00.5'"
            raise self.error(f"{text!r} is not a valid {keyword} ({e})", pos,
                             f"write {keyword} {example}") from e

    # ------------------------------------------------------------------ typing
    def typed(self, field: pa.Field, literal: _Literal) -> pa.Scalar:
        """The literal as a scalar comparable with the column, or a ConfigError."""
        t = field.type
        kind = literal.kind
        hive = _type_name(t)

        def mismatch(hint: str | None = None) -> ConfigError:
            return self.error(f"column {field.name!r} is {hive} but {literal.text} is "
                              f"{_KIND_NAMES[kind]}", literal.pos, hint)

        if kind == "null":
            raise self.error(f"NULL cannot be compared with {field.name!r}", literal.pos,
                             f"use {field.name} IS NULL or {field.name} IS NOT NULL")
        if pa.types.is_dictionary(t):
            t = t.value_type
        if pa.types.is_integer(t):
            if kind == "int":
                bits = _INT_RANGES.get(t, 64)
                low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
                if not low <= literal.value <= high:
                    raise self.error(f"{literal.text} is out of range for column "
                                     f"{field.name!r} ({hive})", literal.pos,
                                     f"{hive} holds {low}..{high}")
                return pa.scalar(literal.value, t)
            if kind == "float":
                return pa.scalar(float(literal.value), pa.float64())
            raise mismatch(f"compare {field.name!r} with a number, e.g. {field.name} = 3")
        if pa.types.is_floating(t):
            if kind in ("int", "float"):
                return pa.scalar(float(literal.value), t)
            raise mismatch(f"compare {field.name!r} with a number, e.g. {field.name} > 1.5")
        if pa.types.is_decimal(t):
            if kind in ("int", "float"):
                return pa.scalar(decimal.Decimal(literal.value))
            raise mismatch(f"compare {field.name!r} with a number, e.g. {field.name} > 1.5")
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            if kind == "string":
                return pa.scalar(literal.value, t)
            raise mismatch(f"quote the value: {field.name} = '{literal.value}'"
                           if kind in ("int", "float") else None)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            if kind == "string":
                return pa.scalar(literal.value.encode("utf-8"), t)
            raise mismatch()
        if pa.types.is_boolean(t):
            if kind == "bool":
                return pa.scalar(literal.value, t)
            raise mismatch(f"write {field.name} = TRUE or {field.name} = FALSE")
        if pa.types.is_date(t):
            value = literal.value
            if kind == "string":
                value = self.parse_temporal("DATE", literal.value, literal.pos)
            elif kind != "date":
                raise mismatch(f"write {field.name} = DATE '2026-01-31'")
            return pa.scalar(value, t)
        if pa.types.is_timestamp(t):
            value = literal.value
            if kind == "string":
                value = self.parse_temporal("TIMESTAMP", literal.value, literal.pos)
            elif kind == "date":
                value = dt.datetime.combine(value, dt.time())
            elif kind != "timestamp":
                raise mismatch(f"write {field.name} >= TIMESTAMP '2026-01-31 12:00:00'")
            if t.tz is not None and value.tzinfo is None:
                value = value.replace(tzinfo=dt.UTC)
            elif t.tz is None and value.tzinfo is not None:
                value = value.astimezone(dt.UTC).replace(tzinfo=None)
            return pa.scalar(value, t)
        raise self.error(f"column {field.name!r} is {hive}, which cannot be compared with a "
                         "value", literal.pos, "only IS [NOT] NULL works on ARRAY, MAP and "
                         "STRUCT columns")


_KIND_NAMES = {"int": "an integer", "float": "a decimal number", "string": "a string",
               "date": "a DATE", "timestamp": "a TIMESTAMP", "bool": "a boolean",
               "null": "NULL"}


def _type_name(t: pa.DataType) -> str:
    names = {pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INT",
             pa.int64(): "BIGINT", pa.float32(): "FLOAT", pa.float64(): "DOUBLE",
             pa.bool_(): "BOOLEAN", pa.string(): "STRING", pa.large_string(): "STRING",
             pa.date32(): "DATE", pa.binary(): "BINARY"}
    if t in names:
        return names[t]
    if pa.types.is_timestamp(t):
        return "TIMESTAMP"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "ARRAY"
    if pa.types.is_map(t):
        return "MAP"
    if pa.types.is_struct(t):
        return "STRUCT"
    return str(t).upper()


def parse_predicate(text: str, schema: pa.Schema, *, option: str = "--where") -> Predicate:
    """Parse a WHERE text against a schema.

    Column names match exactly, else case-insensitively (Hive's names are case-insensitive);
    backquote names that are keywords or contain other characters. Literals must fit the
    column: numbers for numeric columns, 'quoted' strings for strings, DATE '...' (or a
    'yyyy-mm-dd' string) for dates, TIMESTAMP '...' (or a string) for timestamps, TRUE/FALSE
    for booleans. NULL is only allowed as IS [NOT] NULL.

    Args:
        text: e.g. ``"id IN (1, 2) AND dt = '2026-01-01'"``.
        schema: the columns the text may name (for a table: row and partition columns).
        option: what to call the text in error messages.

    Returns:
        The expression and the columns it reads.

    Raises:
        ConfigError: the text cannot be parsed or does not fit the schema; the message names
            the position (0-based character offset) and the hint shows what to write.
    """
    parser = _Parser(text, schema, option)
    condition = parser.parse()
    return Predicate(text, condition.expression(), tuple(parser.columns), condition)


def parse_where(text: str, schema: pa.Schema, *, option: str = "--where") -> pc.Expression:
    """`parse_predicate(...).expression`.

    Raises:
        ConfigError: as for `parse_predicate`.
    """
    return parse_predicate(text, schema, option=option).expression


__all__ = ["Predicate", "parse_predicate", "parse_where"]
