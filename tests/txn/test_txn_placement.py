"""Default metastore placement, finding a table from a path inside it, location normalising."""

from __future__ import annotations

import hashlib
from contextvars import ContextVar
from pathlib import Path

import pyarrow as pa
import pytest

from ingest.errors import TableNotFoundError
from ingest.txn import (
    METASTORE_FILENAME,
    Metastore,
    TableDefinition,
    default_metastore_url,
    find_metastore_for,
    normalize_location,
)

SCHEMA = pa.schema([("x", pa.int64())])


@pytest.mark.parametrize(
    "given, expected",
    [
        ("/tmp/wh/events/", "file:///tmp/wh/events"),
        ("file:///tmp/wh/./events", "file:///tmp/wh/events"),
        ("file:/tmp/wh/events", "file:///tmp/wh/events"),
        ("memory://wh/events/", "memory://wh/events"),
        ("memory:///wh/events", "memory://wh/events"),
        ("s3://bucket/wh/events/", "s3://bucket/wh/events"),
    ],
)
def test_normalize_location(given: str, expected: str) -> None:
    assert normalize_location(given) == expected


def test_relative_path_becomes_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert normalize_location("wh/events") == f"file://{tmp_path}/wh/events"


def test_local_table_metastore_sits_beside_it(tmp_path: Path) -> None:
    expected = f"sqlite://{tmp_path}/wh/{METASTORE_FILENAME}"
    assert default_metastore_url(str(tmp_path / "wh" / "events")) == expected
    assert default_metastore_url(f"file://{tmp_path}/wh/events__dead_letter/") == expected


def test_remote_table_metastore_under_ingest_home(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"memory://wh").hexdigest()[:16]
    expected = f"sqlite://{tmp_path}/ingest-home/metastores/{digest}.sqlite"
    assert default_metastore_url("memory://wh/events") == expected
    assert default_metastore_url("memory:///wh/events__dead_letter") == expected
    assert default_metastore_url("s3://b/wh/events") != expected


def test_home_defaults_to_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("INGEST_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    url = default_metastore_url("s3://bucket/wh/events")
    assert url.startswith(f"sqlite://{tmp_path}/home/.cache/ingest/metastores/")


def test_env_var_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("INGEST_METASTORE", "sqlite:///x/ms.sqlite")
    assert default_metastore_url("/wh/events") == "sqlite:///x/ms.sqlite"
    monkeypatch.setenv("INGEST_METASTORE", str(tmp_path / "ms.sqlite"))
    assert default_metastore_url("memory://wh/events") == f"sqlite://{tmp_path}/ms.sqlite"


def test_no_process_state_chooses_a_metastore() -> None:
    """A chosen metastore is a value passed down (`find_metastore_for(metastore=...)`), never
    a context variable of the process."""
    import ingest.txn
    from ingest.txn import placement

    for module in (ingest.txn, placement):
        assert not hasattr(module, "use_metastore")
        assert not hasattr(module, "chosen_metastore")
    assert not [v for v in vars(placement).values() if isinstance(v, ContextVar)]


def test_a_chosen_metastore_is_the_only_one_searched(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = tmp_path / "wh" / "events"
    _create(str(root), "events")  # beside the table
    other = f"sqlite://{tmp_path}/other.sqlite"
    with Metastore.open(other) as store:
        store.create_table(TableDefinition("elsewhere", str(tmp_path / "x"), SCHEMA))
    monkeypatch.setenv("INGEST_METASTORE", f"sqlite://{tmp_path}/missing.sqlite")
    # The env var is the default; the chosen URL wins over it and over the search, and
    # does not fall back to the metastore beside the table that does list it.
    with pytest.raises(TableNotFoundError, match="other.sqlite"):
        find_metastore_for(str(root / "dt=1"), metastore=other)
    monkeypatch.delenv("INGEST_METASTORE")
    store, defn = find_metastore_for(str(root / "dt=1"),
                                     metastore=default_metastore_url(str(root)))
    with store:
        assert defn.name == "default.events"


def _create(location: str, name: str) -> None:
    with Metastore.open(default_metastore_url(location)) as store:
        store.create_table(TableDefinition(name, location, SCHEMA))


def test_find_from_table_root_or_partition(tmp_path: Path) -> None:
    root = tmp_path / "wh" / "events"
    _create(str(root), "events")
    _create(str(tmp_path / "wh" / "events__dead_letter"), "events__dead_letter")
    assert (tmp_path / "wh" / METASTORE_FILENAME).exists()
    for path in (str(root), f"file://{root}/dt=2026-11-21", f"{root}/dt=2026-11-21/hour=3"):
        store, defn = find_metastore_for(path)
        with store:
            assert defn.name == "default.events"
            assert defn.location == f"file://{root}"
            assert {t.name for t in store.list_tables()} == {
                "default.events",
                "default.events__dead_letter",
            }


def test_find_memory_table_via_ingest_home() -> None:
    _create("memory://wh2/events", "events")
    store, defn = find_metastore_for("memory://wh2/events/dt=1")
    store.close()
    assert defn.location == "memory://wh2/events"


def test_find_with_env_metastore(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("INGEST_METASTORE", str(tmp_path / "central.sqlite"))
    _create(str(tmp_path / "a" / "t1"), "t1")
    assert not (tmp_path / "a" / METASTORE_FILENAME).exists()
    store, defn = find_metastore_for(str(tmp_path / "a" / "t1" / "p=1"))
    store.close()
    assert defn.name == "default.t1"


def test_find_without_metastore_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "wh" / "events").mkdir(parents=True)
    with pytest.raises(TableNotFoundError, match="Cannot find an ingest table at or above") as e:
        find_metastore_for(str(tmp_path / "wh" / "events"))
    assert "ingest create" in str(e.value)


def test_find_with_metastore_but_no_matching_table(tmp_path: Path) -> None:
    _create(str(tmp_path / "wh" / "events"), "events")
    with pytest.raises(TableNotFoundError, match=str(tmp_path / "wh" / METASTORE_FILENAME)):
        find_metastore_for(str(tmp_path / "wh" / "other" / "dt=1"))
