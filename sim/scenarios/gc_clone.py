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
4. the checkpoint is deleted and ``cw`` stays open a little longer: now GC may detach.

The trace check (``sim/checks/gc.py``, CLONE-4) fires at a wrong detach itself: the clone's
GC releases its final checkpoint on the parent while the held checkpoint's manifest lists
parent SSTs. A failing read is the end-to-end consequence, but not within this world's time:
every compaction commit on the parent pins the manifest it replaces for the compactor's
``checkpoint_lifetime`` (900 s), which keeps the parent's SSTs of the clone's time long after a
wrong detach. (Tried: with the trace check off, ``gc-detach-latest-only``, the parent then
compacted fully and its GC run for a minute, every read of gc seeds 0, 2, 3 and 5 passed.)
"""

from __future__ import annotations

import trio

from slatedb.checkpoint import CheckpointOptions, create_checkpoint, delete_checkpoint
from slatedb.compactor import full_spec, submit_compaction
from slatedb.errors import ObjectNotFoundError, SlateDBError
from slatedb.manifest.store import ManifestStore
from slatedb.reader.aio import DbReader

from sim.scenarios.gc_world import CLONE, World, _scan
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


async def checkpoint_reader_through_detach(world: World, held: tuple[object, float] | None, want: dict) -> None:
    """Steps 1-4 of the module docstring, while the clone's writer is open; ``want``: the
    parent's part of the clone's state (what the held checkpoint shows: the clone writes only
    keys of its own)."""
    if held is None:
        return
    cid, expires_at = held
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
                if trio.current_time() < expires_at - 25:
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
            await trio.sleep(rng.uniform(0.5, 2.0))
            await read_again("while the clone compacts")
        # The clone's GC passes (detach every second) while the checkpoint still pins the old
        # manifest: the reads must go on as before.
        for _ in range(rng.randint(3, 6)):
            await trio.sleep(rng.uniform(1.0, 4.0))
            await read_again("after the clone's full compaction")
    await delete_checkpoint(ms, rt, cid, missing_ok=True)
    # Now nothing of ours reads the parent's SSTs: GC may detach (the clone writer stays open).
    for _ in range(20):
        await trio.sleep(1.0)
        latest = await ms.read_latest_required()
        if not latest.manifest.external_dbs:
            world.clone_detach = "detached"
            return
