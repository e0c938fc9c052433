"""Issue 11 item 6 as written: a flipped byte in a committed file's stripe data made `cat`
print garbled values with exit 0 and `verify` see nothing. Now `cat` fails naming the file
and `verify` exits 1 with a checksum-mismatch naming the stripe and its write ids."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest
from support import SIMPLE_SCHEMA
from support import run_cli as run

from ingest.acid import BucketFileOptions, BucketWriter
from ingest.acid.format.names import format_delta
from ingest.orc import read_tail
from ingest.txn import Metastore, OffsetRange


def commit(store: Metastore, root: Path, ids: range) -> Path:
    with store.transaction("default.events",
                           offsets=[OffsetRange("t", 0, ids.start, ids.stop)]) as txn:
        path = root / format_delta(txn.write_id, txn.write_id, 0) / "bucket_00000"
        rows = pa.table({"id": pa.array(list(ids), pa.int64()),
                         "value": [f"value number {i * 7919 % 100_003}" for i in ids]},
                        schema=SIMPLE_SCHEMA)
        with BucketWriter.create(str(path), BucketFileOptions(write_id=txn.write_id,
                                                              row_schema=SIMPLE_SCHEMA)) as w:
            w.write(rows)
    return path


def test_flipped_stripe_byte_fails_cat_and_verify(store: Metastore, root: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    commit(store, root, range(0, 2000))
    path = commit(store, root, range(2000, 4000))
    code, clean, err = run(["cat", str(root)], capsys)
    assert code == 0, err
    (stripe,) = read_tail(fsspec.filesystem("file"), str(path), path.stat().st_size).stripes
    assert stripe.offset + stripe.index_length <= 3000 < stripe.end  # stripe data
    data = bytearray(path.read_bytes())
    data[3000] ^= 0x01
    path.write_bytes(bytes(data))

    code, out, err = run(["cat", str(root)], capsys)
    assert code == 3
    # cat streams: rows of the intact file may come out first, none of the damaged one's.
    assert clean.startswith(out) and all(json.loads(line)["id"] < 2000
                                         for line in out.splitlines())
    assert str(path) in err and "stripe 0" in err and "holding write ids 2..2" in err

    code, out, err = run(["verify", str(root), "--json"], capsys)
    assert code == 1
    (problem,) = json.loads(out)["problems"]
    assert problem["kind"] == "checksum-mismatch"
    assert problem["path"] == str(path) and problem["write_id"] == 2
    assert (f"stripe 0 (bytes {stripe.offset:,}..{stripe.end:,}, holding write ids 2..2)"
            in problem["message"])
    code, out, err = run(["verify", str(root)], capsys)
    assert code == 1 and "checksum-mismatch" in out and str(path) in out

    data[3000] ^= 0x01  # restored: reads exactly as before
    path.write_bytes(bytes(data))
    assert run(["cat", str(root)], capsys)[:2] == (0, clean)
    assert run(["verify", str(root)], capsys)[0] == 0
