"""Bad storage input: a missing bucket, refused credentials, an unreachable endpoint and a
server that fails mid-write. Each gives a clear error naming bucket and endpoint, and nothing
that is not whole is ever committed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from s3_server import FAST_FAILING, AuthServer, Bucket, FlakyProxy
from support import run_cli as run

from ingest.txn import Metastore

DDL = "id BIGINT, value STRING, dt STRING"


def write_rows(path: Path, ids: range, partitions: int = 1) -> str:
    path.write_text("".join(json.dumps({"id": i, "value": f"value-{i:08d}-" + "x" * 40,
                                        "dt": f"d{i % partitions:03d}"}) + "\n" for i in ids))
    return str(path)


def cli_args(options: dict) -> list[str]:
    out = []
    for key, value in options.items():
        out += ["--storage-option",
                f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    return out


def s3_direct(through_proxy: Bucket) -> object:
    """The bucket seen from the server itself, not through the proxy."""
    return Bucket(through_proxy.name, "", {**through_proxy.options,
                                            "endpoint_url": through_proxy.upstream}).fs()


def metastores(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "ingest-home").rglob("*.sqlite"))


def test_a_bucket_that_does_not_exist(s3: Bucket, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    table = "s3://no-such-bucket-here/wh/t"
    code, out, err = run(["create", table, "--schema", DDL, *s3.cli_args()], capsys)
    assert code == 3 and out == ""
    assert "bucket no-such-bucket-here does not exist" in err and s3.endpoint in err
    assert "create the bucket first" in err
    # Nothing was registered, and no bucket was created behind the user's back.
    assert metastores(tmp_path) == []
    assert "no-such-bucket-here" not in s3.fs().ls("")
    code, _, err = run(["load", table, "--input", write_rows(tmp_path / "in.jsonl", range(3)),
                        *s3.cli_args()], capsys)
    assert code == 3 and "no-such-bucket-here" in err
    code, _, err = run(["cat", table, *s3.cli_args()], capsys)
    assert code == 3 and "bucket no-such-bucket-here does not exist" in err


def test_a_bucket_removed_under_a_table(s3: Bucket, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    table = f"{s3.url}/wh/t"
    rows = write_rows(tmp_path / "in.jsonl", range(3))
    assert run(["create", table, "--schema", DDL, *s3.cli_args()], capsys)[0] == 0
    assert run(["load", table, "--input", rows, *s3.cli_args()], capsys)[0] == 0
    fs = s3.fs()
    fs.rm(f"{s3.name}/wh", recursive=True)
    fs.rmdir(s3.name)
    code, out, err = run(["load", table, "--input", rows, *s3.cli_args()], capsys)
    assert (code, out) == (3, ""), err
    assert f"bucket {s3.name} does not exist" in err and s3.endpoint in err
    # The load did not bring the bucket back (fsspec's makedirs would have), nor commit.
    assert s3.name not in s3.fs().ls("")
    (ms,) = metastores(tmp_path)
    with Metastore.open(f"sqlite://{ms}", create=False) as store:
        states = {t.write_id: t.state for t in store.transactions("default.t")}
    assert states == {1: "committed", 2: "aborted"}, states


def test_refused_credentials(s3_auth: AuthServer, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    table = f"s3://{s3_auth.bucket}/wh/{tmp_path.name}"
    good = {**s3_auth.good, **FAST_FAILING}
    assert run(["create", table, "--schema", DDL, *cli_args(good)], capsys)[0] == 0
    rows = write_rows(tmp_path / "in.jsonl", range(10))
    assert run(["load", table, "--input", rows, *cli_args(good)], capsys)[0] == 0
    (before,) = metastores(tmp_path)
    for wrong in ({**good, "secret": "not-the-secret"}, {**good, "key": "AKIDONTEXIST"}):
        for command in (["cat", table], ["load", table, "--input", rows],
                        ["delete", table, "--where", "id = 1"], ["compact", table]):
            code, out, err = run([*command, *cli_args(wrong)], capsys)
            assert (code, out) == (3, ""), err
            assert f"Cannot access s3://{s3_auth.bucket} at {s3_auth.server.endpoint}" in err
            assert "refused the credentials" in err
            assert "not-the-secret" not in err and "not-the-secret" not in out
    # The refused writes committed nothing (their transactions were aborted): same rows.
    with Metastore.open(f"sqlite://{before}", create=False) as store:
        states = {t.write_id: t.state for t in store.transactions("default." + tmp_path.name)}
    assert [w for w, state in states.items() if state == "committed"] == [1], states
    code, out, _ = run(["cat", table, *cli_args(good)], capsys)
    assert code == 0 and sorted(json.loads(x)["id"] for x in out.splitlines()) == list(range(10))


def test_an_unreachable_endpoint(s3: Bucket, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = {**s3.options, "endpoint_url": f"http://127.0.0.1:{port}", **FAST_FAILING}
    table = f"{s3.url}/wh/t"
    code, out, err = run(["create", table, "--schema", DDL, *cli_args(dead)], capsys)
    assert (code, out) == (3, "")
    assert f"Cannot reach {s3.url} at http://127.0.0.1:{port}" in err
    assert "check endpoint_url" in err
    assert metastores(tmp_path) == []


@pytest.mark.slow
def test_a_server_that_fails_mid_write(flaky_s3: tuple[Bucket, FlakyProxy], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    bucket, proxy = flaky_s3
    so = bucket.cli_args()
    table = f"{bucket.url}/wh/t"
    assert run(["create", table, "--schema", DDL, "--partitioned-by", "dt", *so],
               capsys)[0] == 0
    assert run(["load", table, "--input", write_rows(tmp_path / "a.jsonl", range(100)),
                *so], capsys)[0] == 0
    # A large load over 20 partitions: the server goes away after a few files are uploaded.
    big = write_rows(tmp_path / "big.jsonl", range(1000, 21000), partitions=20)
    proxy.arm(budget=150_000)
    code, out, err = run(["load", table, "--input", big, *so], capsys)
    assert (code, out) == (3, ""), err
    assert f"Cannot reach {bucket.url} at {bucket.endpoint}" in err
    assert proxy.broken
    # Mid-write indeed: some of the load's files were stored whole before the server went.
    stored = {p.split("/")[-3] for p in s3_direct(bucket).find(f"{bucket.name}/wh/t")
              if "delta_0000002" in p}
    assert 0 < len(stored) < 20, stored
    (ms,) = metastores(tmp_path)
    with Metastore.open(f"sqlite://{ms}", create=False) as store:
        snapshot = store.snapshot("default.t")
        # The failed load's write id never committed.
        assert snapshot.high_watermark == 1 or not snapshot.is_valid(2)
        states = {t.write_id: t.state for t in store.transactions("default.t")}
    assert states.get(1) == "committed" and states.get(2) in (None, "aborted", "open"), states
    proxy.heal()
    code, out, err = run(["cat", table, *so], capsys)
    assert code == 0, err
    assert sorted(json.loads(x)["id"] for x in out.splitlines()) == list(range(100))
    # What the failed load left is only files of a write id that never commits: recover
    # and clean take them away, and verify finds the table sound.
    assert run(["recover", table, "--txn-timeout-s", "0", *so], capsys)[0] == 0
    assert run(["clean", table, "--retention", "0", *so], capsys)[0] == 0
    code, out, err = run(["verify", table, "--json", *so], capsys)
    assert code == 0 and json.loads(out)["ok"], out
    # None of the aborted write's files is left in the table itself (recover may keep copies
    # in its backup directory).
    left = [p for p in s3_direct(bucket).find(f"{bucket.name}/wh/t") if "delta_0000002" in p]
    assert all("/_ingest_recovery_backup/" in p for p in left), left
