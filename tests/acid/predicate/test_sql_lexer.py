"""The shared lexer: tokens and positions, the two string dialects, and one error shape for both
grammars (a lexical mistake reads the same in a schema and in a WHERE text)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ingest.acid.format.schema import parse_schema, to_ddl
from ingest.acid.predicate.lexer import Dialect, tokenize
from ingest.acid.predicate.where import parse_where
from ingest.errors import ConfigError

SQL = Dialect(punctuation=("<>", "<=", "<", "=", "(", ")", ","))
HIVE = Dialect(punctuation=("<", ">", ","), quotes="'\"", backslash_escapes=True)


def kinds(text: str, dialect: Dialect) -> list[tuple[str, str, int, str]]:
    return [(t.kind, t.text, t.pos, t.value)
            for t in tokenize(text, dialect, subject="text", hint="h")]


def test_tokens_carry_kind_text_position_and_value() -> None:
    assert kinds(" a1 <= `x``y` 1.5e3,'it''s'", SQL) == [
        ("word", "a1", 1, "a1"),
        ("punct", "<=", 4, "<="),
        ("quoted", "`x``y`", 7, "x`y"),
        ("number", "1.5e3", 14, "1.5e3"),
        ("punct", ",", 19, ","),
        ("string", "'it''s'", 20, "it's"),
        ("end", "", 27, ""),
    ]


def test_the_longest_punctuation_wins_within_a_dialect() -> None:
    assert [t.text for t in tokenize("a<>b<c", SQL, subject="t", hint="h")] == [
        "a", "<>", "b", "<", "c", ""]
    # The schema dialect has no `<>`, so an empty struct is `<` then `>`.
    assert [t.text for t in tokenize("STRUCT<>", HIVE, subject="t", hint="h")] == [
        "STRUCT", "<", ">", ""]


def strings(text: str, dialect: Dialect) -> list[str]:
    return [t.value for t in tokenize(text, dialect, subject="t", hint="h") if t.kind == "string"]


def test_string_escapes_per_dialect() -> None:
    """SQL doubles a quote and keeps backslashes; Hive DDL escapes with a backslash."""
    assert strings(r"'a\'b'", HIVE) == ["a'b"]
    assert strings(r"'a\\b'", HIVE) == ["a\\b"]
    assert strings(r"'a\\b'", SQL) == ["a\\\\b"]
    assert strings("'it''s'", SQL) == ["it's"]
    assert strings("'it''s'", HIVE) == ["it", "s"]  # two strings, which the grammar rejects
    assert strings('"q"', HIVE) == ["q"]
    assert strings("'two\nlines'", SQL) == strings("'two\nlines'", HIVE) == ["two\nlines"]


def test_a_stray_double_quote_is_an_error_where_it_opens_no_string() -> None:
    with pytest.raises(ConfigError) as info:
        tokenize('a = "x"', SQL, subject="--where", hint="quote with '")
    assert info.value.message == "Cannot parse --where 'a = \"x\"': unexpected character '\"' " \
                                 "at position 4"
    assert info.value.hint == "quote with '"


# The same lexical mistake, once in a schema and once in a WHERE text: same words, right position.
SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string()), ("My Col", pa.string())])


@pytest.mark.parametrize(("ddl", "where", "what", "ddl_pos", "where_pos", "hint"), [
    ("a int; b int", "id = 1; drop table", "unexpected character ';'", 5, 6, None),
    ("a int, b int ?", "id = 1 ?", "unexpected character '?'", 13, 7, None),
    ("a INT COMMENT 'abc", "value = 'abc", "unterminated string", 14, 8, "close the string"),
    ("`a b INT", "`My Col = 'x'", "unterminated name", 0, 0,
     "close the name with ` (write `` for a backquote inside it)"),
])
def test_both_grammars_report_a_lexical_mistake_alike(ddl: str, where: str, what: str,
                                                      ddl_pos: int, where_pos: int,
                                                      hint: str | None) -> None:
    with pytest.raises(ConfigError) as schema_error:
        parse_schema(ddl)
    with pytest.raises(ConfigError) as where_error:
        parse_where(where, SCHEMA)
    assert schema_error.value.message == (
        f"Cannot parse schema {ddl!r}: {what} at position {ddl_pos}")
    assert where_error.value.message == (
        f"Cannot parse --where {where!r}: {what} at position {where_pos}")
    for error in (schema_error.value, where_error.value):
        assert error.hint
        if hint is not None:
            assert error.hint.startswith(hint)


def test_each_grammar_says_how_to_close_its_own_strings() -> None:
    with pytest.raises(ConfigError) as schema_error:
        parse_schema("a INT COMMENT 'abc")
    with pytest.raises(ConfigError) as where_error:
        parse_where("value = 'abc", SCHEMA)
    assert schema_error.value.hint == "close the string with ' (write \\' for a quote inside it)"
    assert where_error.value.hint == "close the string with ' (write '' for a quote inside it)"


def test_an_empty_struct_round_trips() -> None:
    schema = pa.schema([("s", pa.struct([]))])
    assert to_ddl(schema) == "s STRUCT<>"
    assert parse_schema("s STRUCT<>") == schema
