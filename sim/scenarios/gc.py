"""A simulated world of garbage collection against everyone who needs old data.

One bucket, two databases (``parent/``, and ``clone/`` in about half the seeds), swarm store
faults (latency, transient errors, lost replies, stalls of up to a minute), processes that
freeze for minutes of virtual time (:class:`~sim.world.engine.PausableStore`) and crash:

* the **writer** ``w`` of the parent: a Db with small L0 SSTs, its in-process compactor set to
  compact often and its in-process **GC as aggressive as the settings allow** (per directory an
  interval of 0.2-2 s and a ``min_age`` of 0.5-10 s, far below the stalls). It puts and deletes
  48 keys in paced bursts, waits for durability after most, and now and then takes a checkpoint
  with ``Db.create_checkpoint`` (scope ALL or DURABLE, lifetime 30-240 s) while quiescent, so
  that the checkpoint's contents are known exactly. In some seeds it crashes and restarts
  (``w.r1``, ...);
* in some seeds a standalone **GC** ``g1`` (and a standalone **compactor** ``c1``), crashing,
  restarting and freezing too;
* **managed readers** ``r1``, ``r2`` (DbReader with its own checkpoint: lifetime 6-60 s, poll
  0.5-2 s, follow mode or not) scanning every key over and over; they freeze for up to five
  virtual minutes, often past their checkpoint's lifetime;
* an **admin** ``admin`` holding checkpoints: it creates them (from the latest manifest or from an
  existing one, lifetime 60-300 s), refreshes and deletes them, and reads each through a
  DbReader opened on the fixed checkpoint, as do the writer's checkpoints;
* a **clone** ``clone`` of the parent (from a writer checkpoint or the latest state) created at a
  random time, then a writer ``cw`` on it (with its own compactor and GC) writing its own keys
  and reading back everything.

Checked on every run:

* the trace checks of :class:`sim.checks.gc.GcChecks`: GC-1..4, CKPT-1/2, READ-1/2,
  BOUNDARY-1/2, CLONE-1..3;
* **READ-3** (the reader oracle, the issue's "readers and checkpoints see exactly a prefix of the
  durable history, never a mix"): every scan through a reader, a fixed checkpoint or the clone
  equals the state of the durable history after some sequence number ``S`` -- the parent's
  writes in seq order, each crashed incarnation cut at the first seq of the next one (what its
  successor replayed). Also: a managed reader never goes back; it sees every write acknowledged
  before it opened; a checkpoint taken with scope ALL holds exactly the writes issued before it,
  one with scope DURABLE at least those acknowledged; two scans through one fixed checkpoint
  agree; a clone holds exactly its source checkpoint's state (or, made from the latest state,
  everything acknowledged before it started) plus its own writes;
* **CKPT-1 / READ-2 end to end**: a read through an unexpired checkpoint never fails (a missing
  SST or WAL object); a read may fail only when its checkpoint expired during the read;
* **READ-4**: a managed reader whose checkpoint expired re-establishes one and reads again: a
  reader whose reads still fail 20 virtual s after its last freeze has failed for good;
* **liveness**: once the writer is done, faults stop, readers close, the admin drops its
  checkpoints; the writer writes a little more (it must be acknowledged and compacted) and GC
  runs on. After every remaining checkpoint's lifetime plus a few GC rounds, no garbage is left:
  no SST, manifest or WAL object that the latest manifest and its active checkpoints do not
  need, older than the heal; the whole world within 6 virtual hours. A managed reader ``rfinal``
  opened at the heal stays open through that check (what it pins is needed, nothing more);
* **READ-5** (reader liveness): once the final writes are durable and in L0, ``rfinal`` serves
  exactly the writer's state within 4 polls, and at the garbage check the latest manifest holds
  no checkpoint it replaced other than the one of its last round;
* contents: a fresh Db reads every key's last acknowledged value or a later one.

Same seed, same trace digest. Catalogued GC / reader / clone bugs (``sim/scenarios/catalogue.py``) are switched
on with ``bugs=``; ``./just sim run --seed S --workload gc [--bug NAME]`` replays one seed.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from typing import Any

import attrs
import trio

import slatedb.aio as aio
from slatedb.checkpoint import CheckpointOptions, CheckpointScope, create_checkpoint, delete_checkpoint, \
    refresh_checkpoint
from slatedb.clone import create_clone
from slatedb.compactor import Compactor
from slatedb.api.args import coerce_settings
from slatedb.errors import (
    CheckpointNotFoundError,
    ClosedError,
    FencedError,
    InvalidDbStateError,
    NotFoundError,
    ObjectNotFoundError,
    SlateDBError,
    TransientObjectStoreError,
)
from slatedb.gc import GarbageCollector
from slatedb.gc.retention import manifest_sst_ids
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.base import OVERWRITE, GetResult, ObjectMeta, PutMode
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.reader import DbReaderOptions
from slatedb.reader.aio import DbReader

from sim.world.invariants import Violation
from sim.world.choices import Choices, boolean
from sim.world.engine import Crash, PausableStore, crashable
from sim.checks.gc import GcChecks, snapshot_isolation
from sim.checks.manifest import ManifestFenceChecks, bucket_reader
from sim.checks.structure import check_world
from sim.world.store import ProcessCrashed, SimObjectStore, StoreFaults
from sim.world.runtime import SIM_EPOCH_MS, SimRuntime, run_deterministic
from sim.world.trace import Trace

VIRTUAL_LIMIT_S = 6 * 3600
N_KEYS = 48
STALL_MAX_S = 20.0
PARENT, CLONE = "memory://sim/parent", "memory://sim/clone"
#: A reader may fail this long (virtual s) after its last freeze ended; later it failed for good.
RECOVER_S = 20.0


@attrs.frozen
class GcWorkloadResult:
    """Same fields as ``DbWorkloadResult`` (the CLI reports both), plus GC figures."""

    seed: int
    ok: bool
    digest: str
    events: int
    virtual_s: float
    faults: dict
    violations: tuple[str, ...]
    acked: int = 0
    gc_deletes: int = 0
    reader_scans: int = 0
    checkpoint_scans: int = 0
    read_failures_excused: int = 0
    reestablished: int = 0
    clone: str = ""
    double_apply: int = 0
    last_events: str = ""


# -----------------------------------------------------------------------------------------------
# Stores: one bucket, databases under roots, keys traced with their root
# -----------------------------------------------------------------------------------------------


class RootedStore(SimObjectStore):
    """A process's faulty view of one database root; trace keys carry the root (``parent/...``),
    and ``open_url`` stays in the world (a clone reaching its parent)."""

    def __init__(self, world: "World", process: str, url: str) -> None:
        self.world = world
        self.root = url[len("memory://sim/"):].strip("/") + "/"
        rt_clock = world.clock_of(process)
        inner = MemoryStore(world.bucket, rt_clock, root=self.root, url=url)
        super().__init__(inner, world.choices.stream("store", process, url), world.trace, process=process,
                         faults=world.faults)
        self.faults_enabled = not world.healed
        world.stores.append(self)

    def open_url(self, url: str):
        return self.world.store(self.process, url)

    async def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        return await self._op("get", self.root + key, lambda: self.inner.get_now(key, byte_range), range=byte_range)

    async def head(self, key: str) -> ObjectMeta:
        return await self._op("head", self.root + key, lambda: self.inner.head_now(key))

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        return await self._op("put", self.root + key, lambda: self.inner.put_now(key, data, mode), mode=str(mode),
                              size=len(data))

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        return await self._op("list", self.root + prefix, lambda: self.inner.list_now(prefix))

    async def delete(self, key: str) -> None:
        return await self._op("delete", self.root + key, lambda: self.inner.delete_now(key))

    async def copy(self, src_key: str, dst_key: str) -> ObjectMeta:
        def apply() -> ObjectMeta:
            return self.inner.put_now(dst_key, self.inner.get_now(src_key).data, OVERWRITE)

        return await self._op("copy", self.root + src_key, apply, dst=dst_key)


# -----------------------------------------------------------------------------------------------
# The model: the parent's history, and what each reader saw
# -----------------------------------------------------------------------------------------------


class History:
    """Every write of every writer incarnation (values are unique), acknowledgements, and the
    observations to check at the end (:meth:`check`)."""

    def __init__(self) -> None:
        self.incarnations: list[list[tuple[int, bytes, bytes | None]]] = []
        self.acked_seq: dict[bytes, int] = {}
        self.acked_max = 0  # highest seq acknowledged durable
        self.issued_max = 0
        self.observations: list[tuple[str, str, dict, tuple[int, int]]] = []  # (who, what, state, (min S, max S))
        self.acked = 0

    def new_incarnation(self) -> list:
        self.incarnations.append([])
        return self.incarnations[-1]

    def durable(self) -> dict[bytes, list[tuple[int, bytes | None]]]:
        """Per key, (seq, value) of the durable history, seq ascending."""
        out: dict[bytes, list[tuple[int, bytes | None]]] = defaultdict(list)
        incs = [i for i in self.incarnations if i]
        for n, inc in enumerate(incs):
            cut = incs[n + 1][0][0] if n + 1 < len(incs) else None
            for seq, key, value in inc:
                if cut is None or seq < cut:
                    out[key].append((seq, value))
        for versions in out.values():
            versions.sort()
        return out

    def check(self) -> list[str]:
        """READ-3 for every observation; returns the violations."""
        hist = self.durable()
        by_value = {v: (k, s) for k, versions in hist.items() for s, v in versions if v is not None}
        problems: list[str] = []
        last_s: dict[str, tuple[int, str]] = {}
        for who, what, state, (want_lo, want_hi) in self.observations:
            lo, hi = _prefix_range(hist, by_value, state)
            if lo is None:
                problems.append(f"READ-3: {who} ({what}) read a state that is no prefix of the durable history: {hi}")
                continue
            if hi < want_lo or lo > want_hi:
                problems.append(f"READ-3: {who} ({what}) read the history up to seq {lo}..{hi}, expected within "
                                f"{want_lo}..{want_hi}")
                continue
            prev = last_s.get(who)
            if prev is not None and hi < prev[0]:
                problems.append(f"READ-3: {who} went back: {what} reads up to seq {lo}..{hi} after {prev[1]} read "
                                f"at least {prev[0]}")
            if what.startswith("scan"):
                last_s[who] = (max(lo, prev[0] if prev else 0), what)
        return problems


def _prefix_range(hist, by_value, state: dict) -> tuple[int | None, Any]:
    """The seqs S such that ``state`` is exactly the durable history up to S: (lo, hi), or
    (None, why) when there is none."""
    lo, hi = 0, 2**62
    for key, value in state.items():
        hit = by_value.get(value)
        if hit is None or hit[0] != key:
            return None, f"{key!r} = {value[:24]!r}..., which is not a durable write of that key"
        seq = hit[1]
        versions = hist[key]
        nxt = next((s for s, _ in versions if s > seq), 2**62)
        lo, hi = max(lo, seq), min(hi, nxt - 1)
    if lo > hi:
        return None, "keys read at incompatible points of the history"
    # Absent keys: S must fall where the key is absent (before its first write, or in a
    # tombstone's span).
    forbidden: list[tuple[int, int]] = []
    for key, versions in hist.items():
        if key in state:
            continue
        for n, (s, v) in enumerate(versions):
            if v is not None:
                end = versions[n + 1][0] - 1 if n + 1 < len(versions) else 2**62
                forbidden.append((s, end))
    forbidden.sort()
    # The lowest and highest S in [lo, hi] outside every forbidden span.
    allowed: list[tuple[int, int]] = []
    cur = lo
    for a, b in forbidden:
        if b < cur:
            continue
        if a > hi:
            break
        if a > cur:
            allowed.append((cur, a - 1))
        cur = max(cur, b + 1)
        if cur > hi:
            break
    if cur <= hi:
        allowed.append((cur, hi))
    if not allowed:
        absent = [k for k in hist if k not in state][:3]
        return None, f"no seq in {lo}..{hi} where every key read is current and {absent!r}... are absent"
    return allowed[0][0], allowed[-1][1]


# -----------------------------------------------------------------------------------------------
# The world
# -----------------------------------------------------------------------------------------------


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
        self.trace.record("world", "heal")
        for s in self.stores:
            s.faults_enabled = False

    def now_wall_s(self) -> float:
        return SIM_EPOCH_MS / 1000 + trio.current_time()

    def pause_plan(self, name: str, store: PausableStore, nursery: trio.Nursery, max_s: float) -> None:
        """Freeze the process now and then (minutes of virtual time at most)."""
        rng = self.choices.stream("pauses", name)
        if self.pause_rate == 0 or not boolean(rng, self.pause_rate):
            return

        async def pauser() -> None:
            for _ in range(rng.randint(1, 3)):
                await trio.sleep(rng.uniform(1.0, 20.0))
                seconds = 10 ** rng.uniform(0, math.log10(max_s))
                if self.healed:
                    return
                store.pause(seconds)
                await trio.sleep(seconds)

        nursery.start_soon(pauser)


def _crash_after(world: World, name: str) -> Crash | None:
    rng = world.choices.stream("crash", name)
    if not boolean(rng, world.crash_rate):
        return None
    return Crash(rng.uniform(0.5, 20.0))


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
                    violation = snapshot_isolation(name, snap.seq, first, again)
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
                        res = await db.create_checkpoint(scope, CheckpointOptions(lifetime_s=lifetime, name="w"))
                        world.writer_checkpoints.append((res.id, trio.current_time() + lifetime, (lo, last.seq)))
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
            gc = GarbageCollector(store, rt, world.settings.garbage_collector_options)
            try:
                await gc.run()
            finally:
                with trio.CancelScope(shield=True):
                    await gc.locator.aclose()
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


async def _scan(r) -> dict:
    return {k: v async for k, v in r.scan()}


async def _managed_reader(world: World, name: str) -> None:
    rt = world.runtime(name)
    rng = world.choices.stream("workload", name)
    sim = world.store(name, PARENT)
    store = PausableStore(sim)
    poll = rng.choice([0.5, 1.0, 2.0])
    opts = DbReaderOptions(manifest_poll_interval_s=poll, checkpoint_lifetime_s=rng.choice([6.0, 15.0, 60.0]),
                           follow_latest=boolean(rng, 0.5))
    h = world.history
    await trio.sleep(rng.uniform(0.5, 5.0))
    while await ManifestStore(sim, rt).read_latest() is None:
        await trio.sleep(0.5)
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
                await trio.sleep(rng.uniform(0.1, 1.5))
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
                await trio.sleep(rng.uniform(0.5, 10.0))
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
        await trio.sleep(rng.uniform(1.0, 8.0))
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
    await trio.sleep(rng.uniform(3.0, 25.0))
    if world.healed:
        return
    rt = world.runtime("clone")
    clone_store = world.store("clone", CLONE)
    parent_store = world.store("clone", PARENT)
    h = world.history
    source = None
    want = (h.acked_max, 2**62)
    usable = [c for c in world.writer_checkpoints if trio.current_time() < c[1] - STALL_MAX_S - 10]
    if usable and boolean(rng, 0.6):
        source, _, want = usable[-1]
    try:
        await create_clone(clone_store, parent_store, rt, source)
    except (CheckpointNotFoundError, InvalidDbStateError, NotFoundError) as e:
        inv = "READ-2" if "WAL object" in str(e) else "CLONE-2"  # a pinned WAL object / SST missing
        raise AssertionError(f"{inv}: the clone from {source or 'the latest state'} failed: {e}") from None
    world.clone_outcome = "from-checkpoint" if source else "from-latest"
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
    mine = {k: v for k, v in state.items() if k.startswith(b"c")}
    if mine != own:
        raise AssertionError(f"CLONE: the clone's own keys read {len(mine)} rows, written {len(own)}")
    parent_part = {k: v for k, v in state.items() if k.startswith(b"k")}
    h.observations.append(("clone", f"clone {world.clone_outcome}", parent_part, want))


# -----------------------------------------------------------------------------------------------
# Running one seed
# -----------------------------------------------------------------------------------------------


def run_gc_workload(seed: int, *, faults: str = "swarm", bugs: frozenset[str] = frozenset(),
                    choices: Choices | None = None) -> GcWorkloadResult:
    """Run one world; a violated invariant, a wrong read or a stuck run is reported in the result.
    Every random choice comes from ``choices`` (default: generated from ``seed``)."""
    choices = Choices(seed) if choices is None else choices
    trace = Trace(trio.current_time)
    bucket = MemoryBucket()
    ManifestFenceChecks(bucket_reader(bucket)).attach(trace)  # FENCE-5, CFENCE-1 at every manifest landing

    def db_of(process: str) -> str:
        return "clone/" if process.startswith("cw") else "parent/"

    checks = GcChecks(bucket, ("parent/", "clone/"), db_of).attach(trace)
    world_box: list[World] = []
    try:
        return run_deterministic(_world, seed, choices, faults, trace, checks, bucket, frozenset(bugs), world_box,
                                 seed=choices)
    except (AssertionError, SlateDBError) as e:
        return _failed(seed, trace, checks, world_box, (Violation.of_exception(e),))
    except BaseExceptionGroup as group:
        return _failed(seed, trace, checks, world_box, tuple(Violation.of_exception(e) for e in _leaves(group)))


def _leaves(group: BaseExceptionGroup):
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from _leaves(e)
        else:
            yield e


def _fault_counts(trace: Trace) -> dict:
    counts: dict[str, int] = defaultdict(int)
    for e in trace.events:
        if e.kind == "store.result" and dict(e.fields).get("outcome") == "transient-error":
            counts["fault.transient"] += 1
        elif e.kind in ("store.reply-lost", "fault.stall", "crash", "pause"):
            counts[e.kind] += 1
    return dict(counts)


def _failed(seed, trace, checks, world_box, violations) -> GcWorkloadResult:
    return GcWorkloadResult(seed, False, trace.digest(), len(trace), trace.events[-1].time_s if trace.events else 0.0,
                            _fault_counts(trace), violations, double_apply=checks.counts["double_apply"],
                            last_events=trace.render(last=40))


async def _world(seed, choices, faults, trace, checks: GcChecks, bucket, bugs, world_box) -> GcWorkloadResult:
    world = World(seed, choices, faults, trace, bucket, bugs)
    world_box.append(world)
    rng = world.rng
    trace.record("world", "settings", gc=str(world.settings_map["garbage_collector_options"]),
                 crash_rate=world.crash_rate, pause_rate=world.pause_rate)
    with trio.move_on_after(VIRTUAL_LIMIT_S) as limit:
        async with trio.open_nursery() as everything:
            if boolean(rng, 0.5):
                everything.start_soon(_gc_process, world, "g1")
            if boolean(rng, 0.3):
                everything.start_soon(_compactor_process, world, "c1")
            async with trio.open_nursery() as clients:
                for i in range(1, rng.randint(1, 2) + 1):
                    clients.start_soon(_managed_reader, world, f"r{i}")
                clients.start_soon(_admin, world)
                if boolean(rng, 0.5):
                    clients.start_soon(_clone, world)
                await _writer(world, "w", rng.randint(100, 200))
                world.writer_done.set()
            # Liveness: faults stop; the writer goes on a little; GC must leave no garbage.
            world.heal()
            healed_at = trio.current_time()
            await _final_phase(world, checks, healed_at)
            everything.cancel_scope.cancel()
    assert not limit.cancelled_caught, f"liveness: the world still runs after {VIRTUAL_LIMIT_S} virtual s"
    for problem in world.history.check():
        raise AssertionError(problem)
    await check_world(bucket, ["parent", "clone"], SIM_EPOCH_MS + int(trio.current_time() * 1000))  # slatedb check
    return GcWorkloadResult(
        seed, True, trace.digest(), len(trace), trio.current_time(), _fault_counts(trace), (),
        acked=world.history.acked, gc_deletes=sum(v for k, v in checks.counts.items() if k.startswith("gc_delete.")),
        reader_scans=world.reader_scans, checkpoint_scans=world.checkpoint_scans,
        read_failures_excused=world.read_failures_excused, reestablished=world.reestablished,
        clone=world.clone_outcome, double_apply=checks.counts["double_apply"])


async def _final_phase(world: World, checks: GcChecks, healed_at: float) -> None:
    """After the heal: the writer writes and waits for a compaction; then, once every checkpoint
    but the writer's and the clone's final ones has expired (or was dropped) and GC had time for
    a few rounds, nothing GC should delete is left."""
    rt = world.runtime("wfinal")
    store = world.store("wfinal", PARENT)
    h = world.history
    mine = h.new_incarnation()
    gc_opts = world.settings.garbage_collector_options
    slack = 3 * max(o.min_age + (o.interval or 0) for o in (gc_opts.manifest_options, gc_opts.wal_options,
                                                            gc_opts.compacted_options)) + 10
    parent = checks.dbs["parent/"]
    # READ-5: a managed reader opened now must catch up with the writer's durable state within
    # a few polls and hold no checkpoint it replaced; it stays open through the garbage check.
    r_rt = world.runtime("rfinal")
    r_rng = world.choices.stream("workload", "rfinal")
    r_poll = r_rng.choice([0.5, 1.0, 2.0])
    r_opts = DbReaderOptions(manifest_poll_interval_s=r_poll, checkpoint_lifetime_s=r_rng.choice([6.0, 15.0, 60.0]),
                             follow_latest=boolean(r_rng, 0.5))
    made: set[str] = set()  # the checkpoints the reader made (its reader_checkpoint events)

    def note(e) -> None:
        if e.process == "rfinal" and e.kind == "reader_checkpoint":
            made.add(dict(e.fields)["id"])

    world.trace.listeners.append(note)
    async with aio.Db.open(PARENT, world.settings_map, store=store, runtime=rt) as db, \
            DbReader.open(PARENT, options=r_opts, store=world.store("rfinal", PARENT), runtime=r_rt) as reader:
        for i in range(40):
            key = b"k%03d" % (i % N_KEYS)
            value = b"wfinal:%d:" % i + b"z" * 40
            wh = await db.put(key, value)
            mine.append((wh.seq, key, value))
        await wh.wait_durable()
        for key in {k for _, k, _ in mine}:
            h.acked_seq[key] = max(h.acked_seq.get(key, -1), max(s for s, k, _ in mine if k == key))
        await db.flush(wal=False)
        # A compaction must commit after the heal (the writer's compactor runs on).
        deadline = trio.current_time() + 300
        while len(parent.manifests[parent.latest].l0) >= 2:  # min_compaction_sources
            if trio.current_time() > deadline:
                raise AssertionError(f"liveness: L0 still holds {len(parent.manifests[parent.latest].l0)} SSTs 300 "
                                     "virtual s after faults stopped")
            await trio.sleep(0.5)
        await _reader_catches_up(world, reader, r_opts, await _scan(db))
        # GC goes on for a few rounds (what checkpoints still pin is not garbage).
        await trio.sleep(slack)
        await db.flush(wal=False)  # a fresh L0 moves GC's ULID cutoff past the heal
        # What is garbage now must be gone one slack later; what a checkpoint pins until it
        # expires in that window is excused (gc seeds 102, 160: a checkpoint expired a moment
        # before the check, the objects it pinned were still there).
        since = parent.latest
        await trio.sleep(slack)
        _no_garbage(world, checks, healed_at, since)  # with the reader still open
        _reader_holds_only_what_it_needs(parent, reader, made)
        # Contents: the final state is the whole durable history.
        h.observations.append(("final", "final read", await _scan(db), (mine[-1][0], 2**62)))


#: READ-5's bound: polls a managed reader may take to reach the writer's durable state.
READER_CATCH_UP_POLLS = 4


async def _reader_catches_up(world: World, reader, opts: DbReaderOptions, durable: dict) -> None:
    """READ-5 (reader.md): after the heal, with every write durable and flushed to L0, the
    managed reader serves exactly the writer's durable state within READER_CATCH_UP_POLLS polls."""
    deadline = trio.current_time() + READER_CATCH_UP_POLLS * opts.manifest_poll_interval_s + 1.0
    while True:
        state = await _scan(reader)
        if state == durable:
            return
        if trio.current_time() > deadline:
            missing = sorted(k for k in durable if state.get(k) != durable[k])
            raise AssertionError(f"READ-5: managed reader still behind the writer's durable state "
                                 f"{READER_CATCH_UP_POLLS} polls ({opts.manifest_poll_interval_s} s each) after the "
                                 f"heal: {len(missing)} keys differ, e.g. {missing[:3]} (manifest "
                                 f"{getattr(reader, 'manifest_id', '?')}, stats {reader.stats})")
        await trio.sleep(opts.manifest_poll_interval_s / 4)


def _reader_holds_only_what_it_needs(parent, reader, made: set[str]) -> None:
    """READ-5, second half: the latest manifest holds the reader's current checkpoint and at most
    the one it replaced in its last round (deleted one round later), no older one."""
    latest = parent.manifests[parent.latest]
    ours = {str(c.id) for c in latest.checkpoints} & made
    ours.discard(str(reader.checkpoint_id))
    if len(ours) > 1:
        raise AssertionError(f"READ-5: the managed reader still holds {len(ours)} checkpoints it replaced "
                             f"(latest manifest {parent.latest}): {sorted(ours)[:3]}")


def _no_garbage(world: World, checks: GcChecks, healed_at: float, since: int | None = None) -> None:
    """Liveness of GC: nothing older than the heal that the latest manifest and the manifests
    pinned by the checkpoints of the manifests from ``since`` to the latest (the last GC rounds'
    view; default: the latest alone) do not need is left in the parent."""
    parent = checks.dbs["parent/"]
    latest_id = parent.latest
    latest = parent.manifests[latest_id]
    pinned = {c.manifest_id for mid, m in parent.manifests.items()
              if (since if since is not None else latest_id) <= mid <= latest_id for c in m.checkpoints}
    needed = set(manifest_sst_ids(latest))
    ranges = [(latest.replay_after_wal_id, 2**62)]
    for mid in pinned:
        m = parent.manifests.get(mid)
        if m is not None:
            needed |= manifest_sst_ids(m)
            ranges.append((m.replay_after_wal_id, m.wal_id_last_seen))
    heal_ms = SIM_EPOCH_MS + int(healed_at * 1000) - 2000
    garbage: list[str] = []
    wal_ids = []
    for key, (_data, meta) in world.bucket.objects.items():
        if not key.startswith("parent/") or meta.last_modified_ms >= heal_ms:
            continue
        rel = key[len("parent/"):]
        if rel.startswith("compacted/"):
            sst = rel[len("compacted/"):-len(".sst")]
            if not any(str(s) == sst for s in needed):
                garbage.append(rel)
        elif rel.startswith("manifest/") and rel.endswith(".manifest"):
            mid = int(rel[len("manifest/"):-len(".manifest")])
            if mid != latest_id and mid not in pinned:
                garbage.append(rel)
        elif rel.startswith("wal/") and _data:
            wal_ids.append((int(rel[len("wal/"):-len(".sst")]), rel))
    newest_wal = max((i for i, _ in wal_ids), default=0)
    for wal_id, rel in wal_ids:
        if wal_id != newest_wal and not any(a < wal_id <= b for a, b in ranges):
            garbage.append(rel)
    if garbage:
        raise AssertionError(f"liveness: GC left {len(garbage)} objects written before the heal that nothing needs, "
                             f"e.g. {sorted(garbage)[:4]} (latest manifest {latest_id}, pinned {sorted(pinned)})")
