"""The pristine table of the fault-injection suite, built once per session, and the cases.

The table is built at collection (the cases' ids carry byte offsets of its files) through
the `ingest` CLI, except for what the CLI cannot make yet: a compacted base and a
transaction batch left open with its side file. Those come from `_write_base_and_open_batch`,
the one function here that uses `ingest` internals; adapt it when their APIs change.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from faults._cases import describe_files, generate_cases, smoke_ids
from faults._harness import RESULTS, KnownViolation, Pristine, ingest, rows_of, summary_lines
from faults._known import always_failing

SCHEMA = "id BIGINT, value STRING"
ROWS_PER_WRITE = 150


def row(i: int) -> dict[str, object]:
    return {"id": i, "value": f"v{i:05d}" + "-x" * (i % 5)}


def _write_base_and_open_batch(root: Path, compacted: dict[int, range],
                               batch: dict[int, list[range]]) -> tuple[str, str]:
    """What the CLI cannot make: a compacted base and an open transaction batch.

    Writes `base_<max write id>` holding the rows `compacted` gives per (committed) write id,
    with their original ROW__IDs and the compactor marker, records it in the committed-file
    manifest, then removes the deltas it replaces, as the cleaner would (and their manifest
    entries). Then opens len(batch) transactions at once (a Hive Streaming transaction
    batch) writing one `delta_W_{W+K-1}/bucket_00000`: each transaction appends its row
    ranges, flushing after each (side-file entries), and all but the last commit with the
    file's manifest entry; the last stays open with its flushed rows, its side file left
    behind.

    Returns:
        (base directory name, batch directory name).
    """
    import fsspec

    from ingest.acid import (
        BucketFileOptions,
        BucketWriter,
        format_base,
        format_delta,
        write_acid_version_file,
    )
    from ingest.acid.format.names import write_compacted_marker
    from ingest.txn import Metastore, default_metastore_url

    fs_root = str(root)
    fs = fsspec.filesystem("file")
    with Metastore.open(default_metastore_url(fs_root), create=False) as store:
        name = "default." + root.name
        # The compacted base: one file, write ids in order, row ids as the deltas had them.
        base = format_base(max(compacted))
        path = f"{fs_root}/{base}/bucket_00000"
        writer = None
        for write_id, ids in sorted(compacted.items()):
            rows = _arrow(ids)
            options = BucketFileOptions(write_id=write_id, row_schema=rows.schema,
                                        compression="zlib")
            writer = (BucketWriter.create(path, options) if writer is None
                      else BucketWriter.open_append(path, options))
            writer.write(rows)
            writer.flush()
            writer.abandon()
        # The final footer; the base is recorded in the manifest as compaction records its
        # outputs (docs/format.md §20).
        final = BucketWriter.open_append(path, BucketFileOptions(write_id=max(compacted)))
        final.close()
        store.record_committed_files(name, [final.committed_file(f"{base}/bucket_00000")])
        write_acid_version_file(fs, f"{fs_root}/{base}")
        write_compacted_marker(fs, f"{fs_root}/{base}")
        for write_id in compacted:
            shutil.rmtree(root / format_delta(write_id, write_id, 0))
        store.forget_committed_files(name, [f"{format_delta(w, w, 0)}/bucket_00000"
                                            for w in compacted])
        # The transaction batch.
        txns = store.allocate_write_ids(name, len(batch), agent="faults:transaction-batch")
        first, last = txns[0].write_id, txns[-1].write_id
        assert [t.write_id for t in txns] == sorted(batch), (txns, batch)
        directory = format_delta(first, last, None)
        path = f"{fs_root}/{directory}/bucket_00000"
        for txn in txns:
            for ids in batch[txn.write_id]:
                rows = _arrow(ids)
                options = BucketFileOptions(write_id=txn.write_id, row_schema=rows.schema,
                                            compression="zlib")
                writer = (BucketWriter.open_append(path, options) if Path(path).exists()
                          else BucketWriter.create(path, options))
                writer.write(rows)
                writer.flush()
                writer.abandon()
            if txn is not txns[-1]:
                # Each commit records the file at its flush length, as the sink does.
                store.commit(txn, files={name: [writer.committed_file(
                    f"{directory}/bucket_00000")]})
        write_acid_version_file(fs, f"{fs_root}/{directory}")
    return base, directory


def _arrow(ids: range) -> object:
    import pyarrow as pa

    return pa.table({"id": pa.array(list(ids), pa.int64()),
                     "value": pa.array([row(i)["value"] for i in ids], pa.string())})


def build_pristine(work: Path) -> Pristine:
    """The table every case starts from, under `work/events` with its metastore in `work`:
    a compacted base (write ids 1-2), two committed deltas (3, 4), a transaction batch
    delta_5_7 (5 and 6 committed, 7 open, side file) and a delete delta (8)."""
    root = work / "events"
    work.mkdir(parents=True)
    inputs = work.parent / (work.name + ".inputs")
    inputs.mkdir()
    n = ROWS_PER_WRITE

    def check(*args: str) -> str:
        run = ingest(*args)
        assert run.code == 0, run
        return run.out

    check("create", str(root), "--schema", SCHEMA)
    for k in range(4):
        src = inputs / f"load{k}.jsonl"
        src.write_text("".join(json.dumps(row(i)) + "\n" for i in range(k * n, (k + 1) * n)))
        check("load", str(root), "--input", str(src), "-q")
    base, batch = _write_base_and_open_batch(
        root, compacted={1: range(0, n), 2: range(n, 2 * n)},
        batch={5: [range(4 * n, 4 * n + 50), range(4 * n + 50, 4 * n + 100)],
               6: [range(4 * n + 100, 4 * n + 150)],
               7: [range(4 * n + 150, 4 * n + 200)]})
    check("delete", str(root), "--where",
          f"id BETWEEN 100 AND 119 OR id BETWEEN {2 * n + 20} AND {2 * n + 29} "
          f"OR id BETWEEN {4 * n + 40} AND {4 * n + 59} OR id BETWEEN {4 * n + 100} AND "
          f"{4 * n + 104}", "-q")
    shutil.rmtree(inputs)
    roles = {base: "base", batch: "open-batch"}
    for d in root.iterdir():
        if d.name.startswith("delete_delta_"):
            roles[d.name] = "delete-delta"
        elif d.name.startswith("delta_") and d.name != batch:
            roles[d.name] = "delta"
    cat = ingest("cat", str(root), "--row-id", "--json")
    assert cat.code == 0, cat
    snapshot = work.parent / (work.name + ".pristine")
    shutil.copytree(work, snapshot)
    return Pristine(work, snapshot, describe_files(root, roles), tuple(rows_of(cat)))


_KEY = pytest.StashKey[Pristine]()


def _fast_tmp() -> str | None:
    """A tmpfs when there is one: recover and the metastore fsync, and on a disk the
    thousands of cases would wait on it (measured: 212 s on disk for 80 s of CPU)."""
    for d in (os.environ.get("INGEST_FAULT_TMP"), "/dev/shm"):
        if d and os.path.isdir(d) and os.access(d, os.W_OK):
            return d
    return None


def pristine_table(config: pytest.Config) -> Pristine:
    """Built once per session (first at collection), removed when the session ends."""
    if _KEY not in config.stash:
        tmp = Path(tempfile.mkdtemp(prefix="ingest-faults-", dir=_fast_tmp()))
        config.add_cleanup(lambda: shutil.rmtree(tmp, ignore_errors=True))
        with pytest.MonkeyPatch.context() as mp:
            for var in ("INGEST_METASTORE", "INGEST_CRASH_AT"):
                mp.delenv(var, raising=False)
            mp.setenv("INGEST_HOME", str(tmp / "ingest-home"))
            config.stash[_KEY] = build_pristine(tmp / "work")
    return config.stash[_KEY]


@pytest.fixture(scope="session")
def pristine(request: pytest.FixtureRequest) -> Pristine:
    return pristine_table(request.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize `case` with every fault: a seeded sample runs in the dev loop, the rest
    is marked slow; whole classes known to fail today get xfail(strict=True) from
    `faults._known` only (and only for a violation it explains: `KnownViolation`)."""
    if "case" not in metafunc.fixturenames:
        return
    cases = generate_cases(pristine_table(metafunc.config).files)
    smoke = smoke_ids(cases)
    params = []
    for c in cases:
        marks: list[pytest.MarkDecorator] = [] if c.id in smoke else [pytest.mark.slow]
        known = always_failing(c)
        if known is not None:
            marks.append(pytest.mark.xfail(strict=True, raises=KnownViolation, reason=known))
        params.append(pytest.param(c, id=c.id, marks=marks))
    metafunc.parametrize("case", params)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Verdicts of the fault cases that ran, and the known causes they hit; with
    INGEST_FAULT_REPORT=FILE, one JSON line per case there too."""
    if not RESULTS:
        return
    for line in summary_lines(RESULTS):
        terminalreporter.write_line(line)
    target = os.environ.get("INGEST_FAULT_REPORT")
    if target:
        with open(target, "w") as f:
            for case_id, verdict, violations, causes, seconds in RESULTS:
                f.write(json.dumps({"case": case_id, "verdict": verdict, "violations": violations,
                                    "known_causes": causes, "seconds": round(seconds, 4)}) + "\n")


if __name__ == "__main__":
    # Build the pristine table for reproducing a case by hand:
    #   PYTHONPATH=$PWD:$PWD/tests python tests/faults/conftest.py /tmp/repro
    # makes /tmp/repro/work/events (and its metastore in /tmp/repro/work); a failing case's
    # message gives the commands that damage it.
    import sys

    built = build_pristine(Path(sys.argv[1]) / "work")
    shutil.rmtree(built.snapshot)
    print(f"{built.root}: {len(built.expected)} committed rows; files:")
    for f in built.files:
        print(f"  {f.rel} ({f.role}, {f.size:,} bytes, side file {f.flush_lengths})")
