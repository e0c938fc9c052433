"""Fault cases as data: where the regions of an ORC bucket file lie, which truncations, byte
flips and side-file faults a seeded generator picks for each file, how each is applied, and
the shell lines that reproduce it. Reads files only; imports nothing from `ingest`."""

from __future__ import annotations

import hashlib
import os
import random
import struct
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SEED = 20261124
SEED = int(os.environ.get("INGEST_FAULT_SEED", str(DEFAULT_SEED)))
# Single-byte flips per file; truncation points and side-file cases scale with it. The
# default is the acceptance size (>= 200 flips, >= 20 truncations per file).
FLIPS_PER_FILE = max(200, int(os.environ.get("INGEST_FAULT_CASES", "200")))
TRUNCATIONS_PER_FILE = max(24, FLIPS_PER_FILE // 8)
# How many cases run in the dev loop (unmarked); the rest carry the `slow` marker.
SMOKE_CASES = 60


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


# ---------------------------------------------------------------------------------- files
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
    """Damage outside bucket files that verify must also see: an emptied metastore and a
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
