"""Bulk loads into a database a live writer is writing (spec/protocols/bulk-load.md, LOAD-1/4/5/6/7
and DUR-1).

The protocol of ``slatedb/spark/load.py`` without Spark: its begin / stage / commit / clean-up
functions are plain async functions over a store and a runtime (the Spark data source only calls
them), so each load is a **driver** process (``l1``, in some seeds ``l2`` too, planned while
``l1`` runs) and one process per **task attempt** (``l1.p0.a0``...), on the simulated store with
its faults:

* the driver begins (plans the load's seq), starts its partitions' attempts -- in some seeds a
  partition's first attempt is killed part-way (its staged SSTs stay behind, found by their
  intents) and a retry stages it again, or a speculative second attempt stages it too and one of
  the two results reaches the commit --, waits a moment while the writer goes on writing, then
  commits (fencing the writer: LOAD-4) and cleans up;
* the driver may crash at a random moment (before its commit, or during it: its outcome is then
  judged from the manifests); an operator then aborts the load (``cleanup_load``) in some seeds.
* one load in five is an overwrite: its commit drops every older row and the WAL below its fence.
* in three seeds in ten a plain load's driver runs the production retry policy with no retry:
  a store error ends its call and it gives up as a dying driver (an operator may abort it); a
  reply lost on its commit's update leaves the commit unsure (it may have landed).
* in 30% of the seeds a **sharded load** ``s1`` (the union route) races the writer for the URL
  instead (``sim/scenarios/load_sharded.py``), and LOAD-10 is checked at the end for every load
  whose end ran (``sim/checks/load_leftovers.py``); in 40% of those a plain load ``l1`` races
  them both: whichever of the writer, the plain load's commit (LOAD-11: no database when it
  began) and the sharded load's union creates the database first, the others must refuse or go
  on over it, and the oracle judges both loads and the writer in one history.

Meanwhile the **writer** ``w`` (a ``slatedb.aio.Db``; small memtables, so it flushes L0 while the
load runs) has clients putting unique values on keys the loads also write, each put waiting for
durability; when a load's commit fences it, it reopens (``w.2``, ...) and goes on, its seqs now
above the load's. It may crash and restart too. Neither GC nor a compactor runs: every manifest
and WAL object stays, and the oracle :mod:`sim.checks.load` judges them all at the end with a
final writer's read of every key (LOAD-1/4/5/6/7, DUR-1). :class:`sim.checks.writer.WriterChecks`
(FENCE-1/3/4, DUR-1 at every fence) and :class:`sim.checks.manifest.ManifestFenceChecks`
(FENCE-5: the fenced writer flushes no L0 after the load's epoch) watch the trace as it runs.
In sharded seeds whose union committed, an epilogue (``sim/scenarios/load_kept_shards.py``) then
pins a shard with a reader's checkpoint, destroys the union and cleans the path up while the
shard is pinned and after it is released (LOAD-9, DESTROY-4). Half of the sharded seeds run a second
sharded load ``s2`` in turn (LOAD-13); half of the others an operator's re-run: ``s1``'s driver
crashes and is aborted, ``s2`` runs the job again and the writer opens only once the loads are
done, so ``s2`` commits whenever ``s1``'s commit did not land first; 35% of the plain seeds an epilogue loading under a compactor, GC
and a checkpoint (``sim/scenarios/load_compacted.py``: LOAD-6, LOAD-12, DUR-1).
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

import slatedb.aio as aio
from slatedb.errors import (ClosedError, CommitOutcomeUnknownError, FencedError, InvalidDbStateError,
                            ObjectStoreRetriesExhaustedError)
from slatedb.format.sst import SstOptions
from slatedb.objstore.memory import MemoryRegistry, MemoryStore
from slatedb.runtime import with_max_retries
from slatedb.spark.load import LoadRefusedError, begin_load, cleanup_load, commit_load, stage_sorted

from sim.checks.load import CleanupChecks, Load, Write, check, collect
from sim.checks.load_leftovers import LiveUnionChecks, leftovers
from sim.checks.manifest import ManifestFenceChecks, bucket_reader
from sim.checks.writer import WriterChecks
from sim.scenarios.load_compacted import applies as applies_compacted, compacted
from sim.scenarios.load_kept_shards import applies, kept_shards
from sim.scenarios.load_sharded import sharded_driver, sharded_loads
from sim.scenarios.load_tasks import WorldStore, operator_abort, partition_draws, process_io, run_attempt, take
from sim.world.choices import Choices, boolean
from sim.world.engine import Crash, crashable
from sim.world.harness import Checker, Scenario, Setup, WorldResult, run_world
from sim.world.runtime import SimRuntime
from sim.world.store import SimObjectStore, StoreFaults

#: Keys the writer puts; the loads write some of them (shadowing and shadowed) and their own.
WRITER_KEYS = tuple(b"k%02d" % i for i in range(8))
LOAD_KEYS = WRITER_KEYS[::2] + tuple(b"l%02d" % i for i in range(10))
KEYS = tuple(sorted(set(WRITER_KEYS + LOAD_KEYS)))
SETTINGS = {
    "flush_interval": "20ms",
    "manifest_poll_interval": "300ms",
    "min_filter_keys": 8,
    "l0_max_ssts": 256,
    "compactor_options": None,
    "garbage_collector_options": None,
    "block_cache_size_bytes": 0,
}
SMALL_SST = SstOptions(block_size_bytes=256)
#: How long (virtual s from the first refusal) the writer keeps reopening a database whose union
#: is not initialized: a sharded load's driver that crashed after the union's first manifest and
#: was not aborted leaves it so for good (load seed 388 reopened for ever, hanging the main job).
UNINITIALIZED_WAIT_S = 120.0


@attrs.define
class World:
    setup: Setup
    faults: StoreFaults
    settings: dict
    clients: int
    ops: int  # writes each client makes at most
    after: int  # writes each client makes once every load's driver is done (LOAD-4's later writes)
    think_s: float
    writer_crash: bool
    reopen_s: float  # how long a fenced or crashed writer takes to come back
    loads: list  # of Load
    healed: bool = False
    loads_done: bool = False
    writer_delay_s: float = 0.0  # sharded seeds: the writer opens the URL this late (the race for it)
    plain_delay_s: float = 0.0  # mixed seeds: the plain load begins this much later than it would
    background: Any = None  # a nursery for task attempts that outlive their partition (sharded stragglers)
    #: ``memory://sim`` is this world's bucket (a sharded load's shards are URLs under it), never
    #: the process-wide registry's.
    registry: MemoryRegistry = attrs.Factory(MemoryRegistry)
    writes: list = attrs.Factory(list)
    reopens: int = 0
    violations: list = attrs.Factory(list)
    final: dict = attrs.Factory(dict)

    @property
    def trace(self) -> Any:
        return self.setup.trace


def _build(setup: Setup) -> World:
    rng = setup.choices.stream("load")
    faults = StoreFaults(
        latency_min_s=0.0005,
        latency_max_s=rng.choice([0.005, 0.02, 0.1]),
        transient_rate=rng.uniform(0.01, 0.1) if boolean(rng, 0.5) else 0.0,
        ambiguous_rate=rng.uniform(0.01, 0.1) if boolean(rng, 0.5) else 0.0,
        stall_rate=rng.uniform(0.01, 0.05) if boolean(rng, 0.4) else 0.0,
        stall_max_s=rng.choice([0.5, 2.0]),
    )
    # 64 KiB: no L0 flush in the run, so the commit keeps the staged SSTs (no re-mint) and the WAL tail is long
    settings = dict(SETTINGS, l0_sst_size_bytes=rng.choice([128, 256, 1024, 65536]))
    shape = setup.choices.stream("shape")
    loads = [Load("l1")] + ([Load("l2")] if boolean(rng, 0.4) else [])
    drawn = sharded_loads(setup.choices)  # a sharded load in 30% of the seeds (sim/scenarios/load_sharded.py)
    writer_delay_s = plain_delay_s = 0.0
    if drawn is not None:
        loads, writer_delay_s, plain_delay_s = drawn
    world = World(setup, faults, settings, clients=shape.count(1, 3), ops=shape.count(2, 30),
                  after=shape.count(0, 3),
                  think_s=rng.choice([0.01, 0.05, 0.15]), writer_crash=boolean(rng, 0.3),
                  reopen_s=rng.choice([0.1, 1.0, 3.0]), loads=loads, writer_delay_s=writer_delay_s,
                  plain_delay_s=plain_delay_s)
    world.registry.adopt("sim", setup.bucket)
    LiveUnionChecks(lambda: world.loads).attach(setup.trace)
    setup.trace.record("world", "config", faults=repr(faults), settings=repr(settings), loads=len(loads),
                       clients=world.clients, ops=world.ops)
    return world


def _store(world: World, name: str, rt: SimRuntime) -> SimObjectStore:
    setup = world.setup
    return WorldStore(world, MemoryStore(setup.bucket, rt.now_ms, url="memory://sim", registry=world.registry), rt, name)


async def _processes(world: World, _nursery: trio.Nursery | None) -> None:
    async with trio.open_nursery() as nursery:
        world.background = nursery
        nursery.start_soon(_writer, world)
        nursery.start_soon(_drivers, world)


async def _drivers(world: World) -> None:
    async with trio.open_nursery() as nursery:
        for i, load in enumerate(world.loads):
            if load.sharded:  # s2 (the last load) begins in turn after s1, the one before it
                nursery.start_soon(sharded_driver, world, load, _store, LOAD_KEYS, SMALL_SST,
                                   world.loads[-2] if load.name == "s2" else None)
            else:
                nursery.start_soon(_driver, world, load, i)
    world.loads_done = True


# ---------------------------------------------------------------------------------------------
# The live writer
# ---------------------------------------------------------------------------------------------


async def _writer(world: World) -> None:
    """The writer and its clients; fenced by a load's commit (or crashed) it reopens and its
    clients go on: each writes until every load's driver is done and it made ``after`` writes
    more, or it made ``ops`` writes."""
    setup = world.setup
    left = {c: world.ops for c in range(world.clients)}
    after = {c: world.after for c in range(world.clients)}
    crash_left = world.writer_crash
    incarnation = 0
    if world.writer_delay_s == float("inf"):
        while not world.loads_done:
            await trio.sleep(0.05)
    else:
        await trio.sleep(world.writer_delay_s)
    uninitialized = 0  # opens refused while a sharded load's union is not initialized yet
    refused_s: float | None = None  # the first such refusal
    while any(left[c] and (after[c] or not world.loads_done) for c in left) and incarnation < 8 + uninitialized:
        incarnation += 1
        name = "w" if incarnation == 1 else f"w.{incarnation}"
        rt, store = process_io(world, name, _store)
        rng = setup.choices.stream("writer", name)
        crash = Crash(rng.uniform(0.05, 1.5)) if crash_left and boolean(rng, 0.5) else None
        crash_left = crash_left and crash is None

        async def body(rt: SimRuntime = rt, store: SimObjectStore = store, name: str = name) -> str:
            outcome = "closed"
            try:
                async with aio.Db.open("memory://sim", world.settings, store=store, runtime=rt) as db:
                    async with trio.open_nursery() as clients:
                        for c in range(world.clients):
                            clients.start_soon(_client, world, db, rt, f"{name}.c{c}", c, left, after)
            except* (FencedError, ClosedError):
                outcome = "fenced"
            except* InvalidDbStateError:
                outcome = "uninitialized"  # a sharded load's union is being made: open it once it is done
            return outcome

        if await crashable(world, name, store, crash, body) == "uninitialized":
            refused_s = trio.current_time() if refused_s is None else refused_s
            if trio.current_time() - refused_s < UNINITIALIZED_WAIT_S:
                uninitialized += 1  # past the wait: at most the few incarnations left, then it stops
        await trio.sleep(rng.uniform(0.0, world.reopen_s))


async def _client(world: World, db: Any, rt: SimRuntime, name: str, c: int, left: dict, after: dict) -> None:
    rng = world.setup.choices.stream("client", name)
    while left[c] > 0 and (after[c] > 0 or not world.loads_done):
        with rng.span("op"):
            key = WRITER_KEYS[rng.randrange(len(WRITER_KEYS))]
            think = rng.uniform(0.0, world.think_s)
        w = Write(key, b"%s:%d:%s" % (name.encode(), left[c], key), trio.current_time())
        world.writes.append(w)
        h = await db.put(key, w.value)
        w.seq = h.seq
        await h.wait_durable()
        w.acked_s = trio.current_time()
        left[c] -= 1
        if world.loads_done:
            after[c] -= 1
        await rt.sleep(think)


# ---------------------------------------------------------------------------------------------
# The loads: a driver and its task attempts
# ---------------------------------------------------------------------------------------------


async def _driver(world: World, load: Load, index: int) -> None:
    setup = world.setup
    rng = setup.choices.stream("driver", load.name)
    start_s = rng.uniform(0.05, 0.6) + index * rng.uniform(0.0, 1.0) + world.plain_delay_s
    partitions = rng.randint(1, 3)
    wait_s = rng.uniform(0.0, rng.choice([0.8, 3.0]))  # a long wait lets a load planned later commit first
    crash = Crash(rng.uniform(0.05, 1.5)) if boolean(rng, 0.25) else None
    abort = boolean(rng, 0.6)
    load.overwrite = boolean(rng, 0.2)
    # In some seeds the driver runs the production retry policy with no retry at all: a store
    # error ends its call (ObjectStoreRetriesExhaustedError), the commit's among them -- an update
    # sent whose reply was lost may have landed (catalogued load-deletes-after-ambiguous-commit).
    bounded = boolean(setup.choices.stream("bounded", load.name), 0.3)
    await trio.sleep(start_s)
    rt, store = process_io(world, load.name, _store)
    if bounded:
        with_max_retries(rt, 0)

    async def body() -> str:
        try:
            return await steps()
        except (ObjectStoreRetriesExhaustedError, CommitOutcomeUnknownError) as e:  # it gives up as a dying driver does
            rt.event("load_gave_up", load=load.name, outcome=load.outcome, error=str(e))
            return "crashed"

    async def steps() -> str:
        for tries in range(20):
            try:
                plan = await begin_load(store, rt, overwrite=load.overwrite)
                break
            except InvalidDbStateError as e:
                # A sharded load's union is being made (mixed seeds): wait for it as the writer does.
                if "not initialized" not in str(e) or not any(ld.sharded for ld in world.loads):
                    raise
                if tries == 19:
                    load.outcome, load.why = "refused", str(e)
                    return load.outcome
                await trio.sleep(0.5)
        load.seq, load.load_id = plan.seq, plan.load_id
        keys = sorted(k for k in LOAD_KEYS if boolean(rng, 0.7)) or [LOAD_KEYS[0]]
        parts = [keys[i::partitions] for i in range(partitions)]
        results: list = [None] * partitions
        rows: dict = {}
        async with trio.open_nursery() as tasks:
            for p in range(partitions):
                tasks.start_soon(_partition, world, load, plan, p, sorted(parts[p]), results, rows)
        await trio.sleep(wait_s)
        load.rows = rows
        load.commit_called_s = trio.current_time()
        load.outcome = "committing"
        try:
            got = await commit_load(store, rt, plan, results)
        except LoadRefusedError as e:
            load.outcome, load.why = "refused", str(e)
        else:
            load.outcome = "committed" if got.manifest_id is not None else "empty"
            load.returned_s = trio.current_time()
        await cleanup_load(store, rt, plan.load_id)
        load.ended = True
        return load.outcome

    outcome = await crashable(world, load.name, store, crash, body)
    if outcome == "crashed":
        if load.outcome == "committing":
            load.outcome = "crashed"  # it may have committed: the manifests say
        if load.load_id is not None and abort:
            await operator_abort(world, load, rng, _store, lambda s, r: cleanup_load(s, r, load.load_id))


async def _partition(world: World, load: Load, plan: Any, p: int, keys: list, results: list, rows: dict) -> None:
    """One partition: its attempts (a first one may be killed part-way and retried, or a
    speculative second one run beside it); the result of one of them goes to the commit."""
    rng, shape, deletes = partition_draws(world, load, p, keys, ["one", "one", "killed", "speculative"])

    async def stage(store: Any, rt: SimRuntime, a: int, vals: list) -> Any:
        res = await stage_sorted(store, rt, plan, p, a, keys, vals, sst_options=SMALL_SST, sst_size_bytes=200)
        load.staged_ids.update(s.sst_id for s in res.ssts)
        load.staged_infos.update(s.info for s in res.ssts)
        return res

    async def attempt(a: int, kill_s: float | None) -> Any:
        return await run_attempt(world, load, p, a, keys, deletes, kill_s, _store, stage)

    picked = None
    if shape == "speculative":
        both: list = [None, None]

        async def run(a: int) -> None:
            both[a] = await attempt(a, None)

        async with trio.open_nursery() as n:
            n.start_soon(run, 0)
            n.start_soon(run, 1)
        picked = both[rng.randrange(2)]
    else:
        picked = await attempt(0, rng.uniform(0.0, 0.05) if shape == "killed" else None)
        if picked is None:
            picked = await attempt(1, None)
    take(picked, p, keys, results, rows)


# ---------------------------------------------------------------------------------------------
# The end: a final read of every key, the oracle
# ---------------------------------------------------------------------------------------------


async def _final(world: World) -> None:
    setup = world.setup
    rt = SimRuntime("final", setup.choices, setup.trace)
    store = MemoryStore(setup.bucket, rt.now_ms, url="memory://sim", registry=world.registry)
    left = await collect(store, rt)
    # What the manifests and WAL objects show first: it stands even if the final read fails.
    latest = left.manifests[max(left.manifests)] if left.manifests else None
    ended = leftovers(setup.bucket.objects, world.loads, latest, left.manifests.values())  # LOAD-10, before the final writer
    world.violations = ended + check(world.writes, world.loads, left, {})
    if latest is None or not latest.initialized:
        return  # nothing to read: no database (a sharded load's union never finished)
    async with aio.Db.open("memory://sim", world.settings, store=store, runtime=rt) as db:
        for key in KEYS:
            world.final[key] = await db.get(key)
    world.violations = ended + check(world.writes, world.loads, left, world.final)
    if not world.violations and applies(world, latest):
        world.violations = await kept_shards(world, latest)  # the shards a destroy keeps for their readers
    if not world.violations and applies_compacted(world):  # a load under a compactor, GC and a checkpoint
        world.violations = await compacted(world, world.settings, SMALL_SST)


def _faults_seen(setup: Setup, _world: World | None) -> dict:
    checks = setup.checkers.get("writer")
    counts = checks.counts if checks is not None else {}
    return {k: counts[k] for k in ("fault.transient", "store.reply-lost", "fault.stall", "crash") if counts.get(k)}


def _figures(w: World) -> dict:
    return {"writes": len(w.writes), "acked": sum(1 for x in w.writes if x.acked_s is not None),
            "loads": len(w.loads), "committed": sum(1 for ld in w.loads if ld.outcome == "committed"),
            "refused": sum(1 for ld in w.loads if ld.outcome == "refused"),
            "crashed": sum(1 for ld in w.loads if ld.outcome == "crashed"),
            "sharded": sum(1 for ld in w.loads if ld.sharded),
            "outcomes": " ".join(f"{ld.name}={ld.outcome}" for ld in w.loads)}


SCENARIO = Scenario(
    "load", _build, _processes, nursery="none", final=_final, fault_counts=_faults_seen, figures=_figures,
    oracles=lambda w, _failed: w.violations,
    checkers=(Checker("writer", lambda setup: WriterChecks()),
              Checker("cleanup", lambda setup: CleanupChecks(setup.bucket.objects, lambda p: p.startswith("l"))),
              Checker("manifest", lambda setup: ManifestFenceChecks(bucket_reader(setup.bucket)))),
    limit_what="the writer or a load still runs",
    processes_declared=("w", "w.<n>", "l<n>", "l<n>.p<p>.a<a>", "l<n>.abort", "s<n>", "s<n>.p<p>.a<a>", "s<n>.abort",
                        "final", "e", "w9", "w10", "l9", "l9.abort", "r9", "c9", "g9", "f9"),
    fault_kinds=("fault.transient", "store.reply-lost", "crash"))


def run_load_workload(seed: int, *, bugs: frozenset[str] = frozenset(), choices: Choices | None = None) -> WorldResult:
    """Run one world of bulk loads into a live writer's database; a violated invariant is
    reported. Every random choice comes from ``choices`` (default: generated from ``seed``)."""
    return run_world(SCENARIO, seed, choices=choices, bugs=bugs)
