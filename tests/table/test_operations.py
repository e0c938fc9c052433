"""create_table / load / delete: one transaction each, nothing left on failure."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest

from ingest.acid import read_bucket_file
from ingest.acid.format.bucketing import bucket_ids
from ingest.acid.format.names import decode_bucket_property, parse_bucket_file
from ingest.acid.read.reader import read_table
from ingest.errors import (
    CommitConflictError,
    ConfigError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
)
from ingest.records import partition_path
from ingest.table import open_table
from ingest.table.core import _written as written_module
from ingest.table.write import create_table, delete, load, load_file
from ingest.txn import METASTORE_FILENAME, Metastore, MetastoreError, default_metastore_url
from ingest.txn.registry import backend_for

DDL = "id BIGINT, value STRING, dt STRING"


def rows(n: int, start: int = 0, dts: tuple[str | None, ...] = ("2026-01-01",)) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "value": [f"v{i}" for i in ids],
                     "dt": [dts[i % len(dts)] for i in ids]})


def snapshot_rows(location: str, columns: list[str] | None = None) -> list[dict]:
    store = Metastore.open(f"sqlite://{Path(location).parent}/{METASTORE_FILENAME}", create=False)
    with store:
        snap = store.snapshot(location)
    table = read_table(location, snap, columns=columns)
    return sorted(table.to_pylist(), key=lambda r: (r.get("id") is None, r.get("id")))


def acid_dirs(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*delta_*") if p.is_dir())


def states(location: str) -> dict[int, str]:
    with Metastore.open(f"sqlite://{Path(location).parent}/{METASTORE_FILENAME}",
                        create=False) as store:
        return store.write_id_states(location)


@pytest.fixture
def table(warehouse: Path) -> str:
    location = str(warehouse / "events")
    create_table(location, DDL)
    return location


@pytest.fixture
def parted(warehouse: Path) -> str:
    location = str(warehouse / "parted")
    create_table(location, DDL, partitioned_by=["dt"], buckets=4, bucketed_by=["id"])
    return location


# ---------------------------------------------------------------------------- create

def test_create_makes_the_directory_and_registers_beside_it(warehouse: Path) -> None:
    defn = create_table(str(warehouse / "Events-2026"), DDL, partitioned_by="dt",
                        properties={"orc.compress": "ZLIB"})
    assert (warehouse / "Events-2026").is_dir()
    assert defn.name == "default.events_2026"
    assert defn.row_schema.names == ["id", "value"] and defn.partition_columns == ("dt",)
    assert defn.properties["transactional"] == "true"
    with Metastore.open(f"sqlite://{warehouse}/{METASTORE_FILENAME}", create=False) as store:
        assert store.get_table(str(warehouse / "Events-2026")) == defn


def test_create_twice_is_table_exists(table: str) -> None:
    with pytest.raises(TableExistsError, match="already exists at file://"):
        create_table(table, DDL)


def test_create_with_a_taken_name_leaves_no_directory(table: str, warehouse: Path) -> None:
    with pytest.raises(TableExistsError):
        create_table(str(warehouse / "other"), DDL, name="events")
    assert not (warehouse / "other").exists()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"partitioned_by": ["id"]}, "partition column 'id' is BIGINT, but partition values are "
                                 "strings"),
    ({"buckets": 4}, "bucket_count 4 with bucket columns []"),
    ({"buckets": 5000, "bucketed_by": ["id"]}, "5000 buckets, at most 4096"),
    ({"bucketed_by": ["nope"], "buckets": 2}, "bucket columns ['nope'] are not row columns"),
])
def test_bad_create_options_are_config_errors(warehouse: Path, kwargs: dict,
                                              message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        create_table(str(warehouse / "t"), DDL, **kwargs)
    assert not (warehouse / "t").exists()


def test_bad_schema_is_a_config_error(warehouse: Path) -> None:
    with pytest.raises(ConfigError):
        create_table(str(warehouse / "t"), "id BIGINTEGER")


# ---------------------------------------------------------------------------- load

def test_load_then_read_back_with_the_snapshot(table: str, warehouse: Path) -> None:
    first = load(open_table(table), rows(5))
    second = load(open_table(table), rows(3, start=5))
    assert (first.write_id, second.write_id) == (1, 2)
    assert first.rows == 5 and first.partitions == ("",)
    assert first.files == (f"file://{table}/delta_0000001_0000001_0000/bucket_00000",)
    assert (Path(table) / "delta_0000001_0000001_0000" / "_orc_acid_version").read_bytes() == b"2"
    assert not list(Path(table).rglob("*_flush_length")), "files are closed before commit"
    got = snapshot_rows(table)
    assert [r["id"] for r in got] == list(range(8))
    assert got[0] == {"id": 0, "value": "v0", "dt": "2026-01-01"}
    events = read_bucket_file(f"{table}/delta_0000002_0000002_0000/bucket_00000").to_pylist()
    assert [(e["originalTransaction"], e["bucket"], e["rowId"]) for e in events] == [
        (2, 536870912, 0), (2, 536870912, 1), (2, 536870912, 2)]
    assert states(table) == {1: "committed", 2: "committed"}


def test_partition_columns_are_named_in_the_hint(parted: str) -> None:
    with pytest.raises(SchemaMismatchError, match="column 'dt' \\(STRING\\) is missing") as info:
        load(open_table(parted), pa.table({"id": [1], "value": ["a"]}))
    assert info.value.hint == ("the table's columns are: id BIGINT, value STRING; "
                               "partitioned by dt (STRING); to load NULL into the columns the "
                               "input lacks, ask for it with `ingest load --missing-columns "
                               'null` (Python: missing_columns="null")')


def test_partitioned_bucketed_load_places_every_row_in_its_bucket(parted: str) -> None:
    data = rows(200, dts=("2026-01-01", "2026-01-02", None, "a/b", ""))
    result = load(open_table(parted), data)
    assert result.rows == 200
    assert sorted(result.partitions) == ["dt=2026-01-01", "dt=2026-01-02",
                                         "dt=__HIVE_DEFAULT_PARTITION__", "dt=a%2Fb"]
    seen = 0
    for url in result.files:
        path = url[len("file://"):]
        bucket = parse_bucket_file(path)
        events = read_bucket_file(path)
        row = events.column("row").combine_chunks()
        table = pa.table({"id": row.field("id"), "value": row.field("value")})
        assert set(bucket_ids(table, ["id"], 4).to_pylist()) == {bucket}
        assert {decode_bucket_property(b)[1] for b in events.column("bucket").to_pylist()} == {
            bucket}
        partition = path.split("/")[-3]
        expected_dt = {"dt=a%2Fb": "a/b", "dt=__HIVE_DEFAULT_PARTITION__": None}.get(
            partition, partition[3:])
        ids = table.column("id").to_pylist()
        assert all((data["dt"][i].as_py() or None) == expected_dt for i in ids)
        assert ids == sorted(ids), "input order is kept inside a bucket"
        seen += len(ids)
    assert seen == 200
    got = snapshot_rows(parted)
    assert [(r["id"], r["dt"]) for r in got] == [
        (i, data["dt"][i].as_py() or None) for i in range(200)]


def test_partition_path_escapes_like_hive() -> None:
    assert partition_path(["dt", "c"], ["2026-01-01", None]) == (
        "dt=2026-01-01/c=__HIVE_DEFAULT_PARTITION__")
    assert partition_path(["k"], ["a/b:c=d%"]) == "k=a%2Fb%3Ac%3Dd%25"
    assert partition_path(["k"], [""]) == "k=__HIVE_DEFAULT_PARTITION__"


def test_columns_are_matched_by_name_and_cast(table: str) -> None:
    data = pa.table({"DT": ["x"], "Value": ["a"], "id": pa.array([7], pa.int32())})
    load(open_table(table), data)
    assert snapshot_rows(table) == [{"id": 7, "value": "a", "dt": "x"}]


def test_rows_that_do_not_fit_are_refused_before_anything_is_written(table: str) -> None:
    bad = pa.table({"id": ["1", "x"], "extra": [1, 2], "dt": ["d", "d"]})
    with pytest.raises(SchemaMismatchError) as info:
        load(open_table(table), bad)
    message = str(info.value)
    assert message.startswith("Cannot load 2 rows into default.events: ")
    assert "column 'extra' is not in the table" in message
    assert "column 'value' (STRING) is missing" in message
    assert "column 'id' is string and cannot be converted to BIGINT" in message
    assert "'x'" in message
    assert info.value.hint == ("the table's columns are: id BIGINT, value STRING, dt STRING; "
                               "to load NULL into the columns the input lacks, ask for it "
                               "with `ingest load --missing-columns null` (Python: "
                               'missing_columns="null")')
    assert acid_dirs(Path(table)) == []
    assert states(table) == {}, "no transaction was opened"


def test_empty_input_commits_nothing(table: str) -> None:
    result = load(open_table(table), rows(0))
    assert result.write_id is None and result.rows == 0
    assert states(table) == {}


class _FailingWriter(written_module.BucketWriter):
    """Fails closing the second bucket file a load writes."""

    closed = 0

    def close(self) -> None:
        type(self).closed += 1
        if type(self).closed == 2:
            raise OSError("disk full (injected)")
        super().close()


def test_a_failure_mid_load_removes_every_file_and_aborts(
        parted: str, monkeypatch: pytest.MonkeyPatch) -> None:
    load(open_table(parted), rows(10, dts=("old",)))
    _FailingWriter.closed = 0
    monkeypatch.setattr(written_module, "BucketWriter", _FailingWriter)
    with pytest.raises(OSError, match="disk full"):
        load(open_table(parted), rows(100, start=10, dts=("new1", "new2")))
    assert [p.name for p in Path(parted).iterdir() if p.name != "_ingest_metastore"] == [
        "dt=old"], "new partitions removed"
    assert acid_dirs(Path(parted)) == ["dt=old/delta_0000001_0000001_0000"]
    assert states(parted) == {1: "committed", 2: "aborted"}
    assert [r["id"] for r in snapshot_rows(parted)] == list(range(10))


def test_a_lost_commit_removes_the_files(table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = backend_for(default_metastore_url(table))  # the table's kind of metastore
    original = backend.commit

    def commit_after_timeout(self: Metastore, txn, **kwargs) -> None:  # noqa: ANN001
        self.abort(txn, reason="timed out (simulated)")
        original(self, txn, **kwargs)

    monkeypatch.setattr(backend, "commit", commit_after_timeout)
    with pytest.raises(CommitConflictError, match="it is aborted"):
        load(open_table(table), rows(5))
    assert acid_dirs(Path(table)) == []
    assert states(table) == {1: "aborted"}


def test_unknown_table_is_table_not_found(warehouse: Path) -> None:
    with pytest.raises(TableNotFoundError, match="Cannot find an ingest table at or above"):
        load(open_table(str(warehouse / "nope")), rows(1))
    create_table(str(warehouse / "t"), DDL)
    with pytest.raises(TableNotFoundError):
        load(open_table(str(warehouse / "nope"), metastore=f"sqlite://{warehouse}/{METASTORE_FILENAME}"),
             rows(1))


def test_a_partition_directory_is_not_a_table_root(parted: str) -> None:
    load(open_table(parted), rows(1))
    with pytest.raises(ConfigError, match="inside table default.parted, not its root"):
        load(open_table(f"{parted}/dt=2026-01-01"), rows(1))


def test_corrupt_metastore_is_a_clear_error_and_nothing_is_written(table: str,
                                                                   warehouse: Path) -> None:
    (warehouse / METASTORE_FILENAME).write_bytes(b"this is not a sqlite database" * 100)
    for suffix in ("-wal", "-shm"):
        (warehouse / (METASTORE_FILENAME + suffix)).unlink(missing_ok=True)
    with pytest.raises(MetastoreError, match=METASTORE_FILENAME):
        load(open_table(table), rows(3))
    assert acid_dirs(Path(table)) == []


def test_explicit_metastore_url(warehouse: Path) -> None:
    url = f"sqlite://{warehouse}/elsewhere/ms.sqlite"
    location = str(warehouse / "t")
    create_table(location, DDL, metastore=url)
    assert not (warehouse / METASTORE_FILENAME).exists()
    assert load(open_table(location, metastore=url), rows(2)).write_id == 1
    with pytest.raises(MetastoreError, match="file does not exist"):
        load(open_table(location, metastore=f"sqlite://{warehouse}/missing.sqlite"), rows(2))


def test_memory_filesystem_table(tmp_path: Path) -> None:
    root = f"memory://ops-{uuid.uuid4().hex[:8]}"
    location = f"{root}/events"
    try:
        create_table(location, DDL, partitioned_by=["dt"])
        result = load(open_table(location), rows(4, dts=("a", "b")))
        assert len(result.files) == 2
        with Metastore.open(default_metastore_url(location), create=False) as store:
            snap = store.snapshot(location)
        got = read_table(location, snap).to_pylist()
        assert sorted(r["id"] for r in got) == [0, 1, 2, 3]
        assert delete(open_table(location), "dt = 'a'").rows_deleted == 2
        with Metastore.open(default_metastore_url(location), create=False) as store:
            snap = store.snapshot(location)
        assert sorted(r["id"] for r in read_table(location, snap).to_pylist()) == [1, 3]
    finally:
        fsspec.filesystem("memory").rm(root, recursive=True)


def test_load_file_uses_the_table_types(table: str, tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("id,value,dt\n1,007,2026-01-01\n2,,2026-01-02\n")
    result = load_file(open_table(table), str(path))
    assert result.rows == 2
    assert snapshot_rows(table) == [{"id": 1, "value": "007", "dt": "2026-01-01"},
                                    {"id": 2, "value": "", "dt": "2026-01-02"}]


# ---------------------------------------------------------------------------- delete

def test_delete_writes_delete_events_and_the_rows_disappear(table: str) -> None:
    load(open_table(table), rows(5))
    load(open_table(table), rows(5, start=5))
    result = delete(open_table(table), "id IN (1, 7) OR value = 'v3'")
    assert (result.write_id, result.rows_deleted, result.dry_run) == (3, 3, False)
    assert result.files == (f"file://{table}/delete_delta_0000003_0000003_0000/bucket_00000",)
    assert (Path(table) / "delete_delta_0000003_0000003_0000" / "_orc_acid_version").exists()
    events = read_bucket_file(result.files[0][len("file://"):]).to_pylist()
    assert [(e["operation"], e["originalTransaction"], e["rowId"], e["currentTransaction"],
             e["row"]) for e in events] == [(2, 1, 1, 3, None), (2, 1, 3, 3, None),
                                            (2, 2, 2, 3, None)]
    assert [r["id"] for r in snapshot_rows(table)] == [0, 2, 4, 5, 6, 8, 9]
    assert states(table)[3] == "committed"


def test_delete_matching_nothing_commits_nothing(table: str) -> None:
    load(open_table(table), rows(3))
    result = delete(open_table(table), "id > 100")
    assert result.rows_deleted == 0 and result.write_id is None and result.files == ()
    assert acid_dirs(Path(table)) == ["delta_0000001_0000001_0000"]
    assert states(table) == {1: "committed", 2: "aborted"}


def test_deleting_twice_deletes_once(table: str) -> None:
    load(open_table(table), rows(3))
    assert delete(open_table(table), "id = 1").rows_deleted == 1
    assert delete(open_table(table), "id = 1").rows_deleted == 0


def test_dry_run_counts_and_writes_nothing(table: str) -> None:
    load(open_table(table), rows(10))
    result = delete(open_table(table), "id BETWEEN 2 AND 5", dry_run=True)
    assert result.rows_deleted == 4 and result.dry_run and result.write_id is None
    assert acid_dirs(Path(table)) == ["delta_0000001_0000001_0000"]
    assert states(table) == {1: "committed"}


def test_delete_on_a_partitioned_bucketed_table(parted: str) -> None:
    data = rows(60, dts=("a", "b", None))
    load(open_table(parted), data)
    result = delete(open_table(parted), "dt = 'a' AND id < 30 OR dt IS NULL AND id >= 50")
    expected_gone = {i for i in range(60) if (i % 3 == 0 and i < 30) or (i % 3 == 2 and i >= 50)}
    assert result.rows_deleted == len(expected_gone)
    assert sorted(result.partitions) == ["dt=__HIVE_DEFAULT_PARTITION__", "dt=a"]
    for url in result.files:
        path = url[len("file://"):]
        assert "/delete_delta_0000002_0000002_0000/" in path
        events = read_bucket_file(path)
        assert {decode_bucket_property(b)[1] for b in events.column("bucket").to_pylist()} == {
            parse_bucket_file(path)}
    assert [r["id"] for r in snapshot_rows(parted)] == sorted(set(range(60)) - expected_gone)


def test_bad_where_is_a_config_error_and_opens_no_transaction(table: str) -> None:
    load(open_table(table), rows(3))
    with pytest.raises(ConfigError, match="Cannot parse --where 'id = ': expected a value after "
                                          "'=' at position 5"):
        delete(open_table(table), "id = ")
    with pytest.raises(ConfigError, match="unknown column 'nope'") as info:
        delete(open_table(table), "nope = 1")
    assert info.value.hint == "columns are: id, value, dt"
    assert states(table) == {1: "committed"}


def test_delete_on_an_empty_table(table: str) -> None:
    assert delete(open_table(table), "id = 1").rows_deleted == 0
    assert delete(open_table(table), "id = 1", dry_run=True).rows_deleted == 0


def test_load_result_is_json_friendly(table: str) -> None:
    result = load(open_table(table), rows(2))
    json.dumps(result.__dict__)
