"""The delete registry against a dict model: duplicate keys keep the highest write id they
supersede, and both probes (one write id and bucket with ascending rowIds, or any stripe) hide
exactly the rows the model hides."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.acid.format import BUCKET, ROW_ID, ValidWriteIdList
from ingest.acid.format import CURRENT_TRANSACTION as CURRENT
from ingest.acid.format import ORIGINAL_TRANSACTION as OTID
from ingest.acid.read._delete_registry import DeleteRegistry
from ingest.acid.read.merge import _valid_write_ids, valid_mask

_ALWAYS = np.iinfo(np.int64).max
keys = st.tuples(st.integers(1, 3), st.integers(0, 1), st.integers(0, 30))


def _events(entries: list[tuple[tuple[int, int, int], int]]) -> pa.Table:
    return pa.table({OTID: pa.array([k[0] for k, _ in entries], pa.int64()),
                     BUCKET: pa.array([k[1] for k, _ in entries], pa.int32()),
                     ROW_ID: pa.array([k[2] for k, _ in entries], pa.int64()),
                     CURRENT: pa.array([w for _, w in entries], pa.int64())})


@settings(max_examples=200, deadline=None)
@given(deletes=st.lists(keys, max_size=25),
       legacy=st.lists(st.tuples(keys, st.integers(1, 6)), max_size=25),
       rows=st.lists(st.tuples(keys, st.integers(1, 6)), min_size=1, max_size=40),
       one_group=st.booleans(), run=st.booleans())
def test_keep_mask_matches_a_dict_model(deletes: list, legacy: list, rows: list,
                                        one_group: bool, run: bool) -> None:
    registry = DeleteRegistry([
        DeleteRegistry.delete_events(_events([(k, 0) for k in deletes])),
        DeleteRegistry.superseding_events(_events(legacy)),
    ])
    model: dict[tuple[int, int, int], int] = {}
    for k in deletes:
        model[k] = _ALWAYS
    for k, w in legacy:
        model[k] = max(model.get(k, -1), w)
    assert len(registry) == len(model)
    if one_group:  # the usual stripe: one write id and bucket, rowIds ascending
        first = rows[0][0]
        row_ids = sorted({k[2] for k, _ in rows})
        if run:  # rowIds without gaps (as writers number rows), found by their distance
            row_ids = list(range(first[2], first[2] + len(rows)))
        rows = [((first[0], first[1], r), w) for r, (_, w) in zip(row_ids, rows, strict=False)]
    batch = _events(rows).to_batches()[0]
    keep = registry.keep_mask(batch)
    expected = [not model.get(k, -1) > w for k, w in rows]
    assert (keep is None and all(expected)) or list(keep) == expected
    if one_group and run:
        (otid, bucket, first), _ = rows[0]
        if registry.only_deletes:  # the keys alone, as a stripe's statistics give them
            run_keep = registry.keep_run(otid, bucket, first, len(rows))
            assert (run_keep is None and all(expected)) or list(run_keep) == expected
        else:
            with pytest.raises(ValueError, match="currentTransaction"):
                registry.keep_run(otid, bucket, first, len(rows))


wide = st.one_of(st.integers(0, 5), st.integers((1 << 23) - 2, (1 << 23) + 1))
wide_row = st.one_of(st.integers(0, 30), st.integers((1 << 40) - 2, (1 << 40) + 1))


@settings(max_examples=200, deadline=None)
@given(deletes=st.lists(st.tuples(wide, st.just(7), wide_row), min_size=1, max_size=30),
       probes=st.lists(st.tuples(wide, st.just(7), wide_row), min_size=1, max_size=30))
def test_delete_events_of_one_bucket_sort_as_packed_keys_and_hide_exactly_their_rows(
        deletes: list, probes: list) -> None:
    # Only split-update delete events of one bucket: sorted as one int64 per key when write
    # ids and rowIds fit the packing, by three columns when one does not; the same keys.
    registry = DeleteRegistry([DeleteRegistry.delete_events(_events([(k, 0) for k in deletes]))])
    assert len(registry) == len(set(deletes))
    assert registry.only_deletes
    rows = [(k, 1) for k in [*probes, *deletes[:3]]]
    keep = registry.keep_mask(_events(rows).to_batches()[0])
    expected = [k not in set(deletes) for k, _ in rows]
    assert keep is not None and list(keep) == expected


@settings(max_examples=200, deadline=None)
@given(current=st.lists(st.one_of(st.none(), st.integers(0, 12)), max_size=30),
       hwm=st.integers(0, 12), open_ids=st.lists(st.integers(1, 12), max_size=3),
       aborted=st.lists(st.integers(1, 12), max_size=3))
def test_numpy_validity_of_delete_events_equals_valid_mask(current: list, hwm: int,
                                                           open_ids: list, aborted: list
                                                           ) -> None:
    snapshot = ValidWriteIdList("db.t", hwm, tuple(open_ids),
                                tuple(w for w in aborted if w not in open_ids))
    values = pa.array(current, pa.int64())
    assert list(_valid_write_ids(values, snapshot)) == valid_mask(values, snapshot).to_pylist()
