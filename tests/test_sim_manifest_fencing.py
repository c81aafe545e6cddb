"""Manifest-level fencing on the trace (sim/checks/manifest.py): FENCE-5 for a writer's L0
flush, CFENCE-1 for a compaction commit, PROJ-6 (an SST under one path of ``external_dbs``) and
GC-5 (RFC 0029: an L0's ULID time never below the newest L0's, nor its writer's clock at the
mint), at the moment each manifest lands. Fed good and bad
histories here; the catalogue switch l0-commit-unfenced is held to its budget by
tests/test_sim_bugs.py."""

from __future__ import annotations

import attrs
import pytest
from ulid import ULID

from sim.world.invariants import InvariantViolation
from sim.checks.manifest import ManifestFenceChecks
from sim.world.trace import Event
from slatedb.format.manifest import encode_manifest
from slatedb.format.types import CompactedSsTableView, ExternalDb, ManifestV2
from slatedb.manifest.checkpoints import writer_checkpoint


def _ulid(n: int) -> ULID:
    return ULID.from_int(n + (1 << 80))


def _view(n: int) -> CompactedSsTableView:
    return CompactedSsTableView(_ulid(n), _ulid(n), None)


def _l0_at(ms: int, n: int = 0) -> CompactedSsTableView:
    u = ULID.from_int((ms << 80) | n)
    return CompactedSsTableView(u, u, None)


class World:
    def __init__(self):
        self.objects: dict[str, bytes] = {}
        self.checks = ManifestFenceChecks(self.objects.get)
        self.n = 0

    def event(self, process, kind, **fields):
        self.checks.on_event(Event(float(self.n), process, kind, tuple(fields.items())))

    def land(self, process, mid, m: ManifestV2, root=""):
        key = f"{root}manifest/{mid:020d}.manifest"
        self.n += 1
        self.event(process, "store.put", n=self.n, key=key, decision="ok", mode="create-if-absent", size=1)
        self.objects[key] = encode_manifest(m)
        self.event(process, "store.result", n=self.n, outcome='ok etag="x"')


BASE = ManifestV2(initialized=True, writer_epoch=1)


def _wcp(epoch: int, manifest_id: int):
    """The writer checkpoint of ``epoch`` pinning ``manifest_id`` (CKPT-4 holds in these histories)."""
    import uuid
    return writer_checkpoint(uuid.UUID(int=manifest_id), manifest_id, epoch, 0)


def _w(m: ManifestV2, epoch: int, pinned: int) -> ManifestV2:
    return attrs.evolve(m, writer_epoch=epoch, checkpoints=(_wcp(epoch, pinned),))


def test_a_writer_flushing_while_it_is_the_writer_passes():
    w = World()
    w.land("w1", 1, _w(BASE, 1, 1))
    w.event("w1", "writer_epoch", epoch=1, manifest=1)
    w.land("w1", 2, _w(attrs.evolve(BASE, l0=(_view(1),), replay_after_wal_id=3), 1, 2))
    w.land("w2", 3, _w(attrs.evolve(BASE, l0=(_view(1),), replay_after_wal_id=3), 2, 3))
    w.event("w2", "writer_epoch", epoch=2, manifest=3)
    w.land("w2", 4, _w(attrs.evolve(BASE, l0=(_view(2), _view(1)), replay_after_wal_id=5), 2, 4))
    assert w.checks.counts["writer_updates"] == 2
    assert w.checks.writer_checkpoint.counts["refreshed"] == 2


def test_a_zombie_l0_flush_after_a_newer_epoch_is_fence_5():
    w = World()
    w.land("w1", 1, _w(BASE, 1, 1))
    w.event("w1", "writer_epoch", epoch=1, manifest=1)
    w.land("w2", 2, _w(BASE, 2, 2))
    w.event("w2", "writer_epoch", epoch=2, manifest=2)
    # w1 never re-checked the epoch: its flush copies the latest (epoch 2) and adds its L0.
    with pytest.raises(InvariantViolation, match="FENCE-5.*w1 .writer epoch 1.*manifest 2 below it"):
        w.land("w1", 3, _w(attrs.evolve(BASE, l0=(_view(1),), replay_after_wal_id=4), 2, 2))


def test_roots_are_separate_and_other_updates_are_not_writer_flushes():
    w = World()
    w.land("w1", 1, _w(BASE, 1, 1), root="parent/")
    w.event("w1", "writer_epoch", epoch=1, manifest=1)
    w.land("cw", 1, _w(BASE, 5, 1), root="clone/")
    w.land("w1", 2, _w(attrs.evolve(BASE, l0=(_view(1),)), 1, 2), root="parent/")  # the clone's epoch is not ours
    # A checkpoint or epoch change by the same process is not an L0 flush.
    w.land("w1", 3, _w(attrs.evolve(BASE, l0=(_view(1),), wal_id_last_seen=9), 1, 2), root="parent/")


def test_a_fenced_compactor_commit_is_cfence_1():
    w = World()
    m1 = attrs.evolve(BASE, compactor_epoch=1, l0=(_view(1), _view(2)))
    w.land("c1", 1, m1)
    w.event("c1", "compactor_started", epoch=1)
    w.land("c2", 2, attrs.evolve(m1, compactor_epoch=2))
    w.event("c2", "compactor_started", epoch=2)
    with pytest.raises(InvariantViolation, match="CFENCE-1.*c1 .compactor epoch 1"):
        w.land("c1", 3, attrs.evolve(m1, compactor_epoch=2, l0=()))


def test_an_sst_under_two_paths_of_external_dbs_is_proj_6():
    import uuid
    w = World()
    ckpt = uuid.UUID(int=1, version=4)
    shard = ExternalDb(path="shard0", source_checkpoint_id=ckpt, sst_ids=(_ulid(1),))
    nested = ExternalDb(path="src", source_checkpoint_id=uuid.UUID(int=2, version=4), sst_ids=(_ulid(2),))
    w.land("un", 1, attrs.evolve(BASE, external_dbs=(shard, nested)), root="ok/")  # each SST under one path
    # The same path at two checkpoints may list one SST twice (PROJ-5 merges by path and checkpoint).
    again = attrs.evolve(shard, source_checkpoint_id=uuid.UUID(int=3, version=4))
    w.land("un", 1, attrs.evolve(BASE, external_dbs=(shard, again)), root="ok2/")
    # A union listing the shard's nested SST (stored under src) as the shard's own.
    wrong = attrs.evolve(shard, sst_ids=(_ulid(1), _ulid(2)))
    with pytest.raises(InvariantViolation, match="PROJ-6.*under 'shard0' and under 'src'|PROJ-6.*under 'src' and under"):
        w.land("un", 1, attrs.evolve(BASE, external_dbs=(wrong, nested)), root="merged/")


def test_an_l0_below_the_newest_l0_is_gc_5():
    w = World()
    m1 = attrs.evolve(BASE, l0=(_l0_at(5000),))
    w.land("w1", 1, m1)
    w.land("w1", 2, attrs.evolve(m1, l0=(_l0_at(5000, 1), _l0_at(5000))))  # equal time: allowed
    with pytest.raises(InvariantViolation, match="GC-5.*below the newest L0 of manifest 2"):
        w.land("w2", 3, attrs.evolve(m1, l0=(_l0_at(4999), _l0_at(5000, 1), _l0_at(5000))))


def test_an_l0_minted_in_its_writers_past_is_gc_5():
    """The upload's first attempt is the moment of the mint; the stored object's last_modified is
    the uploader's clock when its last attempt applied."""
    stamps: dict[str, int] = {}
    w = World()
    w.checks.modified_ms = stamps.get
    w.land("w1", 1, BASE)

    def upload(view, minted_s: float, applied_s: float, clock_ms: int) -> None:
        key = f"compacted/{view.sst_id}.sst"
        w.checks.on_event(Event(minted_s, "w1", "store.put", (("n", 1000), ("key", key))))
        w.checks.on_event(Event(minted_s, "w1", "store.result", (("n", 1000), ("outcome", "transient-error"))))
        w.checks.on_event(Event(applied_s, "w1", "store.put", (("n", 1001), ("key", key))))
        w.checks.on_event(Event(applied_s, "w1", "store.result", (("n", 1001), ("outcome", "ok"))))
        stamps[key] = clock_ms

    good = _l0_at(10_000)
    upload(good, 1.0, 6.0, 15_000)  # applied 5 s after the mint, the clock says 15 s: minted at 10 s
    w.land("w1", 2, attrs.evolve(BASE, l0=(good,)))
    stale = _l0_at(10_000, 7)  # minted at 20 s (the clock at the apply, 20.5 s, less 0.5 s) but dated 10 s
    upload(stale, 20.0, 20.5, 20_500)
    with pytest.raises(InvariantViolation, match="GC-5.*before its writer's clock"):
        w.land("w1", 3, attrs.evolve(BASE, l0=(stale, good)))


def test_an_inverted_l0_id_floor_is_reported_as_gc_5(monkeypatch):
    """Issue 27 item 5: a hand-written mutant of ``not_before`` with the floor inverted
    (``min(now, floor)``: every L0 dated at the first one) was caught only by the gc scenario's
    liveness check (an orphan upload never collected); it is GC-5 by name in the db scenario."""
    from slatedb.db import flushers
    from slatedb.runtime import ulid_from_parts
    from sim.scenarios.catalogue import fired
    from sim.scenarios.db import run_db_workload

    def inverted(fresh, floor_ms):
        if fresh.milliseconds < floor_ms:
            return fresh
        return ulid_from_parts(floor_ms, int(fresh) & ((1 << 80) - 1))

    monkeypatch.setattr(flushers, "not_before", inverted)
    result = run_db_workload(0)
    assert not result.ok and fired(result) == "GC-5", result.violations


def test_a_union_owning_nested_external_ssts_is_reported_as_proj_6(monkeypatch):
    """Issue 27 item 5: a hand-written mutant of ``owned_sst_ids`` counting a source's nested
    external SSTs as its own failed the rescale scenario only as ESCAPE-1 (ObjectNotFoundError on
    a read through the union); it is PROJ-6 by name when the union's manifest lands."""
    from slatedb.projection import ops
    from sim.scenarios.catalogue import fired
    from sim.scenarios.rescale import run_rescale_workload

    monkeypatch.setattr(ops, "owned_sst_ids", ops.referenced_sst_ids)
    result = run_rescale_workload(1)
    assert not result.ok and fired(result) == "PROJ-6", result.violations


def test_an_l0_id_without_its_floor_is_reported_as_gc_5(monkeypatch):
    """The other shape: no floor at all (the bug of gc seed 86, found there after 86 seeds as a
    missing SST): a writer whose clock runs behind its predecessor's mints L0 ids below the
    newest L0, GC-5 at db seed 0."""
    from slatedb.db import flushers
    from sim.scenarios.catalogue import fired
    from sim.scenarios.db import run_db_workload

    monkeypatch.setattr(flushers, "not_before", lambda fresh, floor_ms: fresh)
    result = run_db_workload(0)
    assert not result.ok and fired(result) == "GC-5", result.violations
    assert "below the newest L0" in result.violations[0]


def test_a_process_numbers_its_requests_once_over_all_its_stores():
    """Rescale seed 1251: the checkers match a ``store.result`` to its request by ``(process,
    n)``, but each store counted its own ``n``. The merged writer's put of an L0 SST (``n=30`` on
    its ``merged/`` store) stalled 9 s while a get ``n=30`` on its ``src/`` store (an external
    database) returned; GC-5 took that reply as the put's, so the upload seemed to apply 0.7 s
    after the mint, not 9.4 s, and the object's last_modified seemed 8.7 s ahead of the id's
    time. One sequence per process (``Trace.next_request``) over all its stores."""
    import random

    import trio
    import trio.testing

    from slatedb.objstore.memory import MemoryBucket, MemoryStore
    from sim.world.store import SimObjectStore
    from sim.world.trace import Trace

    trace = Trace(trio.current_time)
    bucket = MemoryBucket()

    def store(process: str, root: str) -> SimObjectStore:
        inner = MemoryStore(bucket, lambda: 0, root=f"{root}/", url=f"memory://sim/{root}")
        return SimObjectStore(inner, random.Random(root), trace, process=process)

    merged, src, gc = store("mw", "merged"), store("mw", "src"), store("gm", "merged")

    async def main() -> None:
        await merged.put("a", b"1")
        await src.put("b", b"2")
        await src.get("b")
        await merged.get("a")
        await gc.get("a")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    requests = [(e.process, e.f["n"]) for e in trace.events if e.kind.startswith("store.") and e.kind != "store.result"]
    assert requests == [("mw", 1), ("mw", 2), ("mw", 3), ("mw", 4), ("gm", 1)]
    results = [(e.process, e.f["n"]) for e in trace.events if e.kind == "store.result"]
    assert results == requests
