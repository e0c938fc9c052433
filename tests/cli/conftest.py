"""A table `default.events` registered in its default metastore, with no data yet."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support import SIMPLE_SCHEMA

from ingest.txn import Metastore, TableDefinition, default_metastore_url


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "wh" / "events"


@pytest.fixture
def store(root: Path) -> Iterator[Metastore]:
    s = Metastore.open(default_metastore_url(str(root)))
    s.create_table(TableDefinition("default.events", str(root), SIMPLE_SCHEMA))
    yield s
    s.close()
