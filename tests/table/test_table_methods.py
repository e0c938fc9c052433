"""Every table operation is a method of `Table`, run with the metastore the table was opened
with: a metastore named by URL is used by each of them, never the one beside the table."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import ingest
from ingest.acid import UnverifiedSnapshotWarning
from ingest.errors import ConfigError, TableNotFoundError
from ingest.table.write import create_table
from ingest.txn import METASTORE_FILENAME, Metastore

DDL = "id BIGINT, value STRING"


def _rows(ids: range, dt: str) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "value": [f"v{i}" for i in ids],
                     "dt": [dt] * len(ids)})


def test_every_operation_uses_the_metastore_the_table_was_opened_with(tmp_path: Path) -> None:
    location = str(tmp_path / "wh" / "events")
    url = f"sqlite://{tmp_path}/elsewhere.sqlite"
    create_table(location, DDL, partitioned_by=["dt"], metastore=url)
    table = ingest.open_table(location, metastore=url)
    assert table.metastore_url == url
    for i in range(3):
        table.load(_rows(range(i * 10, i * 10 + 3), "a"))
    assert table.delete("id = 11").rows_deleted == 1
    assert [c.state for c in table.history()] == ["committed"] * 4
    assert table.status().table == table.name
    assert table.verify().ok
    assert table.recover().clean
    report = table.compact("major")
    assert [p.partition for p in report.partitions if p.result is not None] == ["dt=a"]
    cleaned = table.clean(retention_s=0)
    assert cleaned.partitions and not cleaned.dry_run
    assert table.alter({"orc.compress": "SNAPPY"}).changed == (("orc.compress", "ZLIB",
                                                               "SNAPPY"),)
    with Metastore.open(url, create=False, read_only=True) as store:
        assert store.get_table(location).properties["orc.compress"] == "SNAPPY"
        assert len(store.compactions(table.name)) == 1
    # Nothing went to the metastore placed beside the table: none was made there.
    assert not (tmp_path / "wh" / METASTORE_FILENAME).exists()
    assert sorted(table.to_arrow(["id"]).column("id").to_pylist()) == [0, 1, 2, 10, 12, 20,
                                                                     21, 22]


def test_a_table_without_metastore_checks_its_files_only(tmp_path: Path) -> None:
    location = str(tmp_path / "wh" / "events")
    create_table(location, DDL, partitioned_by=["dt"])
    ingest.open_table(location).load(_rows(range(3), "a"))
    # Opened without a metastore on purpose: verify and status do not go looking for the
    # one beside the table (which lists it), so the data is, for them, unregistered.
    files = ingest.open_table(location, metastore=False)
    report = files.verify()
    assert report.table is None and report.files_checked == 1
    assert [p.kind for p in report.problems] == ["unregistered-data"]
    assert ingest.open_table(location).verify().ok
    with pytest.warns(UnverifiedSnapshotWarning):
        assert files.status().table is None
    with pytest.raises(ConfigError, match="opened without a metastore"):
        files.compact()
    with pytest.raises(ConfigError, match="opened without a metastore"):
        files.alter({"orc.compress": "SNAPPY"})


def test_a_chosen_metastore_that_does_not_list_the_table_is_an_error(tmp_path: Path) -> None:
    location = str(tmp_path / "wh" / "events")
    create_table(location, DDL)  # beside the table
    other = f"sqlite://{tmp_path}/other.sqlite"
    create_table(str(tmp_path / "x"), DDL, metastore=other)
    with pytest.raises(TableNotFoundError, match="other.sqlite"):
        ingest.open_table(location, metastore=other)
