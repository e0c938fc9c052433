"""Compaction output named with Hive 4's `_vT` suffix (`ingest.compaction.visibility_suffix`):
T is the compactor's own transaction, and readers that take their snapshot from the
metastore skip the output until T commits (docs/format.md §17)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import cat_ids, error_json, ok_json, three_loads_and_a_delete
from support import run_cli as cli

import ingest
from ingest.acid.format.names import parse_directory
from ingest.errors import ConfigError
from ingest.table.core._definition import VISIBILITY_PROPERTY, uses_visibility_suffix
from ingest.txn import TableDefinition, find_metastore_for

DDL = "id BIGINT, value STRING"


def make_table(tmp_path: Path, capsys: pytest.CaptureFixture[str], *,
               suffix: bool = True) -> str:
    """Three loads of ten rows and one delete: three deltas and a delete delta."""
    props = ["--property", f"{VISIBILITY_PROPERTY}=TRUE"] if suffix else []
    return three_loads_and_a_delete(tmp_path, capsys, *props)


def rows(location: str) -> list[tuple[object, ...]]:
    """The rows through the Python API (snapshot and visibility from the metastore)."""
    t = ingest.open_table(location).to_arrow(with_row_id=True)
    return sorted((r["row__id"]["writeid"], r["row__id"]["rowid"], r["id"], r["value"])
                  for r in t.to_pylist())


def history(location: str, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    return ok_json(["compactions", location], capsys)["compactions"]


def names(location: str) -> list[str]:
    return sorted(p.name for p in Path(location).iterdir())


def test_property_is_checked_and_normalised(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    location = str(tmp_path / "t")
    err = error_json(["create", location, "--schema", DDL, "--property",
                      f"{VISIBILITY_PROPERTY}=maybe"], capsys, 2)
    assert "is not true or false" in err["message"]
    assert not Path(location).exists()
    ok_json(["create", location, "--schema", DDL, "--property", f"{VISIBILITY_PROPERTY}=True"],
            capsys)
    store, defn = find_metastore_for(location, read_only=True)
    store.close()
    assert defn.properties[VISIBILITY_PROPERTY] == "true"


def test_default_follows_the_storage() -> None:
    import pyarrow as pa

    def defn(props: dict[str, str]) -> TableDefinition:
        return TableDefinition("default.t", "file:///t", pa.schema([("id", pa.int64())]),
                               properties=props)

    assert not uses_visibility_suffix(defn({}), "file")
    assert not uses_visibility_suffix(defn({}), ("file", "local"))
    assert uses_visibility_suffix(defn({}), ("s3", "s3a"))
    assert uses_visibility_suffix(defn({}), ("gcs", "gs"))
    assert not uses_visibility_suffix(defn({}), "memory")
    assert uses_visibility_suffix(defn({VISIBILITY_PROPERTY: "true"}), "file")
    assert not uses_visibility_suffix(defn({VISIBILITY_PROPERTY: "false"}), "memory")
    # Without an atomic rename a Hive 3 name would show a half-moved output: refused.
    with pytest.raises(ConfigError, match=r"visibility_suffix=false: on s3:// a directory "
                                          r"is moved file by file"):
        uses_visibility_suffix(defn({VISIBILITY_PROPERTY: "false"}), ("s3", "s3a"))


def test_minor_then_major_are_named_after_the_compactor_txn(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = make_table(tmp_path, capsys)
    before = rows(location)
    assert len(before) == 26

    minor = ok_json(["compact", location, "--minor"], capsys)["partitions"][0]
    (first,) = history(location, capsys)
    t1 = first["txn_id"]
    assert minor["outputs"] == [f"delta_0000001_0000004_v{t1:07d}",
                                f"delete_delta_0000001_0000004_v{t1:07d}"]
    assert first["outputs"] == minor["outputs"]
    assert all(parse_directory(n).visibility == t1 for n in minor["outputs"])
    assert set(minor["outputs"]) <= set(names(location))
    assert rows(location) == before

    major = ok_json(["compact", location, "--major"], capsys)["partitions"][0]
    t2 = history(location, capsys)[1]["txn_id"]
    assert t2 > t1
    assert major["outputs"] == [f"base_0000004_v{t2:07d}"]
    assert sorted(major["inputs"]) == [f"delete_delta_0000001_0000004_v{t1:07d}",
                                       f"delta_0000001_0000004_v{t1:07d}"]
    assert rows(location) == before
    assert cat_ids(location, capsys) == sorted(r[2] for r in before)

    # The cleaner honours the suffix: every input goes, the committed base stays.
    ok_json(["clean", location, "--retention", "0"], capsys)
    assert [n for n in names(location) if not n.startswith((".", "_"))] == [
        f"base_0000004_v{t2:07d}"]
    assert rows(location) == before


def test_default_names_are_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = make_table(tmp_path, capsys, suffix=False)
    major = ok_json(["compact", location, "--major"], capsys)["partitions"][0]
    assert major["outputs"] == ["base_0000004"]


def compact_killed(location: str, kind: str, point: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "INGEST_CRASH_AT": point}
    return subprocess.run([sys.executable, "-m", "ingest", "compact", location, f"--{kind}"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["major", "minor"])
def test_renamed_output_of_an_uncommitted_txn_is_skipped(
        kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location = make_table(tmp_path, capsys)
    before = rows(location)
    ids = cat_ids(location, capsys)

    done = compact_killed(location, kind, "compact.after_rename")
    assert done.returncode == -signal.SIGKILL, done.stderr
    (attempt,) = history(location, capsys)
    dead = attempt["txn_id"]
    leftover = [n for n in names(location) if n.endswith(f"_v{dead:07d}")]
    # In place under its final name, yet its transaction never committed: every reader
    # through the metastore still reads the inputs.
    assert leftover == ([f"base_0000004_v{dead:07d}"] if kind == "major" else
                        [f"delete_delta_0000001_0000004_v{dead:07d}",
                         f"delta_0000001_0000004_v{dead:07d}"])
    assert rows(location) == before
    assert cat_ids(location, capsys) == ids
    # Nor does the cleaner take the open transaction's output as hiding its inputs.
    status = ok_json(["clean", location, "--retention", "0", "--dry-run"], capsys)
    assert (status["directories"], status["partitions"][0]["kept"]) == (0, [])

    # The next compaction takes over the dead compactor's partition and commits its own.
    again = ok_json(["compact", location, f"--{kind}"], capsys)["partitions"][0]
    first, second = history(location, capsys)
    assert first["state"] == "failed" and second["state"] == "ready for cleaning"
    assert all(n.endswith(f"_v{second['txn_id']:07d}") for n in again["outputs"])
    # Having aborted the dead compactor's transaction, it removed that output before writing
    # its own of the same range (a reader that does not check T would read both).
    assert not [n for n in names(location) if n.endswith(f"_v{dead:07d}")]
    assert rows(location) == before
    assert cat_ids(location, capsys) == ids

    # The cleaner removes the inputs; the committed output stays.
    ok_json(["clean", location, "--retention", "0"], capsys)
    assert set(again["outputs"]) <= set(names(location))
    assert rows(location) == before
    code, out, err = cli(["verify", location, "--json"], capsys)
    assert code == 0, out + err
