"""Metastore backends by URL scheme: `Metastore.open` picks the registered implementation, an
unknown scheme is a ConfigError naming it and the supported ones, and a backend registered by
module name is imported only when a URL needs it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import NoReturn, Self

import pyarrow as pa
import pytest

from ingest.acid.format.committed import CommittedFile
from ingest.acid.format.writeids import ValidWriteIdList
from ingest.errors import ConfigError, TableExistsError, TableNotFoundError
from ingest.txn import (
    MEMORY_URL,
    CompactorVisibility,
    Metastore,
    MetastoreCapabilities,
    TableDefinition,
    redact_url,
    register_metastore,
    supported_schemes,
)
from ingest.txn import registry as registry_module
from ingest.txn.model import TableIdentifier, table_key

SCHEMA = pa.schema([("id", pa.int64())])


class DictMetastore(Metastore):
    """A backend of tables in a dict and nothing else: what a backend must implement to be
    opened by URL. Everything a test does not need refuses."""

    def __init__(self, url: str, *, read_only: bool) -> None:
        super().__init__(url=url, location=f"dict store {url.partition('://')[2]}")
        self.read_only = read_only
        self.closed = False
        self.tables: dict[str, TableDefinition] = {}

    @classmethod
    def _connect(cls, url: str, *, create: bool, read_only: bool, busy_timeout_s: float,
                 clock: Callable[[], float]) -> Self:
        return cls(url, read_only=read_only)

    @classmethod
    def _connect_for_reading(cls, url: str) -> Self:
        return cls(url, read_only=True)

    def close(self) -> None:
        self.closed = True

    @property
    def capabilities(self) -> MetastoreCapabilities:
        return MetastoreCapabilities(committed_files=False, reader_leases=False,
                                     compaction_history=False)

    def create_table(self, defn: TableDefinition, *, next_write_id: int = 1) -> TableDefinition:
        if defn.name in self.tables:
            raise TableExistsError(f"{defn.name} exists", table=defn.name)
        self.tables[defn.name] = defn
        return defn

    def find_table(self, table: TableIdentifier) -> TableDefinition | None:
        what, value = table_key(table)
        return next((t for t in self.tables.values() if getattr(t, what) == value), None)

    def list_tables(self) -> list[TableDefinition]:
        return sorted(self.tables.values(), key=lambda t: t.name)

    def snapshot(self, table: TableIdentifier) -> ValidWriteIdList:
        return ValidWriteIdList(self.get_table(table).name, 0)

    def leased_snapshot(self, table: TableIdentifier, *, agent: str, heartbeat_s: float = 60.0,
                        keep_lease: bool = False,
                        ) -> AbstractContextManager[tuple[int | None, ValidWriteIdList]]:
        return nullcontext((None, self.snapshot(table)))  # no reader leases

    def committed_files(self, table: TableIdentifier) -> dict[str, CommittedFile]:
        self.get_table(table)
        return {}  # no manifest (capabilities): files read as they are

    def compactor_visibility(self, table: TableIdentifier) -> CompactorVisibility:
        self.get_table(table)
        return CompactorVisibility(0, frozenset(), frozenset())

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise NotImplementedError("not in this test backend")

    set_properties = drop_table = open_transaction = allocate_write_ids = _refuse
    allocate_write_id = commit = abort = heartbeat = abort_timed_out = _refuse
    transactions = committed_write_id = last_committed_batch = offset_ranges = _refuse
    record_committed_files = forget_committed_files = _refuse
    begin_compaction = finish_compaction = fail_compaction = forget_compaction = _refuse
    compactions = compactions_to_clean = _refuse
    mark_compactions_cleaned = live_readers = forget_dead_readers = _refuse
    heartbeat_reader = end_reader = _refuse


@pytest.fixture
def registrations() -> Iterator[None]:
    """Registrations a test adds are gone after it."""
    saved = dict(registry_module._BACKENDS)
    yield
    registry_module._BACKENDS.clear()
    registry_module._BACKENDS.update(saved)


@pytest.mark.parametrize("url, what", [
    ("mysql://admin:pw-xyz@db.example/metastore", "scheme 'mysql://' is not supported"),
    ("hive://hms.example:9083", "scheme 'hive://' is not supported"),
    ("ms.sqlite", "it is not a URL"),
])
def test_an_unknown_scheme_names_it_and_the_supported_ones(url: str, what: str) -> None:
    for call in (Metastore.open, Metastore.open_for_reading):
        with pytest.raises(ConfigError) as info:
            call(url)
        shown = url.replace("admin:pw-xyz@", "")
        assert info.value.message == (
            f"Cannot open metastore {shown!r}: {what}; supported schemes: postgres://, "
            "postgresql://, postgresql+psycopg://, sqlite://, thrift://")
        assert info.value.hint == ("use 'sqlite:///absolute/path.sqlite', 'sqlite://:memory:', "
                                   "'postgresql://USER@HOST:PORT/DATABASE' or "
                                   "'thrift://HOST:9083'")


def test_the_built_in_schemes_open_the_sql_backend(tmp_path: Path) -> None:
    assert supported_schemes() == ["postgres", "postgresql", "postgresql+psycopg", "sqlite",
                                   "thrift"]
    for url in (MEMORY_URL, f"sqlite://{tmp_path}/ms.sqlite"):
        with Metastore.open(url) as store:
            assert type(store).__name__ == "SqlMetastore"
            assert isinstance(store, Metastore)
            assert store.url == url
            assert store.capabilities == MetastoreCapabilities(True, True, True)


def test_a_registered_backend_class_is_chosen_by_its_scheme(registrations: None) -> None:
    register_metastore("dict", DictMetastore, examples=("dict://NAME",))
    assert "dict" in supported_schemes()
    with Metastore.open("dict://one") as store:
        assert type(store) is DictMetastore
        assert (store.url, store.read_only) == ("dict://one", False)
        defn = store.create_table(TableDefinition("default.t", "/wh/t", SCHEMA))
        # What the interface builds on the backend's primitives works unchanged.
        assert store.get_table("/wh/t") == defn
        with pytest.raises(TableNotFoundError, match="Cannot find table default.u in "
                           "metastore dict store one"):
            store.get_table("u")
        with store.read_view("t", agent="test") as view:
            assert (view.table, view.lease_id, view.snapshot.high_watermark) == (
                "default.t", None, 0)
    assert store.closed
    with Metastore.open("dict://two", read_only=True) as ro:
        assert ro.read_only and ro.list_tables() == []
    assert Metastore.open_for_reading("dict://three").read_only
    assert DictMetastore.open("dict://four").url == "dict://four"
    assert redact_url("dict://me:secret@host/x") == "dict://host/x"
    with pytest.raises(ConfigError) as info:
        Metastore.open("nope://x")
    assert "'dict://NAME'" in str(info.value.hint)


def test_a_backend_registered_by_name_is_imported_when_a_url_needs_it(
        registrations: None) -> None:
    register_metastore("dict", f"{__name__}:DictMetastore")
    with Metastore.open("dict://x") as store:
        assert type(store) is DictMetastore


def test_a_backend_opens_only_its_own_urls_when_asked_by_class(registrations: None) -> None:
    register_metastore("dict", DictMetastore)
    with pytest.raises(ConfigError) as info:
        DictMetastore.open(MEMORY_URL)
    assert info.value.message == (
        "Cannot open metastore 'sqlite://:memory:' as a DictMetastore: the sqlite:// backend "
        "is SqlMetastore, not a DictMetastore")


def test_a_missing_optional_dependency_names_the_extra(
        registrations: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ingest_test_hms_backend.py").write_text(
        "import ingest_test_absent_thrift_library\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    register_metastore("thrift", "ingest_test_hms_backend:HiveMetastore", extra="hive")
    with pytest.raises(ConfigError) as info:
        Metastore.open("thrift://hms.example:9083")
    assert info.value.message == (
        "Cannot open a thrift:// metastore: its backend needs the package "
        "'ingest_test_absent_thrift_library', which is not installed")
    assert info.value.hint == "install ingest's 'hive' extra: pip install 'ingest[hive]'"
    assert isinstance(info.value.__cause__, ModuleNotFoundError)
    sys.modules.pop("ingest_test_hms_backend", None)


def test_a_bad_registration_is_a_clear_error(registrations: None) -> None:
    register_metastore("gone", "ingest.txn.no_such_backend:Backend", extra="hive")
    with pytest.raises(ConfigError, match="its backend ingest.txn.no_such_backend:Backend "
                       "cannot be imported"):
        Metastore.open("gone://x")
    register_metastore("notaclass", "ingest.txn.registry:MEMORY_URL")
    with pytest.raises(ConfigError, match="ingest.txn.registry has no class MEMORY_URL"):
        Metastore.open("notaclass://x")
    register_metastore("other", TableDefinition)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="the other:// backend is TableDefinition, not a "
                       "Metastore"):
        Metastore.open("other://x")
    for scheme, backend in (("thrift://", "m:C"), ("", "m:C"), ("x", "module.Class")):
        with pytest.raises(ConfigError, match="Cannot register metastore"):
            register_metastore(scheme, backend)


def test_a_backend_implements_the_whole_interface() -> None:
    """The primitives every backend implements; `get_table`, `transaction`, `reading`,
    `read_view`, `write_id_states`, `open` and `open_for_reading` are built on them."""
    assert sorted(Metastore.__abstractmethods__) == sorted([
        "_connect", "_connect_for_reading", "close", "capabilities",
        "create_table", "set_properties", "find_table", "list_tables", "drop_table",
        "open_transaction", "allocate_write_ids", "allocate_write_id", "commit", "abort",
        "heartbeat", "abort_timed_out", "snapshot", "leased_snapshot", "transactions",
        "committed_write_id", "last_committed_batch", "offset_ranges", "committed_files",
        "record_committed_files", "forget_committed_files", "begin_compaction",
        "finish_compaction", "fail_compaction", "forget_compaction", "compactor_visibility",
        "compactions", "compactions_to_clean", "mark_compactions_cleaned", "live_readers",
        "forget_dead_readers", "heartbeat_reader", "end_reader"])
    partial = type("Partial", (Metastore,), {"close": lambda self: None})
    with pytest.raises(TypeError, match="abstract method"):
        partial(url="partial://x", location="x")
