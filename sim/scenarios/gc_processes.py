"""The processes of the gc world (``sim/scenarios/gc.py`` describes them): the parent's writer,
a standalone GC and compactor, managed readers, the admin holding checkpoints, the clone and its
writer. Each runs under :func:`sim.world.engine.crashable` on its own store view and may freeze."""

from __future__ import annotations

import uuid

import trio

import slatedb.aio as aio
from slatedb.checkpoint import CheckpointOptions, CheckpointScope, create_checkpoint, delete_checkpoint, \
    refresh_checkpoint
from slatedb.clone import create_clone
from slatedb.compactor import Compactor
from slatedb.errors import (
    CheckpointNotFoundError,
    ClosedError,
    FencedError,
    InvalidDbStateError,
    NotFoundError,
    ObjectNotFoundError,
    SlateDBError,
)
from slatedb.gc import GarbageCollector
from slatedb.manifest.store import ManifestStore
from slatedb.reader import DbReaderOptions
from slatedb.reader.aio import DbReader

from sim.checks.gc import snapshot_isolation
from sim.scenarios.gc_clone import checkpoint_reader_through_detach, hold_clone_checkpoint
from sim.scenarios.gc_world import CLONE, N_KEYS, PARENT, RECOVER_S, STALL_MAX_S, World, _crash_after, _scan, run_gc
from sim.world import fastclock
from sim.world.choices import boolean
from sim.world.engine import PausableStore, crashable
from sim.world.runtime import SimRuntime


# -- the writer ---------------------------------------------------------------------------------


async def _writer(world: World, name: str, n_ops: int, restarts: int = 0) -> None:
    rt = world.runtime(name)
    store = world.store(name, PARENT)
    rng = world.choices.stream("workload", name)
    h = world.history
    mine = h.new_incarnation()
    done = 0
    srng = world.choices.stream("workload", name, "snapshots")  # its own stream: other draws unchanged

    async def body() -> str:
        nonlocal done
        async with aio.Db.open(PARENT, world.settings_map, store=store, runtime=rt) as db:
            unacked: list[tuple[bytes, int]] = []
            i = 0
            held = None  # READ-6: (snapshot, its first scan, op index to re-read it at)
            while i < n_ops:
                if held is None and boolean(srng, 0.05):
                    snap = db.snapshot()
                    held = (snap, await _scan(snap), i + srng.randint(10, 80))
                elif held is not None and i >= held[2]:
                    snap, first, _ = held
                    again = await _scan(snap)
                    snap.close()
                    held = None
                    world.snapshot_reads += 1
                    violation = snapshot_isolation(name, snap.seq, first, again, world.history.state_at(snap.seq))
                    if violation:
                        raise AssertionError(violation)
                last = None
                for _ in range(rng.randint(1, 6)):
                    key = b"k%03d" % rng.randrange(N_KEYS)
                    if boolean(rng, 0.15):
                        value = None
                        wh = await db.delete(key)
                    else:
                        value = b"%s:%d:" % (name.encode(), i) + b"v" * rng.randrange(64)
                        wh = await db.put(key, value)
                    mine.append((wh.seq, key, value))
                    h.issued_max = max(h.issued_max, wh.seq)
                    unacked.append((key, wh.seq))
                    last = wh
                    i += 1
                    done = i
                if boolean(rng, 0.8):
                    await last.wait_durable()
                    for key, seq in unacked:
                        h.acked += 1
                        h.acked_seq[key] = max(h.acked_seq.get(key, -1), seq)
                    h.acked_max = max(h.acked_max, last.seq)
                    unacked = []
                    if boolean(rng, 0.08) and not world.healed:  # quiescent: its contents are known
                        scope = rng.choice([CheckpointScope.ALL, CheckpointScope.DURABLE])
                        lifetime = rng.uniform(20, 90)
                        lo = h.acked_max if scope is CheckpointScope.DURABLE else last.seq
                        # Its lifetime runs from its commit, inside the call: from the call's start at the
                        # latest (gc seed 679: the commit's boundary read stalled 17 s, the call returned
                        # after the checkpoint expired).
                        started = trio.current_time()
                        res = await db.create_checkpoint(scope, CheckpointOptions(lifetime_s=lifetime, name="w"))
                        world.writer_checkpoints.append((res.id, started + lifetime, (lo, last.seq)))
                await rt.sleep(rng.uniform(0, 0.6))  # paced: readers, GC and the admin interleave
        return "closed"

    async def guarded() -> str:
        try:
            return await body()
        except* (FencedError, ClosedError) as group:
            raise AssertionError(f"writer {name} stopped: {group.exceptions[0]!r}") from None

    outcome = await crashable(world, name, store, _crash_after(world, name) if restarts < 2 else None, guarded)
    if outcome == "crashed":
        await _writer(world, f"w.r{restarts + 1}", max(1, n_ops - done), restarts + 1)


# -- GC and compactor processes -----------------------------------------------------------------


async def _gc_process(world: World, name: str, restarts: int = 0) -> None:
    rt = world.runtime(name)
    sim = world.store(name, PARENT)
    store = PausableStore(sim)

    async def body() -> str:
        async with trio.open_nursery() as n:
            world.pause_plan(name, store, n, 60.0)

            async def until_healed() -> None:
                # The healed world's GC is the final writer's (sim/scenarios/gc.py _final_phase):
                # a second collector there would only double the store calls of the liveness
                # phase (every pass reads the latest manifest), not what it proves.
                await world.healed_event.wait()
                n.cancel_scope.cancel()

            n.start_soon(until_healed)
            gc = GarbageCollector(store, rt, world.settings.garbage_collector_options)
            await run_gc(gc)
            n.cancel_scope.cancel()
        return "done"

    outcome = await crashable(world, name, sim, _crash_after(world, name) if restarts < 2 else None, body)
    if outcome == "crashed" and not world.healed:
        await _gc_process(world, f"{name.split('.')[0]}.r{restarts + 1}", restarts + 1)


async def _compactor_process(world: World, name: str) -> None:
    rt = world.runtime(name)
    sim = world.store(name, PARENT)
    store = PausableStore(sim)

    async def body() -> str:
        while await ManifestStore(sim, rt).read_latest() is None:
            await rt.sleep(0.2)
        async with trio.open_nursery() as n:
            world.pause_plan(name, store, n, 120.0)
            await Compactor(store, rt, world.settings).run()
            n.cancel_scope.cancel()
        return "fenced"

    await crashable(world, name, sim, _crash_after(world, name), body)


# -- readers ------------------------------------------------------------------------------------


async def _managed_reader(world: World, name: str) -> None:
    rt = world.runtime(name)
    rng = world.choices.stream("workload", name)
    sim = world.store(name, PARENT)
    store = PausableStore(sim)
    poll = rng.choice([0.5, 1.0, 2.0])
    opts = DbReaderOptions(manifest_poll_interval_s=poll, checkpoint_lifetime_s=rng.choice([6.0, 15.0, 60.0]),
                           follow_latest=boolean(rng, 0.5))
    h = world.history
    await fastclock.sleep(rng.uniform(0.5, 5.0))
    while await ManifestStore(sim, rt).read_latest() is None:
        await fastclock.sleep(0.5)
    lo = h.acked_max
    paused_until = [0.0]
    orig_pause = store.pause

    def pause(seconds: float) -> None:
        paused_until[0] = max(paused_until[0], trio.current_time() + seconds)
        orig_pause(seconds)

    store.pause = pause  # type: ignore[method-assign]
    async with trio.open_nursery() as n:
        world.pause_plan(name, store, n, 120.0)
        while True:
            called = trio.current_time()
            try:
                await _reading(world, name, rng, store, rt, opts, lo, paused_until)
                break
            except SlateDBError as e:  # from open: excused if frozen meanwhile (its checkpoint lapsed)
                if paused_until[0] <= called:
                    raise AssertionError(f"READ-2: reader {name} cannot open: {type(e).__name__}: {e}") from None
                world.read_failures_excused += 1
                lo = h.acked_max
        n.cancel_scope.cancel()


async def _reading(world: World, name: str, rng, store, rt, opts, lo: int, paused_until: list) -> None:
    h = world.history
    if True:
        async with DbReader.open(PARENT, options=opts, store=store, runtime=rt) as r:
            h.observations.append((name, "open", await _scan(r), (lo, 2**62)))
            n_scan = 0
            while not world.writer_done.is_set():
                await fastclock.sleep(rng.uniform(0.1, 1.5))
                called = trio.current_time()
                try:
                    state = await _scan(r)
                except (SlateDBError, ObjectNotFoundError) as e:
                    if trio.current_time() - paused_until[0] < RECOVER_S or called < paused_until[0]:
                        world.read_failures_excused += 1
                        continue
                    raise AssertionError(f"READ-4: reader {name} fails {trio.current_time() - paused_until[0]:.1f} "
                                         f"virtual s after its last freeze: {type(e).__name__}: {e}") from None
                world.reader_scans += 1
                h.observations.append((name, f"scan {n_scan} at {called:.3f}s", state, (0, 2**62)))
                n_scan += 1
            world.reestablished += r.stats["establishes"] - 1


async def _read_fixed(world: World, who: str, rt: SimRuntime, store, cid: uuid.UUID, expires_at: float,
                      want: tuple[int, int], rng) -> None:
    """Open a DbReader on checkpoint ``cid`` (expiring at world time ``expires_at``) and scan it
    a few times while it is clearly unexpired; every scan must be the same prefix."""
    margin = STALL_MAX_S + 5
    if trio.current_time() > expires_at - margin:
        return
    try:
        async with DbReader.open(PARENT, cid, store=store, runtime=rt) as r:
            first = None
            for n in range(rng.randint(1, 3)):
                if trio.current_time() > expires_at - margin:
                    break
                state = await _scan(r)
                world.checkpoint_scans += 1
                world.history.observations.append((f"{who}:{cid}", f"checkpoint scan {n}", state, want))
                if first is None:
                    first = state
                elif state != first:
                    raise AssertionError(f"READ-3: two scans through fixed checkpoint {cid} differ")
                await fastclock.sleep(rng.uniform(0.5, 10.0))
    except (CheckpointNotFoundError, InvalidDbStateError) as e:
        if trio.current_time() > expires_at - margin:
            return
        raise AssertionError(f"CKPT-1: {who} cannot read through unexpired checkpoint {cid}: {e}") from None


async def _admin(world: World) -> None:
    name = "admin"
    rt = world.runtime(name)
    rng = world.choices.stream("workload", name)
    store = world.store(name, PARENT)
    ms = ManifestStore(store, rt)
    held: list[tuple[uuid.UUID, float]] = []
    seen_writer = 0
    while not world.writer_done.is_set():
        await fastclock.sleep(rng.uniform(1.0, 8.0))
        if world.writer_done.is_set() or await ms.read_latest() is None:
            continue
        try:
            # A writer checkpoint not read yet: read it.
            if seen_writer < len(world.writer_checkpoints):
                cid, expires_at, want = world.writer_checkpoints[seen_writer]
                seen_writer += 1
                await _read_fixed(world, name, rt, store, cid, expires_at, want, rng)
                continue
            r = rng.random()
            # Expiry times are world times taken *before* the call that sets them (a lower
            # bound: the checkpoint's expiry is set later, on a clock at most 1 s off), and a
            # source must be clearly unexpired when chosen: choosing an expired one was the
            # scenario's fault (gc seeds 171, 390, 409: InvalidDbStateError escaped).
            margin = STALL_MAX_S + 5
            now = trio.current_time()
            sources = [c for c, e in held if now < e - margin]
            if r < 0.5 or not held:
                lifetime = rng.uniform(20, 90)
                source = rng.choice(sources) if sources and boolean(rng, 0.3) else None
                try:
                    res = await create_checkpoint(ms, rt, CheckpointOptions(lifetime_s=lifetime, source=source,
                                                                            name="admin"))
                except InvalidDbStateError as e:
                    # Only acceptable when the source expired while the call stalled.
                    if source is None or "expired" not in str(e) or trio.current_time() < dict(held)[source] - 1.0:
                        raise AssertionError(f"CKPT-1: creating a checkpoint from {source} failed: {e}") from None
                    continue
                expires = now + lifetime - 1.0
                if source is not None:
                    expires = min(expires, dict(held)[source])
                held.append((res.id, expires))
                await _read_fixed(world, name, rt, store, res.id, expires, (0, 2**62), rng)
            elif r < 0.75:
                cid, expires = held[rng.randrange(len(held))]
                if now < expires - 5:
                    lifetime = rng.uniform(20, 90)
                    await refresh_checkpoint(ms, rt, cid, lifetime)
                    held = [(c, now + lifetime - 1.0 if c == cid else e) for c, e in held]
            else:
                cid, _ = held.pop(rng.randrange(len(held)))
                await delete_checkpoint(ms, rt, cid, missing_ok=True)
        except CheckpointNotFoundError:
            pass  # expired and collected under us
    for cid, _ in held:  # liveness: the admin lets go of its checkpoints
        try:
            await delete_checkpoint(ms, rt, cid, missing_ok=True)
        except SlateDBError:
            pass


# -- the clone ----------------------------------------------------------------------------------


async def _clone(world: World) -> None:
    rng = world.choices.stream("workload", "clone")
    await fastclock.sleep(rng.uniform(3.0, 25.0))
    # A clone needs its parent: when the parent's writer has not created the database yet (its
    # first requests stalled), wait for it (gc seeds 541, 620: the clone met no database there
    # and the scenario called that CLONE-2). Read from the bucket, not through a store: seeds
    # whose parent exists by now run exactly as before.
    while not any(k.startswith("parent/manifest/") for k in world.bucket.objects) and not world.healed:
        await fastclock.sleep(1.0)
    if world.healed:
        return
    rt = world.runtime("clone")
    clone_store = world.store("clone", CLONE)
    parent_store = world.store("clone", PARENT)
    h = world.history
    source = None
    want = (h.acked_max, 2**62)
    usable = [c for c in world.writer_checkpoints if trio.current_time() < c[1] - STALL_MAX_S - 10]
    expires_at = None
    if usable and boolean(rng, 0.6):
        source, expires_at, want = usable[-1]
    try:
        await create_clone(clone_store, parent_store, rt, source)
    except (CheckpointNotFoundError, InvalidDbStateError, NotFoundError) as e:
        if (expires_at is not None and isinstance(e, InvalidDbStateError) and "expired" in str(e)
                and trio.current_time() >= expires_at - 1.0):
            # The source was clearly unexpired when chosen (a stall's margin), but the clone's
            # calls stalled several times over (gc seed 20208: 12.6 + 18.4 + 17.5 s): refusing an
            # expired source is right (CLONE-1), and the half-made clone stays uninitialized.
            world.clone_outcome = "source-expired"
            return
        inv = "READ-2" if "WAL object" in str(e) else "CLONE-2"  # a pinned WAL object / SST missing
        raise AssertionError(f"{inv}: the clone from {source or 'the latest state'} failed: {e}") from None
    world.clone_outcome = "from-checkpoint" if source else "from-latest"
    held = await hold_clone_checkpoint(world)  # CLONE-4's reader (sim/scenarios/gc_clone.py)
    # A writer on the clone: its own keys, then everything read back.
    cw_rt = world.runtime("cw")
    cw_store = world.store("cw", CLONE)
    own: dict[bytes, bytes] = {}
    async with aio.Db.open(CLONE, world.settings_map, store=cw_store, runtime=cw_rt) as db:
        for i in range(rng.randint(10, 60)):
            key = b"c%03d" % rng.randrange(16)
            own[key] = b"cw:%d:" % i + b"x" * rng.randrange(48)
            wh = await db.put(key, own[key])
            if boolean(rng, 0.3):
                await wh.wait_durable()
            if boolean(rng, 0.3):
                await cw_rt.sleep(rng.uniform(0, 0.5))
        await db.flush()
        state = await _scan(db)
        await checkpoint_reader_through_detach(world, held, {k: v for k, v in state.items() if k.startswith(b"k")})
    mine = {k: v for k, v in state.items() if k.startswith(b"c")}
    if mine != own:
        raise AssertionError(f"CLONE: the clone's own keys read {len(mine)} rows, written {len(own)}")
    parent_part = {k: v for k, v in state.items() if k.startswith(b"k")}
    h.observations.append(("clone", f"clone {world.clone_outcome}", parent_part, want))
