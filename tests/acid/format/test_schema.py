"""Hive DDL <-> Arrow schemas, ORC type strings and the ACID event struct."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.acid.format.events import ACID_FIELD_NAMES, acid_event_schema, row_schema_of
from ingest.acid.format.schema import HIVE_TYPE_KEY, parse_schema, to_ddl, to_orc_type_string
from ingest.errors import ConfigError, UnsupportedFormatError


def test_simple_columns() -> None:
    schema = parse_schema("id BIGINT, value STRING, dt STRING")
    assert schema == pa.schema([("id", pa.int64()), ("value", pa.string()), ("dt", pa.string())])
    assert to_ddl(schema) == "id BIGINT, value STRING, dt STRING"
    assert to_orc_type_string(schema) == "struct<id:bigint,value:string,dt:string>"


def test_every_type() -> None:
    schema = parse_schema(
        "a tinyint, b SmallInt, c int, d integer, e bigint, f float, g double, "
        "h double precision, i boolean, j string, k varchar(10), l char(3), m binary, n date, "
        "o timestamp, p decimal(12,2), q decimal, r array<int>, s map<string,array<bigint>>, "
        "t struct<x:int, `y z`:varchar(5)>"
    )
    types = {f.name: f.type for f in schema}
    assert types["a"] == pa.int8() and types["b"] == pa.int16()
    assert types["c"] == types["d"] == pa.int32() and types["e"] == pa.int64()
    assert types["f"] == pa.float32() and types["g"] == types["h"] == pa.float64()
    assert types["i"] == pa.bool_() and types["j"] == types["k"] == types["l"] == pa.string()
    assert types["m"] == pa.binary() and types["n"] == pa.date32()
    assert types["o"] == pa.timestamp("ns")
    assert types["p"] == pa.decimal128(12, 2) and types["q"] == pa.decimal128(10, 0)
    assert types["r"] == pa.list_(pa.int32())
    assert types["s"] == pa.map_(pa.string(), pa.list_(pa.int64()))
    assert types["t"].field(1).name == "y z"
    assert schema.field("k").metadata == {HIVE_TYPE_KEY: b"varchar(10)"}
    assert schema.field("l").metadata == {HIVE_TYPE_KEY: b"char(3)"}
    assert all(f.nullable for f in schema)
    assert to_orc_type_string(schema) == (
        "struct<a:tinyint,b:smallint,c:int,d:int,e:bigint,f:float,g:double,h:double,i:boolean,"
        "j:string,k:varchar(10),l:char(3),m:binary,n:date,o:timestamp,p:decimal(12,2),"
        "q:decimal(10,0),r:array<int>,s:map<string,array<bigint>>,t:struct<x:int,`y z`:varchar(5)>>"
    )
    assert parse_schema(to_ddl(schema)).equals(schema, check_metadata=True)


def test_names_and_comments() -> None:
    schema = parse_schema(r"`select` INT COMMENT 'a \'word\'', `we``ird` STRING, date DATE")
    assert schema.field("select").metadata == {b"comment": b"a 'word'"}
    assert schema.names == ["select", "we`ird", "date"]
    ddl = to_ddl(schema)
    assert ddl.startswith("`select` INT COMMENT ")
    assert "`we``ird` STRING" in ddl and "`date` DATE" in ddl
    assert parse_schema(ddl).equals(schema, check_metadata=True)
    assert to_orc_type_string(schema) == "struct<select:int,`we``ird`:string,date:date>"


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("id BIGNT", "found 'BIGNT' at position 3"),
        ("id", "expected a type, found the end of the text at position 2"),
        ("id int,", "expected a column name"),
        ("id int value string", "expected ',' or the end of the schema, found 'value' at pos"),
        ("v varchar(0)", "VARCHAR length 1..65535 (got 0)"),
        ("c char(256)", "CHAR length 1..255"),
        ("d decimal(39,0)", "DECIMAL(p,s)"),
        ("d decimal(5,6)", "DECIMAL(p,s)"),
        ("m map<int>", "expected ',', found '>' at position 9"),
        ("s struct<a int>", "expected ':'"),
        ("a int; b int", "unexpected character ';' at position 5"),
        ("a int, A string", "duplicate column name(s) a"),
        ("", "expected a column name"),
    ],
)
def test_bad_ddl(ddl: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_schema(ddl)
    assert message in str(info.value)


def test_types_are_case_insensitive() -> None:
    upper = parse_schema("A ARRAY<MAP<STRING,STRUCT<x:DECIMAL(5,1)>>>, B VARCHAR(3)")
    lower = parse_schema("A array<map<string,struct<x:decimal(5,1)>>>, B varchar(3)")
    assert upper.equals(lower, check_metadata=True)


def test_unsupported_arrow_types() -> None:
    with pytest.raises(UnsupportedFormatError, match="column 'u' of Arrow type uint32"):
        to_ddl(pa.schema([("u", pa.uint32())]))
    with pytest.raises(UnsupportedFormatError, match="column 't'"):
        to_orc_type_string(pa.schema([("t", pa.timestamp("us", tz="UTC"))]))


def test_acid_event_schema() -> None:
    row = pa.schema([pa.field("id", pa.int64(), nullable=False), ("value", pa.string())])
    event = acid_event_schema(row)
    assert tuple(event.names) == ACID_FIELD_NAMES
    int32, int64 = pa.int32(), pa.int64()
    assert [f.type for f in event][:5] == [int32, int64, int32, int64, int64]
    row_field = event.field("row")
    assert row_field.nullable
    assert [f.nullable for f in row_field.type] == [True, True]
    assert to_orc_type_string(event) == (
        "struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,"
        "currentTransaction:bigint,row:struct<id:bigint,value:string>>"
    )
    assert row_schema_of(event).names == ["id", "value"]
    with pytest.raises(UnsupportedFormatError, match="Not an ACID event schema"):
        row_schema_of(row)


# ---------------------------------------------------------------- round trips

names = st.one_of(
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8),
)
primitive = st.sampled_from([
    "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "BOOLEAN", "STRING", "BINARY",
    "DATE", "TIMESTAMP", "VARCHAR(7)", "CHAR(2)", "DECIMAL(38,10)", "DECIMAL(1,0)",
])


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


hive_types = st.recursive(
    primitive,
    lambda inner: st.one_of(
        inner.map(lambda t: f"ARRAY<{t}>"),
        st.tuples(primitive, inner).map(lambda kv: f"MAP<{kv[0]},{kv[1]}>"),
        st.lists(st.tuples(names, inner), min_size=1, max_size=3, unique_by=lambda x: x[0]).map(
            lambda fs: "STRUCT<" + ",".join(f"{_quote(n)}:{t}" for n, t in fs) + ">"
        ),
    ),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(names, hive_types), min_size=1, max_size=5,
                unique_by=lambda c: c[0].lower()))
def test_ddl_round_trip(columns: list[tuple[str, str]]) -> None:
    ddl = ", ".join(f"{_quote(n)} {t}" for n, t in columns)
    schema = parse_schema(ddl)
    assert schema.names == [n for n, _ in columns]
    again = to_ddl(schema)
    assert parse_schema(again).equals(schema, check_metadata=True)
    assert to_ddl(parse_schema(again)) == again


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("d decimal(5.5,2)", "expected the DECIMAL precision, found '5.5' at position 10"),
        ("v varchar(x)", "expected the VARCHAR length, found 'x' at position 10"),
        ("a int COMMENT 3", "expected a quoted comment, found '3' at position 14"),
        ("a int COMMENT 'x", "unterminated string at position 14"),
    ],
)
def test_bad_ddl_names_the_token_and_its_position(ddl: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_schema(ddl)
    assert info.value.message == f"Cannot parse schema {ddl!r}: {message}"
    assert info.value.hint


def test_comments_take_either_quote_and_backslash_escapes() -> None:
    schema = parse_schema(r"""a INT COMMENT "say \"hi\"", b INT COMMENT 'back\\slash'""")
    assert schema.field("a").metadata == {b"comment": b'say "hi"'}
    assert schema.field("b").metadata == {b"comment": b"back\\slash"}
    assert parse_schema(to_ddl(schema)).equals(schema, check_metadata=True)
