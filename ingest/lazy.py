"""Package faces that load their names on first use (PEP 562 `__getattr__`).

Spark's Python workers import one module of a package at a time (the Kafka source's reader,
the sink's write tasks), and importing a module first runs its package's `__init__`: an eager
face there imports the whole package, the driver's half too, in every worker process. A lazy
face lists each name's module; type checkers see the names through `if TYPE_CHECKING:` imports
beside the list (tests/spark/test_lazy_faces.py keeps the two and `__all__` equal).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`, loading each name from its home.

    Args:
        package: the package's `__name__`.
        homes: public name -> the module within `package` that defines it ("job"), or
            "module:attribute" when the face renames it.
    """

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = home.partition(":")
        value = getattr(importlib.import_module(f"{package}.{module}"), attribute or name)
        setattr(sys.modules[package], name, value)  # the next lookup finds it directly
        return value

    return load
