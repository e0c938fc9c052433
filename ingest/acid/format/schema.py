"""Table schemas: Hive DDL column lists <-> pyarrow schemas, ORC type strings, ACID event struct.

Mirrors Hive's column type grammar (`TypeInfoUtils`) and ORC's `TypeDescription.toString`;
the ACID root struct is orc-core `SchemaEvolution.createEventSchema` / Hive
`OrcRecordUpdater.createEventObjectInspector`. VARCHAR/CHAR lengths live in field metadata.
"""

from __future__ import annotations

import re

import pyarrow as pa

from ingest.acid.predicate import Dialect, TokenCursor, syntax_error, tokenize
from ingest.errors import ConfigError, UnsupportedFormatError

HIVE_TYPE_KEY = b"hive.type"
"""Field-metadata key holding the Hive type where Arrow cannot say it (varchar(n), char(n))."""
COMMENT_KEY = b"comment"

MAX_VARCHAR_LENGTH = 65535
MAX_CHAR_LENGTH = 255
MAX_DECIMAL_PRECISION = 38
# Deepest ARRAY/MAP/STRUCT nesting a column type may have. Each level costs a few Python
# frames in every recursive walk of a type (this parser, DDL and ORC type strings, the
# writer's column tree, readers), so a few hundred levels exhaust Python's recursion limit;
# 100 keeps every walk far inside it (tested end to end: create, load, cat, verify) and is
# far beyond real schemas (Hive's text SerDe stops at 24 levels).
MAX_TYPE_NESTING = 100

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ORC_UNQUOTED = re.compile(r"[A-Za-z0-9_]+")
# Hive DDL strings take either quote and backslash escapes (what `to_ddl` writes for comments).
_DIALECT = Dialect(punctuation=("<", ">", "(", ")", ",", ":"), quotes="'\"",
                   backslash_escapes=True)
_HINT = "columns look like 'id BIGINT, name STRING, tags ARRAY<STRING>'"

_SIMPLE: dict[str, pa.DataType] = {
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("ns"),
}
# Names to_ddl backquotes: our type words plus Hive's reserved keywords (so DDL we print can be
# pasted into Hive). Backquoting more than needed is harmless.
_KEYWORDS = frozenset(
    set(_SIMPLE)
    | {"varchar", "char", "decimal", "numeric", "array", "map", "struct", "comment", "precision"}
    | set(
        "all alter and as authorization between both by case cast column conf create cross cube "
        "current current_date current_timestamp cursor database delete describe distinct drop "
        "else end exchange exists extended external false fetch following for from full "
        "function grant group grouping having if import in inner insert intersect interval into "
        "is join lateral left less like local macro more none not null of on or order out outer "
        "over partialscan partition percent preceding preserve procedure range reads reduce "
        "revoke right rollup row rows select set table tablesample then to transform trigger "
        "true truncate unbounded union uniquejoin update user using utc_tmestamp values when "
        "where window with commit only regexp rlike rollback start cache constraint foreign "
        "primary references dayofweek extract floor views time sync".split()
    )
)


class _Parser(TokenCursor):
    def __init__(self, text: str) -> None:
        self.text = text
        self.depth = 0
        self.column_name = ""
        super().__init__(tokenize(text, _DIALECT, subject="schema", hint=_HINT))

    def error(self, expected: str) -> ConfigError:
        return syntax_error("schema", self.text, f"expected {expected}, found "
                            f"{self.tok.describe()}", self.tok.pos, _HINT)

    def expect_punct(self, p: str) -> None:
        if not self.take_punct(p):
            raise self.error(repr(p))

    def number(self, what: str) -> int:
        if self.tok.kind != "number" or not self.tok.text.isdigit():
            raise self.error(what)
        return int(self.advance().text)

    def name(self) -> str:
        if self.tok.kind in ("word", "quoted"):
            return self.advance().value
        raise self.error("a column name")

    def schema(self) -> pa.Schema:
        fields = [self.column()]
        while self.take_punct(","):
            fields.append(self.column())
        if self.tok.kind != "end":
            raise self.error("',' or the end of the schema")
        names = [f.name.lower() for f in fields]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(
                f"Cannot parse schema {self.text!r}: duplicate column name(s) {', '.join(dupes)} "
                "(Hive column names are case-insensitive)",
                hint="give each column a name that differs from the others in more than case",
            )
        return pa.schema(fields)

    def column(self) -> pa.Field:
        name = self.name()
        self.column_name = name
        field = self.type_field(name)
        if self.take_word("comment"):
            if self.tok.kind != "string":
                raise self.error("a quoted comment")
            comment = self.advance().value
            field = field.with_metadata({**(field.metadata or {}), COMMENT_KEY: comment.encode()})
        return field

    def type_field(self, name: str) -> pa.Field:
        """Parse a type and return it as a nullable field (metadata for varchar/char)."""
        if self.tok.kind != "word":
            raise self.error("a type")
        start = self.i
        word = self.advance().text.lower()
        if word == "double":
            self.take_word("precision")
        if word in _SIMPLE:
            return pa.field(name, _SIMPLE[word])
        if word in ("varchar", "char"):
            limit = MAX_VARCHAR_LENGTH if word == "varchar" else MAX_CHAR_LENGTH
            self.expect_punct("(")
            length = self.number(f"the {word.upper()} length")
            self.expect_punct(")")
            if not 1 <= length <= limit:
                self.i = start
                raise self.error(f"{word.upper()} length 1..{limit} (got {length})")
            hive_type = f"{word}({length})".encode()
            return pa.field(name, pa.string(), metadata={HIVE_TYPE_KEY: hive_type})
        if word in ("decimal", "numeric"):
            precision, scale = 10, 0
            if self.take_punct("("):
                precision = self.number("the DECIMAL precision")
                if self.take_punct(","):
                    scale = self.number("the DECIMAL scale")
                self.expect_punct(")")
            if not (1 <= precision <= MAX_DECIMAL_PRECISION and 0 <= scale <= precision):
                self.i = start
                raise self.error(
                    f"DECIMAL(p,s) with 1 <= p <= {MAX_DECIMAL_PRECISION} and 0 <= s <= p "
                    f"(got {precision},{scale})"
                )
            return pa.field(name, pa.decimal128(precision, scale))
        if word in ("array", "map", "struct"):
            self.i = start
            return self.nested_field(name)
        self.i = start
        raise self.error("a Hive type (BIGINT, STRING, DECIMAL(p,s), ARRAY<...>, ...)")

    def nested_field(self, name: str) -> pa.Field:
        """ARRAY, MAP or STRUCT, at most MAX_TYPE_NESTING levels deep."""
        if self.depth >= MAX_TYPE_NESTING:
            raise ConfigError(
                f"Cannot parse schema: the type of column {self.column_name!r} nests "
                f"ARRAY/MAP/STRUCT more than {MAX_TYPE_NESTING} levels deep (at position "
                f"{self.tok.pos})",
                hint=f"flatten the type to at most {MAX_TYPE_NESTING} levels of nesting")
        self.depth += 1
        try:
            return self.container_field(name)
        finally:
            self.depth -= 1

    def container_field(self, name: str) -> pa.Field:
        word = self.advance().text.lower()
        if word == "array":
            self.expect_punct("<")
            item = self.type_field("item")
            self.expect_punct(">")
            return pa.field(name, pa.list_(item))
        if word == "map":
            self.expect_punct("<")
            key = self.type_field("key")
            self.expect_punct(",")
            value = self.type_field("value")
            self.expect_punct(">")
            return pa.field(name, pa.map_(key.with_nullable(False), value))
        if word == "struct":
            self.expect_punct("<")
            members = []
            if not self.take_punct(">"):
                while True:
                    member_name = self.name()
                    self.expect_punct(":")
                    members.append(self.type_field(member_name))
                    if self.take_punct(">"):
                        break
                    self.expect_punct(",")
            return pa.field(name, pa.struct(members))
        raise AssertionError(word)  # nested_field is called only for the three words


def parse_schema(ddl: str) -> pa.Schema:
    """Parse a Hive column list such as ``"id BIGINT, value STRING, dt STRING"``.

    Types are case-insensitive; names may be backquoted and keep their case. VARCHAR(n) and
    CHAR(n) become Arrow strings with ``hive.type`` field metadata; TIMESTAMP is
    ``timestamp[ns]``; a bare DECIMAL is DECIMAL(10,0) as in Hive; ``COMMENT '...'`` is kept
    in field metadata. Every field is nullable. Types nest at most `MAX_TYPE_NESTING` levels.

    Args:
        ddl: the column list, without the surrounding parentheses.

    Returns:
        The Arrow schema.

    Raises:
        ConfigError: the text is not a column list (the message gives the position), or a
            type nests deeper than `MAX_TYPE_NESTING`.
    """
    return _Parser(ddl).schema()


def reserved_column_reason(name: str) -> str | None:
    """Why `name` cannot be a column of an ACID table, or None when it can: the one check
    `ingest create`, `ingest alter` and a stream's new columns share. `ingest cat --row-id`
    and Hive's readers add ROW__ID themselves; a column of that name would shadow it."""
    if name.lower() == "row__id":
        return (f"column {name!r} is reserved by Hive: ROW__ID is the virtual column holding "
                "each row's (writeid, bucketid, rowid)")
    return None


def _quote_ddl_name(name: str) -> str:
    if _IDENT.fullmatch(name) and name.lower() not in _KEYWORDS:
        return name
    return "`" + name.replace("`", "``") + "`"


def _quote_orc_name(name: str) -> str:
    # ORC TypeDescription.printFieldName: ^[a-zA-Z0-9_]+$ unquoted, else backquoted.
    if _ORC_UNQUOTED.fullmatch(name):
        return name
    return "`" + name.replace("`", "``") + "`"


def _hive_type(field: pa.Field, *, orc: bool) -> str:
    """Hive DDL (upper case) or ORC (lower case) spelling of one field's type."""
    t = field.type
    meta = (field.metadata or {}).get(HIVE_TYPE_KEY)
    quote = _quote_orc_name if orc else _quote_ddl_name

    def case(s: str) -> str:
        return s.lower() if orc else s.upper()

    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if meta is not None and re.fullmatch(rb"(varchar|char)\(\d+\)", meta.lower()):
            return case(meta.decode())
        return case("string")
    simple = {
        pa.int8(): "tinyint",
        pa.int16(): "smallint",
        pa.int32(): "int",
        pa.int64(): "bigint",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.bool_(): "boolean",
        pa.date32(): "date",
        pa.binary(): "binary",
        pa.large_binary(): "binary",
    }
    if t in simple:
        return case(simple[t])
    if pa.types.is_timestamp(t) and t.tz is None:
        return case("timestamp")
    if pa.types.is_decimal(t):
        return case(f"decimal({t.precision},{t.scale})")
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return case("array") + f"<{_hive_type(t.value_field, orc=orc)}>"
    if pa.types.is_map(t):
        key = _hive_type(t.key_field, orc=orc)
        value = _hive_type(t.item_field, orc=orc)
        return case("map") + f"<{key},{value}>"
    if pa.types.is_struct(t):
        members = ",".join(
            f"{quote(t.field(i).name)}:{_hive_type(t.field(i), orc=orc)}"
            for i in range(t.num_fields)
        )
        return case("struct") + f"<{members}>"
    raise UnsupportedFormatError(
        f"Cannot express column {field.name!r} of Arrow type {t} as a Hive type: supported are "
        "int8/16/32/64, float32/64, bool, string, binary, date32, timestamp without time zone, "
        "decimal, list, map and struct"
    )


def to_ddl(schema: pa.Schema) -> str:
    """The Hive column list for a schema; the inverse of `parse_schema`.

    Returns:
        e.g. ``"id BIGINT, value STRING, dt STRING"``.

    Raises:
        UnsupportedFormatError: a column type Hive cannot hold (e.g. unsigned ints).
    """
    parts = []
    for field in schema:
        part = f"{_quote_ddl_name(field.name)} {_hive_type(field, orc=False)}"
        comment = (field.metadata or {}).get(COMMENT_KEY)
        if comment is not None:
            escaped = comment.decode().replace("\\", "\\\\").replace("'", "\\'")
            part += f" COMMENT '{escaped}'"
        parts.append(part)
    return ", ".join(parts)


def to_orc_type_string(schema: pa.Schema) -> str:
    """ORC's type string for a schema, e.g. ``struct<id:bigint,value:string>``.

    Raises:
        UnsupportedFormatError: a column type ORC cannot hold.
    """
    members = ",".join(f"{_quote_orc_name(f.name)}:{_hive_type(f, orc=True)}" for f in schema)
    return f"struct<{members}>"


__all__ = [
    "COMMENT_KEY",
    "HIVE_TYPE_KEY",
    "MAX_TYPE_NESTING",
    "parse_schema",
    "reserved_column_reason",
    "to_ddl",
    "to_orc_type_string",
]
