"""The dict model of keyed writes (docs/format.md §24) and what the model tests share:
hypothesis strategies for rows and Debezium records, reading a table by key, and Hive 2.3's
two readers over copies of a table (tests/table/test_upsert_model.py,
tests/spark/test_stream_upsert_model.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

RANK = {"c": 0, "r": 1, "u": 2, "d": 3}
KEYS = st.integers(0, 5)
DTS = st.sampled_from(["a", "b"])
Key = tuple[Any, ...]


# -- the model -------------------------------------------------------------------------------

@dataclass
class Event:
    """One change as §24 reads it: the key, the new row (None: a delete), the order-by value
    it carries (None: a delete without it), and its op rank."""

    key: Key
    row: dict[str, Any] | None
    order: int | None
    rank: int


@dataclass
class Model:
    """The table as a dict of key -> row, changed call by call (or micro-batch by
    micro-batch) by §24's rules alone."""

    order_by: str | None
    partitioned: bool
    rows: dict[Key, dict[str, Any]] = field(default_factory=dict)

    def apply(self, events: list[Event]) -> None:
        """One call: the last event per key wins (input order, or the order-by value, then
        op rank, then input order; a delete without the value takes its key's previous
        event's, else is the newest); a winner older than the live row is skipped."""
        by_key: dict[Key, list[tuple[int, Event, int | None]]] = {}
        for seq, e in enumerate(events):
            earlier = by_key.setdefault(e.key, [])
            order = e.order
            if order is None and self.order_by and earlier:
                order = earlier[-1][2]
            earlier.append((seq, e, order))
        for key, chain in by_key.items():
            if self.order_by:
                _, winner, order = max(chain, key=lambda c: (
                    c[2] is None, c[2] if c[2] is not None else 0, c[1].rank, c[0]))
                live = self.rows.get(key)
                if order is not None and live is not None and order < live["v"]:
                    continue  # stale
            else:
                _, winner, _ = chain[-1]
            if winner.row is None:
                self.rows.pop(key, None)
            else:
                self.rows[key] = dict(winner.row)


# -- generating events -----------------------------------------------------------------------

@st.composite
def rows(draw: st.DrawFn, partitioned: bool) -> dict[str, Any]:
    row = {"id": draw(KEYS), "value": draw(st.sampled_from(["x", "y", "z"])),
           "v": draw(st.integers(0, 4))}
    if partitioned:
        row["dt"] = draw(DTS)
    return row


def key_of(row: dict[str, Any], partitioned: bool) -> Key:
    return (row["id"], row["dt"]) if partitioned else (row["id"],)


def key_dict(key: Key) -> dict[str, Any]:
    return {"id": key[0], **({"dt": key[1]} if len(key) > 1 else {})}


@st.composite
def change(draw: st.DrawFn, partitioned: bool) -> tuple[object, Event]:
    """A Debezium record (envelope, `{schema, payload}`, `{key, value}` or a tombstone) and
    what it means."""
    kind = draw(st.sampled_from(["c", "r", "u", "u", "d", "d", "tombstone"]))
    if kind == "tombstone":
        row = draw(rows(partitioned))
        key = key_of(row, partitioned)
        return {"key": key_dict(key), "value": None}, Event(key, None, None, RANK["d"])
    if kind == "d":
        row = draw(rows(partitioned))
        key = key_of(row, partitioned)
        before = key_dict(key)
        order = None
        if draw(st.booleans()):
            before["v"] = order = row["v"]
        record: object = {"op": "d", "before": before, "after": None}
        event = Event(key, None, order, RANK["d"])
    else:
        row = draw(rows(partitioned))
        if draw(st.integers(0, 4)) == 0:  # a column the image leaves out reads as null
            del row["value"]
        before = draw(st.none() | rows(partitioned)) if kind == "u" else None
        if before is not None:  # a `before` of an update names the same key
            before.update(key_dict(key_of(row, partitioned)))
        record = {"op": kind, "before": before, "after": row, "ts_ms": 0}
        event = Event(key_of(row, partitioned), {"value": None, **row}, row["v"], RANK[kind])
    wrap = draw(st.sampled_from(["plain", "plain", "schema", "record"]))
    if wrap == "schema":
        record = {"schema": {}, "payload": record}
    elif wrap == "record":
        record = {"key": key_dict(event.key), "value": record}
    return record, event


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[bool, str | None, list[tuple[str, Any]]]:
    """(partitioned, order_by, steps): up to five change batches, row batches and
    compactions, then a minor and a major compaction."""
    partitioned = draw(st.booleans())
    order_by = draw(st.sampled_from([None, "v"]))
    steps: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["changes", "changes", "rows", "minor", "major"]))
        if kind == "changes":
            steps.append((kind, draw(st.lists(change(partitioned), min_size=1, max_size=12))))
        elif kind == "rows":
            steps.append((kind, draw(st.lists(rows(partitioned), min_size=1, max_size=10))))
        else:
            steps.append((kind, None))
    steps += [("minor", None), ("major", None)]
    return partitioned, order_by, steps


# -- reading the table -----------------------------------------------------------------------

def by_key(found: list[dict[str, Any]], partitioned: bool) -> dict[Key, dict[str, Any]]:
    """Rows by key; a key held twice fails (a double insert, or a delete that missed)."""
    keyed = {key_of(r, partitioned): r for r in found}
    assert len(keyed) == len(found), sorted(key_of(r, partitioned) for r in found)
    return keyed


@dataclass
class Copy:
    """The table's files at one step, the snapshot then, and the model then."""

    root: Path
    partitioned: bool
    snapshot: str
    expected: dict[Key, dict[str, Any]]
    step: str


def hive_check(copies: list[Copy]) -> None:
    """Hive 2.3's two readers see each copy exactly as the model had it."""
    from compat import javatools
    from external import require

    ok, why = javatools.available()
    require(ok, f"Java and pyspark's jars for the Hive tools ({why})")
    queries: list[tuple[str, str]] = []
    owners: list[tuple[int, str | None]] = []
    for i, c in enumerate(copies):
        for dt in ("a", "b") if c.partitioned else (None,):
            directory = c.root / f"dt={dt}" if dt else c.root
            if directory.is_dir():
                queries.append((str(directory), c.snapshot))
                owners.append((i, dt))
    for reader in ("raw_merger", "input_format"):
        results = javatools.hive_merged_read_many(
            queries, columns="id,value,v", columns_types="bigint:string:bigint", reader=reader)
        seen: list[list[dict[str, Any]]] = [[] for _ in copies]
        for (i, dt), result in zip(owners, results, strict=True):
            seen[i] += [{**r["row"], **({"dt": dt} if dt else {})} for r in result["rows"]]
        for c, found in zip(copies, seen, strict=True):
            assert by_key(found, c.partitioned) == c.expected, (reader, c.step)
