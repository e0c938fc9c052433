"""What Hive 2.3 (pyspark's jars) makes of Hive 4's `_vT` compaction output: its
`AcidUtils.getAcidState` cannot parse the names and fails, so a table compacted with
`ingest.compaction.visibility_suffix` is for Hive 4 and our own readers only (docs/format.md
§17)."""

from __future__ import annotations

from pathlib import Path

import pytest
from compat import javatools
from conftest import require
from support import SIMPLE_SCHEMA, simple_table

from ingest.acid import BucketFileOptions, BucketWriter, ValidWriteIdList
from ingest.acid.compaction.compact import compact_partition
from ingest.acid.format.names import format_delta

pytestmark = pytest.mark.java
SNAPSHOT = "default.t:3:::"


@pytest.fixture(autouse=True)
def _java() -> None:
    ok, why = javatools.available()
    require(ok, f"Java and pyspark's jars for the Hive tools ({why})")


def _deltas(root: Path) -> None:
    for w in (1, 2, 3):
        d = root / format_delta(w, w)
        d.mkdir(parents=True)
        with BucketWriter.create(f"{d}/bucket_00000", BucketFileOptions(
                write_id=w, row_schema=SIMPLE_SCHEMA, bucket_id=0)) as writer:
            writer.write(simple_table(range(w * 10, w * 10 + 5)))


@pytest.mark.parametrize(("kind", "output"), [("minor", "delta_0000001_0000003_v0000007"),
                                              ("major", "base_0000003_v0000007")])
def test_hive_2_3_cannot_parse_v_suffixed_output(kind: str, output: str,
                                                 tmp_path: Path) -> None:
    root = tmp_path / "t"
    _deltas(root)
    before = javatools.hive_acid_state(root, SNAPSHOT)
    assert "error" not in before
    result = compact_partition(str(root), ValidWriteIdList.from_hive_string(SNAPSHOT),
                               row_schema=SIMPLE_SCHEMA, kind=kind, visibility_txn_id=7)
    assert result is not None and result.plan.outputs == (output,)
    (after,) = javatools.hive_acid_state_many([(root, SNAPSHOT)], raise_on_error=False)
    assert after["error_class"] == "java.lang.NumberFormatException"
    assert "v0000007" in after["error"]
