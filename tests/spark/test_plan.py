"""Read splits from a pinned manifest (slatedb/spark/plan.py): cuts at SST boundaries, bin-packed
by size, tiling the requested bounds; an empty database is one split."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from ulid import ULID

from slatedb.lsm.view import KeyBounds
from slatedb.errors import InvalidArgumentError
from slatedb.format.types import (
    BoundType,
    BytesBound,
    BytesRange,
    CompactedSsTableV2,
    CompactedSsTableView,
    ManifestV2,
    SortedRunV2,
    SsTableInfo,
)
from slatedb.spark.plan import plan_splits, split_of, sst_spans


def _sst(first: bytes, last: bytes, size: int, n: int) -> tuple[CompactedSsTableV2, CompactedSsTableView]:
    sid = ULID.from_int(n + 1)
    info = SsTableInfo(first_entry=first, last_entry=last, index_offset=size - 100, index_len=100)
    return CompactedSsTableV2(sid, info, 2), CompactedSsTableView(sid, sid, None)


def manifest(runs: list[list[tuple[bytes, bytes, int]]], l0: list[tuple[bytes, bytes, int]] = ()) -> ManifestV2:
    ssts, l0_views, sorted_runs, n = [], [], [], 0
    for first, last, size in l0:
        s, v = _sst(first, last, size, n)
        n += 1
        ssts.append(s)
        l0_views.append(v)
    for rid, run in enumerate(runs):
        views = []
        for first, last, size in run:
            s, v = _sst(first, last, size, n)
            n += 1
            ssts.append(s)
            views.append(v)
        sorted_runs.append(SortedRunV2(rid, tuple(views)))
    return ManifestV2(initialized=True, ssts=tuple(ssts), l0=tuple(l0_views), compacted=tuple(sorted_runs))


def test_empty_database_is_one_split_over_the_bounds() -> None:
    assert [(s.lo, s.hi) for s in plan_splits(ManifestV2(initialized=True), KeyBounds())] == [(None, None)]
    b = KeyBounds(b"b", True, b"m", False)
    assert [(s.lo, s.hi) for s in plan_splits(ManifestV2(initialized=True), b)] == [(b"b", b"m")]


def test_cuts_fall_on_sst_boundaries_and_pack_toward_the_target() -> None:
    run = [(b"a", b"c", 1000), (b"d", b"f", 1000), (b"g", b"i", 1000), (b"j", b"l", 1000)]
    m = manifest([run])
    assert [(s.lo, s.hi) for s in plan_splits(m, KeyBounds(), 1000)] == [
        (None, b"d"), (b"d", b"g"), (b"g", b"j"), (b"j", None)]
    assert [(s.lo, s.hi) for s in plan_splits(m, KeyBounds(), 2000)] == [(None, b"g"), (b"g", None)]
    assert [(s.lo, s.hi) for s in plan_splits(m, KeyBounds(), 10**9)] == [(None, None)]
    # Bounds: only SSTs inside count, the splits tile [e, k).
    assert [(s.lo, s.hi) for s in plan_splits(m, KeyBounds(b"e", True, b"k", False), 1)] == [
        (b"e", b"g"), (b"g", b"j"), (b"j", b"k")]


def test_an_l0_sst_spanning_everything_spreads_its_size() -> None:
    m = manifest([[(b"a", b"c", 1000), (b"d", b"f", 1000)]], l0=[(b"a", b"z", 4000)])
    splits = plan_splits(m, KeyBounds(), 2000)
    assert [(s.lo, s.hi) for s in splits] == [(None, b"d"), (b"d", None)]
    assert sum(s.size_bytes for s in splits) == pytest.approx(6000, abs=2)


def test_visible_ranges_narrow_the_spans() -> None:
    m = manifest([[(b"a", b"z", 1000)]])
    rng = BytesRange(BytesBound(b"m", BoundType.INCLUDED), BytesBound(None, BoundType.UNBOUNDED))
    view = m.compacted[0].ssts[0]
    from attrs import evolve

    m = evolve(m, compacted=(SortedRunV2(0, (evolve(view, visible_range=rng),)),))
    assert [(s.first, s.last) for s in sst_spans(m)] == [(b"m", b"z")]


def test_bad_split_size_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="split_size_bytes"):
        plan_splits(ManifestV2(), KeyBounds(), 0)


keys = st.binary(min_size=1, max_size=3)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(keys, keys, st.integers(1, 5000)), max_size=12), st.integers(1, 8000), st.lists(keys, max_size=20))
def test_splits_tile_the_key_space_in_order(raw, target, probes) -> None:
    ssts = [(min(a, b), max(a, b), size) for a, b, size in raw]
    m = manifest([], l0=ssts)
    splits = plan_splits(m, KeyBounds(), target)
    assert splits[0].lo is None and splits[-1].hi is None
    for a, b in zip(splits, splits[1:]):
        assert a.hi == b.lo and a.hi is not None and (a.lo is None or a.lo < a.hi)
    firsts = {s[0] for s in ssts}
    assert all(s.hi in firsts for s in splits[:-1])  # cuts only at SST first keys
    for k in probes:
        s = splits[split_of(splits, k)]
        assert (s.lo is None or s.lo <= k) and (s.hi is None or k < s.hi)
