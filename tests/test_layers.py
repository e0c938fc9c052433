"""Imports point down the layers only, in the order docs/architecture.md's §1 table lists
them (read from the doc, so the two cannot drift); no module imports one that imports it
back (not even inside a function); above the metastore interface nothing knows SQL; a
package is entered through its face; nothing (`ingest/` with its benchmarks, `jobs/`) imports
another package's `_private` module.

The layers and what each may import: docs/architecture.md.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ingest"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def _doc_layers(markdown: str) -> list[str]:
    """The layers, bottom to top, as the first column of the table under the heading
    "The layers, bottom to top" lists them (`ingest.io`, `ingest.orc`, ...)."""
    section = re.search(r"^#+ .*The layers, bottom to top\n(.*?)(?=^#)", markdown,
                        re.MULTILINE | re.DOTALL)
    assert section, "docs/architecture.md has no section 'The layers, bottom to top'"
    return re.findall(r"^\| `ingest\.(\w+)` \|", section.group(1), re.MULTILINE)


LAYERS = _doc_layers(ARCHITECTURE.read_text())
# Modules outside the layers: shared leaves (anyone may import them) and what sits on top:
# the entry point (`python -m ingest`) and the benchmarks (`python -m ingest.bench`), which
# measure every layer and which nothing imports.
SHARED = {"errors", "faults", "lazy"}
TOP = {"__main__", "bench"}


def test_the_layer_order_is_read_from_the_doc() -> None:
    doc = """# A
## 1. The layers, bottom to top

| layer | knows | must not know |
| --- | --- | --- |
| `ingest.io` | URLs | every layer |
| `ingest.orc` | ORC bytes: `ingest.x` | ACID |

### 1.1 Rooms
| `ingest.acid` | not a layer row |
"""
    assert _doc_layers(doc) == ["io", "orc"]
    assert len(LAYERS) >= 2 and len(set(LAYERS)) == len(LAYERS), LAYERS


def test_every_package_is_a_documented_layer_or_outside_the_stack() -> None:
    names = {p.name.removesuffix(".py") for p in PACKAGE.iterdir()
             if (p / "__init__.py").is_file() or p.suffix == ".py"} - {"__init__"}
    assert names - SHARED - TOP == set(LAYERS), (
        "docs/architecture.md's layer table and the packages of ingest differ: "
        f"undocumented {sorted(names - SHARED - TOP - set(LAYERS))}, "
        f"documented but missing {sorted(set(LAYERS) - names)}")
    doc = ARCHITECTURE.read_text()
    assert all(f"`ingest.{name}`" in doc for name in (SHARED | TOP) - {"__main__"})


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


# Import cycles. Every import that runs counts: module-level imports (in top-level
# if/try/with blocks too) and those inside functions and classes (a function-level import is
# no way around a cycle), but not those under `if TYPE_CHECKING:`. An
# import of a package's own submodule from inside that package (`from ingest.io import
# storage` in ingest/io/files.py) is no edge to the package's `__init__`, which is already
# being imported then.

def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            test = node.test
            type_checking = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
            found += _runtime_statements(node.orelse)
            if not type_checking:
                found += _runtime_statements(node.body)
        elif isinstance(node, ast.Try):
            found += _runtime_statements(node.body + node.orelse + node.finalbody
                                         + [s for h in node.handlers for s in h.body])
        elif isinstance(node, ast.With):
            found += _runtime_statements(node.body)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found += _runtime_statements(node.body)
        else:
            found.append(node)
    return found


def _import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the tree under `root` it imports at import time."""
    paths = {_module_name(p, root): p for p in (root / "ingest").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        edges: set[str] = set()
        for node in _runtime_statements(ast.parse(path.read_text()).body):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in paths}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                submodules = {f"{base}.{a.name}" for a in node.names} & paths.keys()
                edges |= submodules
                own = module == base or module.startswith(base + ".")
                if base in paths and not (own and len(submodules) == len(node.names)):
                    edges.add(base)
        graph[module] = edges - {module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> ... -> a) through each group of modules that import each other."""
    cycles = []
    done: set[str] = set()
    for start in sorted(graph):
        # Depth-first from `start` for a path back to it, through modules not yet reported.
        stack = [(start, [start])]
        seen = {start}
        while stack:
            node, path = stack.pop()
            nexts = sorted(graph[node])
            if start in nexts and start not in done:
                cycles.append([*path, start])
                done |= set(path)
                break
            for n in reversed(nexts):
                if n not in seen and n not in done:
                    seen.add(n)
                    stack.append((n, [*path, n]))
    return cycles


def test_no_import_cycle() -> None:
    cycles = _cycles(_import_graph(PACKAGE.parent))
    assert not cycles, "import cycles (break each by moving the shared piece into a lower " \
        "module):\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_cycle(tmp_path: Path) -> None:
    files = {
        "ingest/__init__.py": "",
        "ingest/table/__init__.py": "from ingest.table.api import Table\n",
        "ingest/table/api.py": "from ingest.table.status import status\nclass Table: ...\n",
        "ingest/table/status.py": "from ingest.table import locate\ndef status(): ...\n",
        "ingest/table/locate.py": "from ingest.table.api import Table\n",
        "ingest/io/__init__.py": "from ingest.io import files\n",
        "ingest/io/files.py": ("from typing import TYPE_CHECKING\nfrom ingest.io import storage\n"
                               "if TYPE_CHECKING:\n    from ingest.table import Table\n"
                               "def f():\n    from ingest.table import api\n"),
        "ingest/io/_late.py": "from ingest.io import _late_back\n",
        "ingest/io/_late_back.py": "def g():\n    from ingest.io import _late\n",
        "ingest/io/storage.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert _cycles(_import_graph(tmp_path)) == [
        ["ingest.io._late", "ingest.io._late_back", "ingest.io._late"],
        ["ingest.table.api", "ingest.table.status", "ingest.table.locate", "ingest.table.api"]]
    (tmp_path / "ingest/table/status.py").write_text("def status(): ...\n")
    (tmp_path / "ingest/io/_late_back.py").write_text("def g(): ...\n")
    assert _cycles(_import_graph(tmp_path)) == []


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


# Faces. Every package's `__init__` lists its public names in `__all__`; from outside a package
# (`ingest.acid.read`, `ingest.spark.sink`, `ingest.table`, ...) code imports those names from
# the package itself, never from one of its modules ("deep import"), and never a `_private`
# module or name of another package. A package's own modules, and its sub-packages, may import
# its modules directly (a face must not import itself). What sits on top
# (`ingest/__main__.py`, the benchmarks) may reach anywhere but into a `_private` module.
FACE_CHECKED = sorted([p for p in MODULES if p.relative_to(PACKAGE).parts[0].removesuffix(".py")
                       not in TOP] + list(JOBS.glob("*.py")))
UNFACED = {"ingest.cli", "ingest.bench"}  # the commands (nothing imports them)


def _package_of(path: Path) -> str:
    """The package a file's imports are judged from (`ingest.acid.read` for its modules and its
    `__init__`; `jobs` for the entry points)."""
    parts = path.resolve().relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1])


def _within(package: str, outer: str) -> bool:
    return package == outer or package.startswith(outer + ".")


def _is_package(module: str) -> bool:
    return (PACKAGE.parent / module.replace(".", "/") / "__init__.py").is_file()


def _is_module(module: str) -> bool:
    return (PACKAGE.parent / (module.replace(".", "/") + ".py")).is_file()


def _face(package: str) -> set[str]:
    tree = ast.parse((PACKAGE.parent / package.replace(".", "/") / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def _face_violations(source: str, importer: str) -> list[str]:
    """What is wrong with the `ingest` imports of `source`, a module of package `importer`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [(node.module, a.name) for a in node.names]
        else:
            continue
        for module, name in targets:
            if module.split(".")[0] != "ingest":
                continue
            full = module.split(".") + ([name] if name else [])
            for i, part in enumerate(full[1:], start=1):
                # A private module belongs to its package; a private name, to its module's.
                owner = ".".join(full[:i])
                owner = owner if _is_package(owner) else owner.rsplit(".", 1)[0]
                if part.startswith("_") and not part.startswith("__") and not _within(
                        importer, owner):
                    found.append(f"{'.'.join(full[:i + 1])} is private to {owner}")
                    break
            else:
                if _is_module(module):
                    package = module.rsplit(".", 1)[0]
                    # ingest.errors and ingest.faults are shared leaves, not behind a face
                    if package != "ingest" and not _within(importer, package):
                        found.append(f"{module} goes around the face of {package}: import "
                                     f"from {package} (add the name to its __all__)")
                elif name and _is_package(module) and not _within(importer, module) and (
                        _is_module(f"{module}.{name}") or _is_package(f"{module}.{name}")) and (
                        name not in _face(module)):
                    found.append(f"{module}.{name} is a module its face does not offer")
    return found


@pytest.mark.parametrize("path", FACE_CHECKED, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_packages_are_entered_through_their_faces(path: Path) -> None:
    problems = _face_violations(path.read_text(), _package_of(path))
    assert not problems, f"{path.relative_to(PACKAGE.parent)}: " + "; ".join(problems)


PACKAGES = sorted({".".join(p.relative_to(PACKAGE.parent).parts[:-1])
                   for p in PACKAGE.rglob("__init__.py")})


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_has_a_face(package: str) -> None:
    if package in UNFACED or package == "ingest":
        return
    names = _face(package)
    assert names, f"{package}/__init__.py lists no __all__"
    tree = ast.parse((PACKAGE.parent / package.replace(".", "/") / "__init__.py").read_text())
    bound = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
             for a in n.names} | {n.name for n in tree.body if isinstance(
                 n, (ast.FunctionDef, ast.ClassDef))}
    assert names <= bound, f"{package}.__all__ names what it does not bind: {names - bound}"


@pytest.mark.parametrize("source, importer, bad", [
    ("from ingest.acid.read.plan import plan_files", "ingest.table", True),
    ("from ingest.acid.read import plan_files", "ingest.table", False),
    ("from ingest.acid.read.plan import plan_files", "ingest.acid.read", False),
    ("from ingest.acid.format.names import format_delta", "ingest.acid.read", True),
    ("from ingest.acid.format import format_delta", "ingest.acid.read", False),
    ("from ingest.acid.read.merge import Merger", "ingest.acid", True),
    ("from ingest.acid.read._delete_registry import DeleteRegistry", "ingest.acid.read", False),
    ("from ingest.acid.read._delete_registry import DeleteRegistry", "ingest.acid.write", True),
    ("from ingest.spark.sink.driver import _remove_written", "ingest.spark", True),
    ("from ingest.table import _open", "ingest.spark", True),
    ("import ingest.acid.read.scan", "ingest.table", True),
    ("from ingest.io import storage", "ingest.acid.read", False),
    ("from ingest.acid.read import merge", "ingest.acid.compaction", True),
    ("from ingest.txn.model import TableIdentifier", "ingest.txn.hms", False),
    ("from ingest.txn.model import TableIdentifier", "ingest.table", True),
    ("from ingest.errors import ConfigError", "ingest.acid.read", False),
    ("from ingest.acid.write._acid_stripes import _Columns", "ingest.acid.write", False),
    ("from ingest.acid.write._acid_stripes import _Columns", "ingest.acid", True),
])
def test_the_face_check_catches_each_form(source: str, importer: str, bad: bool) -> None:
    assert bool(_face_violations(source + "\n", importer)) == bad


# No `_private` module of another package is imported from anywhere: not by `ingest/` (the
# face check above covers that too), the benchmarks or `jobs/`. The benchmarks may import
# `ingest`'s public modules directly (`ingest.table.write`); a name they need from a private
# module is added to its package's face. A module may import its own package's (or a parent
# package's) private modules. Tests may reach into what they test and are not checked.
PRIVATE_CHECKED = sorted([*MODULES, *JOBS.glob("*.py")])


def _private_imports(source: str, importer: str) -> list[str]:
    """The `_private` modules of other packages that `source`, a module of the package
    `importer` (`ingest.bench`, `ingest.spark.sink`, `jobs`), imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pkg import _mod` imports a module when `_mod` is one
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            for i, part in enumerate(parts[1:], start=1):
                if not part.startswith("_") or part.startswith("__"):
                    continue
                private, owner = ".".join(parts[:i + 1]), ".".join(parts[:i])
                # a private name of a public module is the face check's business, not this
                if (_is_module(private) or _is_package(private)) and not _within(importer,
                                                                                  owner):
                    found.append(f"{private} is private to {owner}")
                break
    return list(dict.fromkeys(found))


@pytest.mark.parametrize("path", PRIVATE_CHECKED,
                         ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_module_imports_another_packages_private_module(path: Path) -> None:
    problems = _private_imports(path.read_text(), _package_of(path))
    assert not problems, (
        f"{path.relative_to(PACKAGE.parent)}: " + "; ".join(problems)
        + ": import the name from the package's face (add it to its __all__)")


@pytest.mark.parametrize("source, importer, bad", [
    ("from ingest.acid.read._delete_registry import DeleteRegistry", "ingest.bench", True),
    ("import ingest.acid.read._delete_registry", "ingest.bench", True),
    ("from ingest.acid.read import _delete_registry", "jobs", True),
    ("from ingest.acid.read._delete_registry import DeleteRegistry", "ingest.acid", True),
    ("from ingest.acid.read._delete_registry import DeleteRegistry", "ingest.acid.read", False),
    ("from ingest.acid.read import plan_files", "ingest.bench", False),
    ("from ingest.acid.read.merge import READ_AHEAD_ENV", "ingest.bench", False),
    ("from ingest.txn.hms.thrift import _stubs", "ingest.txn.hms.thrift", False),
    ("from ingest.txn.hms.thrift import _stubs", "ingest.txn.hms", True),
    ("from ingest.txn.hms.thrift import ttypes", "ingest.txn.hms", False),
    ("from ingest.bench.support import report", "ingest.bench", False),
    ("from pyarrow._compute import Expression", "ingest.bench", False),
])
def test_the_private_module_check_catches_each_form(source: str, importer: str,
                                                    bad: bool) -> None:
    assert bool(_private_imports(source + "\n", importer)) == bad
