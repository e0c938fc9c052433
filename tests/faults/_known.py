"""The violations the current code is known to commit, as data: which case classes fail and
why, each with a short name of its kind. The one place to edit when a fix lands:
remove the rule (or the class in ALWAYS_FAILING) and the cases it covered must pass.

Two kinds of entries:
- ALWAYS_FAILING: (role, fault kind) classes in which every case is a violation today; their
  cases carry `xfail(strict=True, raises=KnownViolation)`, so a fix that repairs one turns
  it into a failure (XPASS) until the class is removed here. Their violations must still be
  explained by RULES, or the case fails as a new violation.
- RULES: causes that explain a violation only in some cases of a class (whether a flipped
  byte breaks a decoder or garbles a value depends on the byte); a case whose violations are
  all explained is an imperative xfail, any other violation fails the test, and
  `test_every_known_failure_class_still_occurs` fails once a rule explains nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from faults._cases import Case

CLOSED = ("base", "delta", "delete-delta")

# Short reasons: pytest prints one per expected failure.
ITEM = {
    "2": "item 2: recover removes/cuts a committed file it cannot read, exit 0",
    "3": "item 3: a short, lying or stray side file hides committed rows, exit 0",
    "4": "item 4: verify passes what readers fail on (open batch file, stray "
         "directory, emptied metastore); read-only commands write",
    "5": "item 5: recover exits 0 while cat still fails on the file",
    "new-older-footer": "new, beside items 2-3: a damaged older footer of a batch file makes "
                        "recover reject the intact last one and cut a committed transaction",
}

# Every violation a rule may explain once its cause is established for the case.
_ALL = frozenset({
    "cat-exit-0-wrong-rows", "cat-after-recover-exit-0-wrong-rows",
    "verify-exit-0-on-damaged-table", "verify-after-recover-exit-0-table-not-exact",
    "recover-exit-0-table-not-exact", "recover-lowered-readable-rows",
    "failed-without-naming-the-file", "read-only-command-wrote",
})
_AFTER_RECOVER = frozenset({
    "recover-exit-0-table-not-exact", "cat-after-recover-exit-0-wrong-rows",
    "verify-after-recover-exit-0-table-not-exact", "failed-without-naming-the-file",
})


@dataclass(frozen=True)
class Rule:
    """A known cause: applies to a case with these violations, and explains `covers`."""

    item: str
    applies: Callable[[Case, frozenset[str]], bool]
    covers: frozenset[str]
    # False for a cause the default seed does not hit (found with another INGEST_FAULT_SEED):
    # the strictness check cannot expect it.
    at_default_seed: bool = True

    @property
    def key(self) -> str:
        return self.item


# Empty since the committed-file manifest (docs/format.md §20): the last causes (an emptied
# committed file, a footer flip that still parses, verify passing an open batch file that
# readers failed on, recover rejecting a file the reader read exactly) no longer occur at the
# default seed nor at INGEST_FAULT_SEED=7. A new cause goes here with the item it belongs to.
RULES: tuple[Rule, ...] = ()

# Classes in which every case is a violation today (measured on the full run; see the
# module docstring): truncating any bucket file, and every garbage side file of the batch.
ALWAYS_FAILING: dict[tuple[str, str], str] = {}


def reason(item: str) -> str:
    return ITEM[item.removeprefix("table-")]


def always_failing(case: Case) -> str | None:
    """The xfail(strict=True) reason for a case whose whole class fails today, else None."""
    item = ALWAYS_FAILING.get((case.role, case.kind))
    return None if item is None else reason(item)


def explain(case: Case, violations: list[str]) -> dict[str, str]:
    """Which of `violations` a known cause explains: {violation: reason}; the first rule
    that applies and covers a violation wins."""
    v = frozenset(violations)
    out: dict[str, str] = {}
    for rule in RULES:
        if rule.applies(case, v):
            for name in v & rule.covers:
                out.setdefault(name, reason(rule.item))
    return out


def explaining_rules(case: Case, violations: list[str]) -> list[str]:
    """The keys of the rules that explain at least one of `violations` (for the summary)."""
    v = frozenset(violations)
    return sorted({r.key for r in RULES if r.applies(case, v) and v & r.covers})


def known_classes() -> list[str]:
    """The rule keys a full run at the default seed must still hit."""
    return sorted({r.key for r in RULES if r.at_default_seed})
