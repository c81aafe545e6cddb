"""The executor alone: merge order, retention, output cuts, and resume from any row (RESUME-1/2)."""

from __future__ import annotations

import attrs
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from ulid import ULID

from slatedb.compactor import CompactionSpec, L0Source, RunSource
from slatedb.compactor.executor import Executor, Job
from slatedb.lsm.view import sst_key
from slatedb.format.sst import SstOptions
from slatedb.format.sst_reader import SstReader
from slatedb.format.sst_writer import write_sst
from slatedb.format.types import CompactedSsTable, CompactedSsTableV2, CompactedSsTableView, ManifestV2, SortedRunV2
from slatedb.row import Row, RowKind
from slatedb.runtime.production import ProductionRuntime

from ..db.helpers import memory_store

V, T = RowKind.VALUE, RowKind.TOMBSTONE
OPTS = SstOptions(min_filter_keys=1, block_size_bytes=256)


def put_sst(store, rows: list[Row]) -> CompactedSsTableV2:
    enc = write_sst(sorted(rows, key=lambda r: (r.key, -r.seq)), OPTS)
    sst_id = ProductionRuntime().new_ulid()
    store.put_now(sst_key(sst_id), enc.data)
    return CompactedSsTableV2(sst_id, enc.info, enc.format_version)


def setup(store, l0_rows: list[list[Row]], run_rows: dict[int, list[Row]]) -> ManifestV2:
    """L0 SSTs newest first; each run is one SST."""
    l0 = [put_sst(store, rows) for rows in l0_rows if rows]
    runs = {rid: put_sst(store, rows) for rid, rows in run_rows.items()}
    return ManifestV2(
        ssts=tuple(l0) + tuple(runs.values()),
        l0=tuple(CompactedSsTableView(s.id, s.id) for s in l0),
        compacted=tuple(SortedRunV2(r, (CompactedSsTableView(runs[r].id, runs[r].id),)) for r in sorted(runs, reverse=True)),
    )


def everything(m: ManifestV2) -> CompactionSpec:
    return CompactionSpec(tuple(L0Source(v.id) for v in m.l0) + tuple(RunSource(r.id) for r in m.compacted),
                          min((r.id for r in m.compacted), default=0))


async def rows_of(store, outputs) -> list[Row]:
    out = []
    for o in outputs:
        reader = await SstReader.open(store, sst_key(o.id))
        out += [r async for r in reader.scan()]
    return out


def run(store, job: Job, crash_after: int | None = None) -> tuple[CompactedSsTable, ...]:
    class Crash(Exception):
        pass

    async def main():
        ex = Executor(store, ProductionRuntime())
        seen = []

        async def on_output(outputs):
            seen.append(outputs)
            if crash_after is not None and len(outputs) >= crash_after:
                raise Crash

        try:
            return await ex.run(job, on_output)
        except Crash:
            return seen[-1]

    return trio.run(main)


def job(m: ManifestV2, *, M: int = 0, bottom: bool = True, now: int = 0, max_bytes: int = 1 << 30, resume=()) -> Job:
    return Job(ULID.from_int(1), everything(m), m, M, bottom, now, max_bytes, OPTS, tuple(resume))


def r(key: str, seq: int, kind=V, value: str = "", expire: int | None = None) -> Row:
    return Row(key.encode(), seq, kind, (value or f"{key}{seq}").encode() if kind is V else b"", expire, 1)


def test_newest_source_wins_and_old_versions_below_the_retention_seq_go() -> None:
    store = memory_store()
    m = setup(store, [[r("a", 9), r("b", 8)], [r("a", 5), r("c", 4)]], {0: [r("a", 2), r("b", 1), r("d", 3)]})
    out = trio.run(rows_of, store, run(store, job(m, M=100)))
    assert [(x.key, x.seq) for x in out] == [(b"a", 9), (b"b", 8), (b"c", 4), (b"d", 3)]
    # With a snapshot at seq 4: every version above 4 stays, and the newest at or below 4
    # (what a reader at 4 sees: a@2, b@1).
    out = trio.run(rows_of, store, run(store, job(m, M=4)))
    assert [(x.key, x.seq) for x in out] == [(b"a", 9), (b"a", 5), (b"a", 2), (b"b", 8), (b"b", 1), (b"c", 4), (b"d", 3)]


def test_tombstones_and_expired_rows_drop_only_at_the_bottom() -> None:
    store = memory_store()
    m = setup(store, [[r("a", 9, T), r("b", 8, expire=50)]], {3: [r("a", 2), r("b", 1), r("c", 3)]})
    bottom = trio.run(rows_of, store, run(store, job(m, M=100, bottom=True, now=100)))
    assert [(x.key, x.seq) for x in bottom] == [(b"c", 3)]
    middle = trio.run(rows_of, store, run(store, job(m, M=100, bottom=False, now=100)))
    # Not the bottom: the tombstone stays, the expired row becomes one (it must still hide b@1
    # in the runs below).
    assert [(x.key, x.seq, x.kind) for x in middle] == [(b"a", 9, T), (b"b", 8, T), (b"c", 3, V)]
    # Not yet expired: kept as a value.
    early = trio.run(rows_of, store, run(store, job(m, M=100, bottom=False, now=10)))
    assert early[1].kind is V and early[1].expire_ts_ms == 50


def test_an_expired_version_a_snapshot_may_read_becomes_a_tombstone_in_place() -> None:
    """Versions above the retention seq stay one by one (a snapshot may read each); one of them
    expired is written as a tombstone at its seq (it must still hide the older versions kept
    below it), a tombstone stays one, and the newest version at or below M stays as it is."""
    store = memory_store()
    m = setup(store, [[r("b", 8, expire=50), r("c", 9, T)], [r("b", 6), r("c", 7, expire=50)]],
              {0: [r("b", 1), r("c", 2)]})
    out = trio.run(rows_of, store, run(store, job(m, M=4, bottom=False, now=100)))
    assert [(x.key, x.seq, x.kind, x.expire_ts_ms) for x in out] == [
        (b"b", 8, T, None), (b"b", 6, V, None), (b"b", 1, V, None),
        (b"c", 9, T, None), (b"c", 7, T, None), (b"c", 2, V, None)]


def test_outputs_are_cut_by_size_but_never_inside_a_key() -> None:
    store = memory_store()
    rows = [r(f"k{i:04d}", s, value="x" * 40) for i in range(300) for s in (3, 2, 1)]
    m = setup(store, [], {0: rows})
    outputs = run(store, job(m, M=0, max_bytes=2000))
    assert len(outputs) > 5
    keys_per_sst = []
    for o in outputs:
        got = trio.run(rows_of, store, (o,))
        keys_per_sst.append({x.key for x in got})
    for a, b in zip(keys_per_sst, keys_per_sst[1:]):
        assert not a & b, "a key straddles two output SSTs"
    assert len(trio.run(rows_of, store, outputs)) == 900


def test_cut_after_any_row_splits_a_keys_versions_and_resumes_from_inside_a_key() -> None:
    """``cut_after_any_row`` (the official compactor's rule): outputs are cut inside keys, the
    newer versions ending one output and the older ones starting the next; an attempt stopped
    after any output (its cursor inside a key) resumes to exactly the uninterrupted rows."""
    store = memory_store()
    rows = [r(f"k{i:04d}", s, value="x" * 40) for i in range(120) for s in (5, 4, 3, 2, 1)]
    m = setup(store, [], {0: rows})
    j = attrs.evolve(job(m, M=0, max_bytes=1500), cut_after_any_row=True)
    outputs = run(store, j)
    per_sst = [trio.run(rows_of, store, (o,)) for o in outputs]
    split = [(a[-1].key, a[-1].seq, b[0].seq) for a, b in zip(per_sst, per_sst[1:]) if a[-1].key == b[0].key]
    assert split and all(newer > older for _k, newer, older in split), "no output cut inside a key"
    full = trio.run(rows_of, store, outputs)
    assert [(x.key, x.seq) for x in full] == [(x.key, x.seq) for x in rows]
    for k in range(1, len(outputs)):
        partial = run(store, j, crash_after=k)
        resumed = run(store, attrs.evolve(j, resume_outputs=partial))
        assert trio.run(rows_of, store, resumed) == full
        # ... and resumed by a compactor that cuts only between keys (another worker's rule)
        between = run(store, attrs.evolve(j, resume_outputs=partial, cut_after_any_row=False))
        assert trio.run(rows_of, store, between) == full


@st.composite
def sources(draw):
    keys = [f"k{i}" for i in range(draw(st.integers(1, 12)))]
    n_src = draw(st.integers(1, 4))
    seqs = iter(draw(st.permutations(range(1, 200)))[:120])
    srcs = []
    for _ in range(n_src):
        rows = {}
        for k in draw(st.lists(st.sampled_from(keys), max_size=25)):
            seq = next(seqs, None)
            if seq is None:
                break
            kind = draw(st.sampled_from([V, V, V, T]))
            rows[(k, seq)] = r(k, seq, kind, value="v" * draw(st.integers(0, 30)))
        srcs.append(list(rows.values()))
    return srcs


@settings(max_examples=60, deadline=None)
@given(srcs=sources(), M=st.integers(0, 200), bottom=st.booleans(), max_bytes=st.integers(100, 3000),
       cut=st.floats(0, 1))
def test_resume_from_any_row_of_the_output_gives_the_uninterrupted_result(srcs, M, bottom, max_bytes, cut) -> None:
    """RESUME-1 and RESUME-2: an earlier attempt's output, cut at *any* row (even between two
    versions of one key, as another implementation may write it), plus the resumed rest, is
    exactly the uninterrupted output."""
    store = memory_store()
    m = setup(store, srcs[:-1], {0: srcs[-1]} if srcs[-1] else {})
    j = job(m, M=M, bottom=bottom, now=0, max_bytes=max_bytes)
    full = trio.run(rows_of, store, run(store, j))
    keys = [(x.key, -x.seq) for x in full]
    assert keys == sorted(set(keys)), "RESUME-2: output not strictly ordered"
    if not full:
        return
    upto = max(1, int(cut * len(full)))
    earlier = put_sst(store, full[:upto])
    head = CompactedSsTable(earlier.id, earlier.info, None, earlier.format_version)
    resumed = run(store, attrs.evolve(j, resume_outputs=(head,)))
    assert resumed[0] == head
    assert trio.run(rows_of, store, resumed) == full


def test_a_crash_after_each_output_resumes_to_the_same_outputs() -> None:
    store = memory_store()
    rows = [r(f"k{i:04d}", s, value="y" * 30) for i in range(200) for s in (2, 1)]
    m = setup(store, [[r(f"k{i:04d}", 5, T) for i in range(0, 200, 7)]], {0: rows})
    j = job(m, M=0, max_bytes=1500)
    full = trio.run(rows_of, store, run(store, j))
    n = len(run(store, j))
    assert n >= 4
    for k in range(1, n):
        partial = run(store, j, crash_after=k)
        assert len(partial) == k
        resumed = run(store, attrs.evolve(j, resume_outputs=partial))
        assert len(resumed) == n
        assert trio.run(rows_of, store, resumed) == full


def test_consecutive_operands_above_the_bottom_fold_into_one_operand() -> None:
    """MERGE-5 at a level that is not the bottom: a key's operands below the retention seq with
    no base under them fold into one operand (a reader below adds the base later), in write
    order; operands with another expiry stay a group of their own."""
    from slatedb.compactor.executor import retain
    from slatedb.merge_operator import concat

    M = RowKind.MERGE_OPERAND
    ops = [Row(b"k", 7, M, b"c"), Row(b"k", 6, M, b"b"), Row(b"k", 5, M, b"a")]  # newest first
    (folded,) = retain(ops, 100, False, 0, concat)
    assert (folded.kind, folded.seq, folded.value) == (M, 7, b"abc")
    two = retain([Row(b"k", 6, M, b"b"), Row(b"k", 5, M, b"a")], 100, False, 0, concat)
    assert [(r.kind, r.seq, r.value) for r in two] == [(M, 6, b"ab")]
    mixed = [Row(b"k", 8, M, b"d", expire_ts_ms=9_000), Row(b"k", 7, M, b"c"), Row(b"k", 6, M, b"b")]
    assert [(r.seq, r.value, r.expire_ts_ms) for r in retain(mixed, 100, False, 0, concat)] == [
        (8, b"d", 9_000), (7, b"bc", None)]
    # One operand is kept as written, never passed to the operator with no base: a base lies below.
    def tagged(key, existing, operand):
        return (existing if existing is not None else b"<none>") + operand

    lone = [Row(b"k", 8, M, b"d", expire_ts_ms=9_000), Row(b"k", 7, M, b"c")]
    assert [r.value for r in retain(lone, 100, False, 0, tagged)] == [b"d", b"c"]


def test_a_resume_whose_recorded_output_holds_no_block_is_a_typed_error_naming_it(monkeypatch) -> None:
    """A compaction resumed from its recorded outputs reads the last one's last row to go on
    after it; an output whose index lists no block (damage: the writer never makes one, so the
    reader is stood in for here) is a CorruptionError naming that SST, not a read of block -1."""
    import pytest

    from slatedb.errors import CorruptionError

    class NoBlocks:
        num_blocks = 0

    store = memory_store()
    m = setup(store, [[r("a", 9), r("b", 8)]], {})
    recorded = run(store, job(m, max_bytes=1), crash_after=1)
    real_open = Executor._open

    async def open_(self, sst_id, readers=None):
        return NoBlocks() if sst_id == recorded[-1].id else await real_open(self, sst_id, readers)

    monkeypatch.setattr(Executor, "_open", open_)
    with pytest.raises(CorruptionError, match=f"{recorded[-1].id}.*output SST of a compaction has no rows"):
        run(store, job(m, max_bytes=1, resume=recorded))


def test_a_range_closes_its_sources_when_it_ends_before_they_do(monkeypatch) -> None:
    """A subcompaction range ``[lo, hi)`` stops reading its sources at ``hi``; the executor closes
    their block streams when the range is done (``Executor.run``), not leaving them to the
    garbage collector's finalizer (a run's stream closes the SST it was reading with it: the
    next test)."""
    import contextlib

    from slatedb.compactor.executor import Executor as Ex

    closed: list[bool] = []

    async def tracked(blocks):
        i = len(closed)
        closed.append(False)
        try:
            async with contextlib.aclosing(blocks) as inner:
                async for b in inner:
                    yield b
        finally:
            closed[i] = True

    streams = Ex._streams

    async def tracked_streams(self, *args, **kwargs):
        out = await streams(self, *args, **kwargs)
        for st in out:
            st.blocks = tracked(st.blocks)
        return out

    monkeypatch.setattr(Ex, "_streams", tracked_streams)
    store = memory_store()
    rows = [r(f"k{i:04d}", 2, value="y" * 30) for i in range(300)]
    m = setup(store, [[r(f"k{i:04d}", 5) for i in range(0, 300, 3)]], {0: rows})
    ranged = attrs.evolve(job(m, M=0), key_lo=None, key_hi=b"k0100")

    async def ignore(outputs):
        pass

    async def main():
        outputs = await Executor(store, ProductionRuntime()).run(ranged, ignore)
        return outputs, list(closed)  # read at once: no checkpoint in between for a finalizer

    outputs, at_return = trio.run(main)
    assert outputs and at_return == [True, True], at_return


def test_the_planner_anchors_of_a_view_are_its_block_first_keys_inside_its_visible_range() -> None:
    """``plan_inputs``: an input view's anchors (where subcompaction ranges may be cut) are the
    SST's block first keys strictly inside the view's visible range; a view of the whole SST
    anchors at every block's first key (block 0's is the SST's first entry: its index key is
    empty)."""
    from slatedb.compactor.lifecycle import make_range
    from slatedb.compactor.subcompactions import MAX_ANCHORS_PER_SST

    store = memory_store()
    m = setup(store, [], {0: [r(f"k{i:04d}", 2, value="y" * 30) for i in range(300)]})
    whole = m.compacted[0].ssts[0]
    lo, hi = b"k0100x", b"k0200"  # between keys: no block starts at either bound
    narrow = attrs.evolve(whole, visible_range=make_range(lo, hi))
    narrowed = attrs.evolve(m, compacted=(SortedRunV2(0, (narrow,)),))

    async def anchors(manifest):
        [sst] = await Executor(store, ProductionRuntime()).plan_inputs(everything(manifest), manifest)
        return sst.anchors

    all_anchors = trio.run(anchors, m)
    assert 10 < len(all_anchors) < MAX_ANCHORS_PER_SST and all_anchors[0] == b"k0000"  # none sampled away
    inside = trio.run(anchors, narrowed)
    assert inside == tuple(k for k in all_anchors if lo < k < hi) and len(inside) > 5


def test_a_closed_run_stream_closes_the_sst_it_was_reading() -> None:
    """A sorted run's block stream (``_run_blocks``) reads its SSTs one after another; closed in
    the middle of one, it closes that SST's block generator (``_view_blocks`` and the reader's
    ``scan_blocks``) at once, not leaving them to trio's finalizer (sim mutate seed 18 found it
    left; closing them moved every compaction trace, re-pinned with this change)."""
    from types import SimpleNamespace

    from slatedb.compactor.executor import _run_blocks
    from slatedb.format.types import CompactedSsTableView

    events: list[str] = []

    class Reader:
        def __init__(self, name: str) -> None:
            self.name = name
            self.info = SimpleNamespace(last_entry=None)

        async def scan_blocks(self, lo, hi, *, end_inclusive=False):
            events.append(f"open {self.name}")
            try:
                for i in range(3):
                    yield [r(f"{self.name}{i}", 1)]
            finally:
                events.append(f"close {self.name}")

    view = CompactedSsTableView(ULID.from_int(7), ULID.from_int(8), None)
    readers = [(Reader("a"), view), (Reader("b"), view)]

    async def main():
        stream = _run_blocks(readers, None)
        seen = [await stream.__anext__() for _ in range(4)]  # a's three blocks, then b's first
        await stream.aclose()
        return seen, list(events)

    seen, at_close = trio.run(main)
    assert [rows[0].key for rows in seen] == [b"a0", b"a1", b"a2", b"b0"]
    assert at_close == ["open a", "close a", "open b", "close b"], at_close


def test_a_view_whose_range_excludes_its_start_key_leaves_that_key_out() -> None:
    """``_view_blocks``: a view's visible range may start at an excluded bound (another engine's
    manifest; ours never writes one): the SST's rows at that key are not the view's and do not
    reach the output, the rows after it do."""
    from slatedb.format.types import BoundType, BytesBound, BytesRange

    store = memory_store()
    m = setup(store, [[r("aa", 9), r("bb", 8), r("bb", 7), r("cc", 6)]], {})  # keys of 2 bytes: no cached
    (view,) = m.l0                                                            # 1-byte objects to share
    after_b = BytesRange(BytesBound(b"bb", BoundType.EXCLUDED), BytesBound(None, BoundType.UNBOUNDED))
    m = attrs.evolve(m, l0=(attrs.evolve(view, visible_range=after_b),))
    outputs = run(store, job(m))
    assert [(x.key, x.seq) for x in trio.run(rows_of, store, outputs)] == [(b"cc", 6)]


def test_a_resume_whose_recorded_output_ends_outside_its_subcompaction_range_is_a_typed_error() -> None:
    """A subcompaction resumed from its recorded outputs goes on after the last one's last row;
    a last row outside the range ``[key_lo, key_hi)`` (a record from another range: damage) is
    a CorruptionError naming that output and the key, not a merge of the wrong range."""
    import pytest

    from slatedb.errors import CorruptionError

    store = memory_store()
    m = setup(store, [[r("a", 9), r("b", 8), r("c", 7), r("d", 6)]], {})
    recorded = run(store, job(m, max_bytes=1), crash_after=3)
    assert len(recorded) == 3
    resumed = attrs.evolve(job(m, max_bytes=1, resume=recorded), key_lo=b"m")
    with pytest.raises(CorruptionError) as info:
        run(store, resumed)
    assert info.value.object_name == sst_key(recorded[-1].id)
    assert info.value.reason == (f"output of compaction {resumed.compaction_id} ends at b'c', outside its "
                                 "subcompaction range [b'm', None)")
