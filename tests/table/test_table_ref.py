"""`TableRef`: the resolved table as a value that crosses process boundaries. It pickles, opens
again with the metastore it names without searching for one, and never shows a secret."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pytest

import ingest
from ingest.errors import ConfigError
from ingest.table import TableRef
from ingest.table.write import create_table
from ingest.txn import placement

SECRET = "s3cr3t-value"


def _table(tmp_path: Path) -> tuple[str, str]:
    location = str(tmp_path / "wh" / "events")
    url = f"sqlite://{tmp_path}/elsewhere.sqlite"
    create_table(location, "id BIGINT", metastore=url)
    ingest.open_table(location, metastore=url).load(pa.table({"id": pa.array([1, 2],
                                                                             pa.int64())}))
    return location, url


def test_a_ref_pickles_and_opens_again_without_a_search(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    location, url = _table(tmp_path)
    table = ingest.open_table(location, metastore=url, storage_options={"anon": False})
    ref = table.ref
    assert ref == TableRef(table.location, url, {"anon": False})
    copy = pickle.loads(pickle.dumps(ref))
    assert copy == ref and hash(copy) == hash(ref)

    # Opening a ref never searches: neither $INGEST_METASTORE nor the default placement.
    monkeypatch.setenv("INGEST_METASTORE", f"sqlite://{tmp_path}/wrong.sqlite")

    def no_search(*args: object, **kwargs: object) -> str:
        raise AssertionError("a TableRef searched for its metastore")

    monkeypatch.setattr(placement, "default_metastore_url", no_search)
    for opened in (copy.open(), ingest.open_table(copy)):
        assert opened.metastore_url == url
        assert opened.storage_options == {"anon": False}
        assert opened.definition == table.definition
        assert sorted(opened.to_arrow().column("id").to_pylist()) == [1, 2]
    assert not (tmp_path / "wrong.sqlite").exists()


def test_a_ref_of_files_alone_opens_them_alone(tmp_path: Path) -> None:
    location, url = _table(tmp_path)
    files = ingest.open_table(location, metastore=False)
    assert files.ref.metastore is None
    with pytest.warns(ingest.acid.UnverifiedSnapshotWarning):
        assert files.ref.open().to_arrow().num_rows == 2


def test_a_ref_shows_no_secret(tmp_path: Path) -> None:
    ref = TableRef("s3://bucket/wh/events", f"postgresql://ingest:{SECRET}@db/meta",
                   {"key": "AKIA", "secret": SECRET, "client_kwargs": {"token": SECRET},
                    "endpoint_url": "http://minio:9000"})
    for shown in (repr(ref), str(ref), f"{ref}", repr([ref])):
        assert SECRET not in shown and "AKIA" not in shown
        assert "s3://bucket/wh/events" in shown and "http://minio:9000" in shown
    # The secrets are kept for opening, not lost.
    assert pickle.loads(pickle.dumps(ref)).storage_options["secret"] == SECRET
    assert SECRET in (pickle.loads(pickle.dumps(ref)).metastore or "")


def test_a_ref_holds_its_own_options(tmp_path: Path) -> None:
    options = {"anon": True}
    ref = TableRef("memory://t", None, options)
    options["anon"] = False
    assert ref.storage_options == {"anon": True}
    assert ref.at("memory://t__dead_letter") == TableRef("memory://t__dead_letter", None,
                                                         {"anon": True})


def test_a_ref_is_opened_alone(tmp_path: Path) -> None:
    ref = TableRef(str(tmp_path), None)
    with pytest.raises(ConfigError, match="TableRef names its metastore"):
        ingest.open_table(ref, metastore=False)
