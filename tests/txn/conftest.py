"""Fixtures for the transaction-store suite: one behaviour suite over every store kind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from ingest.txn import Metastore, TableDefinition


class FakeClock:
    """A settable wall clock so time-outs are tested without sleeping."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["sqlite-file", "sqlite-memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[Metastore]:
    if request.param == "sqlite-file":
        url = f"sqlite://{tmp_path}/ms/_ingest_metastore.sqlite"
    else:
        url = "sqlite://:memory:"
    with Metastore.open(url, clock=clock) as s:
        yield s


ROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("payload", pa.string()),
        pa.field(
            "tags",
            pa.list_(pa.struct([("k", pa.string()), ("v", pa.map_(pa.string(), pa.int32()))])),
        ),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("amount", pa.decimal128(18, 4)),
    ],
    metadata={b"origin": b"tests"},
)


def _table_def(name: str = "events", location: str | None = None, **kw: object) -> TableDefinition:
    return TableDefinition(
        name=name,
        location=location or f"memory://wh/{name.split('.')[-1]}",
        row_schema=ROW_SCHEMA,
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def table_def() -> object:
    """Factory: table_def(name, location=None, **TableDefinition fields)."""
    return _table_def


@pytest.fixture
def events(store: Metastore) -> TableDefinition:
    return store.create_table(_table_def("events", partition_columns=("dt",)))


@pytest.fixture
def dead_letter(store: Metastore) -> TableDefinition:
    return store.create_table(_table_def("events__dead_letter"))
