"""getAcidState: the examples of docs/format.md §10, Hive's quirks, the fsspec wrapper and
invariants."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import fsspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.acid.format.names import format_base, format_delta, write_compacted_marker
from ingest.acid.format.writeids import ValidWriteIdList
from ingest.acid.read.directories import (
    AcidState,
    DirectoryEntry,
    acid_state,
    choose_directories,
    delta_sort_key,
)
from ingest.errors import IngestError, NotEnoughHistoryError, UnsupportedFormatError


def d(name: str) -> DirectoryEntry:
    return DirectoryEntry(name, True)


def f(name: str) -> DirectoryEntry:
    return DirectoryEntry(name, False)


def cb(name: str) -> DirectoryEntry:
    return DirectoryEntry(name, True, is_compacted_base=True)


def names(state: AcidState) -> list[str]:
    return [x.name for x in state.deltas]


def committed(hwm: int) -> ValidWriteIdList:
    return ValidWriteIdList.all_committed("default.t", hwm)


def test_minor_compacted_delta_shadows_narrower_ones() -> None:
    # docs/format.md §10: delta_5_20 (no stmt) shadows delta_5_10 and delta_11_20.
    entries = [
        d("delta_0000011_0000020_0000"),
        d("delta_0000005_0000010_0000"),
        d("delta_0000005_0000020"),
        d("delta_0000051_0000060_0000"),
    ]
    state = choose_directories(entries, committed(60))
    assert names(state) == ["delta_0000005_0000020", "delta_0000051_0000060_0000"]
    assert sorted(state.obsolete) == ["delta_0000005_0000010_0000", "delta_0000011_0000020_0000"]


def test_per_statement_deltas_are_all_kept() -> None:
    entries = [
        d("delta_0000005_0000005_0001"),
        d("delete_delta_0000005_0000005_0001"),
        d("delta_0000005_0000005_0000"),
        d("delta_0000004_0000004_0000"),
    ]
    state = choose_directories(entries, committed(5))
    assert names(state) == [
        "delta_0000004_0000004_0000",
        "delta_0000005_0000005_0000",
        "delete_delta_0000005_0000005_0001",
        "delta_0000005_0000005_0001",
    ]
    assert state.obsolete == ()


def test_minor_compaction_of_delta_and_delete_delta_pair() -> None:
    # findBestWorkingDeltas comment: delta_30_30, delete_delta_40_40, delta_50_50 are
    # compacted into delta_30_50 + delete_delta_30_50; the pair rule keeps both.
    before = [
        d("delta_0000030_0000030_0000"),
        d("delete_delta_0000040_0000040_0000"),
        d("delta_0000050_0000050_0000"),
    ]
    assert names(choose_directories(before, committed(50))) == [
        "delta_0000030_0000030_0000",
        "delete_delta_0000040_0000040_0000",
        "delta_0000050_0000050_0000",
    ]
    after = before + [d("delta_0000030_0000050"), d("delete_delta_0000030_0000050")]
    state = choose_directories(after, committed(50))
    assert names(state) == ["delete_delta_0000030_0000050", "delta_0000030_0000050"]
    assert sorted(state.obsolete) == sorted(e.name for e in before)


def test_statement_rule_needs_a_statement_id() -> None:
    # After minor compaction (no stmt id) a same-max per-statement delta is obsolete.
    entries = [d("delta_0000003_0000005"), d("delta_0000005_0000005_0001")]
    state = choose_directories(entries, committed(5))
    assert names(state) == ["delta_0000003_0000005"]
    assert state.obsolete == ("delta_0000005_0000005_0001",)


def test_sort_order_is_hives() -> None:
    entries = [
        d("delta_0000005_0000005_0002"),
        d("delta_0000005_0000005"),
        d("delete_delta_0000005_0000005_0002"),
        d("delta_0000001_0000009"),
        d("delta_0000001_0000010"),
    ]
    parsed = choose_directories(entries, ValidWriteIdList("t", 0)).deltas  # all NONE-valid
    assert parsed == ()
    from ingest.acid.format.names import parse_directory

    parsed_all = [parse_directory(e.name) for e in entries]
    ordered = sorted((p for p in parsed_all if p is not None), key=delta_sort_key)
    assert [p.name for p in ordered] == [
        "delta_0000001_0000010",
        "delta_0000001_0000009",
        "delta_0000005_0000005",
        "delete_delta_0000005_0000005_0002",
        "delta_0000005_0000005_0002",
    ]


def test_open_write_ids_block_compacted_bases() -> None:
    snap = ValidWriteIdList("default.t", 20, open_write_ids=(5,))
    entries = [cb("base_0000004"), cb("base_0000010"), d("delta_0000011_0000011_0000")]
    state = choose_directories(entries, snap)
    assert state.base is not None and state.base.name == "base_0000004"
    assert names(state) == ["delta_0000011_0000011_0000"]
    # base_10 is not obsolete: a newer snapshot will use it.
    assert "base_0000010" not in state.obsolete


def test_not_enough_history() -> None:
    snap = ValidWriteIdList("default.t", 20, open_write_ids=(5,))
    with pytest.raises(NotEnoughHistoryError) as info:
        choose_directories([cb("base_0000010"), d("delta_0000011_0000011_0000")], snap)
    err = info.value
    assert isinstance(err, IngestError)
    assert err.oldest_base == "base_0000010" and err.high_watermark == 20
    assert "base_0000010 is compactor output" in str(err)
    assert err.hint is not None


def test_insert_overwrite_base_is_visible_when_its_write_id_is() -> None:
    snap = ValidWriteIdList("default.t", 20, open_write_ids=(5,))
    entries = [d("base_0000010"), d("delta_0000004_0000004_0000"), d("delta_0000005_0000005_0000")]
    state = choose_directories(entries, snap)
    assert state.base is not None and state.base.name == "base_0000010"
    # delta_4_4 is covered by the base; delta_5_5 (open) holds nothing valid and is skipped.
    assert state.obsolete == ("delta_0000004_0000004_0000",)
    assert state.deltas == ()


def test_base_at_min_open_write_id_is_valid_as_in_hive() -> None:
    # AcidUtils.isValidBase: `writeId <= minOpenWriteId` is valid (a Hive quirk, kept as is).
    snap = ValidWriteIdList("default.t", 20, open_write_ids=(5,))
    state = choose_directories([cb("base_0000005")], snap)
    assert state.base is not None and state.base.write_id == 5


def test_aborted_insert_overwrite_base() -> None:
    snap = ValidWriteIdList("default.t", 20, aborted_write_ids=(12,))
    state = choose_directories([d("base_0000010"), d("base_0000012")], snap)
    assert state.base is not None and state.base.name == "base_0000010"
    assert state.aborted == ("base_0000012",)


def test_compacted_base_wins_over_insert_overwrite_base_of_same_write_id() -> None:
    state = choose_directories([d("base_0000010"), d("base_0000010_v0000099")], committed(20))
    assert state.base is not None and state.base.name == "base_0000010_v0000099"
    assert state.obsolete == ("base_0000010",)


def test_higher_base_makes_lower_ones_obsolete() -> None:
    entries = [cb("base_0000005"), cb("base_0000010"), d("delta_0000006_0000008"),
               d("delta_0000011_0000012_0000"), f("000000_0")]
    state = choose_directories(entries, committed(12))
    assert state.base is not None and state.base.name == "base_0000010"
    assert sorted(state.obsolete) == ["000000_0", "base_0000005", "delta_0000006_0000008"]
    assert names(state) == ["delta_0000011_0000012_0000"]
    assert state.original_files == ()


def test_aborted_only_deltas_are_listed_as_aborted() -> None:
    snap = ValidWriteIdList("default.t", 10, aborted_write_ids=(7, 8))
    entries = [d("delta_0000007_0000007_0000"), d("delta_0000007_0000008"),
               d("delta_0000006_0000009"), d("delta_0000010_0000010_0000")]
    state = choose_directories(entries, snap)
    assert sorted(state.aborted) == ["delta_0000007_0000007_0000", "delta_0000007_0000008"]
    assert names(state) == ["delta_0000006_0000009", "delta_0000010_0000010_0000"]
    assert state.uncompacted_aborts


def test_deltas_with_no_valid_write_id_are_skipped() -> None:
    snap = ValidWriteIdList("default.t", 10, open_write_ids=(9,))
    entries = [d("delta_0000009_0000009_0000"), d("delta_0000011_0000012"),
               d("delta_0000001_0000001_0000")]
    state = choose_directories(entries, snap)
    assert names(state) == ["delta_0000001_0000001_0000"]
    assert state.obsolete == () and state.aborted == ()


def test_visibility_suffix() -> None:
    entries = [d("delta_0000001_0000005_v0000100"), d("delta_0000001_0000001_0000"),
               d("delta_0000002_0000005")]
    hidden = choose_directories(entries, committed(5), visible_txn=lambda txn: txn != 100)
    assert names(hidden) == ["delta_0000001_0000001_0000", "delta_0000002_0000005"]
    shown = choose_directories(entries, committed(5), visible_txn=lambda txn: True)
    assert names(shown) == ["delta_0000001_0000005_v0000100"]
    assert names(choose_directories(entries, committed(5))) == names(shown)


def test_hidden_names_and_originals() -> None:
    entries = [f("_SUCCESS"), d(".hive-staging"), d("_tmp_delta"), f("000001_0"),
               f("000000_0"), d("subdir"), d("delta_0000001_0000001_0000")]
    state = choose_directories(entries, committed(1), directory="/w/t")
    assert state.original_files == ("000000_0", "000001_0")
    assert state.original_directories == ("subdir",)
    assert names(state) == ["delta_0000001_0000001_0000"]
    assert state.path("000000_0") == "/w/t/000000_0"


def test_malformed_acid_directory_fails() -> None:
    with pytest.raises(UnsupportedFormatError, match="'delta_tmp' starts like an ACID"):
        choose_directories([d("delta_tmp")], committed(1))
    # A plain *file* with such a name is just an original file, as in Hive.
    assert choose_directories([f("delta_tmp")], committed(1)).original_files == ("delta_tmp",)


@pytest.fixture
def memfs() -> Iterator[tuple[fsspec.AbstractFileSystem, str]]:
    fs = fsspec.filesystem("memory")
    root = f"/state-{uuid.uuid4().hex}/t/dt=2026-11-21"
    fs.makedirs(root, exist_ok=True)
    try:
        yield fs, root
    finally:
        fs.rm(root.split("/t/")[0], recursive=True)


def test_acid_state_lists_through_fsspec(memfs: tuple[fsspec.AbstractFileSystem, str]) -> None:
    fs, root = memfs
    fs.pipe(f"{root}/base_0000010/bucket_00000", b"x")
    write_compacted_marker(fs, f"{root}/base_0000010")
    fs.pipe(f"{root}/{format_delta(11, 11, 0)}/bucket_00000", b"x")
    fs.pipe(f"{root}/{format_delta(12, 21, None)}/bucket_00000", b"x")
    fs.pipe(f"{root}/{format_delta(5, 5, 0)}/bucket_00000", b"x")
    fs.pipe(f"{root}/_tmp.x/bucket_00000", b"x")
    state = acid_state(fs, root, ValidWriteIdList("default.t", 21, open_write_ids=(15,)))
    assert state.base is not None and state.base.name == "base_0000010"
    assert names(state) == ["delta_0000011_0000011_0000", "delta_0000012_0000021"]
    assert state.obsolete == ("delta_0000005_0000005_0000",)
    assert state.path(state.deltas[0].name) == f"{root}/delta_0000011_0000011_0000"
    # The marker matters: with an open id below it, a compacted base is unusable.
    with pytest.raises(NotEnoughHistoryError):
        acid_state(fs, root, ValidWriteIdList("default.t", 21, open_write_ids=(8,)))


def test_acid_state_original_files(memfs: tuple[fsspec.AbstractFileSystem, str]) -> None:
    fs, root = memfs
    fs.pipe(f"{root}/000001_0", b"x")
    fs.pipe(f"{root}/sub/000000_0", b"x")
    fs.pipe(f"{root}/sub/.hidden", b"x")
    fs.pipe(f"{root}/{format_delta(1, 1, 0)}/bucket_00000", b"x")
    state = acid_state(fs, root, committed(1))
    assert state.original_files == ("000001_0", "sub/000000_0")
    fs.pipe(f"{root}/{format_base(1)}/bucket_00000", b"x")
    state = acid_state(fs, root, committed(1))
    assert state.original_files == ()
    assert sorted(state.obsolete) == ["000001_0", "delta_0000001_0000001_0000", "sub"]


def test_acid_state_missing_directory() -> None:
    fs = fsspec.filesystem("memory")
    with pytest.raises(FileNotFoundError):
        acid_state(fs, f"/nope-{uuid.uuid4().hex}", committed(1))


# ---------------------------------------------------------------- invariants

MAX_ID = 12


@st.composite
def snapshots(draw: st.DrawFn) -> ValidWriteIdList:
    hwm = draw(st.integers(0, MAX_ID))
    ids = list(range(1, hwm + 1))
    status = draw(st.lists(st.sampled_from(["c", "c", "c", "o", "a"]), min_size=hwm, max_size=hwm))
    return ValidWriteIdList(
        "default.t",
        hwm,
        tuple(w for w, s in zip(ids, status, strict=True) if s == "o"),
        tuple(w for w, s in zip(ids, status, strict=True) if s == "a"),
    )


@st.composite
def directory_entries(draw: st.DrawFn) -> list[DirectoryEntry]:
    out: dict[str, DirectoryEntry] = {}
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["delta", "delta", "delete", "base"]))
        a, b = draw(st.integers(1, MAX_ID)), draw(st.integers(1, MAX_ID))
        if kind == "base":
            name = format_base(a)
            out[name] = DirectoryEntry(name, True, draw(st.booleans()))
        else:
            stmt = draw(st.none() | st.integers(0, 2))
            name = format_delta(min(a, b), max(a, b), stmt, delete=kind == "delete")
            out[name] = DirectoryEntry(name, True)
    if draw(st.booleans()):
        out["000000_0"] = DirectoryEntry("000000_0", False)
    return list(out.values())


def _valid_base(e: DirectoryEntry, wid: int, snap: ValidWriteIdList) -> bool:
    low = snap.min_open_write_id
    if low is not None and wid <= low:
        return True
    return snap.is_valid_base(wid) if e.is_compacted_base else snap.is_valid(wid)


@settings(max_examples=400, deadline=None)
@given(directory_entries(), snapshots())
def test_invariants(entries: list[DirectoryEntry], snap: ValidWriteIdList) -> None:
    from ingest.acid.format.names import parse_directory

    try:
        state = choose_directories(entries, snap)
    except NotEnoughHistoryError:
        bases = [(parse_directory(e.name).write_id, e) for e in entries  # type: ignore[union-attr]
                 if e.name.startswith("base_")]
        oldest = min(bases, key=lambda p: p[0])
        assert oldest[1].is_compacted_base
        assert not any(_valid_base(e, w, snap) and not (snap.is_aborted(w) and not
                       e.is_compacted_base) for w, e in bases)
        return

    # Hive's order.
    assert list(state.deltas) == sorted(state.deltas, key=delta_sort_key)
    # Each name lands in at most one place.
    placed = names(state) + list(state.obsolete) + list(state.aborted) + list(state.original_files)
    if state.base is not None:
        placed.append(state.base.name)
    assert len(placed) == len(set(placed))
    assert set(placed) <= {e.name for e in entries}
    base_wid = state.base.write_id if state.base is not None else 0
    if state.base is not None:
        assert state.original_files == ()
        entry = next(e for e in entries if e.name == state.base.name)
        assert _valid_base(entry, base_wid, snap)
        # No higher usable base was passed over.
        for e in entries:
            p = parse_directory(e.name)
            if p is not None and p.is_base and p.write_id > base_wid:
                assert not _valid_base(e, p.write_id, snap) or (
                    snap.is_aborted(p.write_id) and not e.is_compacted_base
                )
    for delta in state.deltas:
        assert snap.range_validity(delta.min_write_id, delta.max_write_id) != "NONE"
        assert snap.range_aborted(delta.min_write_id, delta.max_write_id) != "ALL"
        assert delta.max_write_id > base_wid
    # Every valid write id above the base that some delta holds is covered by a chosen delta.
    for e in entries:
        p = parse_directory(e.name)
        if p is None or p.is_base:
            continue
        for w in range(p.min_write_id, p.max_write_id + 1):
            if w > base_wid and snap.is_valid(w):
                assert any(c.min_write_id <= w <= c.max_write_id for c in state.deltas), (w, p)
