"""The fault-injection harness: cases as data, faults applied to a copy of a pristine table,
and the outcome of `cat`, `verify`, `recover`, `verify`, `cat` classified against the rule of
docs/invariants.md, 7: the committed rows come back exactly, or a command exits non-zero
naming the damaged file. Everything here drives the `ingest` CLI in-process; nothing imports
`ingest` internals (the table itself is built in conftest.py)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import shutil
import struct
import warnings
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

from ingest.cli import main as cli_main

DEFAULT_SEED = 20261124
SEED = int(os.environ.get("INGEST_FAULT_SEED", str(DEFAULT_SEED)))
# Single-byte flips per file; truncation points and side-file cases scale with it. The
# default is the size issue 11 asks for (>= 200 flips, >= 20 truncations per file).
FLIPS_PER_FILE = max(200, int(os.environ.get("INGEST_FAULT_CASES", "200")))
TRUNCATIONS_PER_FILE = max(24, FLIPS_PER_FILE // 8)
# How many cases run in the dev loop (unmarked); the rest carry the `slow` marker.
SMOKE_CASES = 60
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


# ---------------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class Region:
    """A byte range [start, end) of a bucket file and what it holds."""

    kind: str  # magic, stripes, metadata, footer, postscript
    start: int
    end: int


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def _postscript_lengths(ps: bytes) -> tuple[int, int]:
    """(footerLength, metadataLength) from an ORC PostScript; a tiny protobuf walk, enough
    for the fields ORC puts there (varints, packed ints and the magic string)."""
    footer = metadata = 0
    pos = 0
    while pos < len(ps):
        key, pos = _varint(ps, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(ps, pos)
            if number == 1:
                footer = value
            elif number == 5:
                metadata = value
        elif wire == 2:
            size, pos = _varint(ps, pos)
            pos += size
        else:
            raise ValueError(f"unexpected wire type {wire} in a postscript")
    return footer, metadata


def orc_regions(data: bytes, ends: list[int]) -> list[Region]:
    """The regions of a bucket file with a complete tail ending at each of `ends`
    (its flush lengths, or just its size): stripes, metadata, footer, postscript."""
    regions = [Region("magic", 0, 3)]
    start = 3
    for end in sorted(set(e for e in ends if e > 3)):
        ps_len = data[end - 1]
        ps_start = end - 1 - ps_len
        footer_len, metadata_len = _postscript_lengths(data[ps_start:end - 1])
        footer_start = ps_start - footer_len
        metadata_start = footer_start - metadata_len
        regions += [Region("stripes", start, metadata_start),
                    Region("metadata", metadata_start, footer_start),
                    Region("footer", footer_start, ps_start),
                    Region("postscript", ps_start, end)]
        start = end
    return [r for r in regions if r.end > r.start]


# ---------------------------------------------------------------------------------- tables
@dataclass(frozen=True)
class BucketFile:
    """One bucket file of the pristine table."""

    rel: str  # path relative to the table root, e.g. delta_0000003_0000003_0000/bucket_00000
    role: str  # base, delta, delete-delta, open-batch
    size: int
    flush_lengths: tuple[int, ...] | None  # the side file's entries, None without one
    regions: tuple[Region, ...]

    @property
    def side(self) -> str:
        return self.rel + "_flush_length"


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


def describe_files(root: Path, roles: dict[str, str]) -> tuple[BucketFile, ...]:
    """Every bucket file under `root` with its side-file entries and ORC regions."""
    out = []
    for path in sorted(root.rglob("bucket_*")):
        if path.name.endswith("_flush_length"):
            continue
        rel = path.relative_to(root).as_posix()
        data = path.read_bytes()
        side = Path(str(path) + "_flush_length")
        lengths = None
        if side.exists():
            raw = side.read_bytes()
            lengths = tuple(v for (v,) in struct.iter_unpack(">q", raw[:len(raw) // 8 * 8]))
        ends = [x for x in (lengths or ()) if x > 0] or [len(data)]
        role = roles[rel.split("/")[0]]
        out.append(BucketFile(rel, role, len(data), lengths, tuple(orc_regions(data, ends))))
    return tuple(out)


# ---------------------------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    """One fault: what is damaged and how. `id` is the pytest id, e.g.
    `delta_0000003_0000003_0000/bucket_00000:flip@1012^0x5a[stripes]`."""

    target: str  # relative path of the bucket file (side-file faults name their bucket file)
    role: str
    kind: str  # truncate, flip, append, side-*, table-*
    offset: int = 0
    value: int = 0
    data: bytes = b""
    region: str = ""

    @property
    def id(self) -> str:
        if self.kind == "truncate":
            detail = f"@{self.offset}[{self.region}]"
        elif self.kind == "flip":
            detail = f"@{self.offset}^{self.value:#04x}[{self.region}]"
        elif self.kind == "side-flip":
            detail = f"@{self.offset}^{self.value:#04x}"
        elif self.kind == "side-truncate":
            detail = f"@{self.offset}"
        elif self.kind in ("side-write", "side-append", "append"):
            detail = f"={self.data.hex()}" if len(self.data) <= 16 else \
                f"={len(self.data)}B:{hashlib.sha1(self.data).hexdigest()[:8]}"
        else:
            detail = ""
        return f"{self.target}:{self.kind}{detail}"

    @property
    def damaged(self) -> str:
        """The file a loud failure has to name (a side file's bucket file counts)."""
        return self.target


def region_of(f: BucketFile, offset: int) -> str:
    for r in f.regions:
        if r.start <= offset < r.end:
            return r.kind
    return "past-end"


def _pick(rng: random.Random, pool: list[int], count: int) -> list[int]:
    """`count` offsets of `pool`: distinct while it has room, then repeats (other masks)."""
    if count <= len(pool):
        return rng.sample(pool, count)
    return pool + rng.choices(pool, k=count - len(pool))


def bucket_cases(f: BucketFile, rng: random.Random) -> list[Case]:
    """Truncations and single-byte flips of one bucket file, plus appended garbage."""
    cases: list[Case] = []
    # Truncation: every region boundary and its neighbours, then random points.
    points = {0, 1, 3, 4, f.size - 1, f.size - 2}
    for r in f.regions:
        points |= {r.start, r.start + 1, r.end - 1}
    points = {p for p in points if 0 <= p < f.size}
    while len(points) < TRUNCATIONS_PER_FILE:
        points.add(rng.randrange(f.size))
    cases += [Case(f.rel, f.role, "truncate", offset=p, region=region_of(f, p))
              for p in sorted(points)]
    # Flips: about 40 % in stripe data, 35 % in metadata + footer, 25 % in postscripts (tails),
    # at distinct offsets where a region has room, each XORed with a random non-zero byte.
    by_kind: dict[str, list[int]] = {}
    for r in f.regions:
        by_kind.setdefault("tail" if r.kind in ("postscript", "magic") else
                           "footer" if r.kind in ("footer", "metadata") else "stripes",
                           []).extend(range(r.start, r.end))
    quota = {"stripes": 0.40, "footer": 0.35, "tail": 0.25}
    seen: set[tuple[int, int]] = set()
    for kind, share in quota.items():
        pool = by_kind.get(kind, [])
        for offset in _pick(rng, pool, round(FLIPS_PER_FILE * share)) if pool else []:
            mask = rng.randrange(1, 256)
            while (offset, mask) in seen:
                mask = rng.randrange(1, 256)
            seen.add((offset, mask))
            cases.append(Case(f.rel, f.role, "flip", offset=offset, value=mask,
                              region=region_of(f, offset)))
    # A torn write after the file was closed: bytes past the last footer.
    cases += [Case(f.rel, f.role, "append", data=rng.randbytes(n)) for n in (1, 17, 300)]
    return cases


def side_cases(f: BucketFile, rng: random.Random) -> list[Case]:
    """Faults of a side file: short, flipped, long, garbage and missing; for a bucket file
    without one, a stray side file appearing beside it."""
    enc = lambda *xs: b"".join(struct.pack(">q", x) for x in xs)  # noqa: E731
    mid_stripe = next(r for r in f.regions if r.kind == "stripes")
    mid = (mid_stripe.start + mid_stripe.end) // 2
    if f.flush_lengths is None:
        return [Case(f.rel, f.role, "side-write", data=d) for d in (
            enc(0), enc(f.size), enc(mid), enc(f.size + 100), enc(0, f.size), rng.randbytes(8),
            b"\x00\x00\x00")]
    side = enc(*f.flush_lengths)
    cases: list[Case] = []
    # Short: every length below the full one.
    cases += [Case(f.rel, f.role, "side-truncate", offset=n) for n in range(len(side))]
    # Single-byte flips: every position, random masks, FLIPS_PER_FILE distinct pairs.
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < min(FLIPS_PER_FILE, len(side) * 255):
        pairs.add((rng.randrange(len(side)), rng.randrange(1, 256)))
    cases += [Case(f.rel, f.role, "side-flip", offset=o, value=m) for o, m in sorted(pairs)]
    # Long: entries past the end, inside a stripe, backwards, repeated, torn, zero, huge.
    last = f.flush_lengths[-1]
    for extra in (enc(f.size + 1), enc(f.size + 1_000_000), enc(mid), enc(last),
                  enc(f.flush_lengths[1] if len(f.flush_lengths) > 1 else 3), enc(0),
                  enc(2**63 - 1), enc(-1), b"\x00\x00\x00", enc(last - 1)):
        cases.append(Case(f.rel, f.role, "side-append", data=extra))
    # Garbage, same length and other lengths, and well-formed entries that lie.
    for d in (rng.randbytes(len(side)), rng.randbytes(7), rng.randbytes(64), b"\xff" * len(side),
              b"\x00" * len(side), enc(0, mid), enc(0, f.size + 8), b""):
        cases.append(Case(f.rel, f.role, "side-write", data=d))
    cases.append(Case(f.rel, f.role, "side-missing"))
    return cases


def table_cases() -> list[Case]:
    """Damage outside bucket files that issue 11, item 4 names: an emptied metastore and a
    stray directory that looks like a delta."""
    return [Case("_ingest_metastore.sqlite", "metastore", "table-empty-metastore"),
            Case("delta_abc_def", "directory", "table-stray-directory")]


def generate_cases(files: tuple[BucketFile, ...], seed: int = SEED) -> list[Case]:
    """Every case, in a stable order, from one seeded generator per file."""
    cases: list[Case] = []
    for i, f in enumerate(files):
        rng = random.Random(f"{seed}:{i}:{f.rel}")
        cases += bucket_cases(f, rng)
        cases += side_cases(f, rng)
    cases += table_cases()
    # Two faults with one id (e.g. the same garbage twice) would be one test: keep the first.
    first: dict[str, Case] = {}
    for c in cases:
        first.setdefault(c.id, c)
    return list(first.values())


def smoke_ids(cases: list[Case], seed: int = SEED) -> set[str]:
    """The dev-loop sample: a few cases of every (role, kind), chosen by the seed."""
    rng = random.Random(f"{seed}:smoke")
    groups: dict[tuple[str, str], list[Case]] = {}
    for c in cases:
        groups.setdefault((c.role, c.kind), []).append(c)
    per = max(1, SMOKE_CASES // max(1, len(groups)))
    return {c.id for g in groups.values() for c in rng.sample(g, min(per, len(g)))}


# ---------------------------------------------------------------------------------- faults
def apply(case: Case, root: Path) -> None:
    """Damage the restored table at `root` as `case` says."""
    path = root / case.target
    side = Path(str(path) + "_flush_length")
    if case.kind == "truncate":
        os.truncate(path, case.offset)
    elif case.kind == "flip":
        with open(path, "r+b") as f:
            f.seek(case.offset)
            b = f.read(1)[0]
            f.seek(case.offset)
            f.write(bytes([b ^ case.value]))
    elif case.kind == "append":
        with open(path, "ab") as f:
            f.write(case.data)
    elif case.kind == "side-truncate":
        os.truncate(side, case.offset)
    elif case.kind == "side-flip":
        with open(side, "r+b") as f:
            f.seek(case.offset)
            b = f.read(1)[0]
            f.seek(case.offset)
            f.write(bytes([b ^ case.value]))
    elif case.kind == "side-append":
        with open(side, "ab") as f:
            f.write(case.data)
    elif case.kind == "side-write":
        side.write_bytes(case.data)
    elif case.kind == "side-missing":
        side.unlink()
    elif case.kind == "table-empty-metastore":
        (root.parent / case.target).write_bytes(b"")
    elif case.kind == "table-stray-directory":
        (root / case.target).mkdir()
    elif case.kind != "none":
        raise ValueError(f"unknown fault kind {case.kind}")


def shell_commands(case: Case, root: str = "$T") -> list[str]:
    """The fault as shell commands on a table at `root` (for reproductions)."""
    p = f"{root}/{case.target}"
    s = f"{p}_flush_length"
    py = "python3 -c"
    if case.kind == "truncate":
        return [f"truncate -s {case.offset} {p}"]
    if case.kind in ("flip", "side-flip"):
        f = p if case.kind == "flip" else s
        return [f"{py} \"import sys;f=open('{f}','r+b');f.seek({case.offset});b=f.read(1)[0];"
                f"f.seek({case.offset});f.write(bytes([b^{case.value}]))\""]
    if case.kind == "append":
        return [f"{py} \"open('{p}','ab').write(bytes.fromhex('{case.data.hex()}'))\""]
    if case.kind == "side-truncate":
        return [f"truncate -s {case.offset} {s}"]
    if case.kind == "side-append":
        return [f"{py} \"open('{s}','ab').write(bytes.fromhex('{case.data.hex()}'))\""]
    if case.kind == "side-write":
        return [f"{py} \"open('{s}','wb').write(bytes.fromhex('{case.data.hex()}'))\""]
    if case.kind == "side-missing":
        return [f"rm {s}"]
    if case.kind == "table-empty-metastore":
        return [f": > {root}/../{case.target}"]
    if case.kind == "table-stray-directory":
        return [f"mkdir {p}"]
    raise ValueError(case.kind)


def repro_script(case: Case) -> str:
    """Shell lines that rebuild the pristine table, apply `case` and run the five commands."""
    return "\n".join([
        "export PYTHONPATH=$PWD:$PWD/tests  # in the repository root",
        "rm -rf /tmp/repro && python tests/faults/conftest.py /tmp/repro",
        "T=/tmp/repro/work/events",
        *shell_commands(case),
        "ingest cat $T --row-id | wc -l; ingest verify $T",
        "ingest recover $T --txn-timeout-s 0 --backup-dir /tmp/repro/backup",
        "ingest verify $T; ingest cat $T --row-id | wc -l",
    ])


# ---------------------------------------------------------------------------------- outcome
def tree_bytes(work: Path) -> dict[str, bytes]:
    return {p.relative_to(work).as_posix(): p.read_bytes()
            for p in sorted(work.rglob("*")) if p.is_file()}


def tree_digest(work: Path) -> str:
    h = hashlib.sha256()
    for rel, data in tree_bytes(work).items():
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
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
