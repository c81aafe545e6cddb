"""A simulated world of compactors contending over one database on a faulty store.

One simulated object store (swarm faults per seed: latency, transient errors, lost replies,
stalls of up to a minute) is shared by:

* the **writer** ``w``: a Db with a small ``l0_sst_size_bytes`` and its in-process compactor
  (``compactor_options`` that compact often: poll 0.1-0.5 s, ``min_compaction_sources`` 2, a
  small ``worker.max_sst_size`` so compactions write several output SSTs; all per-seed). It
  puts, overwrites and deletes 64 keys in paced bursts, waits for durability after most bursts,
  reads its own writes back and holds snapshots (read at their seq against its own history).
  In a quarter of the seeds (the ``purge`` choice stream) it opens with a **purge**: a few L0
  SSTs of keys it puts and deletes at once, which the first compactions (at the bottom: no run
  yet) drop whole, writing no SST (empty jobs); in half of those with crashes the first
  compactor process crashes right after its first commit, so a restarted or taking-over
  compactor must recognise the empty job's commit by its sources gone (COMPACT-10). Per seed
  compactions cut outputs after any row and writers hold a snapshot to the close (READ-7); TTL
  seeds add rows with a TTL and run the compactors' clocks hours ahead (COMPACT-12);
* standalone **compactors** ``c1``, ``c2``, ... started at random virtual times (sometimes two
  at once) or right after an event of the running ones (an output SST, a ``.compactions``
  write, a commit, a state change, a pause): each fences the ones before; the zombies keep
  running until they learn it. In some seeds processes crash, at a random moment or right
  after one of their own events (an output stored, a ``.compactions`` write, startup, and
  often the commit to the manifest before it is recorded Completed: RFC 002's crash window),
  and restart under a new name (``c1.r1``, ``w.r1``): a restarted compactor flips ``Running``
  compactions back to ``Submitted`` and resumes them from their persisted outputs. In some
  seeds a compactor freezes (:class:`PausableStore`, 0.05-20 virtual s) right after recording
  an output, and an orchestrator starts a replacement (``c1.p1``): the frozen one wakes up a
  zombie, perhaps on its way to commit;
* an **admin** submitting external compactions: valid ones built from the latest manifest
  with ``full_spec``, and invalid ones (an unknown L0 source, an L0 slice skipping the oldest
  SST, a wrong destination), which must end ``Failed``.

A crashed process's requests already past the server still land (their replies are lost).
Wall clocks follow the world's virtual time with a skew of up to a second per process.

Checked on every run:

* the trace checks of :class:`sim.checks.compactor.CompactorChecks` (CFENCE-1/2/3,
  COMPACT-1/2/3 as the metadata files land) and of :class:`sim.checks.writer.WriterChecks`
  (FENCE-1/3/4, DUR-1, BOUNDARY-3);
* liveness: once the writer is done, faults stop (no new faults, crashes or pauses) and a last
  compactor ``cfinal`` starts; L0 must drop below ``min_compaction_sources`` within
  :data:`DRAIN_LIMIT_S` virtual seconds (longer for a big backlog, :data:`DRAIN_PER_L0_S`); the whole world within 6 virtual hours;
* RESUME-1/2 on the output SSTs of every committed compaction
  (:meth:`CompactorChecks.verify_outputs`);
* READ-7 on the writer's own reads (its last write of a key, through compacted runs) and READ-6
  on its snapshots' reads (the version at the snapshot's sequence);
* contents (READ-7): a fresh Db reads, for every key, its last acknowledged value (absent if that was
  a delete) or the value of a later write that was never acknowledged (it may or may not have
  become durable before a crash); no key that was never written exists; an external
  compaction naming an unknown source never commits.

Same seed, same trace digest. Catalogued compactor bugs (``sim/scenarios/catalogue.py``) are switched on with
``bugs=``; ``./just sim run --seed S --workload compactor [--bug NAME]`` replays one seed.
"""

from __future__ import annotations

from typing import Any

import trio

import slatedb.aio as aio
from slatedb.compactor import Compactor, CompactorEpochError, full_spec, submit_compaction
from slatedb.compactor.spec import CompactionSpec, L0Source, RunSource
from slatedb.errors import ClosedError, FencedError
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.memory import MemoryStore
from slatedb.runtime import switches

from sim.checks.compactor import CompactorChecks
from sim.checks.manifest import manifest_checks
from sim.checks.structure import check_world
from sim.checks.writer import WriterChecks
from sim.scenarios.compactor_world import MIN_SOURCES, N_KEYS, TAKEOVER_POINTS, World, purge, purge_crash, ttl_put
from sim.world import fastclock
from sim.world.choices import Choices, boolean
from sim.world.engine import Crash, PausableStore, crashable
from sim.world.trace import listens
from sim.world.harness import Checker, Scenario, Setup, WorldResult, run_world
from sim.world.runtime import SIM_EPOCH_MS, SimRuntime
from sim.world.store import SimObjectStore
#: Once faults stop, L0 must drain below ``min_compaction_sources`` within this (virtual s), or
#: within :data:`DRAIN_PER_L0_S` per L0 SST found at the heal if that is longer. With
#: ``max_compaction_sources`` 2 a drain is one job per L0 SST (a pair's run, then the merge the
#: back-pressure rule waits for), each about 12.5 virtual s of ``.compactions`` writes at the
#: simulated store's latency (compactor seed 44: 47 L0 SSTs at the heal, drained after ~620 s).
#: A compactor that stops compacting still never drains; one merely slow under a big backlog is
#: not reported as stuck.
DRAIN_LIMIT_S = 600.0
DRAIN_PER_L0_S = 20.0
#: Catalogued switches of the read path, also on in the final reader of the contents check.
READ_PATH_BUGS = frozenset({switches.STRADDLE_LATER_SST_ONLY})


# -----------------------------------------------------------------------------------------------
# The writer
# -----------------------------------------------------------------------------------------------


async def _writer(world: World, name: str, n_ops: int, restarts: int = 0) -> None:
    rt, store = world.process(name)
    rng = world.choices.stream("workload", name)
    ttl_rng = world.choices.stream("ttl", name) if world.ttl else None
    model = world.model
    own: dict[bytes, list[tuple[int, bytes | None]]] = {}  # this incarnation's writes
    done = 0

    async def body() -> str:
        nonlocal done
        async with aio.Db.open("memory://sim", world.settings_map, store=store, runtime=rt) as db:
            if world.purge and not world.purged:  # once, in the first incarnation that opens
                world.purged = True
                await purge(world, name, db, rt, own)
            unacked: list[tuple[bytes, int]] = []
            snaps: list[Any] = []
            # Open at the close (never released): the last flush records its floor, so the
            # compactions keep every version written since, up to the drain's.
            held = db.snapshot() if world.hold_snapshot else None  # noqa: F841
            i = 0
            while i < n_ops:
                last = None
                for _ in range(rng.randint(1, 8)):
                    key = b"k%03d" % rng.randrange(N_KEYS)
                    value: bytes | None
                    if boolean(rng, 0.2):
                        value = None
                        h = await db.delete(key)
                    else:
                        value = b"%s:%d:" % (name.encode(), i) + b"v" * rng.randrange(96)
                        h = await db.put(key, value)
                    model.write(key, h.seq, value)
                    own.setdefault(key, []).append((h.seq, value))
                    unacked.append((key, h.seq))
                    last = h
                    i += 1
                    done = i
                    last = await ttl_put(world, name, db, ttl_rng, unacked) or last
                assert last is not None
                if boolean(rng, 0.8):
                    await last.wait_durable()
                    for key, seq in unacked:
                        if seq <= last.seq:
                            model.ack(key, seq)
                    unacked = [(k, s) for k, s in unacked if s > last.seq]
                if boolean(rng, 0.3):  # read your writes (through compacted runs by now)
                    key = rng.choice(list(own))
                    got = await db.get(key)
                    want = own[key][-1][1]
                    assert got == want, f"READ-7: read: {name} reads {got!r} for {key!r}, its last write was {want!r}"
                if boolean(rng, 0.1) and len(snaps) < 3:
                    snaps.append(db.snapshot())
                if snaps and boolean(rng, 0.15):
                    snap = snaps.pop(rng.randrange(len(snaps)))
                    keys = list(own)
                    for key in rng.sample(keys, min(6, len(keys))):
                        versions = [v for s, v in own[key] if s <= snap.seq]
                        if versions:
                            got = await snap.get(key)
                            assert got == versions[-1], (f"READ-6: snapshot: {name} at seq {snap.seq} reads {got!r} for "
                                                         f"{key!r}, expected {versions[-1]!r}")
                    snap.release()
                if boolean(rng, 0.6):  # paced: the compactors contend for ~10 virtual s or more
                    await rt.sleep(rng.uniform(0, 0.3))
            for snap in snaps:
                snap.release()
        return "closed"

    async def guarded() -> str:
        try:
            return await body()
        except* (FencedError, ClosedError) as group:
            raise AssertionError(f"writer {name} stopped: {group.exceptions[0]!r}") from None

    plan = world.crash_plan(compactor=False) if restarts < 2 else None
    if restarts == 0 and world.settings_map.get("compactor_options") is not None:
        plan = purge_crash(world, plan)  # its in-process compactor's first commit
    outcome = await crashable(world, name, store, plan, guarded)
    world.outcomes[name] = outcome
    if outcome == "crashed":
        await _writer(world, f"{name.split('.')[0]}.r{restarts + 1}", max(1, n_ops - done), restarts + 1)


# -----------------------------------------------------------------------------------------------
# Compactors and the admin
# -----------------------------------------------------------------------------------------------


async def _wait_for_db(store: SimObjectStore, rt: SimRuntime) -> None:
    ms = ManifestStore(store, rt)
    while await ms.read_latest() is None:
        await rt.sleep(0.1)


def _pause_plan(world: World, name: str, store: PausableStore) -> None:
    """In seeds with pauses, a compactor may freeze (0.05 to 20 virtual s) right after it
    records the progress of its n-th output SST (when that is a compaction's last output, the
    commit to the manifest comes next), and most often a replacement is started at once: the
    frozen one wakes up a zombie, maybe in the middle of its commit."""
    if world.pause_rate == 0 or not boolean(world.rng, world.pause_rate):
        return
    nth, seconds = world.rng.randint(1, 4), 10 ** world.rng.uniform(-1.3, 1.3)  # 0.05..20 s, log-uniform
    outputs = 0

    replace = boolean(world.rng, 0.7)

    @listens("compaction_output", "commit")
    def on_event(e) -> None:
        nonlocal outputs
        if e.process != name:
            return
        if e.kind == "compaction_output":
            outputs += 1
        elif outputs >= nth and e.kind == "commit" and e.f.get("ns") == "compactions":
            world.trace.listeners.remove(on_event)
            if not world.healed:
                store.pause(seconds)
                if replace:  # its health check fails: an orchestrator starts a replacement
                    world.replacements += 1
                    world.nursery.start_soon(_compactor, world, f"{name.split('.')[0]}.p{world.replacements}")

    world.trace.listeners.append(on_event)


async def _compactor(world: World, name: str, *, crash: Crash | None = None, restarts: int = 0) -> None:
    rt, sim_store = world.process(name)
    store = PausableStore(sim_store)
    _pause_plan(world, name, store)
    comp = Compactor(store, rt, world.settings, local_worker=world.local_worker)

    async def body() -> str:
        await _wait_for_db(sim_store, rt)
        try:
            await comp.run()
        except* CompactorEpochError as group:  # reported like the in-process compactor's (CFENCE-3)
            rt.event("compactor_error", error=f"CompactorEpochError: {group.exceptions[0]}")
            raise
        return "fenced"

    outcome = await crashable(world, name, sim_store, crash, body)
    world.outcomes[name] = outcome
    if outcome == "crashed" and restarts < 3 and not world.healed:
        await fastclock.sleep(world.rng.uniform(0.0, 1.0))
        if not world.healed:
            base = name.split(".")[0]
            again = world.crash_plan(compactor=True) if restarts < 2 else None
            await _compactor(world, f"{base}.r{restarts + 1}", crash=again, restarts=restarts + 1)


async def _start_compactor(world: World, name: str, at: float, trigger: tuple | None, crash: Crash | None) -> None:
    """Start compactor ``name`` at virtual time ``at``, or as soon as the ``trigger`` event
    (kind, ``ns``, n-th occurrence in any compactor) happens if that is sooner."""
    if trigger is None:
        await fastclock.sleep(at)
    else:
        kind, ns, nth = trigger
        fired = trio.Event()
        seen = 0

        @listens(kind)
        def on_event(e) -> None:
            nonlocal seen
            if e.kind == kind and e.process != "admin" and (ns is None or e.f.get("ns") == ns):
                seen += 1
                if seen == nth:
                    fired.set()

        world.trace.listeners.append(on_event)
        try:
            with trio.move_on_after(at):
                await fired.wait()
        finally:
            world.trace.listeners.remove(on_event)
    if not world.healed:
        await _compactor(world, name, crash=crash)


def _invalid_spec(rng, m, rt) -> tuple[CompactionSpec | None, str]:
    """A spec that is invalid against ``m`` (the last two may become valid as L0 and the runs
    change before the compactor looks at it; an unknown source never does)."""
    l0 = [L0Source(v.id) for v in m.l0]
    runs = [RunSource(r.id) for r in m.compacted]
    choice = rng.randrange(3)
    if choice == 0:
        return CompactionSpec((L0Source(rt.new_ulid()),) + tuple(l0), runs[-1].run_id if runs else 0), "unknown-source"
    if choice == 1 and len(l0) >= 2:
        return CompactionSpec(tuple(l0[:-1]), (runs[0].run_id + 1) if runs else 0), "skips-oldest-l0"
    if len(runs) >= 2:
        return CompactionSpec(tuple(runs), runs[0].run_id), "wrong-destination"
    return None, ""


async def _admin(world: World, n: int) -> None:
    rt, store = world.process("admin")
    rng = world.choices.stream("workload", "admin")
    manifests = ManifestStore(store, rt)
    for _ in range(n):
        await rt.sleep(rng.uniform(0.3, 3.0))
        if world.healed:
            return
        latest = await manifests.read_latest()
        if latest is None:
            continue
        if boolean(rng, 0.6):
            spec, wrong = full_spec(latest.manifest), ""
        else:
            spec, wrong = _invalid_spec(rng, latest.manifest, rt)
        if spec is None:
            continue
        c = await submit_compaction(store, rt, spec)
        if wrong:
            world.invalid_submitted.append((c.id, wrong))
        else:
            world.valid_submitted += 1


# -----------------------------------------------------------------------------------------------
# The world
# -----------------------------------------------------------------------------------------------


# -----------------------------------------------------------------------------------------------
# Running one seed
# -----------------------------------------------------------------------------------------------


async def _processes(world: World, everything: trio.Nursery | None) -> None:
    """Compactors at random times (sometimes two together), or right after an event of the
    compactors already running (takeover in the middle of a compaction); the admin; the writer."""
    assert everything is not None
    rng = world.rng
    world.nursery = everything
    t = 0.0
    for i in range(1, rng.randint(1, 5) + 1):
        if i == 1 or not boolean(rng, 0.25):
            t += rng.uniform(0.1, 3.0)
        trigger = (*rng.choice(TAKEOVER_POINTS), rng.randint(1, 6)) if boolean(rng, 0.5) else None
        plan = world.crash_plan(compactor=True)
        everything.start_soon(_start_compactor, world, f"c{i}", t, trigger, purge_crash(world, plan) if i == 1 else plan)
    everything.start_soon(_admin, world, rng.randint(2, 8))
    await _writer(world, "w", rng.randint(250, 450))


async def _drain(world: World, everything: trio.Nursery | None) -> None:
    """Liveness: faults stop; a last compactor drains L0 within DRAIN_LIMIT_S (or DRAIN_PER_L0_S per L0 SST)."""
    assert everything is not None
    checks = world.setup.checkers["compactor"]
    healed_at = trio.current_time()
    at_heal = checks.manifests.get(checks.latest_manifest)
    limit_s = max(DRAIN_LIMIT_S, DRAIN_PER_L0_S * (len(at_heal.l0) if at_heal is not None else 0))
    everything.start_soon(lambda: _compactor(world, "cfinal", crash=None))
    world.start_final_workers(everything)
    while True:
        latest = checks.manifests.get(checks.latest_manifest)
        if latest is not None and len(latest.l0) < MIN_SOURCES:
            break
        if trio.current_time() - healed_at > limit_s:
            raise AssertionError(f"liveness: L0 still holds {len(latest.l0) if latest else '?'} SSTs "
                                 f"{limit_s:.0f} virtual s after faults stopped (it held "
                                 f"{len(at_heal.l0) if at_heal is not None else '?'})")
        await fastclock.sleep(0.05)
    world.drain_s = trio.current_time() - healed_at


async def _final(world: World) -> None:
    """RESUME-1/2 on every output; contents through a fresh Db; COMPACT-3 for the admin's
    invalid submissions."""
    choices, trace, bucket = world.choices, world.trace, world.bucket
    checks = world.setup.checkers["compactor"]
    final_rt = SimRuntime("final", choices, trace, offset_ms=int(trio.current_time() * 1000),
                          bugs=world.bugs & READ_PATH_BUGS)  # the read path's switches only: it reads
    inner = MemoryStore(bucket, final_rt.now_ms, url="memory://sim")
    world.verified = await checks.verify_outputs(inner)  # RESUME-1/2
    # Contents: a fresh Db reads what the model allows.
    model = world.model
    async with aio.Db.open("memory://sim", {**world.settings_map, "compactor_options": None}, store=inner,
                           runtime=final_rt) as db:
        for key in sorted(model.writes):
            got = await db.get(key)
            allowed = model.allowed(key)
            if got not in allowed:
                raise AssertionError(f"READ-7: contents: {key!r} reads {got!r}; the last acknowledged write (seq "
                                     f"{model.acked_seq.get(key)}) or a later one allows {allowed[:4]!r}")
        async for key, _value in db.scan():
            assert key in model.writes, f"READ-7: contents: {key!r} exists but was never written"
    await check_world(bucket, [""], SIM_EPOCH_MS + int(trio.current_time() * 1000))  # slatedb check
    for cid, kind in world.invalid_submitted:
        if kind == "unknown-source":
            assert cid not in checks.committed, f"COMPACT-3: external compaction {cid} with an unknown source committed"


def _figures(world: World) -> dict[str, Any]:
    checks = world.setup.checkers["compactor"]
    return dict(
        acked=world.model.acked, compactors=checks.counts["compactor_started"], commits=checks.counts["commits"],
        completed=checks.counts["completed"], resumes=checks.counts["resumes"], verified=world.verified,
        purge=world.purge, empty_commits=checks.counts["commits_empty"],
        external=len(world.invalid_submitted) + world.valid_submitted,
        external_failed=sum(1 for cid, _ in world.invalid_submitted if cid in checks.failed_reasons),
        drain_s=round(world.drain_s, 3))


def _fault_counts(setup: Setup, _world: World | None) -> dict:
    counts = setup.checkers["writer"].counts
    return {k: counts[k] for k in ("fault.transient", "store.reply-lost", "fault.stall", "crash") if counts[k]}


SCENARIO = Scenario(
    "compactor", World, _processes, liveness=_drain, heals=True, final=_final, figures=_figures,
    fault_counts=_fault_counts,
    checkers=(Checker("writer", lambda setup: WriterChecks()),
              Checker("manifest", manifest_checks),
              Checker("compactor", lambda setup: CompactorChecks(MemoryStore(setup.bucket, lambda: 0,
                                                                             url="memory://sim")))),
    processes_declared=("w", "c1..c5", "admin", "cfinal", "final"),
    fault_kinds=("fault.transient", "store.reply-lost", "fault.stall", "crash"))


def run_compactor_workload(seed: int, *, faults: str = "swarm", bugs: frozenset[str] = frozenset(),
                           choices: Choices | None = None) -> WorldResult:
    """Run one world; a violated invariant, a wrong read or a stuck run is reported in the result.

    ``bugs`` switches on catalogued bugs in every process of the world (``sim bugs``); every
    random choice comes from ``choices`` (default: generated from ``seed``)."""
    return run_world(SCENARIO, seed, choices=choices, bugs=bugs, faults=faults)
