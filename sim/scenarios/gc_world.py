"""The gc world (``sim/scenarios/gc.py``): its settings, drawn per seed, and what its processes
share (the bucket, the stores, clocks, the READ-3 history, checkpoints, counters); also the
rescale world's base."""

from __future__ import annotations

import collections
import itertools
import math
import operator
import uuid

import attrs
import trio

from slatedb.api.args import coerce_settings
from slatedb.gc import GarbageCollector
from slatedb.objstore.memory import MemoryBucket

from sim.checks.prefix import History
from sim.world import fastclock
from sim.world.choices import Choices, boolean
from sim.world.engine import Crash, PausableStore
from sim.world.rooted import RootedStore
from sim.world.runtime import SIM_EPOCH_MS, SimRuntime
from sim.world.store import SimObjectStore, StoreFaults
from sim.world.trace import Trace

N_KEYS = 48
STALL_MAX_S = 20.0
PARENT, CLONE = "memory://sim/parent", "memory://sim/clone"
#: A store leg's longest latency once the world is healed (virtual s).
HEALED_LATENCY_MAX_S = 0.02
#: A reader may fail this long (virtual s) after its last freeze ended; later it failed for good.
RECOVER_S = 20.0

async def run_gc(gc: GarbageCollector) -> None:
    """``gc.run()`` until it ends or is cancelled (the heal), then close its locator, shielded:
    the one way the gc, rescale and destroy worlds run a collector."""
    try:
        await gc.run()
    finally:
        with trio.CancelScope(shield=True):
            await gc.locator.aclose()



def _dir(rng, min_ages) -> dict:
    return {"interval": f"{rng.choice([500, 1000, 2000])}ms", "min_age": f"{rng.choice(min_ages)}ms"}


def _gc_options(rng) -> dict:
    """As aggressive as settings allow: short intervals, min_age far below the stalls."""
    min_ages = [500, 1000, 2000, 5000, 10000]
    return {"manifest_options": _dir(rng, min_ages), "wal_options": _dir(rng, min_ages),
            "compacted_options": _dir(rng, min_ages), "compactions_options": _dir(rng, min_ages),
            "detach_options": {"interval": "1s"}}


def _settings(rng) -> dict:
    return {
        "l0_sst_size_bytes": rng.choice([512, 1024, 2048]),
        "flush_interval": rng.choice(["20ms", "50ms", "100ms"]),
        "manifest_poll_interval": rng.choice(["100ms", "300ms", "1s"]),
        "min_filter_keys": 8,
        "l0_max_ssts": rng.choice([4, 8]),
        "compactor_options": {
            "poll_interval": f"{rng.choice([100, 300, 1000])}ms",
            "max_concurrent_compactions": rng.choice([1, 2]),
            "scheduler_options": {"min_compaction_sources": "2", "max_compaction_sources": str(rng.choice([2, 4, 8]))},
            "worker": {"max_sst_size": rng.choice([1024, 4096])},
        },
        "garbage_collector_options": _gc_options(rng),
    }


#: A GC directory's interval once the world is healed (its drawn interval is 0.5-2 s).
HEALED_GC_INTERVAL = "2000ms"


def healed_gc_options(settings_map: dict) -> dict:
    """The drawn GC options (a settings map's ``garbage_collector_options``) with every
    directory's interval at the slowest drawn value: after the heal a collector need only finish
    the work (liveness), and each pass reads the latest manifest afresh (at the drawn 0.5-2 s,
    most of a healed world's store calls)."""
    return {name: dict(o, interval=HEALED_GC_INTERVAL) for name, o in settings_map["garbage_collector_options"].items()}


def gc_slack_s(gc_options: dict) -> float:
    """Virtual s for GC (``gc_options`` as :func:`healed_gc_options` returns them) to collect what
    became garbage: two rounds of the slowest directory after its min_age, and a margin for a
    pass's own store calls."""
    opts = coerce_settings({"garbage_collector_options": gc_options}).garbage_collector_options
    return 2 * max(o.min_age + (o.interval or 0) for o in (opts.manifest_options, opts.wal_options,
                                                           opts.compacted_options)) + 5


async def gc_through_heal(world: "World", name: str, store: PausableStore, rt: SimRuntime) -> None:
    """A standalone GC process of one database, freezing now and then, until the heal; then
    restarted at the healed intervals (:func:`healed_gc_options`) until the end. Returns if its
    collector stops (the database removed) before the heal."""
    async with trio.open_nursery() as n:
        world.pause_plan(name, store, n, 60.0)
        gc = GarbageCollector(store, rt, world.settings.garbage_collector_options)

        async def until_healed() -> None:
            await world.healed_event.wait()
            n.cancel_scope.cancel()

        n.start_soon(until_healed)
        await run_gc(gc)
        n.cancel_scope.cancel()
    if not world.healed:
        return
    opts = coerce_settings({"garbage_collector_options": healed_gc_options(world.settings_map)})
    gc = GarbageCollector(store, rt, opts.garbage_collector_options)
    try:
        await gc.run()
    finally:
        with trio.CancelScope(shield=True):
            await gc.locator.aclose()


class World:
    def __init__(self, seed: int, choices: Choices, faults: str, trace: Trace, bucket: MemoryBucket,
                 bugs: frozenset[str]) -> None:
        self.seed = seed
        self.choices = choices
        self.trace = trace
        self.bugs = bugs
        self.rng = choices.stream("world")
        swarm = faults == "swarm"
        f = StoreFaults.swarm(self.rng) if swarm else StoreFaults()
        self.faults = attrs.evolve(f, stall_max_s=min(f.stall_max_s, STALL_MAX_S))
        self.crash_rate = self.rng.choice([0.0, 0.5, 1.0]) if swarm else 0.0
        self.pause_rate = self.rng.choice([0.0, 0.5, 1.0]) if swarm else 0.0
        self.settings_map = _settings(self.rng)
        self.settings = coerce_settings(self.settings_map)
        self.bucket = bucket
        self.stores: list[SimObjectStore] = []
        self.runtimes: dict[str, SimRuntime] = {}
        self.healed = False
        self.healed_event = trio.Event()  # set with ``healed``: background processes may stop then
        self.history = History()
        self.writer_checkpoints: list[tuple[uuid.UUID, float, tuple[int, int]]] = []  # (id, expires at, S range)
        self.writer_done = trio.Event()
        self.readers_done = trio.Event()
        self.read_failures_excused = 0
        self.reestablished = 0
        self.reader_scans = 0
        self.snapshot_reads = 0
        self.checkpoint_scans = 0
        self.clone_outcome = ""
        self.clone_detach = ""  # how far the clone checkpoint reader's history got (sim/scenarios/gc_clone.py)
        self.clone_checkpoint_scans = 0
        self.compactor_pins_s = 900.0  # the compactor's checkpoint_lifetime (sim/scenarios/gc.py _compactor_pins)

    # -- processes ----------------------------------------------------------------------------

    def runtime(self, name: str) -> SimRuntime:
        skew_ms = self.choices.stream("skew", name).randint(-1000, 1000)
        rt = SimRuntime(name, self.choices, self.trace, bugs=self.bugs, offset_ms=int(trio.current_time() * 1000) + skew_ms)
        self.runtimes[name] = rt
        return rt

    def clock_of(self, process: str):
        rt = self.runtimes.get(process)
        return rt.now_ms if rt is not None else (lambda: SIM_EPOCH_MS + int(trio.current_time() * 1000))

    def store(self, process: str, url: str) -> RootedStore:
        return RootedStore(self, process, url)

    def heal(self) -> None:
        self.healed = True
        self.healed_event.set()
        self.trace.record("world", "heal")
        # Faults stop, and a slow store (latency up to 0.2 s a leg) becomes a quick one (up to
        # 0.02 s): the liveness phase's work (a compaction, GC rounds) then takes fewer polls.
        self.faults = attrs.evolve(self.faults, latency_max_s=min(self.faults.latency_max_s, HEALED_LATENCY_MAX_S))
        for s in self.stores:
            s.faults_enabled = False
            s.faults = self.faults

    def now_wall_s(self) -> float:
        return SIM_EPOCH_MS / 1000 + trio.current_time()

    def pause_plan(self, name: str, store: PausableStore, nursery: trio.Nursery, max_s: float) -> None:
        """Freeze the process now and then (minutes of virtual time at most)."""
        rng = self.choices.stream("pauses", name)
        if self.pause_rate == 0 or not boolean(rng, self.pause_rate):
            return

        async def pauser() -> None:
            for _ in range(rng.randint(1, 3)):
                await fastclock.sleep(rng.uniform(1.0, 20.0))
                seconds = 10 ** rng.uniform(0, math.log10(max_s))
                if self.healed:
                    return
                store.pause(seconds)
                await fastclock.sleep(seconds)

        nursery.start_soon(pauser)


def _crash_after(world: World, name: str) -> Crash | None:
    rng = world.choices.stream("crash", name)
    if not boolean(rng, world.crash_rate):
        return None
    return Crash(rng.uniform(0.5, 20.0))


async def _scan(r) -> dict:
    return {k: v async for k, v in r.scan()}


_FAULT_KINDS = ("store.reply-lost", "fault.stall", "crash", "pause")
_KIND = operator.attrgetter("kind")


def fault_counts(trace: Trace) -> dict:
    """Injected faults by kind, in the order each kind first occurs in the trace: transient
    errors (``fault.transient``: a ``store.result`` whose outcome is ``transient-error``), lost
    replies, stalls, crashes and pauses. The kinds are read and counted in C; only the store
    results are looked at one by one."""
    events = trace.events
    kinds = list(map(_KIND, events))
    first: dict[str, int] = {}
    transient = 0
    for i in itertools.compress(range(len(kinds)), map("store.result".__eq__, kinds)):
        if events[i].f.get("outcome") == "transient-error":
            if not transient:
                first["fault.transient"] = i
            transient += 1
    counted = collections.Counter(kinds)
    for kind in _FAULT_KINDS:
        if counted[kind]:
            first[kind] = kinds.index(kind)
    return {kind: transient if kind == "fault.transient" else counted[kind] for kind in sorted(first, key=first.__getitem__)}
