"""The gc world's clone detaching from its parent under a reader of an older clone checkpoint
(CLONE-4, ``spec/protocols/clone.md``; RFC 000 "Detach the clone if possible").

Run by the clone's process (``sim/scenarios/gc_processes.py`` ``_clone``), in most seeds that
make a clone:

1. an admin ``cadmin`` checkpoints the clone as soon as it exists: the checkpoint pins the
   clone's first manifest, whose ``external_dbs`` entry lists the parent's SSTs;
2. once the clone's writer ``cw`` (its compactor, and its GC detaching every second) wrote its
   keys, a reader ``cr`` opens that checkpoint (no block cache: every read goes to the store)
   and reads exactly the parent's part of the clone; ``cadmin`` submits full compactions of the
   clone until its latest manifest references no parent SST;
3. the clone's GC passes (detach every second) while ``cr`` reads on through its checkpoint:
   every read must equal the first, and none may fail;
4. in the seeds whose compactor pins are short (``_compactor_pins`` of ``sim/scenarios/gc.py``:
   30 or 60 s instead of 900 s), the parent moves on under the reader: once the parent's writer
   is done, ``pc`` compacts the parent fully (so its latest manifest lists none of the SSTs the
   held clone manifest reads) and ``pgc`` runs the parent's GC every few seconds until every
   pin of the parent's compactions has expired; ``cr`` reads on (the held checkpoint refreshed);
5. the checkpoint is deleted and ``cw`` stays open a little longer: now GC may detach.

The trace check (``sim/checks/gc.py``, CLONE-4) fires at a wrong detach itself: the clone's
GC releases its final checkpoint on the parent while the held checkpoint's manifest lists
parent SSTs. Step 4 makes the consequence visible end to end: after a wrong detach nothing
of the parent's keeps those SSTs any more, its GC collects them and the next read through the
held checkpoint fails (this read oracle reports CLONE-4 on its own: ``gc-detach-latest-only``
with the trace check off, ``tests/test_sim_gc.py``). With 900-s pins the parent's SSTs of the
clone's time outlive any world, so step 4 runs only when the pins are short.
"""

from __future__ import annotations

import trio

from slatedb.checkpoint import CheckpointOptions, create_checkpoint, delete_checkpoint, refresh_checkpoint
from slatedb.compactor import full_spec, submit_compaction
from slatedb.compactor import Compactor
from slatedb.errors import ObjectNotFoundError, SlateDBError
from slatedb.gc import GarbageCollector
from slatedb.gc.retention import manifest_sst_ids
from slatedb.manifest.store import ManifestStore
from slatedb.reader.aio import DbReader

from sim.scenarios.gc_world import CLONE, PARENT, World, _scan
from sim.world import fastclock
from sim.world.choices import boolean

#: Virtual seconds the compaction may take before the history gives up on it (faults, stalls).
COMPACT_WITHIN_S = 90.0


def _parent_ssts(m) -> int:
    return sum(len(x.sst_ids) for x in m.external_dbs)


async def hold_clone_checkpoint(world: World) -> tuple[object, float] | None:
    """Step 1's checkpoint, taken by ``cadmin`` right after the clone is created (before its
    writer opens: its compactor soon compacts the parent's SSTs away), so that it pins the
    clone's first manifest, which lists the parent's SSTs. Returns (id, world time it is
    clearly unexpired until), or None in the seeds that skip the history."""
    rng = world.choices.stream("workload", "clone", "detach")
    if not boolean(rng, 0.8) or world.healed:
        return None
    rt = world.runtime("cadmin")
    lifetime = rng.uniform(200.0, 300.0)
    expires_at = trio.current_time() + lifetime - 1.0
    res = await create_checkpoint(ManifestStore(world.store("cadmin", CLONE), rt), rt,
                                  CheckpointOptions(lifetime_s=lifetime, name="cr"))
    world.clone_detach = "checkpointed"
    return res.id, expires_at


async def _parent_moves_on(world: World, ms: ManifestStore, cid, read_again, expiry: list[float]) -> None:
    """Step 4: the parent compacted fully and collected while ``cr`` reads on (the held
    checkpoint refreshed first: ``expiry[0]``, world time, is its new expiry)."""
    rng = world.choices.stream("workload", "clone", "detach", "parent")
    rt = world.runtimes["cadmin"]
    pinned = next(c.manifest_id for c in (await ms.read_latest_required()).manifest.checkpoints if c.id == cid)
    reads = {x for e in (await ms.read(pinned)).manifest.external_dbs for x in e.sst_ids}
    if not reads:
        return  # the parent held no SST when cloned (its WAL was copied): nothing read there
    while not world.writer_done.is_set():  # the parent's writer (and its compactor) close first
        await fastclock.sleep(rng.uniform(1.0, 4.0))
        await read_again("while the parent's writer finishes")
    lifetime = rng.uniform(200.0, 300.0)
    expiry[0] = trio.current_time() + lifetime - 1.0
    await refresh_checkpoint(ms, rt, cid, lifetime)
    pc_rt, pc_store = world.runtime("pc"), world.store("pc", PARENT)
    parent = ManifestStore(pc_store, pc_rt)
    deadline = trio.current_time() + 90.0
    while trio.current_time() < deadline:
        latest = (await parent.read_latest_required()).manifest
        if not reads & manifest_sst_ids(latest):
            world.clone_detach = "parent-compacted"
            break
        spec = full_spec(latest)
        try:
            if spec is not None:
                await submit_compaction(pc_store, pc_rt, spec)
            await Compactor(pc_store, pc_rt, world.settings).run_until_idle()
        except SlateDBError:
            pass  # faults: try again
        await read_again("while the parent compacts")
    if world.clone_detach != "parent-compacted":
        return  # the parent never compacted within the time (faults): nothing more to see
    # Every parent checkpoint but the clone's final ones (the source checkpoint of a clone of
    # the latest state lives 300 s, the compactions' pins 30 or 60 s, the writer's and the
    # admin's up to 90 s) expires before the parent's GC gives up; the held one outlives it.
    finals = {e.final_checkpoint_id for e in (await ms.read(pinned)).manifest.external_dbs}
    now_wall = world.now_wall_s()
    ends = [c.checkpoint_expire_time_s - now_wall for c in (await parent.read_latest_required()).manifest.checkpoints
            if c.id not in finals and c.checkpoint_expire_time_s]
    wait = min(max(ends, default=0.0), 330.0) + 20.0
    lifetime = wait + rng.uniform(60.0, 120.0)
    expiry[0] = trio.current_time() + lifetime - 1.0
    await refresh_checkpoint(ms, rt, cid, lifetime)
    until = trio.current_time() + wait
    gc_rt = world.runtime("pgc")
    gc = GarbageCollector(world.store("pgc", PARENT), gc_rt, world.settings.garbage_collector_options)
    try:
        while trio.current_time() < until:
            await fastclock.sleep(rng.uniform(1.0, 4.0))
            try:
                await gc.run_once()
            except SlateDBError:
                pass
            await read_again("while the parent's GC runs")
    finally:
        with trio.CancelScope(shield=True):
            await gc.locator.aclose()


async def checkpoint_reader_through_detach(world: World, held: tuple[object, float] | None, want: dict) -> None:
    """Steps 1-4 of the module docstring, while the clone's writer is open; ``want``: the
    parent's part of the clone's state (what the held checkpoint shows: the clone writes only
    keys of its own)."""
    if held is None:
        return
    cid, expires_at = held
    expiry = [expires_at]  # the held checkpoint's expiry (world time); step 4 refreshes it
    rng = world.choices.stream("workload", "clone", "detach", "reads")
    rt = world.runtimes["cadmin"]
    store = world.store("cadmin", CLONE)
    ms = ManifestStore(store, rt)
    # No block cache: every read goes to the store, as a reader that evicted the blocks would.
    async with DbReader.open(CLONE, cid, settings={"block_cache_size_bytes": 0}, store=world.store("cr", CLONE),
                             runtime=world.runtime("cr")) as reader:
        first = await _scan(reader)
        if first != want:
            raise AssertionError(f"CLONE-4: clone checkpoint {cid} reads {len(first)} rows, the parent's part of the "
                                 f"clone {len(want)}")

        async def read_again(why: str) -> None:
            try:
                state = await _scan(reader)
            except (SlateDBError, ObjectNotFoundError) as e:
                if trio.current_time() < expiry[0] - 25:
                    raise AssertionError(f"CLONE-4: a read through clone checkpoint {cid} ({why}) fails: "
                                         f"{type(e).__name__}: {e}") from None
                return
            world.clone_checkpoint_scans += 1
            if state != first:
                raise AssertionError(f"CLONE-4: a read through clone checkpoint {cid} ({why}) differs from its "
                                     f"first read")

        deadline = trio.current_time() + COMPACT_WITHIN_S
        submitted_at = -1e9
        while trio.current_time() < deadline:
            latest = await ms.read_latest_required()
            if _parent_ssts(latest.manifest) == 0:
                world.clone_detach = "compacted"
                break
            if trio.current_time() - submitted_at > 20.0:
                spec = full_spec(latest.manifest)
                if spec is not None:
                    await submit_compaction(store, rt, spec)
                    submitted_at = trio.current_time()
            await fastclock.sleep(rng.uniform(0.5, 2.0))
            await read_again("while the clone compacts")
        # The clone's GC passes (detach every second) while the checkpoint still pins the old
        # manifest: the reads must go on as before.
        for _ in range(rng.randint(3, 6)):
            await fastclock.sleep(rng.uniform(1.0, 4.0))
            await read_again("after the clone's full compaction")
        if world.clone_detach == "compacted" and world.compactor_pins_s < 900 and not world.healed:
            await _parent_moves_on(world, ms, cid, read_again, expiry)
    await delete_checkpoint(ms, rt, cid, missing_ok=True)
    # Now nothing of ours reads the parent's SSTs: GC may detach (the clone writer stays open).
    for _ in range(20):
        await fastclock.sleep(1.0)
        latest = await ms.read_latest_required()
        if not latest.manifest.external_dbs:
            world.clone_detach = "detached"
            return
