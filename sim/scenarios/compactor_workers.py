"""The compactor world with separate workers: coordinators and N simulated worker processes.

The world of ``sim/scenarios/compactor.py`` (a writer, an admin submitting external
compactions, one simulated object store with swarm faults), but the compaction protocol runs
as the official 0.17 deployment does, the roles in separate processes:

* **coordinators** ``c1`` (and sometimes ``c2``, fencing it): :class:`Compactor` with
  ``local_worker=False``: they validate, schedule, reclaim Running jobs whose heartbeat is
  older than ``worker_heartbeat_timeout`` and commit Compacted ones; they crash and restart
  like the compactors of the compactor world. The writer runs no compactor of its own;
* **workers** ``k1`` .. ``kN`` (N from the seed, 2 to 4): the production
  :class:`slatedb.compactor.worker.Worker` (``Worker.run``), each its own process with its own
  worker id and its own ``compactor_options.worker`` (``max_subcompactions``, capacity,
  heartbeat and poll intervals: a mixed fleet). They contend for Scheduled jobs by CAS, and per
  seed they

  - **crash** (at a random moment, or right after a claim, an output SST, or a ``.compactions``
    write) and restart under a new name and worker id (``k1.r1``): the job they held is
    reclaimed once its heartbeat is stale and resumed from its recorded ranges by another;
  - **stall** (the whole process freezes, 0.3 to 60 virtual s, right after a claim, after
    recording an output, or as its job's result leaves) or **lose their heartbeat** (only their ``.compactions`` requests
    hang, the merge goes on): past the timeout the coordinator reclaims the job, another worker
    claims and finishes it, and the stalled one **returns late**: its heartbeat finds the job
    owned by another (the job stops), or its finished result is dropped (W6).

At the heal the last coordinator ``cfinal`` and worker ``kfinal`` start and must drain L0.

Checked on every run, besides the compactor world's checks (CFENCE-*, COMPACT-1..3, RESUME-*,
contents, liveness, ``slatedb check``): the owner (COMPACT-5: only the job's owner writes its
progress and result, and the run committed is the owner's Compacted result), the ranges
(COMPACT-6: subranges tile the key space, outputs lie in their range) and, for every committed
job, the committed sorted run against a single-process compaction of the same spec by the
production merge (COMPACT-9, ``sim/checks/compactor.py``).

``./just sim run --seed S --workload compactor-workers [--bug NAME]`` replays one seed.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import trio

from slatedb.api.args import coerce_settings
from slatedb.compactor.worker import Worker
from slatedb.format.compactions import decode_compactions
from slatedb.format.types import CompactionStatus
from slatedb.objstore.base import OVERWRITE, GetResult, ObjectMeta, PutMode
from slatedb.objstore.memory import MemoryStore

from sim.checks.compactor import CompactorChecks
from sim.checks.manifest import manifest_checks
from sim.checks.writer import WriterChecks
from sim.scenarios.compactor import _admin, _drain, _fault_counts, _figures, _final, _start_compactor, _wait_for_db, _writer
from sim.scenarios.compactor_world import World, purge_crash
from sim.world import events, fastclock
from sim.world.choices import Choices, boolean
from sim.world.engine import Crash, PausableStore, crashable
from sim.world.trace import listens
from sim.world.harness import Checker, Scenario, Setup, WorldResult, run_world

#: Events of a worker right after which it may crash (kind, ``ns`` field).
WORKER_CRASH_POINTS = (("compaction_claimed", None), ("compaction_output", None), ("commit", "compactions"))
#: Stalls: log10 of the seconds, uniform (0.3 to 60 s: below and above every heartbeat timeout).
STALL_LOG10_S = (-0.5, 1.78)


class HeartbeatLossStore(PausableStore):
    """A worker that loses its heartbeat: while "paused", only its ``.compactions`` requests
    (claims, heartbeats, results) hang; its SST reads and writes go on."""

    async def _wait_key(self, key: str) -> None:
        if key.startswith("compactions/"):
            await self._wait()

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, trio.current_time() + seconds)
        self.sim.trace.record(self.sim.process, events.PAUSE, seconds=round(seconds, 6), only="compactions")

    async def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        await self._wait_key(key)
        return await self.sim.get(key, byte_range)

    async def head(self, key: str) -> ObjectMeta:
        await self._wait_key(key)
        return await self.sim.head(key)

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        await self._wait_key(key)
        return await self.sim.put(key, data, mode)

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        await self._wait_key(prefix)
        return await self.sim.list(prefix)


class ResultStallStore(PausableStore):
    """A worker that freezes as it writes a job's result: the request of its ``nth`` Compacted
    leaves ``seconds`` late (the late worker of W6), everything after it waits too."""

    def __init__(self, sim, world: "WorkersWorld", nth: int, seconds: float) -> None:
        super().__init__(sim)
        self.world, self.nth, self.seconds = world, nth, seconds
        self.worker_id = ""
        self.results: set = set()

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        if self.nth and key.startswith("compactions/") and not self.world.healed:
            done = {c.id for c in decode_compactions(data, key).recent_compactions
                    if c.status is CompactionStatus.COMPACTED and c.worker is not None
                    and c.worker.worker_id == self.worker_id}
            if done - self.results:
                self.results |= done
                if len(self.results) >= self.nth:
                    self.nth = 0
                    self.pause(self.seconds)
        return await super().put(key, data, mode)


class WorkersWorld(World):
    """The compactor world; coordinators without a local worker; ``n_workers`` workers."""

    local_worker = False

    def __init__(self, setup: Setup) -> None:
        super().__init__(setup)
        self.full_settings_map = self.settings_map
        self.settings_map = {**self.settings_map, "compactor_options": None}  # the writer compacts nothing
        self.n_workers = self.rng.randint(2, 4)
        self.worker_restarts = 0
        self.counts: Counter = Counter()
        self.claimers: set[str] = set()  # worker ids that claimed a job
        self.trace.listeners.append(self._count)

    @listens("compaction_claimed", "compaction_reclaimed", "compaction_result_dropped", "compaction_lost",
             "compaction_released", "pause")
    def _count(self, e) -> None:
        if e.kind in ("compaction_claimed", "compaction_reclaimed", "compaction_result_dropped", "compaction_lost",
                      "compaction_released") or (e.kind == "pause" and e.process.startswith("k")):
            self.counts[e.kind] += 1
            if e.kind == "compaction_claimed":
                self.claimers.add(str(e.f.get("worker")))

    def worker_settings(self, base: str):
        """A worker's own ``compactor_options.worker`` (drawn per worker, kept across restarts)."""
        rng = self.choices.stream("worker-settings", base)
        m = copy.deepcopy(self.full_settings_map)
        m["compactor_options"]["worker"].update(
            max_subcompactions=rng.choice([1, 2, 4]), max_concurrent_compactions=rng.choice([1, 2]),
            heartbeat_interval=rng.choice(["1s", "2s"]), compactions_poll_interval=rng.choice(["200ms", "500ms", "1s"]))
        # A mixed fleet: each worker cuts outputs after any row or between keys only, so a job
        # cut inside a key by one resumes on another (compaction.md step 7).
        m["compactor_options"]["worker"]["cut_after_any_row"] = boolean(rng, 0.5)
        return coerce_settings(m)

    def worker_crash_plan(self) -> Crash | None:
        if not boolean(self.rng, self.crash_rate):
            return None
        if boolean(self.rng, 0.6):
            kind, ns = self.rng.choice(WORKER_CRASH_POINTS)
            return Crash(None, kind, ns, self.rng.randint(1, 3))
        return Crash(self.rng.uniform(0.5, 8.0))

    def start_final_workers(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(_worker, self, "kfinal", None)


def _stall_plan(world: WorkersWorld, name: str) -> PausableStore | None:
    """Whether (and how) worker ``name`` stalls: the whole process or only its heartbeat, right
    after its n-th claim, or at the first ``.compactions`` write after its n-th output SST (the
    progress of that output; the job's result when it was the last)."""
    if world.pause_rate == 0 or not boolean(world.rng, world.pause_rate):
        return None
    at_result = boolean(world.rng, 0.35)
    heartbeat_only = boolean(world.rng, 0.4)
    at_claim = boolean(world.rng, 0.3)
    if at_result:  # most often back just after the reclaim: the job is being redone by another worker
        timeout_s = world.settings.compactor_options.worker_heartbeat_timeout
        late_s = timeout_s + world.rng.uniform(1.0, 4.0) if boolean(world.rng, 0.7) else 10 ** world.rng.uniform(*STALL_LOG10_S)
        return _Stall(world, name, False, False, world.rng.randint(1, 2), late_s, at_result=True)
    nth = world.rng.randint(1, 2 if at_claim else 4)
    seconds = 10 ** world.rng.uniform(*STALL_LOG10_S)
    return _Stall(world, name, heartbeat_only, at_claim, nth, seconds)


class _Stall:
    def __init__(self, world: WorkersWorld, name: str, heartbeat_only: bool, at_claim: bool, nth: int,
                 seconds: float, at_result: bool = False) -> None:
        self.world, self.name, self.heartbeat_only, self.at_result = world, name, heartbeat_only, at_result
        self.at_claim, self.nth, self.seconds = at_claim, nth, seconds
        self.seen = 0
        self.store: PausableStore | None = None

    def attach(self, store: PausableStore) -> None:
        self.store = store
        if not self.at_result:  # else the store stalls itself (ResultStallStore)
            self.world.trace.listeners.append(self.on_event)

    @listens("compaction_claimed", "compaction_output", "commit")
    def on_event(self, e) -> None:
        if e.process != self.name:
            return
        if e.kind == ("compaction_claimed" if self.at_claim else "compaction_output"):
            self.seen += 1
            fire = self.at_claim and self.seen == self.nth
        else:
            fire = (not self.at_claim and self.seen >= self.nth and e.kind == "commit"
                    and e.f.get("ns") == "compactions")
        if fire:
            self.world.trace.listeners.remove(self.on_event)
            if not self.world.healed and self.store is not None:
                self.store.pause(self.seconds)


async def _worker(world: WorkersWorld, name: str, crash: Crash | None, restarts: int = 0) -> None:
    """Worker process ``name``: the production worker until it crashes (then a new incarnation
    with a new worker id, unless healed) or the world ends."""
    rt, sim_store = world.process(name)
    base = name.split(".")[0]
    stall = None if base == "kfinal" else _stall_plan(world, name)
    store: PausableStore
    if stall is not None and stall.at_result:
        store = ResultStallStore(sim_store, world, stall.nth, stall.seconds)
    else:
        store = (HeartbeatLossStore if stall is not None and stall.heartbeat_only else PausableStore)(sim_store)
    if stall is not None:
        stall.attach(store)
    worker = Worker(store, rt, world.worker_settings(base))
    if isinstance(store, ResultStallStore):
        store.worker_id = worker.worker_id

    async def body() -> str:
        await _wait_for_db(sim_store, rt)
        await worker.run()
        return "stopped"

    try:
        outcome = await crashable(world, name, sim_store, crash, body)
    finally:
        if stall is not None and stall.on_event in world.trace.listeners:
            world.trace.listeners.remove(stall.on_event)
    world.outcomes[name] = outcome
    if outcome == "crashed" and restarts < 3 and not world.healed:
        await fastclock.sleep(world.rng.uniform(0.0, 2.0))
        if not world.healed:
            world.worker_restarts += 1
            await _worker(world, f"{base}.r{restarts + 1}", world.worker_crash_plan() if restarts < 2 else None,
                          restarts + 1)


async def _processes(world: WorkersWorld, everything: trio.Nursery | None) -> None:
    """One coordinator (sometimes a second one later, fencing it, maybe right after an event of
    the first), N workers starting within the first seconds, the admin, the writer."""
    assert everything is not None
    rng = world.rng
    world.nursery = everything
    everything.start_soon(_start_compactor, world, "c1", rng.uniform(0.1, 2.0), None,
                          purge_crash(world, world.crash_plan(compactor=True)))
    if boolean(rng, 0.4):
        trigger = (rng.choice(("compaction_state", "compaction_reclaimed", "compaction_commit")), None,
                   rng.randint(1, 6))
        everything.start_soon(_start_compactor, world, "c2", rng.uniform(3.0, 20.0), trigger,
                              world.crash_plan(compactor=True))
    for i in range(1, world.n_workers + 1):
        everything.start_soon(_start_worker, world, f"k{i}", rng.uniform(0.0, 3.0), world.worker_crash_plan())
    everything.start_soon(_admin, world, rng.randint(2, 6))
    await _writer(world, "w", rng.randint(250, 450))


async def _start_worker(world: WorkersWorld, name: str, at: float, crash: Crash | None) -> None:
    await fastclock.sleep(at)
    if not world.healed:
        await _worker(world, name, crash)


def _worker_figures(world: WorkersWorld) -> dict[str, Any]:
    c = world.counts
    return dict(_figures(world), workers=world.n_workers, worker_restarts=world.worker_restarts,
                claims=c["compaction_claimed"], claimers=len(world.claimers), reclaims=c["compaction_reclaimed"], stalls=c["pause"],
                jobs_lost=c["compaction_lost"], results_dropped=c["compaction_result_dropped"],
                released=c["compaction_released"])


SCENARIO = Scenario(
    "compactor-workers", WorkersWorld, _processes, liveness=_drain, heals=True, final=_final, figures=_worker_figures,
    fault_counts=_fault_counts,
    checkers=(Checker("writer", lambda setup: WriterChecks()),
              Checker("manifest", manifest_checks),
              Checker("compactor", lambda setup: CompactorChecks(MemoryStore(setup.bucket, lambda: 0,
                                                                             url="memory://sim")))),
    processes_declared=("w", "c1", "c2", "k1..k4", "admin", "cfinal", "kfinal", "final"),
    fault_kinds=("fault.transient", "store.reply-lost", "fault.stall", "crash"))


def run_compactor_workers(seed: int, *, faults: str = "swarm", bugs: frozenset[str] = frozenset(),
                          choices: Choices | None = None) -> WorldResult:
    """Run one world of coordinators and separate workers (see the module)."""
    return run_world(SCENARIO, seed, choices=choices, bugs=bugs, faults=faults)
