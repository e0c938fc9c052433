"""Fault injection (the acceptance suite, docs/invariants.md, 5 and 7): every bucket
file and side file of a table with a compacted base, committed deltas, a delete delta and an
open transaction batch is truncated, flipped byte by byte, extended, and its side file cut,
lengthened, garbled or removed; then `cat`, `verify`, `recover`, `verify`, `cat` run. Each
case must end with the committed rows back exactly, or a command exiting non-zero naming
the damaged file; never exit 0 with a row missing, changed or added, never a recovery that
loses readable rows or removes bytes it did not back up.

Cases are seeded (INGEST_FAULT_SEED) and listed as data: each id names the file, the fault
and its offset. The dev loop runs a sample; `-m slow` runs the rest (INGEST_FAULT_CASES
raises the flips per file above 200). A failing case's message holds the shell lines that
reproduce it (`repro_script`); `python tests/faults/conftest.py DIR` builds the table.
"""

from __future__ import annotations

import time

import pytest
from faults._cases import (
    DEFAULT_SEED,
    FLIPS_PER_FILE,
    SEED,
    TRUNCATIONS_PER_FILE,
    Case,
    generate_cases,
    repro_script,
)
from faults._harness import RESULTS, KnownViolation, Pristine, run_case
from faults._known import explain, explaining_rules, known_classes


def test_pristine_table_reads_exactly_through_every_command(pristine: Pristine) -> None:
    """The control case: no fault, every command exits 0 and the rows are exact (recover
    only aborts the batch's open transaction and drops its side file)."""
    outcome = run_case(pristine, Case("-", "control", "none"))
    assert outcome.verdict == "OK-exact", outcome.describe()
    assert all(r.code == 0 for r in outcome.runs.values()), outcome.describe()
    roles = sorted({f.role for f in pristine.files})
    assert roles == ["base", "delete-delta", "delta", "open-batch"], roles
    (batch,) = [f for f in pristine.files if f.role == "open-batch"]
    assert batch.flush_lengths is not None and len(batch.flush_lengths) >= 4


def test_cases_cover_every_file_at_the_required_size(pristine: Pristine) -> None:
    """>= 20 truncations and >= 200 flips per bucket file (tail, footer and stripe data
    each hit), >= 20 truncations and >= 200 flips of the side file, and every side-file
    fault kind; the same seed gives the same cases."""
    cases = generate_cases(pristine.files)
    assert [c.id for c in cases] == [c.id for c in generate_cases(pristine.files)]
    assert len({c.id for c in cases}) == len(cases)
    for f in pristine.files:
        mine = [c for c in cases if c.target == f.rel]
        kinds = {c.kind for c in mine}
        assert sum(c.kind == "truncate" for c in mine) >= min(20, TRUNCATIONS_PER_FILE)
        flips = [c for c in mine if c.kind == "flip"]
        assert len(flips) >= FLIPS_PER_FILE >= 200, f.rel
        assert {c.region for c in flips} >= {"stripes", "footer", "postscript"}, f.rel
        if f.flush_lengths is not None:
            assert sum(c.kind == "side-truncate" for c in mine) >= 20
            assert sum(c.kind == "side-flip" for c in mine) >= 200
            assert kinds >= {"side-append", "side-write", "side-missing"}
        else:
            assert "side-write" in kinds


def test_fault(pristine: Pristine, case: Case, request: pytest.FixtureRequest) -> None:
    """One fault: no violation, or only violations faults/_known.py explains (xfail)."""
    start = time.monotonic()
    outcome = run_case(pristine, case)
    seconds = time.monotonic() - start
    reasons = explain(case, outcome.violations)
    RESULTS.append((case.id, outcome.verdict, outcome.violations,
                    explaining_rules(case, outcome.violations), seconds))
    if not outcome.violations:
        return
    unknown = [v for v in outcome.violations if v not in reasons]
    message = (f"{case.id} ({seconds:.2f} s): {outcome.describe()}\nreproduce:\n  "
               + repro_script(case).replace("\n", "\n  "))
    if unknown:
        pytest.fail(f"new violation {unknown}\n{message}")
    if request.node.get_closest_marker("xfail") is not None:
        raise KnownViolation(message)  # the class's strict xfail (faults/_known.py)
    pytest.xfail("known: " + "; ".join(sorted(set(reasons.values()))))


@pytest.mark.slow
def test_every_known_failure_class_still_occurs(pristine: Pristine) -> None:
    """Strictness for the rules in faults/_known.py: once a fix removes a cause, this fails
    until the rule goes. Only after every case ran, at the default seed and size."""
    default = SEED == DEFAULT_SEED and FLIPS_PER_FILE == 200
    if not default or len(RESULTS) < len(generate_cases(pristine.files)):
        pytest.skip("only after every fault case ran (tests/faults without -m), default seed")
    hit = {cause for r in RESULTS for cause in r[3]}
    gone = [k for k in known_classes() if k not in hit]
    assert not gone, f"known causes no longer seen (fixed? remove them from _known.py): {gone}"
