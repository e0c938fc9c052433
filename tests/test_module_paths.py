"""Every module and file path the docs and the code's own words quote names something that
exists, so the map (docs/architecture.md's "where each idea lives", docstrings, comments)
cannot drift from the tree when a module is renamed or moved.

Where references are looked for: the docstrings and comments of `ingest/**/*.py`
(the benchmarks in `ingest/bench/` too), `docs/*.md`, `README.md` and `pyproject.toml`.

What counts as a reference:
- a file path: slash-separated names ending in an extension of the repository's own files
  (`.py`, `.md`, `.sh`, `.toml`, `.yaml`, `.yml`, `.java`, `.xml`) whose first name is a
  directory name the repository has, e.g. `ingest/spark/sink/driver.py`,
  `spark/sink/_batch.py`, `tests/test_docker.py`; a bare Python file name (`_batch.py`);
- a directory path whose first name is a top-level directory of the repository or a package
  of `ingest` (`ingest/txn/sql/`, `tests/hms`, `spark/kafka`);
- a dotted name under `ingest` whose second name is a module, package or name of `ingest`
  (`ingest.table.api`, `ingest.txn.sql.SqlMetastore`), read name by name: each name must be
  a module or sub-package of the package before it, or a name bound at the top level of that
  module (a class, a function, an import); the first such bound name ends the check
  (`Metastore.open` is not followed further).

Not references (false positives kept out): anything in a URL (`https://...`, `s3://...`),
absolute paths, glob patterns and templates (`tests/*.py`, `spark/kafka/*`, `ingest.txn._*`,
`<bucket>_flush_length`, `{name}.py`), paths inside a table (`dt=.../delta_0000001_0000001/
bucket_00000`: no known extension, no repository directory first), other projects' files
(`pyspark/sql/worker/...py`, a bare `kafka-consumer-groups.sh`) and table properties
(`ingest.schema.version`). Old module names quoted without an extension (`_sink_tasks`)
are not found: quote a module as a path (`_tasks.py`) or a dotted name.

How a path resolves: relative to the repository root, to `ingest/`, or to the quoting file's
directory or one of its parents; failing those, a partial path (`write/event_writer.py`,
`_connect.py`, `spark/test_datasource.py`) resolves when it is the tail of an existing path
in the repository. A renamed or moved module leaves its old tail nowhere, so it is caught.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Directories that are not the project's own tree.
SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
             "node_modules", ".hypothesis"}
EXTENSIONS = ("py", "md", "sh", "toml", "yaml", "yml", "java", "xml")

# A path token starts after a character that cannot be part of a path, a URL or a template
# (so `https://host/a.py`, `/abs/a.py`, `$HOME/a.py`, `{x}/a.py` and `<t>/a.py` start nowhere),
# and ends before one (so `tests/*.py` and `spark/kafka/*` are not cut short into a path).
_START = r"(?<![\w.\-/:~$@{}<>*%=\\])"
_END = r"(?![\w/*{}<>%=\\-]|\.\w)"
_FILE = re.compile(_START + r"((?:[\w\-][\w.\-]*/)*[\w\-][\w.\-]*\.(?:"
                   + "|".join(EXTENSIONS) + r"))" + _END)
_DIR = re.compile(_START + r"((?:[\w\-][\w.\-]*/)+[\w\-](?:[\w.\-]*[\w\-])?/?)" + _END)
_MODULE = re.compile(r"(?<![\w./\-])(ingest(?:\.[A-Za-z_]\w*)+)(?![\w*\-]|\.\w)")


def _walk(root: Path) -> Iterator[Path]:
    for path in sorted(root.iterdir()):
        if path.name in SKIP_DIRS or path.name.endswith(".egg-info"):
            continue
        yield path
        if path.is_dir() and not path.is_symlink():
            yield from _walk(path)


@dataclass(frozen=True)
class Stale:
    file: str
    line: int
    reference: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reference}"


class Tree:
    """The repository's files and directories, for resolving references against."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = {p.relative_to(root).as_posix() for p in _walk(root)}
        top = {p.split("/")[0] for p in self.paths if "/" in p}
        packages = {p.split("/")[1] for p in self.paths
                    if p.startswith("ingest/") and p.endswith("/__init__.py")
                    and p.count("/") == 2}
        # A directory path is a reference only when it starts with one of these names.
        self.dir_roots = top | packages
        # A file path, only when it starts with a directory name the repository has
        # (`pyspark/sql/worker/plan_data_source_read.py` is another project's file).
        self.dir_names = {p.rsplit("/", 1)[-1] for p in self.paths if (root / p).is_dir()}
        # A dotted name, only when its second name is one of `ingest`'s modules or names
        # (`ingest.schema.version` is a table property).
        self.layers = packages | {p.split("/")[1].removesuffix(".py") for p in self.paths
                                  if p.startswith("ingest/") and p.count("/") == 1}
        if "ingest/__init__.py" in self.paths:
            self.layers |= _bound_names(root / "ingest/__init__.py")

    def exists(self, relative: str) -> bool:
        return relative.strip("/") in self.paths

    def is_tail(self, partial: str) -> bool:
        partial = partial.strip("/")
        return any(p == partial or p.endswith("/" + partial) for p in self.paths)

    def resolves(self, reference: str, quoted_in: str) -> bool:
        bases = ["", "ingest/"]
        parent = quoted_in.rsplit("/", 1)[0] if "/" in quoted_in else ""
        while parent:
            bases.append(parent + "/")
            parent = parent.rsplit("/", 1)[0] if "/" in parent else ""
        return any(self.exists(base + reference) for base in bases) or self.is_tail(reference)

    def module_resolves(self, dotted: str) -> bool:
        names = dotted.split(".")
        current = names[0]
        for name in names[1:]:
            package = f"{current.replace('.', '/')}/__init__.py"
            module = f"{current.replace('.', '/')}.py"
            child = f"{current}.{name}".replace(".", "/")
            if package in self.paths and (f"{child}.py" in self.paths
                                          or f"{child}/__init__.py" in self.paths):
                current = f"{current}.{name}"
                continue
            source = package if package in self.paths else module
            return source in self.paths and name in _bound_names(self.root / source)
        return True


def _bound_names(path: Path) -> set[str]:
    """Names a module binds at its top level (and in its top-level if/try blocks)."""
    names: set[str] = set()
    statements = list(ast.parse(path.read_text(), filename=str(path)).body)
    while statements:
        node = statements.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            statements += [*node.body, *getattr(node, "orelse", []),
                           *getattr(node, "finalbody", []),
                           *(s for h in getattr(node, "handlers", []) for s in h.body)]
    return names


def _python_prose(source: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of the docstrings and comments of a Python module."""
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(
                    body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                doc = body[0].value
                assert doc.end_lineno is not None
                for number in range(doc.lineno, doc.end_lineno + 1):
                    yield number, lines[number - 1]
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def _text_lines(source: str) -> Iterator[tuple[int, str]]:
    yield from enumerate(source.splitlines(), start=1)


def references(text: str, tree: Tree) -> Iterator[tuple[str, str]]:
    """("path" or "module", reference) for each reference in one line of prose."""
    for match in _FILE.finditer(text):
        path = match.group(1)
        if path.split("/")[0] in tree.dir_names if "/" in path else path.endswith(".py"):
            yield "path", path
    for match in _DIR.finditer(text):
        path = match.group(1)
        if path.split("/")[0] in tree.dir_roots and not _FILE.fullmatch(path):
            yield "path", path
    for match in _MODULE.finditer(text):
        if match.group(1).split(".")[1] in tree.layers:
            yield "module", match.group(1)


def stale_references(tree: Tree, relative: str, source: str) -> list[Stale]:
    """The references in `source` (the file at `relative` in `tree`) that name nothing."""
    lines = _python_prose(source) if relative.endswith(".py") else _text_lines(source)
    found = set()
    for number, text in lines:
        for kind, reference in references(text, tree):
            ok = (tree.module_resolves(reference) if kind == "module"
                  else tree.resolves(reference, relative))
            if not ok:
                found.add(Stale(relative, number, reference))
    return sorted(found, key=lambda s: (s.line, s.reference))


def quoting_files(root: Path) -> list[Path]:
    return sorted([*(root / "ingest").rglob("*.py"), *(root / "docs").glob("*.md"),
                   root / "README.md", root / "pyproject.toml"])


def test_every_quoted_path_exists() -> None:
    tree = Tree(ROOT)
    stale = [s for path in quoting_files(ROOT)
             for s in stale_references(tree, path.relative_to(ROOT).as_posix(),
                                       path.read_text())]
    assert not stale, ("references to modules or files that do not exist (renamed or moved? "
                       "write the path the code has now):\n" + "\n".join(map(str, stale)))


# The test of the test: the check finds what it is meant to find, and nothing else.

@pytest.fixture
def tiny(tmp_path: Path) -> Tree:
    for name in ["ingest/__init__.py", "ingest/spark/__init__.py",
                 "ingest/spark/sink/__init__.py", "ingest/spark/sink/driver.py",
                 "ingest/spark/sink/_batch.py", "tests/test_x.py", "scripts/x.sh",
                 "docs/a.md"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "ingest/spark/sink/__init__.py").write_text(
        "from ingest.spark.sink.driver import AcidSink\n")
    (tmp_path / "ingest/spark/sink/driver.py").write_text("class AcidSink:\n    pass\n")
    return Tree(tmp_path)


@pytest.mark.parametrize("text", [
    "`ingest/spark/sink/driver.py`", "spark/sink/_batch.py", "`_batch.py`",
    "sink/driver.py", "tests/test_x.py", "scripts/x.sh", "docs/a.md (§2)",
    "`ingest/spark/sink/`", "`spark/sink`", "ingest.spark.sink.driver",
    "ingest.spark.sink.AcidSink", "ingest.spark.sink.driver.AcidSink.__call__",
    "`ingest.spark`'s face", "ends in ingest/spark/sink/driver.py.",
    "tests/test_x.py::test_one",
    # not references at all
    "https://example.com/ingest/gone.py", "s3://bucket/gone/x.py", "/tmp/gone.py",
    "warehouse/t/delta_0000001_0000001/bucket_00000", "tests/*.py", "spark/kafka/*",
    "`<bucket>_flush_length`", "read/write", "ingest.egg-info", "{name}.py",
    "`ingest.schema.version` (a table property)", "`ingest.spark._*`",
    "another project's pyspark/sql/worker/gone.py", "Kafka's kafka-consumer-groups.sh",
])
def test_the_check_passes_what_exists(tiny: Tree, text: str) -> None:
    assert stale_references(tiny, "docs/a.md", text) == []


@pytest.mark.parametrize("text, stale", [
    ("`ingest/spark/sink/driver_old.py`", "ingest/spark/sink/driver_old.py"),
    ("as spark/sink/_microbatch.py does", "spark/sink/_microbatch.py"),
    ("`_microbatch.py`", "_microbatch.py"),
    ("`ingest/spark/kafka/`", "ingest/spark/kafka/"),
    ("`spark/kafka`", "spark/kafka"),
    ("tests/test_gone.py", "tests/test_gone.py"),
    ("ingest.spark.sink.gone", "ingest.spark.sink.gone"),
    ("ingest.spark.sink.driver.Gone", "ingest.spark.sink.driver.Gone"),
    ("ingest.spark.kafka.source", "ingest.spark.kafka.source"),
])
def test_the_check_reports_a_renamed_module(tiny: Tree, text: str, stale: str) -> None:
    assert stale_references(tiny, "docs/a.md", f"one\n{text}\n") == [
        Stale("docs/a.md", 2, stale)]


def test_the_check_reads_docstrings_and_comments_only(tiny: Tree) -> None:
    source = ('"""See ingest/spark/sink/gone.py."""\n'
              'X = "ingest/spark/sink/also_gone.py"  # and tests/test_gone.py\n'
              'def f() -> None:\n'
              '    """Relative to this package: _batch.py, driver.py, sink/nope.py."""\n')
    assert [str(s) for s in stale_references(tiny, "ingest/spark/sink/m.py", source)] == [
        "ingest/spark/sink/m.py:1: ingest/spark/sink/gone.py",
        "ingest/spark/sink/m.py:2: tests/test_gone.py",
        "ingest/spark/sink/m.py:4: sink/nope.py",
    ]


def test_a_moved_module_fails_the_whole_check(tiny: Tree, tmp_path: Path) -> None:
    text = "the driver: `ingest/spark/sink/driver.py`, `ingest.spark.sink.driver`\n"
    assert stale_references(tiny, "docs/a.md", text) == []
    (tmp_path / "ingest/spark/sink/driver.py").rename(tmp_path / "ingest/spark/sink/_drv.py")
    moved = Tree(tmp_path)
    assert [s.reference for s in stale_references(moved, "docs/a.md", text)] == [
        "ingest.spark.sink.driver", "ingest/spark/sink/driver.py"]
