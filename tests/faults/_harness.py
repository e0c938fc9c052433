"""The fault-injection harness: a case applied to a fresh copy of the pristine table, then
`cat`, `verify`, `recover`, `verify`, `cat` judged by docs/invariants.md, 7: the committed
rows come back exactly, or a command exits non-zero naming the damaged file. Drives the
`ingest` CLI in-process; imports no `ingest` internals (conftest.py builds the table)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import warnings
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

from faults._cases import BucketFile, Case, apply
from support import metastore_contents

from ingest.cli import main as cli_main

# Verify's time-out for open transactions: large, so that a heartbeat that ages while the
# suite runs never turns into a problem (recover uses 0 and aborts the open transaction).
VERIFY_TIMEOUT = "1e9"


# ---------------------------------------------------------------------------------- running
class KnownViolation(AssertionError):
    """A case broke a rule in a way `faults._known` explains (an expected failure)."""


# (case id, verdict, violations, known causes, seconds) of every case run this session.
RESULTS: list[tuple[str, str, list[str], list[str], float]] = []


def summary_lines(results: list[tuple[str, str, list[str], list[str], float]]) -> list[str]:
    """The fault run in a few lines: verdicts, time, and cases per known cause."""
    from collections import Counter

    verdicts = Counter(r[1] for r in results)
    causes = Counter(c for r in results for c in r[3])
    seconds = sum(r[4] for r in results)
    lines = [f"fault injection: {len(results)} cases in {seconds:.1f} s "
             f"({1000 * seconds / len(results):.0f} ms each): "
             + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))]
    lines += [f"  known cause {k}: {v} cases" for k, v in sorted(causes.items())]
    return lines


@dataclass(frozen=True)
class Run:
    """One `ingest` command: its exit code and what it printed."""

    args: tuple[str, ...]
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def ingest(*args: str) -> Run:
    """Run `ingest ARGS` in-process through its real entry point, as a user's shell would.

    Warnings are shown (on the captured stderr), as the console script shows them, instead
    of being raised by pytest's `filterwarnings = error`.
    """
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(), redirect_stdout(out), redirect_stderr(err):
        warnings.simplefilter("always")
        try:
            cli_main.main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return Run(tuple(args), code, out.getvalue(), err.getvalue())


def rows_of(run: Run) -> list[str]:
    """`cat` output as sorted canonical JSON rows (a multiset: duplicates stay)."""
    return sorted(json.dumps(json.loads(line), sort_keys=True)
                  for line in run.out.splitlines() if line.strip())


# ---------------------------------------------------------------------------------- table
@dataclass(frozen=True)
class Pristine:
    """The table every case starts from, and what `cat --row-id` returns on it.

    Attributes:
        work: the directory holding the table (`work/events`) and its metastore; each case
            restores `work` from `snapshot` first, so absolute paths stay the same.
        snapshot: a copy of `work` as built.
        files: every bucket file.
        expected: the committed rows, as `rows_of` gives them.
    """

    work: Path
    snapshot: Path
    files: tuple[BucketFile, ...]
    expected: tuple[str, ...]

    @property
    def root(self) -> Path:
        return self.work / "events"

    def restore(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        shutil.copytree(self.snapshot, self.work)

# ---------------------------------------------------------------------------------- outcome
def tree_bytes(work: Path) -> dict[str, bytes]:
    """Every file's bytes, except SQLite's lock index (`-shm`) and an empty write-ahead log: a
    read-only connection may leave those, they hold no data, and the next writer removes them."""
    return {p.relative_to(work).as_posix(): p.read_bytes()
            for p in sorted(work.rglob("*")) if p.is_file() and not _sqlite_transient(p)}


def _sqlite_transient(path: Path) -> bool:
    return path.name.endswith("-shm") or (path.name.endswith("-wal")
                                          and path.stat().st_size == 0)


def tree_digest(work: Path) -> str:
    """Every file's bytes, but a metastore's rows: `ingest cat` registers its snapshot there
    while it reads and removes the registration at the end (docs/invariants.md, 7)."""
    h = hashlib.sha256()
    for rel, data in tree_bytes(work).items():
        content = (metastore_contents(work / rel).encode() if rel.endswith(".sqlite")
                   else hashlib.sha256(data).digest())
        h.update(rel.encode() + b"\0" + content)
    return h.hexdigest()


@dataclass
class Outcome:
    """What the five commands did, and every rule they broke (empty: the case is fine)."""

    runs: dict[str, Run]
    exact: bool
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.violations:
            return "VIOLATION"
        return "OK-exact" if self.exact else "OK-failed-loudly"

    def describe(self) -> str:
        lines = [f"{self.verdict}: {', '.join(self.violations) or '-'}"]
        for name, run in self.runs.items():
            text = run.text.strip().replace("\n", " | ")
            lines.append(f"  {name}: exit {run.code}: {text[:400]}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _names(run: Run, damaged: str) -> bool:
    """Whether a failed command named the damaged file (or its side file)."""
    if run.code == 0:
        return False
    if run.args[0] == "recover":
        try:
            doc = json.loads(run.out)
        except json.JSONDecodeError:
            return damaged in run.err
        return any(f["path"].endswith("/" + damaged) and f["action"] == "unrecoverable"
                   for f in doc.get("files", [])) or damaged in run.err
    return damaged in run.text


def _backed_up(work: Path, backup: Path, before: dict[str, bytes]) -> list[str]:
    """Files whose removed bytes are in no backup file: (rel, old, new) descriptions."""
    after = tree_bytes(work)
    blobs = {p.read_bytes() for p in backup.rglob("*") if p.is_file()} if backup.exists() else set()
    missing = []
    for rel, old in before.items():
        if rel.endswith(".sqlite"):
            continue  # the metastore: recover aborts transactions in it by design
        new = after.get(rel)
        if new == old or (new is not None and new.startswith(old)):
            continue  # unchanged, or only grew
        if new is not None and old.startswith(new):
            if old[len(new):] in blobs or old in blobs:
                continue
        elif old in blobs:
            continue
        missing.append(f"{rel} {len(old)} -> {'removed' if new is None else len(new)} bytes")
    return missing


def run_case(pristine: Pristine, case: Case) -> Outcome:
    """Restore the table, apply the fault, run cat, verify, recover, verify, cat; judge."""
    pristine.restore()
    root = pristine.root
    apply(case, root)
    backup = pristine.work.parent / (pristine.work.name + ".backup")
    shutil.rmtree(backup, ignore_errors=True)
    t = str(root)
    expected = list(pristine.expected)
    damaged = case.damaged

    digest = tree_digest(pristine.work)
    cat0 = ingest("cat", t, "--row-id", "--json")
    verify1 = ingest("verify", t, "--json", "--txn-timeout-s", VERIFY_TIMEOUT)
    readonly_wrote = tree_digest(pristine.work) != digest
    before = tree_bytes(pristine.work)
    recover = ingest("recover", t, "--json", "--txn-timeout-s", "0", "--backup-dir", str(backup))
    unbacked = _backed_up(pristine.work, backup, before)
    digest = tree_digest(pristine.work)
    verify2 = ingest("verify", t, "--json", "--txn-timeout-s", VERIFY_TIMEOUT)
    cat1 = ingest("cat", t, "--row-id", "--json")
    readonly_wrote = readonly_wrote or tree_digest(pristine.work) != digest
    runs = {"cat": cat0, "verify": verify1, "recover": recover, "verify2": verify2, "cat2": cat1}

    exact0 = cat0.code == 0 and rows_of(cat0) == expected
    exact1 = cat1.code == 0 and rows_of(cat1) == expected
    out = Outcome(runs, exact=exact1)
    v = out.violations
    for name, cat in (("cat", cat0), ("cat2", cat1)):
        if cat.code == 0 and rows_of(cat) != expected:
            got = set(rows_of(cat))
            lost, added = len(set(expected) - got), len(got - set(expected))
            v.append(f"{'cat' if name == 'cat' else 'cat-after-recover'}-exit-0-wrong-rows")
            out.notes.append(f"{name}: {len(rows_of(cat))} rows, {lost} expected rows missing "
                             f"or changed, {added} unexpected")
    if verify1.code == 0 and not exact0:
        v.append("verify-exit-0-on-damaged-table")
    if readonly_wrote:
        v.append("read-only-command-wrote")
    if recover.code == 0 and not exact1:
        v.append("recover-exit-0-table-not-exact")
    elif verify2.code == 0 and not exact1:
        v.append("verify-after-recover-exit-0-table-not-exact")
    if exact0 and not exact1:
        v.append("recover-lowered-readable-rows")
    if unbacked:
        v.append("recover-removed-bytes-without-backup")
        out.notes.append("not in the backup: " + "; ".join(unbacked))
    if not out.exact and not any(_names(r, damaged) for r in runs.values()):
        v.append("failed-without-naming-the-file")
    return out
