"""Minor compaction's two renames: a reader between them reads the inputs, and the next
compaction finishes the second rename."""

from __future__ import annotations

from pathlib import Path

import fsspec
from support import SIMPLE_SCHEMA, delete_keys, snap, write_rows

from ingest.acid.compaction.compact import TEMP_PREFIX, compact_partition, finish_interrupted
from ingest.acid.format.names import encode_bucket_property, format_delta, half_renamed_minor
from ingest.acid.read.directories import acid_state
from ingest.acid.read.reader import read_table

FS = fsspec.filesystem("file")
BP = encode_bucket_property(0, 0)


def keyed(root: Path) -> list[tuple[object, ...]]:
    t = read_table(str(root), snap(4), with_row_id=True)
    return sorted((r["row__id"]["writeid"], r["row__id"]["rowid"], r["id"])
                  for r in t.to_pylist())


def test_half_renamed_minor_compaction_reads_like_its_inputs(tmp_path: Path) -> None:
    root = tmp_path / "p"
    write_rows(root / format_delta(1, 1, 0), 1, range(0, 10))
    delete_keys(root / format_delta(2, 2, 0, delete=True), [(1, BP, 0), (1, BP, 1)], write_id=2)
    write_rows(root / format_delta(3, 3, 0), 3, range(10, 20))
    delete_keys(root / format_delta(4, 4, 0, delete=True), [(3, BP, 5)], write_id=4)
    before = keyed(root)
    assert len(before) == 17
    result = compact_partition(str(root), snap(4), row_schema=SIMPLE_SCHEMA, kind="minor")
    assert result is not None
    delta, delete = format_delta(1, 4, None), format_delta(1, 4, None, delete=True)
    assert result.plan.outputs == (delta, delete)
    assert keyed(root) == before

    # The state a crash between the two renames leaves: the delete half still hidden.
    (root / delete).rename(root / f"{TEMP_PREFIX}{delete}")
    names = [p.name for p in root.iterdir()]
    assert half_renamed_minor(names) == {delta}
    state = acid_state(FS, str(root), snap(4))
    assert delta not in [d.name for d in state.deltas]
    assert delta not in state.obsolete
    assert len(state.deltas) == 4
    # Without the rule, delta_1_4 would shadow both delete deltas and deleted rows return.
    assert keyed(root) == before

    assert finish_interrupted(FS, str(root)) == [delete]
    assert [d.name for d in acid_state(FS, str(root), snap(4)).deltas] == [delete, delta]
    assert keyed(root) == before
    assert finish_interrupted(FS, str(root)) == []


def test_a_hidden_delete_half_without_its_partner_stays_hidden(tmp_path: Path) -> None:
    root = tmp_path / "p"
    write_rows(root / format_delta(1, 1, 0), 1, range(0, 10))
    delete_keys(root / format_delta(2, 2, 0, delete=True), [(1, BP, 0)], write_id=2)
    write_rows(root / format_delta(3, 3, 0), 3, range(10, 20))
    delete_keys(root / format_delta(4, 4, 0, delete=True), [(3, BP, 5)], write_id=4)
    before = keyed(root)
    # A crash after writing both halves, before either rename.
    torn = root / f"{TEMP_PREFIX}{format_delta(1, 4, None, delete=True)}"
    torn.mkdir()
    (torn / "bucket_00000").write_bytes(b"torn")
    assert half_renamed_minor(p.name for p in root.iterdir()) == set()
    assert finish_interrupted(FS, str(root)) == []
    assert keyed(root) == before
    result = compact_partition(str(root), snap(4), row_schema=SIMPLE_SCHEMA, kind="minor")
    assert result is not None and keyed(root) == before
    assert not [p for p in root.iterdir() if p.name.startswith(TEMP_PREFIX)]
