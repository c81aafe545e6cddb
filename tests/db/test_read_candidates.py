"""The point-read shortcuts of the hot path: ``LsmView.point_candidates`` returns the L0 tuple (no
generator) when every view covers its whole SST, and bounds-checks otherwise; ``Memtable.holds``
tells a reader to pass a table without the key."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

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
    for run in view.runs:
        h = run.find(key)
        if h is not None and h.bounds.contains(key):
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


def test_memtable_holds_what_it_has_rows_of() -> None:
    m = Memtable()
    assert not m.holds(b"k")
    m.put(Row(b"k", 1, RowKind.VALUE, b"v"))
    m.put(Row(b"t", 2, RowKind.TOMBSTONE, b""))
    assert m.holds(b"k") and m.holds(b"t") and not m.holds(b"x")
    m.freeze()
    assert m.holds(b"k") and m.get(b"t").kind is RowKind.TOMBSTONE
