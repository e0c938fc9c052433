"""How often one operation opens a metastore: `open_table` resolves once, and the `Table`'s
operations use what it resolved (docs/architecture.md: the resolved table is the currency).
`Table.load` opens it twice: once to resolve (read-only), once to write. `ingest cat` opens
it twice too: once to resolve (read-only, by `ingest.txn.find_metastore_for`'s search), once
for the read's lease (`Metastore.open_for_reading`); one open needs the search to open its
candidates for reading (a change in `ingest.txn`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from support import run_cli

import ingest
from ingest.table.write import create_table
from ingest.txn import Metastore


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every `Metastore.open`/`open_for_reading` from here on, by kind."""
    seen: list[str] = []
    real_open, real_reading = Metastore.open.__func__, Metastore.open_for_reading.__func__  # type: ignore[attr-defined]

    def counted_open(cls: type[Metastore], url: str, **kwargs: object) -> Metastore:
        seen.append("read-only" if kwargs.get("read_only") else "open")
        return real_open(cls, url, **kwargs)  # type: ignore[no-any-return]

    def counted_reading(cls: type[Metastore], url: str) -> Metastore:
        seen.append("for-reading")
        return real_reading(cls, url)  # type: ignore[no-any-return]

    monkeypatch.setattr(Metastore, "open", classmethod(counted_open))
    monkeypatch.setattr(Metastore, "open_for_reading", classmethod(counted_reading))
    yield seen


def _table(tmp_path: Path) -> str:
    location = str(tmp_path / "wh" / "events")
    create_table(location, "id BIGINT")
    ingest.open_table(location).load(pa.table({"id": pa.array([1, 2], pa.int64())}))
    return location


def test_table_load_opens_the_metastore_to_resolve_and_to_write(
        tmp_path: Path, opens: list[str]) -> None:
    location = _table(tmp_path)
    opens.clear()
    table = ingest.open_table(location)
    assert opens == ["read-only"]
    table.load(pa.table({"id": pa.array([3], pa.int64())}))
    assert opens == ["read-only", "open"]


def test_cat_opens_the_metastore_to_resolve_and_for_the_lease(
        tmp_path: Path, opens: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    location = _table(tmp_path)
    opens.clear()
    code, out, err = run_cli(["cat", location], capsys)
    assert code == 0, err
    assert len(out.splitlines()) == 2
    assert opens == ["read-only", "for-reading"]
