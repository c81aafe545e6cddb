"""The point-read shortcuts of the hot path: ``LsmView.point_candidates`` returns the L0 tuple (no
generator) when every view covers its whole SST, and bounds-checks otherwise; ``Memtable.holds``
tells a reader to pass a table without the key."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import types

from slatedb.format.types import SsTableInfo, SstType
from slatedb.lsm.view import UNBOUNDED, KeyBounds, LsmView, SortedRunView, SstHandle
from slatedb.memtable import Memtable
from slatedb.row import Row, RowKind

_KEYS = [b"a", b"c", b"e", b"g", b"i", b"k", b"m"]
_BOUNDS = st.one_of(
    st.just(UNBOUNDED),
    st.builds(KeyBounds, st.sampled_from([None] + _KEYS), st.booleans(), st.sampled_from([None] + _KEYS), st.booleans()),
)


def _handle(name: str, bounds: KeyBounds) -> SstHandle:
    return SstHandle(name, name, None, bounds)  # type: ignore[arg-type]


def _model(view: LsmView, key: bytes) -> list[SstHandle]:
    out = [h for h in view.l0 if h.bounds.contains(key)]
    for run in view.runs:  # an SST may end with the key its successor starts with (READ-7)
        firsts = run.first_keys
        for i, h in enumerate(run.ssts):
            may_hold = firsts[i] <= key and (i + 1 == len(firsts) or key <= firsts[i + 1])
            if may_hold and h.bounds.contains(key):
                out.append(h)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(_BOUNDS, max_size=3), st.lists(st.lists(_BOUNDS, min_size=1, max_size=3), max_size=2))
def test_point_candidates_are_the_handles_whose_bounds_hold_the_key(l0_bounds, run_bounds) -> None:
    l0 = tuple(_handle(f"l0-{i}", b) for i, b in enumerate(l0_bounds))
    runs = []
    for r, bounds in enumerate(run_bounds):
        firsts = _KEYS[: len(bounds)]
        ssts = tuple(_handle(f"r{r}-{i}", b) for i, b in enumerate(bounds))
        runs.append(SortedRunView(r, ssts, tuple(firsts)))
    view = LsmView(1, l0, tuple(runs))
    everything = list(l0) + [h for run in runs for h in run.ssts]
    assert view.whole is all(h.bounds is UNBOUNDED for h in everything)
    for key in [b"", b"b", b"c", b"h", b"z"] + _KEYS:
        assert list(view.point_candidates(key)) == _model(view, key)
    if view.whole and not runs:
        assert view.point_candidates(b"x") is l0


def _ranged(name: str, first: bytes | None, last: bytes | None, sst_type: SstType = SstType.COMPACTED) -> SstHandle:
    reader = types.SimpleNamespace(info=SsTableInfo(first_entry=first, last_entry=last, sst_type=sst_type))
    return SstHandle(name, name, reader, UNBOUNDED)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_KEYS), st.sampled_from(_KEYS)).map(sorted), min_size=2, max_size=5),
       st.booleans())
def test_l0_candidates_are_the_ssts_whose_key_range_holds_the_key(ranges, with_run) -> None:
    """Several L0 SSTs with known key ranges: a get consults only those whose range holds the
    key (in L0 order), then the runs; one SST without a recorded range (or a WAL-typed one):
    every L0 SST, as before."""
    l0 = tuple(_ranged(f"l0-{i}", lo, hi) for i, (lo, hi) in enumerate(ranges))
    runs = (SortedRunView(0, (_handle("r0", UNBOUNDED),), (b"",)),) if with_run else ()
    view = LsmView(1, l0, runs)
    tail = [runs[0].ssts[0]] if with_run else []
    for key in [b"", b"b", b"c", b"h", b"z"] + _KEYS:
        assert list(view.point_candidates(key)) == [h for h, (lo, hi) in zip(l0, ranges) if lo <= key <= hi] + tail
    for odd in (_ranged("odd", b"a", None), _ranged("wal", b"a", b"z", SstType.WAL)):
        view = LsmView(1, l0 + (odd,), runs)
        assert view.l0_ranges is None
        assert list(view.point_candidates(b"z")) == list(l0) + [odd] + tail


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=2, max_size=40, unique=True), st.data())
def test_disjoint_l0_ranges_find_their_one_candidate_by_bisection(cuts, data) -> None:
    """L0 SSTs whose key ranges do not overlap (in any L0 order): the view keeps them sorted by
    first key, and a get's candidates are what testing every range gives; ranges that touch or
    overlap keep the test of every range."""
    cuts = sorted(cuts)
    spans = [(b"k%03d" % lo, b"k%03d" % (hi - 1)) for lo, hi in zip(cuts, cuts[1:]) if hi - 1 >= lo]
    if len(spans) < 2:
        return
    order = data.draw(st.permutations(range(len(spans))))
    l0 = tuple(_ranged(f"l0-{i}", *spans[i]) for i in order)
    view = LsmView(1, l0)
    assert view.l0_disjoint is not None and view.l0_disjoint[0] == sorted(lo for lo, _ in spans)
    for n in range(-1, 42):
        for key in (b"k%03d" % n, b"k%03d~" % n):
            assert list(view.point_candidates(key)) == [h for h, (lo, hi) in zip(l0, [spans[i] for i in order])
                                                        if lo <= key <= hi]
    touching = LsmView(1, l0 + (_ranged("touch", spans[0][1], spans[1][0]),))
    assert touching.l0_disjoint is None and touching.l0_ranges is not None


def test_memtable_holds_what_it_has_rows_of() -> None:
    m = Memtable()
    assert not m.holds(b"k")
    m.put(Row(b"k", 1, RowKind.VALUE, b"v"))
    m.put(Row(b"t", 2, RowKind.TOMBSTONE, b""))
    assert m.holds(b"k") and m.holds(b"t") and not m.holds(b"x")
    m.freeze()
    assert m.holds(b"k") and m.get(b"t").kind is RowKind.TOMBSTONE
