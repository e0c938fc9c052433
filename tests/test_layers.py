"""Imports point down the layers only: orc < acid < txn < table < spark < cli; above the
metastore interface nothing knows SQL.

The layers and what each may import: docs/architecture.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ingest"
LAYERS = ["orc", "acid", "txn", "table", "spark", "cli"]
# Modules outside the layers: shared leaves (anyone may import them) and tools on top.
SHARED = {"errors", "faults"}
TOP = {"bench", "__main__"}


def _layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "ingest" or len(parts) < 2:
        return None
    return parts[1]


def _imports(path: Path, *, with_names: bool = False) -> list[str]:
    """Absolute modules `path` imports; with_names adds `pkg.name` for `from pkg import name`
    (the name may be a submodule)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            if with_names:
                found += [f"{node.module}.{a.name}" for a in node.names]
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down_only(path: Path) -> None:
    own = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    if own in TOP or own == "__init__":
        return
    for module in _imports(path):
        target = _layer_of(module)
        if target is None or target in SHARED or target == own:
            continue
        if own in SHARED:
            pytest.fail(f"{path}: shared module imports {module}")
        assert target in LAYERS, f"{path}: imports unknown package {module}"
        assert LAYERS.index(target) < LAYERS.index(own), (
            f"{path.relative_to(PACKAGE)} ({own}) imports {module} ({target}), a layer above it")


# Modules only ingest.txn may import: the SQL backend and the package's private helpers.
# Everything above uses the `Metastore` interface, so another backend (a Hive Metastore over
# thrift://) serves every layer unchanged.
JOBS = Path(__file__).resolve().parent.parent / "jobs"
OUTSIDE_TXN = sorted([p for p in MODULES if p.relative_to(PACKAGE).parts[0] != "txn"]
                     + list(JOBS.glob("*.py")))
DRIVERS = ("sqlalchemy", "sqlite3", "psycopg")


def _txn_internal(module: str) -> bool:
    parts = module.split(".")
    return parts[:2] == ["ingest", "txn"] and len(parts) > 2 and (
        parts[2] == "sql" or parts[2].startswith("_"))


@pytest.mark.parametrize("path", OUTSIDE_TXN,
                         ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_only_txn_knows_the_sql_backend(path: Path) -> None:
    for module in _imports(path, with_names=True):
        assert not _txn_internal(module), (
            f"{path.relative_to(PACKAGE.parent)} imports {module}: outside ingest.txn use the "
            "Metastore interface (ingest.txn's public names), not the SQL backend")
        assert module.split(".")[0] not in DRIVERS, (
            f"{path.relative_to(PACKAGE.parent)} imports the database driver {module}")


@pytest.mark.parametrize("source, bad", [
    ("from ingest.txn.sql import SqlMetastore", True),
    ("from ingest.txn.sql._database import Database", True),
    ("import ingest.txn._whatever", True),
    ("from ingest.txn import sql", True),
    ("from ingest.txn import Metastore, redact_url", False),
    ("from ingest.txn.locations import ancestors", False),
])
def test_the_sql_backend_check_catches_each_form(tmp_path: Path, source: str,
                                                 bad: bool) -> None:
    module = tmp_path / "m.py"
    module.write_text(source + "\n")
    assert any(_txn_internal(m) for m in _imports(module, with_names=True)) == bad
