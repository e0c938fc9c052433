"""Test data shared across suites: a table with every ORC type we write, built from a seed."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pytest

from ingest.acid import BucketFileOptions, BucketWriter, ValidWriteIdList
from ingest.acid.read.reader import read_table
from ingest.cli import main as cli_main
from ingest.txn import METASTORE_FILENAME, Metastore

ALL_TYPES_SCHEMA = pa.schema([
    ("b", pa.bool_()),
    ("i8", pa.int8()),
    ("i16", pa.int16()),
    ("i32", pa.int32()),
    ("i64", pa.int64()),
    ("f32", pa.float32()),
    ("f64", pa.float64()),
    ("s", pa.string()),
    ("bin", pa.binary()),
    ("d", pa.date32()),
    ("ts", pa.timestamp("ns")),
    ("dec", pa.decimal128(12, 3)),
    ("lst", pa.list_(pa.int32())),
    ("mp", pa.map_(pa.string(), pa.int64())),
    ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
])


def all_types_table(rows: int, *, seed: int = 0, start: int = 0) -> pa.Table:
    """Rows with nulls (about 1 in 7) in every column; values vary with seed and start."""
    rng = random.Random(seed * 1_000_003 + start)

    def maybe(value: object) -> object:
        return None if rng.random() < 0.14 else value

    cols: dict[str, list[object]] = {name: [] for name in ALL_TYPES_SCHEMA.names}
    epoch = dt.datetime(2026, 1, 1)
    for i in range(start, start + rows):
        cols["b"].append(maybe(rng.random() < 0.5))
        cols["i8"].append(maybe(rng.randint(-128, 127)))
        cols["i16"].append(maybe(rng.randint(-32768, 32767)))
        cols["i32"].append(maybe(rng.randint(-2**31, 2**31 - 1)))
        cols["i64"].append(maybe(i * 7 - 1000 + rng.randint(-5, 5)))
        cols["f32"].append(maybe(float(rng.uniform(-1e3, 1e3))))
        cols["f64"].append(maybe(rng.uniform(-1e6, 1e6)))
        cols["s"].append(maybe(f"s{rng.randint(0, 10**6):07d}-é"))
        cols["bin"].append(maybe(rng.randbytes(rng.randint(0, 12))))
        cols["d"].append(maybe(dt.date(2000, 1, 1) + dt.timedelta(days=rng.randint(0, 20000))))
        cols["ts"].append(maybe(epoch + dt.timedelta(seconds=rng.randint(-10**8, 10**8),
                                                     microseconds=rng.randint(0, 999_999))))
        cols["dec"].append(maybe(decimal.Decimal(rng.randint(-10**11, 10**11)).scaleb(-3)))
        cols["lst"].append(maybe([rng.randint(-9, 9) for _ in range(rng.randint(0, 4))]))
        cols["mp"].append(maybe([(f"k{j}", rng.randint(0, 99)) for j in range(rng.randint(0, 3))]))
        cols["st"].append(maybe({"x": rng.randint(0, 9), "y": f"y{rng.randint(0, 9)}"}))
    return pa.table({n: pa.array(cols[n], type=ALL_TYPES_SCHEMA.field(n).type)
                     for n in ALL_TYPES_SCHEMA.names})


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run `ingest ARGS` in-process through its real entry point: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        cli_main.main(args)
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def ok_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    """`ingest ARGS --json` that must succeed: its one JSON document."""
    code, out, err = run_cli([*args, "--json"], capsys)
    assert code == 0, err
    return json.loads(out)


def cat_ids(table: Path | str, capsys: pytest.CaptureFixture[str], *extra: str) -> list[int]:
    """`ingest cat TABLE EXTRA...` that must succeed: the `id` of every row, sorted."""
    code, out, err = run_cli(["cat", str(table), *extra], capsys)
    assert code == 0, err
    return sorted(json.loads(line)["id"] for line in out.splitlines())


def three_loads_and_a_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             *create_args: str) -> str:
    """`ingest create` (id BIGINT, value STRING; `create_args` added), three loads of ten rows
    and one delete of four: a table of three deltas and a delete delta. Returns its location."""
    location = str(tmp_path / "wh" / "events")
    ok_json(["create", location, "--schema", "id BIGINT, value STRING", *create_args], capsys)
    for k in range(3):
        src = tmp_path / f"in{k}.jsonl"
        src.write_text("".join(json.dumps({"id": i, "value": f"v{i}"}) + "\n"
                               for i in range(k * 10, k * 10 + 10)))
        ok_json(["load", location, "--input", str(src)], capsys)
    ok_json(["delete", location, "--where", "id < 3 OR id = 25"], capsys)
    return location


def error_json(args: list[str], capsys: pytest.CaptureFixture[str], code: int) -> dict:
    """`ingest ARGS --json` that must fail with `code`: stdout empty, the error from stderr."""
    got, out, err = run_cli([*args, "--json"], capsys)
    assert (got, out) == (code, ""), err
    return json.loads(err)["error"]


SIMPLE_SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string())])


def simple_table(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()),
                     "value": pa.array([f"v{i}" for i in ids])}, schema=SIMPLE_SCHEMA)


def write_deletes(path: str, keys: pa.Table, *, write_id: int, bucket_id: int = 0,
                  row_schema: pa.Schema = SIMPLE_SCHEMA,
                  fs: fsspec.AbstractFileSystem | None = None) -> int:
    """Write a delete-delta bucket file deleting `keys` (originalTransaction, bucket, rowId)
    with the product's writer; returns the number of delete events."""
    with BucketWriter.create(path, BucketFileOptions(write_id=write_id, row_schema=row_schema,
                                                     bucket_id=bucket_id,
                                                     kind="delete"), fs=fs) as w:
        w.write_deletes(keys)
    return w.deletes_written


def snap(hwm: int, open_ids: tuple[int, ...] = (), aborted: tuple[int, ...] = ()
         ) -> ValidWriteIdList:
    """A snapshot of table `default.t`."""
    return ValidWriteIdList("default.t", hwm, open_ids, aborted)


def write_rows(directory: Path | str, write_id: int, ids: range, *, bucket_id: int = 0,
               statement_id: int = 0) -> None:
    """`directory/bucket_N` holding `simple_table(ids)` as insert events of `write_id`."""
    path = f"{directory}/bucket_{bucket_id:05d}"
    with BucketWriter.create(path, BucketFileOptions(write_id=write_id, row_schema=SIMPLE_SCHEMA,
                                                     bucket_id=bucket_id,
                                                     statement_id=statement_id)) as w:
        w.write(simple_table(ids))


def delete_keys(directory: Path | str, keys: list[tuple[int, int, int]], *, write_id: int,
                bucket_id: int = 0) -> None:
    """`directory/bucket_N` holding delete events of `write_id` for (write id, bucket
    property, row id) keys."""
    table = pa.table({
        "originalTransaction": pa.array([k[0] for k in keys], pa.int64()),
        "bucket": pa.array([k[1] for k in keys], pa.int32()),
        "rowId": pa.array([k[2] for k in keys], pa.int64()),
    })
    write_deletes(f"{directory}/bucket_{bucket_id:05d}", table, write_id=write_id,
                  bucket_id=bucket_id)


def visible(location: str) -> list[dict]:
    """The rows of the table at `location` (metastore beside it) as of its current snapshot,
    sorted by id."""
    with Metastore.open(f"sqlite://{Path(location).parent}/{METASTORE_FILENAME}",
                        create=False) as store:
        current = store.snapshot(location)
    return sorted(read_table(location, current).to_pylist(), key=lambda r: r["id"])


def metastore_contents(path: Path | str) -> str:
    """A digest of a metastore's rows, leaving out registered readers: `ingest cat` takes a
    reader's lease there and removes it at the end (docs/invariants.md, 7), which changes the
    file's bytes but no table's state. Opened read-only; a file that is not a readable
    metastore digests as its bytes, so damage to it still shows."""
    import hashlib
    import sqlite3
    import urllib.parse

    try:
        conn = sqlite3.connect("file:" + urllib.parse.quote(str(path)) + "?mode=ro", uri=True)
        try:
            h = hashlib.sha256()
            names = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            for name in names:
                if name == "readers":
                    continue
                where = " WHERE name != 'readers'" if name == "sqlite_sequence" else ""
                h.update(name.encode() + b"\0")
                rows = conn.execute(f'SELECT * FROM "{name}"{where}').fetchall()
                for text in sorted(map(repr, rows)):
                    h.update(text.encode() + b"\n")
            return "rows:" + h.hexdigest()
        finally:
            conn.close()
    except sqlite3.Error:
        return "bytes:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()


def wait_until(what: str, condition: Callable[[], object], *, timeout_s: float = 180.0,
               interval_s: float = 0.05) -> None:
    """Poll `condition` until it is true; fail naming `what` after `timeout_s`. For a server's
    or a thread's background work: a busy CI machine may take long, so wait on the condition
    itself, never a fixed time. `condition` may raise to stop waiting early (a dead process)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout_s:g} s")
        time.sleep(interval_s)


def assert_each_offset_once(ids: list[int], ranges: Iterable[tuple[object, Any]],
                            produced: int) -> None:
    """The committed rows `ids` are the records of the committed offset ranges (`ranges` as
    `Metastore.offset_ranges` gives them), each once: no duplicate, nothing beyond the
    `produced` records, the ranges contiguous from offset 0 in each partition."""
    assert len(set(ids)) == len(ids) and set(ids) <= set(range(produced)), "no duplicates"
    covered = sorted((r.partition, r.from_offset, r.until_offset) for _, r in ranges)
    for p in {q for q, _, _ in covered}:
        mine = [(a, b) for q, a, b in covered if q == p]
        assert mine[0][0] == 0 and all(x[1] == y[0] for x, y in zip(mine, mine[1:],
                                                                    strict=False)), mine
    assert sum(b - a for _, a, b in covered) == len(ids), "each committed offset once"


def job_env() -> dict[str, str]:
    """The environment of an `ingest` job run as a process of its own: this checkout on the
    path, this interpreter for Spark's driver and workers, and neither the suite's
    PYSPARK_SUBMIT_ARGS (a job's session sets its own) nor an armed crash point."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYSPARK_SUBMIT_ARGS" and not k.startswith("INGEST_CRASH")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def kafka_rows(spark: Any, rows: list[tuple[str, int, int, bytes | None]]) -> Any:
    """A DataFrame shaped like the Kafka source's (key, value, topic, partition, offset) of
    rows (topic, partition, offset, value), in two partitions."""
    table = pa.table({
        "key": pa.array([None] * len(rows), pa.binary()),
        "value": pa.array([v for _, _, _, v in rows], pa.binary()),
        "topic": pa.array([t for t, _, _, _ in rows]),
        "partition": pa.array([p for _, p, _, _ in rows], pa.int32()),
        "offset": pa.array([o for _, _, o, _ in rows], pa.int64()),
    })
    return spark.createDataFrame(table).repartition(2)
