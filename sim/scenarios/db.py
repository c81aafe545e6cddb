"""A simulated world of writers taking over one database on a faulty store.

Three writer processes share one simulated object store (latency, transient errors, ambiguous
outcomes, stalls -- a swarm mix per seed). In some seeds writers also crash at a random moment
(wherever they are: mid-flush, mid-manifest-update; memory lost, requests on the wire still
land) and restart. Writer ``w1`` writes, waiting for durability now and
then; at random virtual times ``w2`` and then ``w3`` open the same database, each fencing its
predecessor, and keep writing. Zombies keep trying until they learn they were fenced. Writers
also delete now and then and read keys (mostly ones they just wrote).

Per seed, swarm style, the world also draws Db settings (flush interval, memtable and block
sizes, back-pressure threshold, compression codec, bloom filters, block cache) from valid
ranges, and on a random subset of seeds skews the processes' clocks: every host gets a wall
clock offset and a rate drift, and on some seeds hosts' wall clocks jump (forwards or back) in
the middle of the run. A restarted process keeps its host's clock. The trace records the
settings (``settings``) and the skews (``clock.skew``, ``clock.jump``).

Checked on every run:

* the trace invariants of :class:`sim.checks.writer.WriterChecks` (FENCE-1/3/4, DUR-1, BOUNDARY-3);
* durability, end to end: every write acknowledged durable by any writer is readable, with
  that value or a newer one of the same key, by a final writer opened after everything;
* linearizability of the client-visible history (``LIN``, :mod:`sim.checks.linearizability`), under
  the model of guarantees below.

The model of guarantees checked by LIN
--------------------------------------
The history holds every put, delete and get a writer called, stamped at call and return with
one counter (so real-time order is exact), and the final writer's read of every key.

*Writes.* A write returns, for this engine, when it is acknowledged durable, not when
``put`` returns: ``put`` only puts the row in the writer's memtable, and a row that never
reaches a WAL object vanishes when its writer crashes or is fenced. So a write's return stamp
is the first moment its writer's client could know it durable -- ``wait_durable`` returned, or
``WriteHandle.durable`` (durability is a prefix of the writer's seqs, so one acknowledgement
covers every earlier write) -- checked before every operation, after every wait and after
``close``. A write never known durable is *pending*: it may have taken effect at any moment
after its call, or never (an unacknowledged row can still be replayed by the next writer if its
WAL object landed).

*Reads.* ``get`` reads the writer's own state: its memtables (including its own writes not yet
durable) and the SSTs of the manifest it adopted. That is linearizable only where the writer's
state is the database's state, so a read counts iff

1. no writer with a higher epoch had finished opening when the read was called: a fenced
   writer goes on serving its own world (it misses the newer writer's writes) until it notices
   the fence, and nothing in the API promises otherwise. Before the newer writer's open
   returns it has written nothing, and everything the older one acknowledged is replayed
   (DUR-1), so reads up to then are in the common history; and
2. the last write of that key by the reader itself, if it was not durable when the read was
   called, is later acknowledged durable: a read that may have returned a row which was then
   lost (crash, fence) observed a state that never existed for anyone else.

Reads excluded by these rules are not checked; everything else must be linearizable as one
register per key. The final writer's reads (opened after every writer stopped, no writes)
always count. The rules only ever drop reads or widen intervals, so a LIN violation is a
client-visible lost, resurrected or reordered write.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import attrs
import trio

import slatedb.aio as aio
from slatedb.config import KiB, MiB, Settings
from slatedb.errors import ClosedError, CorruptionError, FencedError, SlateDBError
from slatedb.objstore.memory import MemoryBucket, MemoryStore

from sim.world.invariants import ORACLE, Violation
from sim.world.choices import Choices, boolean
from sim.checks.writer import WriterChecks
from sim.checks.manifest import ManifestFenceChecks, bucket_reader
from sim.checks.linearizability import PENDING, LinResult, Op, check_history
from sim.world.store import FLIP_CLASSES, BitFlip, ProcessCrashed, SimObjectStore, StoreFaults, flip_one_bit
from sim.checks.structure import check_world
from sim.world.runtime import SIM_EPOCH_MS, SimRuntime, run_deterministic
from sim.world.trace import Trace

#: A run that has not finished after this much virtual time is reported as stuck (liveness).
VIRTUAL_LIMIT_S = 6 * 3600

#: The base settings; :func:`draw_settings` varies most of them per seed.
SETTINGS = {
    "l0_sst_size_bytes": 2048,
    "flush_interval": "20ms",
    "manifest_poll_interval": "300ms",
    "min_filter_keys": 8,
    "l0_max_ssts": 64,
}

#: Keys the writers touch (``k000`` .. ``k199``); the final writer reads every one.
N_KEYS = 200
READ_RATE = 0.15
DELETE_RATE = 0.05

#: Swarm seeds with one flipped bit in a stored object (drawn from their own stream, so that
#: seeds without a flip run exactly as before). See :class:`FlipOracle`.
BITFLIP_RATE = 0.1

#: Draw small ``max_unflushed_bytes`` (back-pressure) in some seeds. It found a hang, now fixed
#: (a writer whose WAL replay left more than ``max_unflushed_bytes`` in its live memtable never
#: wrote again); ``tests/test_sim_db.py`` keeps the reproduction.
SMALL_MAX_UNFLUSHED = True


def draw_settings(rng: random.Random) -> dict[str, Any]:
    """Db settings for one seed, from valid ranges (swarm style)."""
    s: dict[str, Any] = dict(SETTINGS)
    # Shorter intervals cost wall time in proportion to virtual time (idle flush ticks through
    # long stalls), hence no 5 ms.
    s["flush_interval"] = rng.choice(["20ms", "50ms", "100ms"])
    s["manifest_poll_interval"] = rng.choice(["200ms", "300ms", "1s"])
    l0 = rng.choice([1024, 2048, 8192])
    s["l0_sst_size_bytes"] = l0
    # L0 may only grow (no compaction is guaranteed): keep its cap above what a run writes
    # (~50 KB of rows), or writes would stall for good once it is full.
    s["l0_max_ssts"] = 256 if l0 < 2048 else 64
    # Back-pressure: writes wait while unflushed bytes exceed this (kept above a memtable).
    small = rng.choice([4 * l0, 16 * l0])
    s["max_unflushed_bytes"] = small if SMALL_MAX_UNFLUSHED and boolean(rng, 0.5) else 1024 * MiB
    s["compression_codec"] = rng.choice([None, "Snappy", "Zlib", "Lz4", "Zstd"])
    s["block_size_bytes"] = rng.choice([256, 1024, 4096])
    s["min_filter_keys"] = rng.choice([0, 8, 1000])
    s["block_cache_size_bytes"] = rng.choice([0, 64 * KiB, 64 * MiB])
    return s


@attrs.frozen
class DbWorkloadResult:
    """Same fields as ``StoreRunResult`` (the CLI reports both), plus the writer outcomes."""

    seed: int
    ok: bool
    digest: str
    events: int
    virtual_s: float
    faults: dict
    violations: tuple[str, ...]
    acked: int = 0
    fenced: int = 0
    last_events: str = ""
    #: Operations of the history LIN checked, and reads it had to leave out (see the model).
    lin_ops: int = 0
    lin_reads_dropped: int = 0
    #: What failed after a bit flip the format cannot detect (``bitflip.silent-damage``).
    silent_damage: tuple[str, ...] = ()
    #: The bit flip of the run, as ``<kind>:<how>:<key>`` (see :class:`sim.world.store.BitFlip`).
    flip: str = ""


# ---------------------------------------------------------------------------------------------
# Clocks
# ---------------------------------------------------------------------------------------------


@attrs.frozen
class ClockPlan:
    """One host's clock: a wall-clock offset, a rate drift, maybe one jump (after ``jump_at_s``
    virtual seconds of its first process)."""

    offset_ms: int = 0
    drift_ppm: float = 0.0
    jump_at_s: float | None = None
    jump_ms: int = 0

    @staticmethod
    def draw(choices: Choices, host: str, skew: bool, jumps: bool) -> "ClockPlan":
        rng = choices.stream("clock", host)
        offset, drift = 0, 0.0
        if skew:
            offset = rng.choice([rng.randint(-50, 50), rng.randint(-5_000, 5_000), rng.randint(-600_000, 600_000)])
            drift = rng.choice([rng.uniform(-100.0, 100.0), rng.uniform(-20_000.0, 20_000.0)])
        jump_at, jump = None, 0
        if jumps and boolean(rng, 0.5):
            jump_at = rng.uniform(0.05, 4.0)
            jump = rng.choice([-1, 1]) * rng.choice([1_000, 60_000, 3_600_000])
        return ClockPlan(offset, drift, jump_at, jump)


class Host:
    """A machine: its clock survives a process restart (the new runtime carries on from the
    dead one's wall time; its monotonic clock starts again)."""

    def __init__(self, name: str, plan: ClockPlan, choices: Choices, trace: Trace) -> None:
        self.name = name
        self.plan = plan
        self.choices = choices
        self.trace = trace
        self.rt: SimRuntime | None = None

    def runtime(self, process: str, bugs: frozenset[str] = frozenset()) -> SimRuntime:
        if self.rt is None:
            # World-aligned wall clock (a process's own clock starts at the epoch) plus the skew.
            offset = round(trio.current_time() * 1000) + self.plan.offset_ms
            if self.plan.offset_ms or self.plan.drift_ppm:
                self.trace.record(process, "clock.skew", offset_ms=self.plan.offset_ms,
                                  drift_ppm=round(self.plan.drift_ppm, 3))
        else:
            offset = self.rt.now_ms() - SIM_EPOCH_MS
        self.rt = SimRuntime(process, self.choices, self.trace, offset_ms=offset, drift_ppm=self.plan.drift_ppm,
                             bugs=bugs)
        return self.rt


# ---------------------------------------------------------------------------------------------
# The client-visible history
# ---------------------------------------------------------------------------------------------


class _Write:
    __slots__ = ("process", "kind", "key", "value", "call", "call_s", "seq", "ret", "ret_s")

    def __init__(self, process: str, kind: str, key: bytes, value: bytes | None, call: int, call_s: float) -> None:
        self.process, self.kind, self.key, self.value = process, kind, key, value
        self.call, self.call_s = call, call_s
        self.seq: int | None = None
        self.ret: int | None = None
        self.ret_s = 0.0


class _Read:
    __slots__ = ("process", "epoch", "key", "value", "call", "ret", "call_s", "ret_s", "dep")

    def __init__(self, process: str, epoch: int, key: bytes, value: bytes | None, call: int, ret: int,
                 call_s: float, ret_s: float, dep: _Write | None) -> None:
        self.process, self.epoch, self.key, self.value = process, epoch, key, value
        self.call, self.ret, self.call_s, self.ret_s, self.dep = call, ret, call_s, ret_s, dep


class Incarnation:
    """One opened writer process: its epoch, and its writes not yet known durable."""

    def __init__(self, history: "History", name: str, epoch: int) -> None:
        self.history = history
        self.name = name
        self.epoch = epoch
        self.unconfirmed: deque[tuple[Any, _Write]] = deque()  # (WriteHandle, record), seq order
        self.last_write: dict[bytes, _Write] = {}

    def sweep(self) -> None:
        """Mark every write the client can now see durable as returned (durability is a prefix)."""
        q = self.unconfirmed
        while q and q[0][0].durable:
            _h, rec = q.popleft()
            rec.ret = self.history.tick()
            rec.ret_s = trio.current_time()

    async def write(self, db: aio.Db, kind: str, key: bytes, value: bytes | None) -> Any:
        h = self.history
        rec = _Write(self.name, kind, key, value, h.tick(), trio.current_time())
        h.writes.append(rec)
        handle = await (db.put(key, value) if kind == "put" else db.delete(key))  # type: ignore[arg-type]
        rec.seq = handle.seq
        self.unconfirmed.append((handle, rec))
        self.last_write[key] = rec
        return handle

    async def read(self, db: aio.Db, key: bytes) -> bytes | None:
        h = self.history
        dep = self.last_write.get(key)
        if dep is not None and dep.ret is not None:
            dep = None  # already durable when the read was called
        call, call_s = h.tick(), trio.current_time()
        value = await db.get(key)
        h.reads.append(_Read(self.name, self.epoch, key, value, call, h.tick(), call_s, trio.current_time(), dep))
        return value


class History:
    """What the clients of one world called and saw (the model: see the module docstring)."""

    def __init__(self) -> None:
        self.stamp = 0
        self.writes: list[_Write] = []
        self.reads: list[_Read] = []
        self.opens: list[tuple[int, int]] = []  # (epoch, stamp at which open returned)

    def tick(self) -> int:
        self.stamp += 1
        return self.stamp

    def opened(self, name: str, epoch: int) -> Incarnation:
        self.opens.append((epoch, self.tick()))
        return Incarnation(self, name, epoch)

    def ops(self) -> tuple[list[Op], int]:
        """The operations LIN checks, and how many reads the model leaves out."""
        ops = []
        for w in self.writes:
            seq = f"seq {w.seq}" if w.seq is not None else "no seq"
            if w.ret is None:
                note = f"t={w.call_s:.4f}s {seq}, never acknowledged durable"
                ops.append(Op(w.process, w.kind, w.key, w.value, w.call, PENDING, note))
            else:
                note = f"t={w.call_s:.4f}s..{w.ret_s:.4f}s {seq}, durable"
                ops.append(Op(w.process, w.kind, w.key, w.value, w.call, w.ret, note))
        dropped = 0
        for r in self.reads:
            newer_open = any(epoch > r.epoch and stamp < r.call for epoch, stamp in self.opens)
            if newer_open or (r.dep is not None and r.dep.ret is None):
                dropped += 1
                continue
            note = f"t={r.call_s:.4f}s..{r.ret_s:.4f}s epoch {r.epoch}"
            ops.append(Op(r.process, "get", r.key, r.value, r.call, r.ret, note))
        return ops, dropped

    def check(self) -> tuple[LinResult, int, int]:
        ops, dropped = self.ops()
        return check_history(ops), len(ops), dropped


# ---------------------------------------------------------------------------------------------
# Bit flips
# ---------------------------------------------------------------------------------------------


class FlipOracle:
    """What a flipped bit may do, and what it did.

    After a bit of a stored object flipped (:func:`sim.world.store.flip_one_bit`), a read that
    returns data must still match the model (DUR-1, LIN: unchanged), but a
    :class:`~slatedb.errors.CorruptionError` is an acceptable answer: the process that meets it
    stops (event ``corruption``, counted as ``bitflip.detected``) and the final check skips what
    it cannot read (a database whose manifest or replayed WAL object is damaged cannot be
    opened at all). For an SST or WAL SST, whose every block and metadata carry a CRC32, the
    error must name the flipped object (FLIP-1). A flipped manifest or ``.compactions`` object
    that still *decodes*, to different values, cannot be detected (flatbuffers, no checksum):
    what goes wrong after such a flip is reported as ``bitflip.silent-damage``, not as the
    run's failure. Without a flip, a CorruptionError is a failure as before."""

    def __init__(self) -> None:
        self.flip: BitFlip | None = None
        self.detected: list[str] = []

    def allows(self, e: CorruptionError, process: str, trace: Trace) -> bool:
        """Account for a CorruptionError ``process`` met; False if it must fail the run."""
        if self.flip is None:
            return False
        trace.record(process, "corruption", object=e.object_name, reason=e.reason)
        self.detected.append(e.object_name)
        if self.flip.how == "crc" and e.object_name != self.flip.key:
            raise AssertionError(f"FLIP-1: {process} met corruption in {e.object_name!r} ({e.reason}) but the "
                                 f"flipped object is {self.flip.key!r}") from e
        return True

    def silent(self) -> bool:
        return self.flip is not None and self.flip.how == "silent"


async def _flipper(world: World, rng: random.Random, at_s: float, kind: str) -> None:
    await trio.sleep(at_s)
    flip = flip_one_bit(world.bucket, rng, kind)
    for _ in range(20):  # nothing stored yet (the first requests stalled): a little later
        if flip is not None:
            break
        await trio.sleep(0.5)
        flip = flip_one_bit(world.bucket, rng, kind)
    if flip is not None and world.flips is not None:
        world.flips.flip = flip
        world.trace.record("world", "fault.bitflip", key=flip.key, bit=flip.bit, how=flip.how)


# ---------------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------------


@attrs.define
class World:
    """What the processes of one world share."""

    seed: int
    choices: Choices
    trace: Trace
    bucket: MemoryBucket
    faults: StoreFaults
    settings: Settings
    history: History
    bugs: frozenset[str]
    flips: "FlipOracle | None" = None
    acked: dict = attrs.Factory(dict)  # (writer, seq) -> (key, value or None) acknowledged durable
    written: dict = attrs.Factory(dict)  # value -> seq of every put (values are unique)
    deleted: dict = attrs.Factory(dict)  # key -> seqs of every delete of it


def _key(i: int) -> bytes:
    return b"k%03d" % i


def _draw_op(rng: random.Random, recent: list[bytes]) -> tuple[bytes | None, bytes, bool, bool, float | None]:
    """One writer operation's choices: an optional read first (of a recent key, mostly), the key
    written (remembered in ``recent``), whether to wait for durability, put or delete, a pause."""
    read_key = None
    if boolean(rng, READ_RATE):
        read_key = rng.choice(recent) if recent and boolean(rng, 0.6) else _key(rng.randrange(N_KEYS))
    key = _key(rng.randrange(N_KEYS))
    recent.append(key)
    if len(recent) > 8:
        del recent[0]
    durable = boolean(rng, 0.2)
    delete = boolean(rng, DELETE_RATE)
    pause_s = rng.uniform(0, 0.05) if boolean(rng, 0.3) else None
    return read_key, key, durable, delete, pause_s


async def _writer(name: str, host: Host, world: World, n_writes: int, crash_after_s: float | None) -> str:
    """One writer process: open, write ``n_writes`` keys (reading some), close. With
    ``crash_after_s`` the process dies at that virtual time wherever it is (memory lost, nothing
    flushed) and is restarted once under the name ``<name>.r``, which reopens the database and
    goes on."""
    rt = host.runtime(name, world.bugs)
    rng = world.choices.stream("workload", name)
    inner = MemoryStore(world.bucket, rt.now_ms, url="memory://sim")
    store = SimObjectStore(inner, world.choices.stream("store", name), world.trace, process=name,
                           faults=world.faults)
    done = 0
    me: Incarnation | None = None
    recent: list[bytes] = []

    async def body() -> str:
        nonlocal done, me
        async with aio.Db.open("memory://sim", world.settings, store=store, runtime=rt) as db:
            me = world.history.opened(name, db.core.epoch)
            for i in range(n_writes):
                with rng.span("op"):  # the draws of one operation, first; then the operation
                    read_key, key, durable, delete, pause_s = _draw_op(rng, recent)
                me.sweep()
                if read_key is not None:
                    await me.read(db, read_key)
                    me.sweep()
                if delete:
                    h = await me.write(db, "delete", key, None)
                    world.deleted.setdefault(key, []).append(h.seq)
                    value = None
                else:
                    value = b"%s:%d" % (name.encode(), i)
                    h = await me.write(db, "put", key, value)
                    world.written[value] = h.seq  # before any wait: a crash may leave it durable anyway
                if durable:
                    await h.wait_durable()
                    world.acked[(name, h.seq)] = (key, value)
                    me.sweep()
                done = i + 1
                if pause_s is not None:
                    await rt.sleep(pause_s)
        me.sweep()  # close wrote everything, unless it was fenced meanwhile: ask the handles
        return "closed"

    with trio.CancelScope() as life:
        async with trio.open_nursery() as nursery:
            if crash_after_s is not None:

                async def crasher() -> None:
                    await trio.sleep(crash_after_s)
                    store.crash()
                    life.cancel()

                nursery.start_soon(crasher)
            if host.plan.jump_at_s is not None:

                async def jumper(at_s: float, delta_ms: int) -> None:
                    await trio.sleep(at_s)
                    rt.jump_wall_clock(delta_ms)

                nursery.start_soon(jumper, host.plan.jump_at_s, host.plan.jump_ms)
            try:
                outcome = await body()
            except* (FencedError, ClosedError):
                outcome = "fenced"
                if me is not None:
                    me.sweep()  # what it acknowledged before it learned it was fenced
            except* ProcessCrashed:
                outcome = "crashed"
            except* CorruptionError as group:
                if world.flips is None or not all(world.flips.allows(e, name, world.trace)
                                                  for e in _leaves(group)):
                    raise
                outcome = "corrupt"
            nursery.cancel_scope.cancel()
        return outcome
    # Cancelled by the crasher: the process is dead. Restart it once (same host, same clock;
    # no second jump).
    if not store.crashed:  # pragma: no cover - only the crasher cancels ``life``
        raise AssertionError("writer cancelled without a crash")
    host.plan = attrs.evolve(host.plan, jump_at_s=None)
    return "crashed:" + await _writer(name + ".r", host, world, max(1, n_writes - done), None)


# ---------------------------------------------------------------------------------------------
# The world
# ---------------------------------------------------------------------------------------------


def run_db_workload(seed: int, *, faults: str = "swarm", bugs: frozenset[str] = frozenset(),
                    choices: Choices | None = None) -> DbWorkloadResult:
    """Run one world; a violated invariant, a lost write or a non-linearizable history is
    reported in the result.

    ``bugs`` switches on catalogued bugs in every process of the world (``sim bugs``). Every
    random choice comes from ``choices`` (default: generated from ``seed``; a replayed or shrunk
    sequence, :mod:`sim.world.choices`)."""
    choices = Choices(seed) if choices is None else choices
    trace = Trace(trio.current_time)
    checks = WriterChecks().attach(trace)
    history = History()
    flips = FlipOracle()
    try:
        result = run_deterministic(_world, seed, choices, faults, trace, checks, history, frozenset(bugs), flips,
                                   seed=choices)
        return _after_flip(result, flips)
    except (AssertionError, SlateDBError) as e:
        errors: list[BaseException] = [e]
    except BaseExceptionGroup as group:
        errors = list(_leaves(group))
    # The run stopped early: still check what the clients saw until then.
    lin, n_ops, dropped = history.check()
    violations = tuple(Violation.of_exception(e) for e in errors)
    if not lin.ok:
        violations += (Violation("LIN: " + lin.describe(), "LIN", ORACLE),)
    return _after_flip(DbWorkloadResult(
        seed, False, trace.digest(), len(trace), trace.events[-1].time_s if trace.events else 0.0,
        _fault_counts(checks), violations, last_events=trace.render(last=30), lin_ops=n_ops,
        lin_reads_dropped=dropped), flips)


def _after_flip(result: DbWorkloadResult, flips: FlipOracle) -> DbWorkloadResult:
    """A run that failed after a flip the format cannot detect (a manifest or .compactions that
    decodes to other values) is counted as silent damage, not as the run's failure."""
    if flips.flip is not None:
        f = flips.flip
        result = attrs.evolve(result, flip=f"{f.kind}:{f.how}:{f.key}")
    if result.ok or not flips.silent() or any(v.startswith("AssertionError: FLIP-") for v in result.violations):
        return result
    faults = dict(result.faults, **{"bitflip.silent-damage": 1})
    return attrs.evolve(result, ok=True, faults=faults, violations=(), silent_damage=result.violations)


def _leaves(group: BaseExceptionGroup):
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from _leaves(e)
        else:
            yield e


_FAULT_KINDS = ("fault.transient", "store.reply-lost", "fault.stall", "crash", "clock.skew", "clock.jump",
                "fault.bitflip")


def _fault_counts(checks: WriterChecks) -> dict:
    counts = {k: checks.counts[k] for k in _FAULT_KINDS if checks.counts[k]}
    if checks.counts["corruption"]:
        counts["bitflip.detected"] = checks.counts["corruption"]
    return counts


async def _world(seed: int, choices: Choices, faults: str, trace: Trace, checks: WriterChecks, history: History,
                 bugs: frozenset[str], flips: FlipOracle | None = None) -> DbWorkloadResult:
    rng = choices.stream("world")
    store_faults = StoreFaults.swarm(rng) if faults == "swarm" else StoreFaults()
    crash_rate = rng.choice([0.0, 0.5, 1.0]) if faults == "swarm" else 0.0  # swarm: crashes on or off
    swarm_rng = choices.stream("swarm")
    raw_settings = draw_settings(choices.stream("settings"))
    settings = Settings.from_dict(raw_settings)
    trace.record("world", "settings", **{k: v for k, v in sorted(raw_settings.items())})
    skew = faults == "swarm" and boolean(swarm_rng, 0.5)
    jumps = faults == "swarm" and boolean(swarm_rng, 0.3)
    world = World(seed, choices, trace, MemoryBucket(), store_faults, settings, history, bugs, flips)
    ManifestFenceChecks(bucket_reader(world.bucket)).attach(trace)  # FENCE-5, CFENCE-1 at every manifest landing
    # A bit flip in a stored object on some swarm seeds, from its own stream.
    flip_rng = choices.stream("bitflip")
    flip_at: tuple[float, str] | None = None
    if faults == "swarm" and boolean(flip_rng, BITFLIP_RATE):
        kind = flip_rng.choices([c[0] for c in FLIP_CLASSES], weights=[c[3] for c in FLIP_CLASSES])[0]
        flip_at = (flip_rng.uniform(0.2, 4.0), kind)
    hosts = {name: Host(name, ClockPlan.draw(choices, name, skew, jumps), choices, trace) for name in ("w1", "w2", "w3")}
    outcomes: dict[str, str] = {}
    # The world's shape: three writers of 400, 200 and 200 operations in the seed's world; a
    # shrunk world may have fewer of either (the last writers go first).
    shape = choices.stream("shape")
    n_writers = shape.count(1, 3)
    n_ops = [shape.count(1, n) for n in (400, 200, 200)[:n_writers]]

    async def run(name: str, delay_s: float, n: int) -> None:
        await trio.sleep(delay_s)
        crash_after = rng.uniform(0.05, 3.0) if boolean(rng, crash_rate) else None
        outcomes[name] = await _writer(name, hosts[name], world, n, crash_after)

    with trio.move_on_after(VIRTUAL_LIMIT_S) as limit:
        async with trio.open_nursery() as nursery:
            if flip_at is not None:
                nursery.start_soon(_flipper, world, flip_rng, *flip_at)
            delays = (0.0, rng.uniform(0.05, 2.0), rng.uniform(1.0, 4.0))
            for i, n in enumerate(n_ops):
                nursery.start_soon(run, f"w{i + 1}", delays[i], n)
    # Liveness: with faults healed by retries, every writer finishes or learns it was fenced.
    assert not limit.cancelled_caught, f"liveness: writers still running after {VIRTUAL_LIMIT_S} virtual s"
    # Every acknowledged-durable write must be readable by a last writer: its own value, or the
    # value of a write of the same key with a higher seq (superseded, never rolled back). The
    # last writer then reads every key, for LIN.
    final = Host("final", ClockPlan.draw(choices, "final", skew, False), choices, trace)
    final_rt = final.runtime("final")
    inner = MemoryStore(world.bucket, final_rt.now_ms, url="memory://sim")

    def corrupt(e: CorruptionError) -> bool:
        return world.flips is not None and world.flips.allows(e, "final", trace)

    try:
        async with aio.Db.open("memory://sim", settings, store=inner, runtime=final_rt) as db:
            for (_name, seq), (key, value) in world.acked.items():
                try:
                    got = await db.get(key)
                except CorruptionError as e:
                    if not corrupt(e):
                        raise
                    continue
                if got is None:
                    assert value is None or any(s > seq for s in world.deleted.get(key, ())), (
                        f"DUR-1: acknowledged durable write {value!r} of {key!r} (seq {seq}) lost")
                else:
                    assert got == value or world.written.get(got, -1) > seq, (
                        f"DUR-1: {key!r} holds {got!r} (seq {world.written.get(got)}), older than acknowledged "
                        f"{'delete' if value is None else repr(value)} (seq {seq})")
            me = history.opened("final", db.core.epoch)
            for i in range(N_KEYS):
                try:
                    await me.read(db, _key(i))
                except CorruptionError as e:
                    if not corrupt(e):
                        raise
    except* CorruptionError as group:
        # The database cannot be opened (its manifest, or a WAL object to replay, is damaged),
        # or closing it met the damage: detected, nothing more to check end to end.
        if not all(corrupt(e) for e in _leaves(group)):
            raise
    if world.flips is None:  # bit flips damage objects on purpose (FLIP-1 judges those runs)
        await check_world(world.bucket, [""], SIM_EPOCH_MS + int(trio.current_time() * 1000))
    lin, n_ops, dropped = history.check()
    violations = () if lin.ok else (Violation("LIN: " + lin.describe(), "LIN", ORACLE),)
    fenced = sum(1 for o in outcomes.values() if o.endswith("fenced"))
    return DbWorkloadResult(seed, lin.ok, trace.digest(), len(trace), trio.current_time(), _fault_counts(checks),
                            violations, acked=len(world.acked), fenced=fenced,
                            last_events="" if lin.ok else trace.render(last=30), lin_ops=n_ops,
                            lin_reads_dropped=dropped)
