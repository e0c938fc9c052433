"""The WHERE language: parsed conditions as trees (`conditions`), checked against a table schema
and turned into pyarrow expressions (`where`), and the lexer shared with Hive column lists.

The bottom room of `ingest.acid`: knows no file, name or snapshot.
"""

from ingest.acid.predicate import conditions
from ingest.acid.predicate.conditions import UNKNOWN, Condition, Domain
from ingest.acid.predicate.lexer import Dialect, TokenCursor, syntax_error, tokenize
from ingest.acid.predicate.where import Predicate, parse_predicate, parse_where

__all__ = [
    "conditions",
    "UNKNOWN",
    "Condition",
    "Dialect",
    "Domain",
    "Predicate",
    "TokenCursor",
    "parse_predicate",
    "parse_where",
    "syntax_error",
    "tokenize",
]
