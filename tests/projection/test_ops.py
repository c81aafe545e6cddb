"""Pure projection and union (slatedb/projection/ops.py) against a model of reads.

A "physical SST" here is a dict key -> seq; a read of key k through a manifest returns
``(sst id, seq)`` of the first view (L0 in order, then each run's one candidate view, found
as the read path finds it) whose effective range holds k and whose SST holds k.
"""

from __future__ import annotations

import itertools
import uuid
from bisect import bisect_right

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ulid import ULID

from slatedb.lsm.view import bounds_of
from slatedb.errors import InvalidProjectionError, InvalidUnionError, SstIdCollisionError, UnionSetEmptyError
from slatedb.format.types import (
    CompactedSsTableV2,
    CompactedSsTableView,
    ExternalDb,
    ManifestV2,
    SortedRunV2,
    SsTableInfo,
)
from slatedb.projection import KeyRange, UnionSource, format_range, parse_range, project, referencing, union
from slatedb.projection.ops import BUG_PROJECT_WIDENS, BUG_UNION_EXTERNAL_DUP, BUG_UNION_SEQ_FIRST
from slatedb.projection.ranges import effective_bounds, start_cmp_key

KEYS = [bytes([c]) for c in b"abcdefghij"]


class Ids:
    """Deterministic ULIDs and UUIDs for a test."""

    def __init__(self, start: int = 1) -> None:
        self.n = start

    def ulid(self) -> ULID:
        self.n += 1
        return ULID.from_int((1_700_000_000_000 << 80) | self.n)

    def uuid(self) -> uuid.UUID:
        self.n += 1
        return uuid.UUID(int=self.n, version=4)


class Db:
    """Builds a manifest and remembers each SST's contents."""

    def __init__(self, ids: Ids, contents: dict) -> None:
        self.ids = ids
        self.contents = contents  # shared across dbs: sst id -> {key: seq}
        self.ssts: list[CompactedSsTableV2] = []
        self.seq = 0

    def sst(self, keys) -> CompactedSsTableV2:
        keys = sorted(set(keys))
        sid = self.ids.ulid()
        data = {}
        for k in keys:
            self.seq += 1
            data[k] = self.seq
        self.contents[sid] = data
        s = CompactedSsTableV2(sid, SsTableInfo(first_entry=keys[0], last_entry=keys[-1]))
        self.ssts.append(s)
        return s

    def view(self, s: CompactedSsTableV2) -> CompactedSsTableView:
        return CompactedSsTableView(self.ids.ulid(), s.id, None)

    def manifest(self, l0_keys, runs_keys) -> ManifestV2:
        # runs oldest first in the input; written newest first with descending ids
        runs = []
        for rid, chunks in enumerate(runs_keys):
            runs.append(SortedRunV2(rid + 1, tuple(self.view(self.sst(c)) for c in chunks)))
        l0 = [self.view(self.sst(k)) for k in l0_keys]  # newest last in the input
        return ManifestV2(initialized=True, ssts=tuple(self.ssts), l0=tuple(reversed(l0)),
                          compacted=tuple(reversed(runs)), last_l0_seq=self.seq)


def read(m: ManifestV2, contents: dict, key: bytes):
    ssts = {s.id: s for s in m.ssts}
    for v in m.l0:
        if effective_bounds(v, ssts[v.sst_id]).contains(key) and key in contents[v.sst_id]:
            return v.sst_id, contents[v.sst_id][key]
    for run in m.compacted:
        firsts = [effective_bounds(v, ssts[v.sst_id]).lo or b"" for v in run.ssts]
        assert firsts == sorted(firsts), "a sorted run's views are sorted"
        i = bisect_right(firsts, key) - 1
        if i >= 0:
            v = run.ssts[i]
            if effective_bounds(v, ssts[v.sst_id]).contains(key) and key in contents[v.sst_id]:
                return v.sst_id, contents[v.sst_id][key]
    return None


def rows(m, contents):
    return {k: read(m, contents, k) for k in KEYS}


def source(ids=None, contents=None):
    ids = ids or Ids()
    contents = {} if contents is None else contents
    db = Db(ids, contents)
    m = db.manifest(l0_keys=[[b"a", b"c", b"h"], [b"c", b"d"], [b"b", b"i"]],
                    runs_keys=[[[b"a", b"b"], [b"d", b"e", b"f"], [b"g", b"j"]], [[b"b", b"c"], [b"e", b"h"]]])
    return m, contents, ids


# --- projection ------------------------------------------------------------------------------


def test_projection_keeps_rows_inside_and_none_outside():  # PROJ-1
    m, contents, _ = source()
    r = KeyRange(b"c", b"g")
    p = project(m, r)
    for k in KEYS:
        assert read(p, contents, k) == (read(m, contents, k) if r.contains(k) else None), k


def test_projection_drops_views_runs_ssts_and_external_entries():
    m, contents, ids = source()
    # The newest run's SSTs are someone else's (a clone): one entry.
    run_ids = [v.sst_id for v in m.compacted[0].ssts]
    m = attrs.evolve(m, external_dbs=(ExternalDb("parent", ids.uuid(), ids.uuid(), tuple(run_ids)),))
    p = project(m, KeyRange(b"i", None))
    assert [(r.id, len(r.ssts)) for r in p.compacted] == [(1, 1)]  # run 2 ([b,c],[e,h]) dropped, run 1 keeps its id
    assert p.external_dbs == ()  # nothing of the external run is left: entry removed
    assert {s.id for s in p.ssts} == {v.sst_id for v in p.l0} | {p.compacted[0].ssts[0].sst_id}
    q = project(m, KeyRange(b"b", b"c"))
    assert q.external_dbs[0].sst_ids == (run_ids[0],)
    assert q.external_dbs[0].final_checkpoint_id == m.external_dbs[0].final_checkpoint_id


def test_run_view_spans_to_next_start_but_never_past_its_own_view():  # PROJ-2 with a gap
    m, contents, _ = source()
    # a union of [a,c) and [f,..) of one run leaves a gap; projecting the result on everything
    # must not resurrect [c,f) of the first SST of the run.
    left, right = project(m, KeyRange(None, b"c")), project(m, KeyRange(b"f", None))
    for base in (left, right):
        for v in base.l0 + tuple(v for r in base.compacted for v in r.ssts):
            assert v.visible_range is not None
    again = project(left, KeyRange())
    assert rows(again, contents) == rows(left, contents)
    widened = project(left, KeyRange(), bugs=frozenset({BUG_PROJECT_WIDENS}))
    assert rows(widened, contents) != rows(left, contents)


@pytest.mark.parametrize("newer", ["value", "tombstone"])
@pytest.mark.parametrize("r", [KeyRange(), KeyRange(b"b", b"y"), KeyRange(b"k", None)], ids=format_range)
def test_a_key_whose_versions_span_two_ssts_of_a_run_keeps_the_newer_ones(newer, r):  # PROJ-1, READ-7
    """The official compactor cuts an output SST after any row, so a key's versions may span
    adjacent SSTs of a sorted run, the newer ones ending the earlier SST (READ-7). P3 bounds a
    run's view by the next view's start *included*: bounded before it, the projection dropped
    the earlier SST's versions of that key and read the older value (or the deleted key) from
    the next SST -- a projection onto every key changed a read (`sim mutate` seed 24: the
    end's flag turned survived, and was the better rule). The projected databases are read by
    the engine here."""
    import slatedb
    from slatedb.format.manifest import encode_manifest
    from slatedb.manifest.store import manifest_key
    from slatedb.row import Row, RowKind
    from tests.compactor.test_executor import put_sst
    from tests.db.helpers import memory_store

    store = memory_store()
    last = Row(b"k", 10, RowKind.VALUE, b"new") if newer == "value" else Row(b"k", 10, RowKind.TOMBSTONE, b"")
    first = put_sst(store, [Row(b"a", 1, RowKind.VALUE, b"A"), last])
    second = put_sst(store, [Row(b"k", 5, RowKind.VALUE, b"old"), Row(b"z", 2, RowKind.VALUE, b"Z")])
    m = ManifestV2(initialized=True, last_l0_seq=20, ssts=(first, second), compacted=(SortedRunV2(
        0, (CompactedSsTableView(first.id, first.id), CompactedSsTableView(second.id, second.id))),))
    p = project(m, r)
    (run,) = p.compacted
    assert [v.sst_id for v in run.ssts] == [first.id, second.id]
    assert effective_bounds(run.ssts[0], first).contains(b"k")
    store.put_now(manifest_key(1), encode_manifest(p))
    want = {b"a": b"A", b"k": b"new", b"z": b"Z"} if newer == "value" else {b"a": b"A", b"z": b"Z"}
    with slatedb.Db.open("memory://test", {"compactor_options": None, "min_filter_keys": 1}, store=store) as db:
        assert dict(db.scan(None, None)) == {k: v for k, v in want.items() if r.contains(k)}
        assert db.get(b"k") == want.get(b"k")


def test_a_split_at_a_key_spanning_two_ssts_of_a_run_and_its_union_read_the_newer_version():  # PROJ-4, READ-7
    """Projections onto ``..k`` and ``k..`` of that run, and their union: the right one keeps the
    earlier SST's view of ``k`` alone (``[k, k]``, before it the view was dropped), the union
    merges the two views of that SST back into one, and ``k`` reads the newer version."""
    import slatedb
    from slatedb.format.manifest import encode_manifest
    from slatedb.manifest.store import manifest_key
    from slatedb.row import Row, RowKind
    from tests.compactor.test_executor import put_sst
    from tests.db.helpers import memory_store

    ids = Ids()
    store = memory_store()
    first = put_sst(store, [Row(b"a", 1, RowKind.VALUE, b"A"), Row(b"k", 10, RowKind.VALUE, b"new")])
    second = put_sst(store, [Row(b"k", 5, RowKind.VALUE, b"old"), Row(b"z", 2, RowKind.VALUE, b"Z")])
    m = ManifestV2(initialized=True, last_l0_seq=20, ssts=(first, second), compacted=(SortedRunV2(
        0, (CompactedSsTableView(first.id, first.id), CompactedSsTableView(second.id, second.id))),),
        external_dbs=(ExternalDb("root", ids.uuid(), ids.uuid(), (first.id, second.id)),))
    left, right = project(m, KeyRange(None, b"k")), project(m, KeyRange(b"k", None))
    from slatedb.lsm.view import KeyBounds

    kept = right.compacted[0].ssts[0]
    assert kept.sst_id == first.id and bounds_of(kept.visible_range) == KeyBounds(b"k", True, b"k", True)
    u = union([UnionSource(left, "left", ids.uuid()), UnionSource(right, "right", ids.uuid())],
              new_uuid=ids.uuid, new_ulid=ids.ulid)
    assert [v.sst_id for v in u.compacted[0].ssts] == [first.id, second.id]
    store.put_now(manifest_key(1), encode_manifest(attrs.evolve(u, initialized=True, external_dbs=())))
    with slatedb.Db.open("memory://test", {"compactor_options": None, "min_filter_keys": 1}, store=store) as db:
        assert dict(db.scan(None, None)) == {b"a": b"A", b"k": b"new", b"z": b"Z"}


def test_projection_rejects_bad_ranges():
    m, _, _ = source()
    with pytest.raises(InvalidProjectionError):
        KeyRange(b"m", b"a")
    with pytest.raises(InvalidProjectionError):
        project(m, "a..m")  # type: ignore[arg-type]
    for kw in ({"start": "a"}, {"end": "m"}):  # text, not bytes: refused when the range is made
        with pytest.raises(InvalidProjectionError, match=f"KeyRange.{next(iter(kw))} must be bytes"):
            KeyRange(**kw)  # type: ignore[arg-type]


def test_typed_ranges_round_trip():
    assert parse_range("a..m") == KeyRange(b"a", b"m")
    assert parse_range("..m") == KeyRange(None, b"m")
    assert parse_range("a..") == KeyRange(b"a", None)
    assert parse_range("..") == KeyRange()
    assert parse_range(r"\x00\xff..\\\.z") == KeyRange(b"\x00\xff", b"\\.z")
    for bad in ("a", "a..b..c", r"\q..", "m..a"):
        with pytest.raises(InvalidProjectionError):
            parse_range(bad)
    # the error names the mistake: a second '..' is not "a key range without '..'"
    with pytest.raises(InvalidProjectionError, match=r"has one '\.\.'"):
        parse_range("a..b..c")
    with pytest.raises(InvalidProjectionError) as bad_escape:
        parse_range(r"x\q..")
    assert "at " + repr(b"\\q..") in str(bad_escape.value)  # the four bytes from the bad escape on


def test_the_hull_of_adjacent_bounds_is_their_concatenation_in_the_one_form_of_no_end():
    """An open end is ``hi=None, hi_inclusive=False`` (KeyBounds(), FULL_RANGE): a hull reaching
    it is written so, and compares equal to the same bounds made directly."""
    from slatedb.lsm.view import KeyBounds
    from slatedb.projection.ranges import hull

    a, b = KeyBounds(b"a", True, b"c", False), KeyBounds(b"c", True, None, False)
    assert hull(a, b) == hull(b, a) == KeyBounds(b"a", True, None, False)
    assert hull(KeyBounds(None, True, b"c", False), b) == KeyBounds()
    assert hull(a, KeyBounds(b"c", True, b"e", True)) == KeyBounds(b"a", True, b"e", True)
    # ... and an open start is ``lo=None, lo_inclusive=True``, whatever flag the open side carried.
    open_start = KeyBounds(None, False, b"b", False)
    assert hull(open_start, a) == hull(a, open_start) == KeyBounds(None, True, b"c", False)


@given(st.binary(max_size=6), st.binary(max_size=6))
def test_typed_range_format_parse_inverse(a, b):
    if a and b and a >= b:
        return
    r = KeyRange(a or None, b or None)
    assert parse_range(format_range(r)) == r


def test_the_typed_form_writes_graphic_ascii_as_itself_and_every_other_byte_escaped():
    """``format_range``: the bytes 0x21..0x7E stand for themselves (``\\`` and ``.`` escaped);
    space, the control bytes, DEL (0x7F) and everything above as ``\\xNN``, so the text is
    printable ASCII without blanks whatever the keys (`sim mutate` seed 24 let DEL through)."""
    for byte in range(256):
        text = format_range(KeyRange(bytes([byte]), None))
        if byte == 0x5C:
            want = "\\\\.."
        elif byte == 0x2E:
            want = "\\..."
        elif 0x21 <= byte <= 0x7E:
            want = chr(byte) + ".."
        else:
            want = f"\\x{byte:02x}.."
        assert text == want, (byte, text)
        assert parse_range(text) == KeyRange(bytes([byte]), None)


# --- union -----------------------------------------------------------------------------------


def shards(m, ids, cuts, path="root", checkpoint=None):
    checkpoint = checkpoint or ids.uuid()
    edges = [None, *cuts, None]
    ranges = [KeyRange(a, b) for a, b in zip(edges, edges[1:])]
    base = referencing(m, path, checkpoint)
    return [UnionSource(project(base, r), f"shard{i}", ids.uuid()) for i, r in enumerate(ranges)], ranges


def test_split_and_merge_is_the_source():  # PROJ-4
    m, contents, ids = source()
    parts, ranges = shards(m, ids, [b"c", b"f"])
    for given_ranges in (None, ranges):
        u = union(list(reversed(parts)), given_ranges and list(reversed(given_ranges)), new_uuid=ids.uuid, new_ulid=ids.ulid)
        assert rows(u, contents) == rows(m, contents)
        assert u.initialized is False and u.writer_epoch == 0 and u.compactor_epoch == 0
        assert u.replay_after_wal_id == 0 and u.wal_id_last_seen == 0 and u.checkpoints == ()
        assert u.last_l0_seq == m.last_l0_seq  # PROJ-3
        # one external entry: the root at the one checkpoint (the shards own nothing)
        assert [(e.path, len(e.sst_ids)) for e in u.external_dbs] == [("root", len(m.ssts))]
        # adjacent views of one SST were merged back: as many views as the source
        assert len(u.l0) == len(m.l0)
        assert sorted(len(r.ssts) for r in u.compacted) == sorted(len(r.ssts) for r in m.compacted)
        view_ids = [v.id for v in u.l0] + [v.id for r in u.compacted for v in r.ssts]
        assert len(set(view_ids)) == len(view_ids)


def test_given_ranges_project_each_source_before_the_union():  # PROJ-4, U1
    """With ranges given, ``union`` projects each source onto its range itself: three whole
    copies of one database, each given one range of a partition, make the database again (not
    three overlapping copies)."""
    m, contents, ids = source()
    base = referencing(m, "root", ids.uuid())
    edges = [None, b"c", b"f", None]
    ranges = [KeyRange(a, b) for a, b in zip(edges, edges[1:])]
    whole = [UnionSource(base, f"copy{i}", ids.uuid()) for i in range(len(ranges))]
    u = union(whole, ranges, new_uuid=ids.uuid, new_ulid=ids.ulid)
    assert rows(u, contents) == rows(m, contents)
    parts, _ = shards(m, ids, [b"c", b"f"])
    projected = union(parts, ranges, new_uuid=ids.uuid, new_ulid=ids.ulid)
    assert (u.l0, u.compacted) == (projected.l0, projected.compacted)


def test_adjacent_views_of_different_ssts_in_one_run_stay_apart():  # PROJ-4, U3
    """Two databases whose one-run SSTs both span a..j, given the ranges [.., e) and [e, ..):
    the union's run holds two adjacent views (one ends where the other starts), of two SSTs.
    Only views of one SST merge: each key reads from its own source's SST."""
    ids, contents = Ids(), {}
    a = Db(ids, contents).manifest([], [[KEYS]])
    b = Db(ids, contents).manifest([], [[KEYS]])
    assert a.ssts[0].id < b.ssts[0].id
    ranges = [KeyRange(None, b"e"), KeyRange(b"e", None)]
    u = union([UnionSource(a, "a", ids.uuid()), UnionSource(b, "b", ids.uuid())], ranges,
              new_uuid=ids.uuid, new_ulid=ids.ulid)
    assert [len(r.ssts) for r in u.compacted] == [2]
    expect = {k: read(a if k < b"e" else b, contents, k) for k in KEYS}
    assert rows(u, contents) == expect


def test_start_bounds_sort_open_first_then_by_key_included_before_excluded():
    """``start_cmp_key``: an open start sorts before every start, the empty key included; at one
    key an included start sorts before an excluded one (U1's order of the sources)."""
    from slatedb.lsm.view import KeyBounds

    starts = [KeyBounds(None), KeyBounds(b""), KeyBounds(b"", False), KeyBounds(b"a"), KeyBounds(b"a", False)]
    keys = [start_cmp_key(b) for b in starts]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_union_seq_is_max_and_external_entries_merge():
    ids, contents = Ids(), {}
    a = Db(ids, contents).manifest([[b"a", b"b"]], [])
    b = Db(ids, contents)
    b.seq = 100
    bm = b.manifest([[b"x", b"y"]], [])
    u = union([UnionSource(bm, "b", ids.uuid()), UnionSource(a, "a", ids.uuid())], new_uuid=ids.uuid, new_ulid=ids.ulid)
    assert u.last_l0_seq == 102  # PROJ-3
    assert [e.path for e in u.external_dbs] == ["a", "b"]  # sorted by start key
    assert len({e.final_checkpoint_id for e in u.external_dbs}) == 2
    bad = union([UnionSource(a, "a", ids.uuid()), UnionSource(bm, "b", ids.uuid())], new_uuid=ids.uuid,
                new_ulid=ids.ulid, bugs=frozenset({BUG_UNION_SEQ_FIRST}))
    assert bad.last_l0_seq == 2


def test_union_errors():
    m, contents, ids = source()
    with pytest.raises(UnionSetEmptyError):
        union([], new_uuid=ids.uuid, new_ulid=ids.ulid)
    with pytest.raises(InvalidUnionError, match="overlapping"):
        union([UnionSource(m, "x", ids.uuid()), UnionSource(project(m, KeyRange(b"c", b"e")), "y", ids.uuid())],
              new_uuid=ids.uuid, new_ulid=ids.ulid)
    parts, ranges = shards(m, ids, [b"c", b"f"])
    with pytest.raises(InvalidUnionError, match="not adjacent"):
        union(parts[:1] + parts[2:], [ranges[0], ranges[2]], new_uuid=ids.uuid, new_ulid=ids.ulid)
    # same id, different objects
    other = attrs.evolve(m, ssts=tuple(attrs.evolve(s, info=attrs.evolve(s.info, first_entry=b"z", last_entry=b"z"))
                                       for s in m.ssts), l0=m.l0[:1], compacted=())
    with pytest.raises(SstIdCollisionError):
        union([UnionSource(project(m, KeyRange(None, b"c")), "x", ids.uuid()), UnionSource(other, "y", ids.uuid())],
              new_uuid=ids.uuid, new_ulid=ids.ulid)


def test_cycles_keep_external_dbs_the_same_size():
    m, contents, ids = source()
    cur, path = m, "root"
    sizes = []
    for cycle in range(5):
        parts, ranges = shards(cur, ids, [b"c", b"f"], path=path)
        cur = union(parts, ranges, new_uuid=ids.uuid, new_ulid=ids.ulid)
        path = f"union{cycle}"
        assert rows(cur, contents) == rows(m, contents)
        sizes.append((len(cur.external_dbs), len(cur.l0), sum(len(r.ssts) for r in cur.compacted)))
    assert len(set(sizes)) == 1, sizes
    parts, ranges = shards(cur, ids, [b"c", b"f"], path=path)
    dup = union(parts, ranges, new_uuid=ids.uuid, new_ulid=ids.ulid, bugs=frozenset({BUG_UNION_EXTERNAL_DUP}))
    assert len(dup.external_dbs) == 3 * len(cur.external_dbs)


# --- property: project then union of any partition = the source --------------------------------

key_sets = st.lists(st.sampled_from(KEYS), min_size=1, max_size=5, unique=True)


@st.composite
def manifests(draw):
    ids, contents = Ids(draw(st.integers(0, 10**6))), {}
    db = Db(ids, contents)
    l0 = draw(st.lists(key_sets, max_size=4))
    runs = []
    for _ in range(draw(st.integers(0, 3))):
        keys = sorted(draw(key_sets))
        cuts = sorted(draw(st.sets(st.integers(1, max(1, len(keys) - 1)), max_size=3)))
        chunks = [keys[a:b] for a, b in zip([0, *cuts], [*cuts, len(keys)]) if keys[a:b]]
        runs.append(chunks)
    m = db.manifest(l0, runs)
    if draw(st.booleans()):  # start from an earlier projection (views with visible ranges, gaps)
        lo, hi = sorted(draw(st.lists(st.sampled_from(KEYS + [None]), min_size=2, max_size=2, unique=True)),
                        key=lambda k: (k is None, k))
        m = project(m, KeyRange(lo, hi if hi is not None and (lo is None or hi > lo) else None))
    return m, contents, ids


@settings(max_examples=300, deadline=None)
@given(manifests(), st.sets(st.sampled_from(KEYS[1:]), max_size=4), st.booleans(), st.randoms(use_true_random=False))
def test_property_partition_project_union_is_identity(mci, cuts, with_ranges, rnd):
    m, contents, ids = mci
    before = rows(m, contents)
    parts, ranges = shards(m, ids, sorted(cuts))
    for (part, r) in zip(parts, ranges):  # PROJ-1 and PROJ-2 on every shard
        assert rows(part.manifest, contents) == {k: (v if r.contains(k) else None) for k, v in before.items()}
        src_views = {v.id: v for v in itertools.chain(m.l0, *(run.ssts for run in m.compacted))}
        ssts = {s.id: s for s in m.ssts}
        for v in itertools.chain(part.manifest.l0, *(run.ssts for run in part.manifest.compacted)):
            old = effective_bounds(src_views[v.id], ssts[v.sst_id])
            new = bounds_of(v.visible_range)
            assert old.intersect(new) == new or new.intersect(old) == new
            for k in KEYS:
                assert not new.contains(k) or old.contains(k), (old, new, k)
    order = list(range(len(parts)))
    rnd.shuffle(order)
    u = union([parts[i] for i in order], [ranges[i] for i in order] if with_ranges else None,
              new_uuid=ids.uuid, new_ulid=ids.ulid)
    assert rows(u, contents) == before  # PROJ-4
    assert u.last_l0_seq == max(p.manifest.last_l0_seq for p in parts)  # PROJ-3
    assert len(u.l0) <= len(m.l0)
    ext = [(e.path, e.source_checkpoint_id) for e in u.external_dbs]
    assert len(ext) == len(set(ext))


def test_projection_of_a_sorted_run_with_hundreds_of_ssts():
    """A run of 300 SSTs (ints past CPython's small-int cache: an identity test in place of the
    index comparison would run off the run's end) keeps exactly the rows inside the range."""
    ids, contents = Ids(), {}
    keys = [b"k%04d" % i for i in range(600)]
    m = Db(ids, contents).manifest([], [[keys[i:i + 2] for i in range(0, 600, 2)]])
    (run,) = m.compacted
    assert len(run.ssts) == 300
    p = project(m, KeyRange(b"k0100", b"k0500"))
    (prun,) = p.compacted
    assert len(prun.ssts) == 200
    ssts = {s.id: s for s in p.ssts}
    inside = {k for v in prun.ssts for k in contents[v.sst_id] if effective_bounds(v, ssts[v.sst_id]).contains(k)}
    assert inside == set(keys[100:500])


def test_a_union_of_sources_whose_runs_are_not_descending_renumbers_them_from_n_minus_one_down():
    """_union_runs' fallback: a source listing its runs other than by strictly descending id gets
    every run copied in source order and renumbered n-1 .. 0 (ids are never negative, the newest
    first), and reads see the source."""
    m, contents, ids = source()
    ascending = attrs.evolve(m, compacted=tuple(reversed(m.compacted)))
    parts, _ranges = shards(ascending, ids, [b"e"])
    u = union(parts, None, new_uuid=ids.uuid, new_ulid=ids.ulid)
    n = sum(len(p.manifest.compacted) for p in parts)
    assert [r.id for r in u.compacted] == list(range(n - 1, -1, -1))
