"""The metastore backends are built by composition (docs/architecture.md §3.0, "a new metastore
backend"): one shared connection object, parts that each own a concern and hold it, and one
`Metastore` implementation that holds the parts and hands each call to its part. So no class
of a backend package has more than one base, only that one class subclasses `Metastore`, and
none subclasses it (a tower of single bases is a mixin tower too).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TXN = Path(__file__).resolve().parents[2] / "ingest" / "txn"
BACKENDS = sorted(p.parent for p in TXN.glob("*/__init__.py"))


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Subscript):  # Generic[T]
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ast.unparse(node)


def _problems(sources: dict[str, str]) -> list[str]:
    """What breaks the rule in a backend made of `sources` (file name -> text)."""
    found = []
    classes = [(name, node.name, [_base_name(b) for b in node.bases])
               for name, text in sorted(sources.items())
               for node in ast.walk(ast.parse(text)) if isinstance(node, ast.ClassDef)]
    for name, cls, bases in classes:
        if len(bases) > 1:
            found.append(f"{name}: class {cls}({', '.join(bases)}) has more than one base; "
                         "make the parts plain classes its store holds")
    stores = [(name, cls) for name, cls, bases in classes if "Metastore" in bases]
    if len(stores) != 1:
        found.append(f"expected one class subclassing Metastore, found {stores or 'none'}")
    for name, cls, bases in classes:
        if any(base == store for _, store in stores for base in bases):
            found.append(f"{name}: class {cls}({', '.join(bases)}) subclasses the store; "
                         "make it a part the store holds")
    return found


@pytest.mark.parametrize("package", BACKENDS, ids=lambda p: p.name)
def test_a_backend_is_one_metastore_holding_its_parts(package: Path) -> None:
    sources = {str(p.relative_to(TXN)): p.read_text() for p in sorted(package.rglob("*.py"))}
    assert not _problems(sources)


def test_the_rule_catches_a_mixin_tower() -> None:
    tower = {
        "base.py": "class Base(Metastore): ...\n",
        "ops.py": "class Reads(Base): ...\nclass Writes(Base): ...\n",
        "store.py": "class Store(Reads, Writes): ...\n",
    }
    assert _problems(tower) == [
        "store.py: class Store(Reads, Writes) has more than one base; make the parts plain "
        "classes its store holds",
        "ops.py: class Reads(Base) subclasses the store; make it a part the store holds",
        "ops.py: class Writes(Base) subclasses the store; make it a part the store holds"]
    assert _problems({"store.py": "class Store(Metastore, Mixin): ...\n"}) == [
        "store.py: class Store(Metastore, Mixin) has more than one base; make the parts "
        "plain classes its store holds"]
    composed = {"parts.py": "class Reads:\n    def __init__(self, session): ...\n",
                "store.py": "class Store(txn.Metastore): ...\n"}
    assert _problems(composed) == []
    assert _problems({"a.py": "class A: ...\n"}) == [
        "expected one class subclassing Metastore, found none"]
    chain = {"store.py": "class Base(Metastore): ...\nclass Store(Base): ...\n"}
    assert _problems(chain) == [
        "store.py: class Store(Base) subclasses the store; make it a part the store holds"]
