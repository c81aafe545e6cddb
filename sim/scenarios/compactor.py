"""A simulated world of compactors contending over one database on a faulty store.

One simulated object store (swarm faults per seed: latency, transient errors, lost replies,
stalls of up to a minute) is shared by:

* the **writer** ``w``: a Db with a small ``l0_sst_size_bytes`` and its in-process compactor
  (``compactor_options`` that compact often: poll 0.1-0.5 s, ``min_compaction_sources`` 2, a
  small ``worker.max_sst_size`` so compactions write several output SSTs; all per-seed). It
  puts, overwrites and deletes 64 keys in paced bursts, waits for durability after most bursts,
  reads its own writes back and holds snapshots (read at their seq against its own history);
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
  :data:`DRAIN_LIMIT_S` virtual seconds; the whole world within 6 virtual hours;
* RESUME-1/2 on the output SSTs of every committed compaction
  (:meth:`CompactorChecks.verify_outputs`);
* contents: a fresh Db reads, for every key, its last acknowledged value (absent if that was
  a delete) or the value of a later write that was never acknowledged (it may or may not have
  become durable before a crash); no key that was never written exists; an external
  compaction naming an unknown source never commits.

Same seed, same trace digest. Catalogued compactor bugs (``sim/scenarios/catalogue.py``) are switched on with
``bugs=``; ``./just sim run --seed S --workload compactor [--bug NAME]`` replays one seed.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import attrs
import trio

import slatedb.aio as aio
from slatedb.compactor import Compactor, CompactorEpochError, full_spec, submit_compaction
from slatedb.compactor.spec import CompactionSpec, L0Source, RunSource
from slatedb.api.args import coerce_settings
from slatedb.errors import ClosedError, FencedError, SlateDBError
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.base import OVERWRITE, GetResult, ObjectMeta, ObjectStore, PutMode
from slatedb.objstore.memory import MemoryBucket, MemoryStore

from sim.world.invariants import Violation
from sim.world.choices import Choices, boolean
from sim.checks.manifest import ManifestFenceChecks, bucket_reader
from sim.checks.structure import check_world
from sim.checks.writer import WriterChecks
from sim.checks.compactor import CompactorChecks
from sim.world.engine import Crash, PausableStore, crashable
from sim.world.store import ProcessCrashed, SimObjectStore, StoreFaults
from sim.world.runtime import SIM_EPOCH_MS, SimRuntime, run_deterministic
from sim.world.trace import Trace

#: A run that has not finished after this much virtual time is reported as stuck.
VIRTUAL_LIMIT_S = 6 * 3600
#: Once faults stop, L0 must drain below ``min_compaction_sources`` within this (virtual s).
DRAIN_LIMIT_S = 600.0
N_KEYS = 64
STALL_MAX_S = 60.0
MIN_SOURCES = 2


@attrs.frozen
class CompactorWorkloadResult:
    """Same fields as ``DbWorkloadResult`` (the CLI reports both), plus compaction figures."""

    seed: int
    ok: bool
    digest: str
    events: int
    virtual_s: float
    faults: dict
    violations: tuple[str, ...]
    acked: int = 0
    compactors: int = 0
    commits: int = 0
    completed: int = 0
    resumes: int = 0
    verified: int = 0
    external: int = 0
    external_failed: int = 0  # invalid external compactions that ended Failed
    drain_s: float = 0.0
    last_events: str = ""


def _settings(rng) -> dict:
    """Per-seed settings (swarm): small SSTs, a compactor that compacts often."""
    return {
        "l0_sst_size_bytes": rng.choice([512, 1024, 2048]),
        "flush_interval": rng.choice(["20ms", "50ms", "100ms"]),
        "manifest_poll_interval": rng.choice(["100ms", "300ms"]),
        "min_filter_keys": 8,
        "l0_max_ssts": rng.choice([4, 8, 16]),
        "compactor_options": {
            "poll_interval": f"{rng.choice([100, 200, 500])}ms",
            "max_concurrent_compactions": rng.choice([1, 2, 4]),
            "scheduler_options": {"min_compaction_sources": str(MIN_SOURCES),
                                  "max_compaction_sources": str(rng.choice([2, 4, 8]))},
            "worker": {"max_sst_size": rng.choice([1024, 2048, 4096]),
                       # the official coordinator/worker protocol: ranges, heartbeats, reclaims
                       "max_subcompactions": rng.choice([1, 2, 4]),
                       "heartbeat_interval": rng.choice(["1s", "2s"]),
                       "compactions_poll_interval": rng.choice(["200ms", "1s"])},
            "commit_compacted_interval": rng.choice(["50ms", "200ms"]),
            "worker_heartbeat_timeout": rng.choice(["5s", "10s", "30s"]),
        },
    }


class Model:
    """Every write, and per key the highest acknowledged seq. Values are unique."""

    def __init__(self) -> None:
        self.writes: dict[bytes, list[tuple[int, bytes | None]]] = defaultdict(list)
        self.acked_seq: dict[bytes, int] = {}
        self.acked = 0

    def write(self, key: bytes, seq: int, value: bytes | None) -> None:
        self.writes[key].append((seq, value))

    def ack(self, key: bytes, seq: int) -> None:
        self.acked += 1
        self.acked_seq[key] = max(self.acked_seq.get(key, -1), seq)

    def allowed(self, key: bytes) -> list[bytes | None]:
        """The last acknowledged value, or that of any later write (never acknowledged: it may
        or may not have become durable); before any acknowledgement, absent too. Seqs grow across
        writer incarnations above everything durable, so "later" is "higher seq"."""
        a = self.acked_seq.get(key)
        out = [v for s, v in self.writes[key] if a is None or s >= a]
        if a is None:
            out.append(None)
        return out


class World:
    def __init__(self, seed: int, choices: Choices, faults: str, trace: Trace, bucket: MemoryBucket,
                 bugs: frozenset[str]) -> None:
        self.seed = seed
        self.choices = choices
        self.trace = trace
        self.bugs = bugs
        self.rng = choices.stream("world")
        swarm = faults == "swarm"
        self.faults = StoreFaults.swarm(self.rng) if swarm else StoreFaults()
        # Stalls of up to a minute open every window a longer one would (poll intervals are
        # < 1 s); longer ones only stretch the idle polling of every process.
        self.faults = attrs.evolve(self.faults, stall_max_s=min(self.faults.stall_max_s, STALL_MAX_S))
        self.crash_rate = self.rng.choice([0.0, 0.5, 1.0]) if swarm else 0.0
        self.pause_rate = self.rng.choice([0.0, 0.5, 1.0]) if swarm else 0.0
        self.replacements = 0
        self.nursery: trio.Nursery | None = None
        self.settings_map = _settings(self.rng)
        self.settings = coerce_settings(self.settings_map)
        self.bucket = bucket
        self.stores: list[SimObjectStore] = []
        self.healed = False
        self.model = Model()
        self.outcomes: dict[str, str] = {}
        self.invalid_submitted: list[tuple[Any, str]] = []  # (compaction id, what is wrong)
        self.valid_submitted = 0

    def process(self, name: str) -> tuple[SimRuntime, SimObjectStore]:
        # Wall clocks agree with the world's virtual time (a restarted process does not start
        # at the epoch again), up to a skew of a second either way.
        skew_ms = self.choices.stream("skew", name).randint(-1000, 1000)
        rt = SimRuntime(name, self.choices, self.trace, bugs=self.bugs,
                        offset_ms=int(trio.current_time() * 1000) + skew_ms)
        inner = MemoryStore(self.bucket, rt.now_ms, url="memory://sim")
        store = SimObjectStore(inner, self.choices.stream("store", name), self.trace, process=name,
                               faults=self.faults)
        store.faults_enabled = not self.healed
        self.stores.append(store)
        return rt, store

    def heal(self) -> None:
        """Faults stop: no new injected fault, no more crashes (requests in flight finish)."""
        self.healed = True
        self.trace.record("world", "heal")
        for s in self.stores:
            s.faults_enabled = False

    def crash_plan(self, *, compactor: bool) -> "Crash | None":
        """When a process will crash (None: it will not). Compactors crash either at a random
        moment or right after one of their own events: an output SST stored (its progress not
        yet recorded), a ``.compactions`` write committed, a compaction committed to the
        manifest (not yet recorded Completed: RFC 002's crash window), startup completed."""
        if not boolean(self.rng, self.crash_rate):
            return None
        if compactor and boolean(self.rng, 0.6):
            if boolean(self.rng, 0.5):  # RFC 002's crash window: committed, not yet recorded
                return Crash(None, "compaction_commit", None, 1)
            kind, ns = self.rng.choice(CRASH_POINTS)
            return Crash(None, kind, ns, self.rng.randint(1, 3))
        return Crash(self.rng.uniform(0.05, 4.0))


#: Events of a compactor process right after which it may crash (kind, ``ns`` field), besides
#: the first ``compaction_commit`` (chosen half of the time).
CRASH_POINTS = (("compaction_output", None), ("commit", "compactions"), ("compaction_commit", None),
                ("compactor_started", None))
#: Events of running compactors right after which a new compactor may start (a takeover).
TAKEOVER_POINTS = (("compaction_output", None), ("commit", "compactions"), ("compaction_commit", None),
                   ("compaction_state", None), ("pause", None), ("pause", None))


# -----------------------------------------------------------------------------------------------
# The writer
# -----------------------------------------------------------------------------------------------


async def _writer(world: World, name: str, n_ops: int, restarts: int = 0) -> None:
    rt, store = world.process(name)
    rng = world.choices.stream("workload", name)
    model = world.model
    own: dict[bytes, list[tuple[int, bytes | None]]] = {}  # this incarnation's writes
    done = 0

    async def body() -> str:
        nonlocal done
        async with aio.Db.open("memory://sim", world.settings_map, store=store, runtime=rt) as db:
            unacked: list[tuple[bytes, int]] = []
            snaps: list[Any] = []
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
                    assert got == want, f"read: {name} reads {got!r} for {key!r}, its last write was {want!r}"
                if boolean(rng, 0.1) and len(snaps) < 3:
                    snaps.append(db.snapshot())
                if snaps and boolean(rng, 0.15):
                    snap = snaps.pop(rng.randrange(len(snaps)))
                    keys = list(own)
                    for key in rng.sample(keys, min(6, len(keys))):
                        versions = [v for s, v in own[key] if s <= snap.seq]
                        if versions:
                            got = await snap.get(key)
                            assert got == versions[-1], (f"snapshot: {name} at seq {snap.seq} reads {got!r} for "
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

    outcome = await crashable(world, name, store, world.crash_plan(compactor=False) if restarts < 2 else None,
                               guarded)
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

    def on_event(e) -> None:
        nonlocal outputs
        if e.process != name:
            return
        if e.kind == "compaction_output":
            outputs += 1
        elif outputs >= nth and e.kind == "commit" and dict(e.fields).get("ns") == "compactions":
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
    comp = Compactor(store, rt, world.settings)

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
        await trio.sleep(world.rng.uniform(0.0, 1.0))
        if not world.healed:
            base = name.split(".")[0]
            again = world.crash_plan(compactor=True) if restarts < 2 else None
            await _compactor(world, f"{base}.r{restarts + 1}", crash=again, restarts=restarts + 1)


async def _start_compactor(world: World, name: str, at: float, trigger: tuple | None, crash: Crash | None) -> None:
    """Start compactor ``name`` at virtual time ``at``, or as soon as the ``trigger`` event
    (kind, ``ns``, n-th occurrence in any compactor) happens if that is sooner."""
    if trigger is None:
        await trio.sleep(at)
    else:
        kind, ns, nth = trigger
        fired = trio.Event()
        seen = 0

        def on_event(e) -> None:
            nonlocal seen
            if e.kind == kind and e.process != "admin" and (ns is None or dict(e.fields).get("ns") == ns):
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


def run_compactor_workload(seed: int, *, faults: str = "swarm", bugs: frozenset[str] = frozenset(),
                           choices: Choices | None = None) -> CompactorWorkloadResult:
    """Run one world; a violated invariant, a wrong read or a stuck run is reported in the result.

    ``bugs`` switches on catalogued bugs in every process of the world (``sim bugs``); every
    random choice comes from ``choices`` (default: generated from ``seed``)."""
    choices = Choices(seed) if choices is None else choices
    trace = Trace(trio.current_time)
    writer_checks = WriterChecks().attach(trace)
    bucket = MemoryBucket()
    ManifestFenceChecks(bucket_reader(bucket)).attach(trace)  # FENCE-5, CFENCE-1 at every manifest landing
    checks = CompactorChecks(MemoryStore(bucket, lambda: 0, url="memory://sim")).attach(trace)
    try:
        return run_deterministic(_world, seed, choices, faults, trace, writer_checks, checks, bucket, frozenset(bugs),
                                 seed=choices)
    except (AssertionError, SlateDBError) as e:
        return _failed(seed, trace, writer_checks, (Violation.of_exception(e),))
    except BaseExceptionGroup as group:
        return _failed(seed, trace, writer_checks, tuple(Violation.of_exception(e) for e in _leaves(group)))


def _failed(seed: int, trace: Trace, wc: WriterChecks, violations: tuple[str, ...]) -> CompactorWorkloadResult:
    return CompactorWorkloadResult(seed, False, trace.digest(), len(trace),
                                   trace.events[-1].time_s if trace.events else 0.0, _fault_counts(wc), violations,
                                   last_events=trace.render(last=40))


def _leaves(group: BaseExceptionGroup):
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from _leaves(e)
        else:
            yield e


def _fault_counts(checks: WriterChecks) -> dict:
    return {k: checks.counts[k] for k in ("fault.transient", "store.reply-lost", "fault.stall", "crash") if checks.counts[k]}


async def _world(seed: int, choices: Choices, faults: str, trace: Trace, writer_checks: WriterChecks, checks: CompactorChecks,
                 bucket: MemoryBucket, bugs: frozenset[str]) -> CompactorWorkloadResult:
    world = World(seed, choices, faults, trace, bucket, bugs)
    rng = world.rng
    drain_s = 0.0
    with trio.move_on_after(VIRTUAL_LIMIT_S) as limit:
        async with trio.open_nursery() as everything:
            world.nursery = everything
            # Compactors at random times (sometimes two together), or right after an event of
            # the compactors already running (takeover in the middle of a compaction).
            t = 0.0
            for i in range(1, rng.randint(1, 5) + 1):
                if i == 1 or not boolean(rng, 0.25):
                    t += rng.uniform(0.1, 3.0)
                trigger = (*rng.choice(TAKEOVER_POINTS), rng.randint(1, 6)) if boolean(rng, 0.5) else None
                everything.start_soon(_start_compactor, world, f"c{i}", t, trigger, world.crash_plan(compactor=True))
            everything.start_soon(_admin, world, rng.randint(2, 8))
            await _writer(world, "w", rng.randint(250, 450))
            # Liveness: faults stop; a last compactor drains L0 within DRAIN_LIMIT_S.
            world.heal()
            healed_at = trio.current_time()
            everything.start_soon(lambda: _compactor(world, "cfinal", crash=None))
            while True:
                latest = checks.manifests.get(checks.latest_manifest)
                if latest is not None and len(latest.l0) < MIN_SOURCES:
                    break
                if trio.current_time() - healed_at > DRAIN_LIMIT_S:
                    raise AssertionError(f"liveness: L0 still holds {len(latest.l0) if latest else '?'} SSTs "
                                         f"{DRAIN_LIMIT_S:.0f} virtual s after faults stopped")
                await trio.sleep(0.05)
            drain_s = trio.current_time() - healed_at
            everything.cancel_scope.cancel()
    assert not limit.cancelled_caught, f"liveness: the world still runs after {VIRTUAL_LIMIT_S} virtual s"
    final_rt = SimRuntime("final", choices, trace, offset_ms=int(trio.current_time() * 1000))
    inner = MemoryStore(bucket, final_rt.now_ms, url="memory://sim")
    verified = await checks.verify_outputs(inner)  # RESUME-1/2
    # Contents: a fresh Db reads what the model allows.
    model = world.model
    async with aio.Db.open("memory://sim", {**world.settings_map, "compactor_options": None}, store=inner,
                           runtime=final_rt) as db:
        for key in sorted(model.writes):
            got = await db.get(key)
            allowed = model.allowed(key)
            if got not in allowed:
                raise AssertionError(f"contents: {key!r} reads {got!r}; the last acknowledged write (seq "
                                     f"{model.acked_seq.get(key)}) or a later one allows {allowed[:4]!r}")
        async for key, _value in db.scan():
            assert key in model.writes, f"contents: {key!r} exists but was never written"
    await check_world(bucket, [""], SIM_EPOCH_MS + int(trio.current_time() * 1000))  # slatedb check
    for cid, kind in world.invalid_submitted:
        if kind == "unknown-source":
            assert cid not in checks.committed, f"COMPACT-3: external compaction {cid} with an unknown source committed"
    return CompactorWorkloadResult(
        seed, True, trace.digest(), len(trace), trio.current_time(), _fault_counts(writer_checks), (),
        acked=model.acked, compactors=checks.counts["compactor_started"], commits=checks.counts["commits"],
        completed=checks.counts["completed"], resumes=checks.counts["resumes"], verified=verified,
        external=len(world.invalid_submitted) + world.valid_submitted,
        external_failed=sum(1 for cid, _ in world.invalid_submitted if cid in checks.failed_reasons),
        drain_s=round(drain_s, 3))
