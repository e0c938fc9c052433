"""Every table command on a table in an S3 bucket (moto's server), reached only through
`--storage-option`: the same rows as the same commands on a local table."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from s3_server import Bucket
from support import run_cli as run

from ingest.acid import BucketFileOptions, BucketWriter
from ingest.acid.format.names import format_delta, parse_directory
from ingest.table.core._owner import MARKER_NAME
from ingest.txn import Metastore

DDL = "id BIGINT, value STRING, dt STRING"


def write_rows(path: Path, ids: range, deleted: str = "") -> str:
    path.write_text("".join(json.dumps({"id": i, "value": f"v{i}{deleted}",
                                        "dt": f"2026-01-0{1 + i % 2}"}) + "\n" for i in ids))
    return str(path)


def ok(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run(args, capsys)
    assert code == 0, err
    return out


def rows(out: str) -> list[dict]:
    return sorted((json.loads(line) for line in out.splitlines()),
                  key=lambda r: (r["id"], r["dt"]))


def acid_dirs(fs: object, root: str) -> list[str]:
    found = fs.find(root, withdirs=True)  # type: ignore[attr-defined]
    return sorted({p[len(root) + 1:].split("/bucket_")[0] for p in found
                   if "/bucket_" in p})


@pytest.mark.slow
def test_every_command_on_s3_matches_the_local_run(s3: Bucket, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    remote = f"{s3.url}/wh/events"
    local = str(tmp_path / "wh" / "events")
    so = s3.cli_args()
    inputs = [write_rows(tmp_path / f"in{n}.jsonl", range(n * 10, n * 10 + 10))
              for n in range(3)]

    def both(*args: str, extra: tuple[str, ...] = ()) -> tuple[str, str]:
        return (ok([args[0], remote, *args[1:], *so, *extra], capsys),
                ok([args[0], local, *args[1:], *extra], capsys))

    both("create", "--schema", DDL, "--partitioned-by", "dt")
    # An empty table has no data key on S3 (only its owner marker), and is still a table.
    assert s3.fs().find(f"{s3.name}/wh") == [f"{s3.name}/wh/events/{MARKER_NAME}"]
    assert both("cat") == ("", "")
    assert '"ok": true' in both("verify", "--json")[0].replace('"ok":true', '"ok": true')
    for path in inputs:
        both("load", "--input", path)
    both("delete", "--where", "id < 5 OR id >= 25")
    remote_rows, local_rows = (rows(out) for out in both("cat"))
    assert remote_rows == local_rows and len(remote_rows) == 20

    both("compact", "--minor")
    assert [rows(out) for out in both("cat")] == [local_rows, local_rows]
    both("compact", "--major")
    assert [rows(out) for out in both("cat")] == [local_rows, local_rows]
    fs = s3.fs()
    names = acid_dirs(fs, f"{s3.name}/wh/events")
    # Object stores name compaction outputs after the compactor's transaction (_vT) and
    # leave no hidden work directory behind.
    bases = [n for n in names if n.split("/")[-1].startswith("base_")]
    assert len(bases) == 2 and all("_v" in n for n in bases), names
    assert not [p for p in fs.find(f"{s3.name}/wh") if "/." in p]

    both("clean", "--retention", "0")
    after = acid_dirs(fs, f"{s3.name}/wh/events")
    assert sorted(n.split("/")[-1].split("_v")[0] for n in after) == \
        sorted(n.split("/")[-1] for n in acid_dirs_local(Path(local))), after
    assert [rows(out) for out in both("cat")] == [local_rows, local_rows]
    remote_verify = json.loads(both("verify", "--json")[0])
    assert remote_verify["ok"] and remote_verify["problems"] == []
    assert "nothing to do" in run(["recover", remote, *so], capsys)[2]
    status = json.loads(ok(["status", remote, "--json", *so], capsys))
    assert status["totals"]["partitions"] == 2
    history = ok(["compactions", remote, *so], capsys)
    assert history.count("major") >= 2 and history.count("minor") >= 2, history
    ok(["alter", remote, "--property", "orc.compress=SNAPPY", *so], capsys)
    ok(["load", remote, "--input", write_rows(tmp_path / "more.jsonl", range(100, 103)), *so],
       capsys)
    assert len(rows(ok(["cat", remote, *so], capsys))) == 23


def acid_dirs_local(root: Path) -> list[str]:
    return sorted(str(p.parent.relative_to(root)) for p in root.rglob("bucket_*"))


def test_recover_cuts_a_torn_file_on_s3(s3: Bucket, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    table = f"{s3.url}/wh/t"
    so = s3.cli_args()
    ok(["create", table, "--schema", DDL, *so], capsys)
    ok(["load", table, "--input", write_rows(tmp_path / "a.jsonl", range(5)), *so], capsys)
    # An aborted write whose file ends in a torn stripe (uploaded whole, as S3 stores files).
    assert json.loads(ok(["status", table, "--json", *so], capsys))["snapshot"].startswith(
        "default.t:1:")
    local = tmp_path / "torn"
    local.mkdir()
    store_url = _metastore_url(tmp_path)
    with Metastore.open(store_url, create=False) as store:
        (txn,) = store.allocate_write_ids("default.t", 1)
        store.abort(txn)
    name = format_delta(txn.write_id, txn.write_id, 0)
    torn = pa.table({"id": pa.array(range(50, 60), pa.int64()),
                     "value": [f"v{i}" for i in range(50, 60)], "dt": ["x"] * 10})
    with BucketWriter.create(str(local / "bucket_00000"), BucketFileOptions(
            write_id=txn.write_id, row_schema=torn.schema)) as w:
        w.write(torn)
    fs = s3.fs()
    fs.pipe(f"{s3.name}/wh/t/{name}/bucket_00000",
            (local / "bucket_00000").read_bytes() + b"torn stripe bytes")
    code, out, _ = run(["verify", table, *so], capsys)
    assert code == 1 and "needs-recovery" in out
    code, out, err = run(["recover", table, *so], capsys)
    assert code == 0, err
    assert f"{name}/bucket_00000" in out
    assert fs.size(f"{s3.name}/wh/t/{name}/bucket_00000") == \
        (local / "bucket_00000").stat().st_size
    assert run(["verify", table, *so], capsys)[0] == 0
    assert [r["id"] for r in rows_by_id(ok(["cat", table, *so], capsys))] == list(range(5))
    assert parse_directory(name) is not None


def rows_by_id(out: str) -> list[dict]:
    return sorted((json.loads(line) for line in out.splitlines()), key=lambda r: r["id"])


def _metastore_url(tmp_path: Path) -> str:
    """Where a table on S3 keeps its metastore: under $INGEST_HOME (tests/conftest.py)."""
    found = sorted((tmp_path / "ingest-home").rglob("*.sqlite"))
    assert len(found) == 1, found
    return f"sqlite://{found[0]}"


@pytest.mark.slow
def test_each_command_opens_its_table_with_the_metastore_and_options_given(
        s3: Bucket, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every table command given `--metastore URL` and `--storage-option` opens its table
    with them at the edge and the table carries them into each operation: a table in a bucket
    only the options reach (fsspec's S3 environment is cleared), listed only in a metastore
    away from it, is loaded, deleted from, compacted, cleaned, altered, read, described,
    verified and recovered; no other metastore is searched for or created, and without
    `--metastore` the same table is not found."""
    table = f"{s3.url}/wh/events"
    chosen = tmp_path / "elsewhere" / "ms.sqlite"
    given = ["--metastore", f"sqlite://{chosen}", *s3.cli_args()]

    def cli(*args: str) -> str:
        return ok([args[0], table, *args[1:], *given], capsys)

    cli("create", "--schema", DDL, "--partitioned-by", "dt")
    cli("load", "--input", write_rows(tmp_path / "a.jsonl", range(10)))
    assert "Deleted 2 rows" in cli("delete", "--where", "id < 2")
    assert "2 of 2 partitions compacted" in cli("compact", "--major")
    assert "removed" in cli("clean", "--retention", "0")
    assert "orc.compress" in cli("alter", "--property", "orc.compress=SNAPPY")
    cli("load", "--input", write_rows(tmp_path / "b.jsonl", range(10, 12)))
    assert [r["id"] for r in rows_by_id(cli("cat"))] == list(range(2, 12))
    status = json.loads(cli("status", "--json"))
    assert (status["table"], status["snapshot_source"]) == ("default.events", "metastore")
    assert status["totals"]["partitions"] == 2
    verify = json.loads(cli("verify", "--json"))
    assert verify["ok"] and verify["table"] == "default.events"
    assert json.loads(cli("recover", "--json"))["table"] == "default.events"
    assert cli("compactions").count("major") == 2
    # The chosen metastore is the only one: none was made under $INGEST_HOME for the bucket.
    assert sorted((tmp_path / "ingest-home").rglob("*.sqlite")) == []
    assert chosen.exists()
    code, _, err = run(["load", table, "--input", str(tmp_path / "b.jsonl"), "--json",
                        *s3.cli_args()], capsys)
    assert code == 3 and json.loads(err)["error"]["type"] == "TableNotFoundError"
