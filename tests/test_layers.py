"""Imports point down the layers only: orc < acid < txn < table < spark < cli.

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


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
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
