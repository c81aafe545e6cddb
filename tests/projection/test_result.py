"""Reads, writes, compaction and GC on projected and unioned databases."""

from __future__ import annotations

import pytest
import trio

import slatedb
from slatedb.errors import InvalidUnionError
from slatedb.gc import run_gc
from slatedb.projection import KeyRange
from slatedb.runtime.production import ProductionRuntime
from tests.clone.helpers import NO_COMPACTOR, contents, latest, store, write
from tests.db.helpers import compact_all_l0
from tests.gc.helpers import gc_options
from tests.projection.test_create import checkpoints, given_checkpoint, make, rows, world

pytestmark = pytest.mark.xdist_group("projection")


class Later(ProductionRuntime):
    """A GC process whose clock is ``ahead_s`` ahead (checkpoints with a lifetime have expired)."""

    def __init__(self, ahead_s: float) -> None:
        super().__init__("gc")
        self.ahead_ms = int(ahead_s * 1000)

    def now_ms(self) -> int:
        return super().now_ms() + self.ahead_ms


def gc(url: str, ahead_s: float = 0.0) -> None:
    trio.run(run_gc, store(url), Later(ahead_s), gc_options(min_age_s=0.0), True)


def test_reads_honour_visible_ranges_through_every_read_path(tmp_path) -> None:
    from tests.clone.helpers import bucket

    b = bucket()
    src, data = world(b)
    make(f"{b}/s", (src, None, KeyRange(b"a010", b"m005")))
    inside = {k: v for k, v in data.items() if b"a010" <= k < b"m005"}
    with slatedb.Db.open(f"{b}/s", settings=NO_COMPACTOR) as db:
        assert dict(db.scan()) == inside
        assert dict(db.scan(b"a000", b"zzz")) == inside
        assert db.get(b"a000") is None and db.get(b"x001") is None and db.get(b"m004") == data[b"m004"]
        assert [k for k, _ in db.scan(b"m", None)] == sorted(k for k in inside if k >= b"m")
    with slatedb.DbReader.open(f"{b}/s") as reader:
        assert dict(reader.scan()) == inside
        assert reader.get(b"m005") is None


def test_writes_outside_the_range_are_accepted_and_a_union_then_refuses_the_overlap() -> None:
    """Policy (docs/rescaling.md): as 0.17, a write outside a projected database's range is
    accepted and readable (the 0.17 manifest has no database range to check against); a union
    without ranges then refuses the overlapping sources, one with ranges drops the row."""
    from tests.clone.helpers import bucket

    b = bucket()
    src, data = world(b)
    cp = given_checkpoint(src)
    make(f"{b}/left", (src, cp, KeyRange(None, b"m")))
    make(f"{b}/right", (src, cp, KeyRange(b"m", None)))
    write(f"{b}/left", {b"z-outside": b"1"})
    assert contents(f"{b}/left")[b"z-outside"] == b"1"
    with pytest.raises(InvalidUnionError, match="overlapping"):
        make(f"{b}/u", (f"{b}/left", None, None), (f"{b}/right", None, None))
    make(f"{b}/u", (f"{b}/left", None, KeyRange(None, b"m")), (f"{b}/right", None, KeyRange(b"m", None)))
    assert contents(f"{b}/u") == data


def test_compaction_keeps_rows_and_prunes_external_dbs_gc_detaches_only_when_unreferenced() -> None:
    from tests.clone.helpers import bucket

    b = bucket()
    src, data = world(b)
    other = f"{b}/other"
    write(other, rows(b"zz", 8))
    u = f"{b}/u"
    make(u, (src, None, KeyRange(b"m", None)), (other, None, None))
    expect = {**{k: v for k, v in data.items() if k >= b"m"}, **rows(b"zz", 8)}
    write(u, {b"m001": b"after", b"n-new": b"1"})
    expect |= {b"m001": b"after", b"n-new": b"1"}
    pinned = given_checkpoint(u)  # pins a manifest that still references both sources' SSTs
    assert compact_all_l0(store(u)) >= 2
    assert contents(u) == expect
    m = latest(u).manifest
    assert m.external_dbs and all(not e.sst_ids for e in m.external_dbs)  # pruned, still attached
    finals = {url: [c.id for c in checkpoints(url) if c.checkpoint_expire_time_s == 0] for url in (src, other)}
    assert all(len(v) == 1 for v in finals.values())
    gc(u)  # the checkpoint still references them: no detach
    assert len(latest(u).manifest.external_dbs) == 2
    gc(src)
    src_objects = {k.key for k in store(src).list_now("compacted/")}
    referenced = {f"compacted/{i}.sst" for e in m.external_dbs for i in latest_refs(u, pinned, e.path)}
    assert referenced and referenced <= src_objects | {k.key for k in store(other).list_now("compacted/")}
    trio.run(_delete_checkpoint, u, pinned)
    write(u, {b"n-new2": b"2"})  # the writer's own checkpoint moves past the compaction too
    expect[b"n-new2"] = b"2"
    gc(u, ahead_s=86_400)  # and the readers' checkpoints of the tests' helpers expire
    assert latest(u).manifest.external_dbs == ()
    for url in (src, other):
        assert [c for c in checkpoints(url) if c.checkpoint_expire_time_s == 0] == [], url
    assert contents(u) == expect


def latest_refs(url, checkpoint_id, path):
    """SST ids the manifest pinned by ``checkpoint_id`` on ``url`` takes from ``path``."""
    from slatedb.manifest.store import ManifestStore

    cp = next(c for c in latest(url).manifest.checkpoints if c.id == checkpoint_id)

    async def main():
        return (await ManifestStore(store(url), ProductionRuntime()).read(cp.manifest_id)).manifest

    m = trio.run(main)
    return [i for e in m.external_dbs if e.path == path for i in e.sst_ids]


async def _delete_checkpoint(url, cid):
    from slatedb import admin

    await admin.delete_checkpoint(store(url), cid)


def test_source_ssts_survive_while_a_result_references_them() -> None:
    from tests.clone.helpers import bucket

    b = bucket()
    src, data = world(b)
    make(f"{b}/s", (src, None, KeyRange(None, b"m")))
    before = {k.key for k in store(src).list_now("compacted/")}
    assert compact_all_l0(store(src)) >= 1  # the source rewrites its SSTs
    gc(src)
    after = {k.key for k in store(src).list_now("compacted/")}
    assert before <= after  # the final checkpoint keeps the shard's SSTs alive
    assert contents(f"{b}/s") == {k: v for k, v in data.items() if k < b"m"}


def test_five_project_union_cycles_keep_external_dbs_the_same_size() -> None:
    from tests.clone.helpers import bucket

    b = bucket()
    src, data = world(b)
    cur = src
    sizes = []
    for cycle in range(5):
        cp = given_checkpoint(cur)
        for i, r in enumerate([KeyRange(None, b"m"), KeyRange(b"m", b"x"), KeyRange(b"x", None)]):
            make(f"{b}/c{cycle}s{i}", (cur, cp, r))
        nxt = f"{b}/c{cycle}u"
        m = make(nxt, *((f"{b}/c{cycle}s{i}", None, None) for i in range(3)))
        assert contents(nxt) == data, cycle
        sizes.append((len(m.external_dbs), len(m.l0), len(m.compacted)))
        cur = nxt
    assert len(set(sizes)) == 1, sizes
