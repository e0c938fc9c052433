"""Every exception class of `ingest` is defined in ingest/errors.py, under `IngestError`, so
a caller finds the whole hierarchy in one module and no two layers grow the same error.

Not counted: warning categories (`UserWarning` subclasses are issued, not raised), a
module's private control-flow signal (`_NothingLeft`: raised and caught within one module,
never seen by a caller), and the CLI's click exceptions (`click.ClickException`: how a
command asks click for an exit code, not an error of the package).
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

import ingest.errors

PACKAGE = Path(__file__).resolve().parent.parent / "ingest"


def _is_builtin_exception(name: str) -> bool:
    found = getattr(builtins, name, None)
    return isinstance(found, type) and issubclass(found, BaseException)


def _is_warning(name: str) -> bool:
    found = getattr(builtins, name, None)
    return name.endswith("Warning") or (isinstance(found, type) and issubclass(found, Warning))


def exception_classes(sources: dict[str, str]) -> list[tuple[str, int, str]]:
    """(file, line, class) of each exception class the modules `sources` ({file: text})
    define, warnings, private names and click exceptions left out. A class is an exception
    when a base is a builtin exception, is named like one (`...Error`, `...Exception`), or is
    an exception class of these modules."""
    classes = [(file, node, [ast.unparse(b) for b in node.bases])
               for file, text in sources.items() for node in ast.walk(ast.parse(text))
               if isinstance(node, ast.ClassDef)]
    known: set[str] = set()
    grew = True
    while grew:  # subclasses of our own exception classes, however deep
        grew = False
        for _, node, bases in classes:
            last = [b.rsplit(".", 1)[-1] for b in bases]
            if node.name not in known and any(
                    _is_builtin_exception(b) or b.endswith(("Error", "Exception", "Warning"))
                    or b in known for b in last):
                known.add(node.name)
                grew = True
    warnings = {node.name for _, node, bases in classes
                if any(_is_warning(b.rsplit(".", 1)[-1]) for b in bases)}
    return sorted((file, node.lineno, node.name) for file, node, bases in classes
                  if node.name in known - warnings and not node.name.startswith("_")
                  and "click.ClickException" not in bases)


def test_only_ingest_errors_defines_exception_classes() -> None:
    sources = {str(p.relative_to(PACKAGE.parent)): p.read_text()
               for p in sorted(PACKAGE.rglob("*.py")) if p.name != "errors.py"
               or p.parent != PACKAGE}
    elsewhere = exception_classes(sources)
    assert not elsewhere, "exception classes outside ingest/errors.py (move each there, " \
        "under IngestError):\n" + "\n".join(f"{f}:{n}: {c}" for f, n, c in elsewhere)


def test_every_error_class_is_under_ingest_error() -> None:
    classes = [v for v in vars(ingest.errors).values()
               if isinstance(v, type) and issubclass(v, BaseException)]
    assert len(classes) > 1
    assert all(issubclass(c, ingest.errors.IngestError) for c in classes), classes
    assert {c.__name__ for c in classes} == set(ingest.errors.__all__)


@pytest.mark.parametrize("source, found", [
    ("class GoneError(ValueError):\n    pass\n", ["GoneError"]),
    ("class Oops(KeyError): ...\n", ["Oops"]),
    ("from ingest.errors import IngestError\nclass Mine(IngestError): ...\n"
     "class Deeper(Mine): ...\n", ["Mine", "Deeper"]),
    ("class Base(RuntimeError): ...\nclass Sub(Base): ...\n", ["Base", "Sub"]),
    ("class Careful(UserWarning): ...\n", []),
    ("class _Signal(Exception): ...\n", []),
    ("import click\nclass Problems(click.ClickException): ...\n", []),
    ("class Plain:\n    pass\nclass Errorless(Plain): ...\n", []),
])
def test_the_check_finds_an_exception_class(source: str, found: list[str]) -> None:
    assert [c for _, _, c in exception_classes({"ingest/x.py": source})] == found
