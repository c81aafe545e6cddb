"""The forward merge of several SST sources takes the rows of the source just popped that lie
below every other source's head as columns, without heap steps (``MergeScan._gallop``). A
property against :func:`slatedb.merge.visible` over the union of the sources' rows (disjoint,
interleaved or overlapping sources; plain or not; any seq, bounds and batch size), and a count
of the blocks whose rows were built: a scan of disjoint plain sources builds rows only where the
merge meets a source's first row, not for every block."""

from __future__ import annotations

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatedb.format import block as blk
from slatedb.lsm.scan import MergeScan, NeedIO, SstSource
from slatedb.lsm.view import KeyBounds, SstHandle
from slatedb.merge import visible
from slatedb.row import Row, RowKind

from .test_block_columns import _concat, _reader, sorted_rows


@st.composite
def versioned_values(draw) -> list[Row]:
    """Values without expiry (plain blocks), a key with up to three versions: spread over the
    sources, a key's versions meet in the merge from plain blocks of several sources."""
    keys = sorted(draw(st.sets(st.binary(min_size=1, max_size=6), min_size=1, max_size=60)))
    rows = []
    for key in keys:
        for seq in sorted(draw(st.sets(st.integers(0, 30), min_size=1, max_size=3)), reverse=True):
            rows.append(Row(key, seq, RowKind.VALUE, draw(st.binary(max_size=40))))
    return rows


def _merge_scan(readers, bounds: KeyBounds, max_seq: int, n: int, reverse: bool = False) -> list:
    sources = [SstSource([SstHandle(None, None, r, KeyBounds())], bounds, reverse) for r in readers]  # type: ignore[arg-type]
    merge = MergeScan(sources, reverse=reverse, max_seq=max_seq, now_ms=0, op=_concat)
    out = []
    while True:
        try:
            batch = merge.next_batch(n)
        except NeedIO as e:
            src = e.source
            r, first, last = src.io_request()
            src.supply(first, trio.run(r.read_blocks, first, last))
            continue
        assert len(batch) <= n
        if not batch:
            return out
        out += batch


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(sorted_rows(plain=True), versioned_values(), sorted_rows()), st.sampled_from([64, 256, 4096]),
       st.integers(1, 70), st.sampled_from(["disjoint", "interleaved"]), st.data())
def test_merged_scans_yield_what_the_merge_model_yields(rows, block_size, n, mode, data) -> None:
    n_sources = data.draw(st.integers(2, 4))
    if mode == "disjoint":  # consecutive keys to one source (a sequential load's L0 SSTs)
        keys = sorted({r.key for r in rows})
        cuts = sorted(data.draw(st.lists(st.sampled_from(keys), max_size=n_sources - 1)))
        which = {k: sum(1 for c in cuts if c <= k) for k in keys}
        parts = [[r for r in rows if which[r.key] == i] for i in range(n_sources)]
    else:  # each row to any source (a key's versions may be spread over several)
        picks = data.draw(st.lists(st.integers(0, n_sources - 1), min_size=len(rows), max_size=len(rows)))
        parts = [[r for r, p in zip(rows, picks) if p == i] for i in range(n_sources)]
    readers = [_reader(part, block_size, 1 << 30)[0] for part in parts if part]
    keys = sorted({r.key for r in rows})
    max_seq = data.draw(st.sampled_from([0, 2**64 - 1] + [r.seq for r in rows]))
    lo = data.draw(st.one_of(st.none(), st.sampled_from(keys)))
    hi = data.draw(st.one_of(st.none(), st.sampled_from(keys)))
    bounds = KeyBounds(lo, True, hi, data.draw(st.booleans()))
    want = [(k, v) for k, v in visible(iter(rows), snapshot_seq=max_seq, now_ms=0, op=_concat) if bounds.contains(k)]
    assert _merge_scan(readers, bounds, max_seq, n) == want
    assert _merge_scan(readers, bounds, max_seq, n, reverse=True) == want[::-1]


def test_a_scan_of_disjoint_plain_sources_builds_no_rows_for_the_blocks_it_passes(monkeypatch) -> None:
    built = []
    rows_of = blk.Block.rows

    def counting(self):
        built.append(self)
        return rows_of.fget(self)

    monkeypatch.setattr(blk.Block, "rows", property(counting))
    parts = [[Row(b"k%05d" % (p * 1000 + i), 7, RowKind.VALUE, b"v" * 50) for i in range(300)] for p in range(4)]
    readers = [_reader(part, 512, 1 << 30)[0] for part in parts]
    blocks = sum(len(r.index) for r in readers)
    assert blocks >= 100
    got = _merge_scan(readers[::-1], KeyBounds(), 100, 1000)  # newest (highest keys) first, as L0
    assert got == [(r.key, r.value) for part in parts for r in part]
    assert len(built) <= 2 * len(readers)  # a source's first block (its head in the heap), not every block
