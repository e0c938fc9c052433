"""The lazy faces (ingest/lazy.py): Spark's Python workers import one module of a package each
and must not pay for the rest. Each face's map of names to modules, its TYPE_CHECKING imports
(what type checkers see) and its `__all__` agree, and every name resolves to its module's."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import ingest.spark
import ingest.spark.sink
from ingest.lazy import lazy_names

LAZY_FACES = [ingest.spark, ingest.spark.sink]


def _type_checking_imports(package: ModuleType) -> dict[str, str]:
    tree = ast.parse(Path(str(package.__file__)).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If)
                 and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING")
    return {a.asname or a.name: str(n.module).removeprefix(f"{package.__name__}.")
            + (f":{a.name}" if a.asname else "")
            for n in block.body if isinstance(n, ast.ImportFrom) for a in n.names}


@pytest.mark.parametrize("package", LAZY_FACES, ids=lambda p: p.__name__)
def test_the_map_the_type_checking_imports_and_all_agree(package: ModuleType) -> None:
    homes = package._HOMES
    assert homes == _type_checking_imports(package)
    assert set(homes) == set(package.__all__)
    for name, home in homes.items():
        module, _, attribute = home.partition(":")
        assert getattr(package, name) is getattr(
            importlib.import_module(f"{package.__name__}.{module}"), attribute or name)


def test_the_worker_side_modules_do_not_load_the_driver_side() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, ingest.spark.kafka.source, ingest.spark.sink._tasks; "
         "print(' '.join(m for m in sys.modules if m.startswith('ingest.spark')))"],
        capture_output=True, text=True, check=True).stdout.split()
    assert {"ingest.spark.kafka.source", "ingest.spark.sink._tasks"} <= set(loaded)
    assert not {"ingest.spark.job", "ingest.spark.compact_job", "ingest.spark.metrics",
                "ingest.spark.maintenance", "ingest.spark.sink.driver"} & set(loaded), loaded


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    load = lazy_names("ingest.spark", {"run_stream": "job"})
    with pytest.raises(AttributeError, match="'ingest.spark' has no attribute 'no_such_name'"):
        load("no_such_name")
