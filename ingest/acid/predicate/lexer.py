"""One lexer for the two small SQL languages of `ingest`: Hive column lists and WHERE texts.

Splits text into words, `backquoted` names, numbers, quoted strings and punctuation, each with
its 0-based character position, so that every syntax error names where it is. The grammars stay
in `schema.py` and `where.py` and differ here only in punctuation and string quoting: DDL
escapes with a backslash as Hive's `HiveLexer.g` StringLiteral does, WHERE doubles the quote (SQL).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from ingest.errors import ConfigError

_NUMBER = r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
_WORD = r"[A-Za-z_][A-Za-z0-9_]*"
_QUOTED = r"`(?:[^`]|``)*`"


@dataclass(frozen=True)
class Dialect:
    """What one grammar's text may contain besides words, names and numbers.

    Attributes:
        punctuation: operators and punctuation marks; the longest one that matches wins.
        quotes: the characters that open (and close) a string.
        backslash_escapes: a backslash takes the next character literally (``'a \\'b\\''``), as
            in Hive DDL; otherwise a quote is written twice (``'it''s'``) and a backslash is
            an ordinary character, as in SQL.
    """

    punctuation: tuple[str, ...]
    quotes: str = "'"
    backslash_escapes: bool = False

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """One regular expression with a named group per token kind (``ws`` for white space)."""
        strings = []
        for q in self.quotes:
            qe = re.escape(q)
            body = rf"(?:[^{qe}\\]|\\.)*" if self.backslash_escapes else rf"(?:[^{qe}]|{qe}{qe})*"
            strings.append(f"{qe}{body}{qe}")
        punct = "|".join(re.escape(p) for p in sorted(self.punctuation, key=len, reverse=True))
        pattern = (
            rf"(?P<ws>\s+)|(?P<number>{_NUMBER})|(?P<word>{_WORD})|(?P<quoted>{_QUOTED})"
            rf"|(?P<string>{'|'.join(strings)})|(?P<punct>{punct})"
        )
        return re.compile(pattern, re.DOTALL)

    def string_value(self, text: str) -> str:
        """The content of a string token, quotes removed and escapes resolved."""
        body = text[1:-1]
        if self.backslash_escapes:
            return re.sub(r"\\(.)", r"\1", body, flags=re.DOTALL)
        return body.replace(text[0] * 2, text[0])

    def unterminated_hint(self, quote: str) -> str:
        """How to close a string (or a backquoted name) opened with `quote`."""
        if quote == "`":
            return "close the name with ` (write `` for a backquote inside it)"
        inner = f"\\{quote}" if self.backslash_escapes else quote * 2
        return f"close the string with {quote} (write {inner} for a quote inside it)"


@dataclass(frozen=True)
class Token:
    """One token.

    Attributes:
        kind: word (a bare name or keyword), quoted (a backquoted name), number, string,
            punct, or end (after the last token; its text is empty).
        text: the token as written.
        pos: 0-based character offset of its first character in the text.
        value: a quoted name or a string without its quotes and escapes; else the text.
    """

    kind: str
    text: str
    pos: int
    value: str

    def is_word(self, word: str) -> bool:
        """Whether this is the bare word `word`, in any case."""
        return self.kind == "word" and self.text.upper() == word.upper()

    def describe(self) -> str:
        """How an error message names this token: ``'abc'`` or "the end of the text"."""
        return "the end of the text" if self.kind == "end" else repr(self.text)


def syntax_error(subject: str, text: str, what: str, pos: int, hint: str | None) -> ConfigError:
    """The one shape of a syntax error: ``Cannot parse <subject> '<text>': <what> at position N``.

    Args:
        subject: what the text is, e.g. ``schema`` or ``--where``.
        text: the whole text as given.
        what: what is wrong, e.g. ``expected ')', found 'x'``.
        pos: 0-based character offset the error is at.
        hint: what to write instead.

    Returns:
        The error, for the caller to raise.
    """
    return ConfigError(f"Cannot parse {subject} {text!r}: {what} at position {pos}", hint=hint)


def tokenize(text: str, dialect: Dialect, *, subject: str, hint: str) -> list[Token]:
    """Split `text` into tokens, skipping white space; the last token is always the end token.

    Args:
        text: the text to split.
        dialect: its punctuation and string quoting.
        subject: what the text is, for error messages (see `syntax_error`).
        hint: the hint for a character that starts no token.

    Returns:
        The tokens, ending with one of kind ``end`` at ``len(text)``.

    Raises:
        ConfigError: a character that starts no token, or an unterminated string or
            backquoted name; the message gives its position.
    """
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        m = dialect.pattern.match(text, pos)
        if m is None:
            char = text[pos]
            if char in dialect.quotes or char == "`":
                what = "unterminated name" if char == "`" else "unterminated string"
                raise syntax_error(subject, text, what, pos, dialect.unterminated_hint(char))
            raise syntax_error(subject, text, f"unexpected character {char!r}", pos, hint)
        kind = m.lastgroup or ""
        tok_text = m.group()
        if kind == "quoted":
            tokens.append(Token("quoted", tok_text, pos, tok_text[1:-1].replace("``", "`")))
        elif kind == "string":
            tokens.append(Token("string", tok_text, pos, dialect.string_value(tok_text)))
        elif kind in ("number", "word", "punct"):
            tokens.append(Token(kind, tok_text, pos, tok_text))
        pos = m.end()
    tokens.append(Token("end", "", len(text), ""))
    return tokens


class TokenCursor:
    """A position in a token list with the look-ahead both grammars use."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0

    @property
    def tok(self) -> Token:
        """The next token (the end token once all are taken)."""
        return self.tokens[self.i]

    def advance(self) -> Token:
        """Take the next token and return it."""
        tok = self.tokens[self.i]
        if tok.kind != "end":
            self.i += 1
        return tok

    def take_punct(self, punct: str) -> bool:
        """Take the next token if it is `punct`."""
        if self.tok.kind == "punct" and self.tok.text == punct:
            self.i += 1
            return True
        return False

    def take_word(self, word: str) -> bool:
        """Take the next token if it is the bare word `word` (any case)."""
        if self.tok.is_word(word):
            self.i += 1
            return True
        return False
