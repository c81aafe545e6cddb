"""A simulated world of writers taking over one database on a faulty store.

Three writer processes share one simulated object store (latency, transient errors, ambiguous
outcomes, stalls -- a swarm mix per seed). In some seeds writers also crash at a random moment
(wherever they are: mid-flush, mid-manifest-update; memory lost, requests on the wire still land)
and restart. Writer ``w1`` writes, waiting for durability now and then; at random virtual times
``w2`` and then ``w3`` open the same database, each fencing its predecessor, and keep writing.
Zombies keep trying until they learn they were fenced. Writers also delete now and then and read
keys (mostly ones they just wrote).

Per seed, swarm style, the world also draws Db settings (flush interval, memtable and block sizes,
back-pressure threshold, compression codec, bloom filters, block cache) from valid ranges, and on a
random subset of seeds skews the processes' clocks: every host gets a wall clock offset and a rate
drift, and on some seeds hosts' wall clocks jump (forwards or back) in the middle of the run. A
restarted process keeps its host's clock. The trace records the settings (``settings``) and the
skews (``clock.skew``, ``clock.jump``).

Checked on every run:

* the trace invariants of :class:`sim.checks.writer.WriterChecks` (FENCE-1/3/4, DUR-1,
  BOUNDARY-3; DUR-3 at each durable return);
* durability, end to end: every write acknowledged durable by any writer is readable, with
  that value or a newer one of the same key, by a final writer opened after everything;
* linearizability of the client-visible history (``LIN``, :mod:`sim.checks.linearizability`), under
  the model of guarantees below.

The model of guarantees checked by LIN
--------------------------------------
The history holds every put, delete and get a writer called, stamped at call and return with one
counter (so real-time order is exact), and the final writer's read of every key.

*Writes.* A write returns, for this engine, when it is acknowledged durable, not when ``put``
returns: ``put`` only puts the row in the writer's memtable, and a row that never reaches a WAL
object vanishes when its writer crashes or is fenced. So a write's return stamp is the first moment
its writer's client could know it durable -- ``wait_durable`` returned, or ``WriteHandle.durable``
(durability is a prefix of the writer's seqs, so one acknowledgement covers every earlier write) --
checked before every operation, after every wait and after ``close``. A write never known durable
is *pending*: it may have taken effect at any moment after its call, or never (an unacknowledged
row can still be replayed by the next writer if its WAL object landed).

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

Reads excluded by these rules are not checked; everything else must be linearizable as one register
per key. The final writer's reads (opened after every writer stopped, no writes) always count. The
rules only ever drop reads or widen intervals, so a LIN violation is a client-visible lost,
resurrected or reordered write.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
import trio

import slatedb.aio as aio
from slatedb.config import KiB, MiB, Settings
from slatedb.errors import ClosedError, CorruptionError, FencedError
from slatedb.objstore.memory import MemoryBucket, MemoryStore

from sim.checks.flips import FlipOracle, after_flip
from sim.checks.lin_history import History, Incarnation
from sim.checks.manifest import manifest_checks
from sim.checks.structure import check_world
from sim.checks.writer import WriterChecks
from sim.world import fastclock
from sim.world.choices import Choices, boolean
from sim.world.harness import VIRTUAL_LIMIT_S, Checker, Scenario, Setup, WorldResult, leaves, run_world
from sim.world.hosts import ClockPlan, Host
from sim.world.invariants import ORACLE, Violation
from sim.world.store import FLIP_CLASSES, ProcessCrashed, SimObjectStore, StoreFaults, flip_one_bit
from sim.world.runtime import SIM_EPOCH_MS
from sim.world.trace import Trace

__all__ = ["SCENARIO", "run_db_workload", "draw_settings", "FlipOracle", "Incarnation", "History", "ClockPlan", "Host",
           "VIRTUAL_LIMIT_S"]

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


# ---------------------------------------------------------------------------------------------
# Bit flips
# ---------------------------------------------------------------------------------------------


async def _flipper(world: World, rng: random.Random, at_s: float, kind: str) -> None:
    await fastclock.sleep(at_s)
    flip = flip_one_bit(world.bucket, rng, kind)
    for _ in range(20):  # nothing stored yet (the first requests stalled): a little later
        if flip is not None:
            break
        await fastclock.sleep(0.5)
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
    checks: WriterChecks = attrs.Factory(WriterChecks)  # the world's writer checks (DUR-3 at a durable return)
    acked: dict = attrs.Factory(dict)  # (writer, seq) -> (key, value or None) acknowledged durable
    written: dict = attrs.Factory(dict)  # value -> seq of every put (values are unique)
    deleted: dict = attrs.Factory(dict)  # key -> seqs of every delete of it
    outcomes: dict = attrs.Factory(dict)  # writer -> how it ended
    rng: Any = None
    crash_rate: float = 0.0
    skew: bool = False
    flip_rng: Any = None
    flip_at: tuple[float, str] | None = None
    hosts: dict = attrs.Factory(dict)
    n_ops: list = attrs.Factory(list)
    lin_ops: int = 0
    lin_reads_dropped: int = 0


def _key(i: int) -> bytes:
    return b"k%03d" % i


def _draw_op(rng: random.Random, recent: list[bytes]) -> tuple[bytes | None, bytes, bool, bool, float | None]:
    """One writer operation's choices: an optional read first (of a recent key, mostly), the key
    written (remembered in ``recent``), whether to wait for durability, put or delete, a pause."""
    read_key = None
    if boolean(rng, READ_RATE):
        read_key = rng.choice(recent) if recent and boolean(rng, 0.6) else _key(rng.randrange(N_KEYS))
    key = _key(rng.randrange(N_KEYS))
    recent[:] = [*recent[-7:], key]  # the last 8 keys written
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
    store = SimObjectStore(inner, world.choices.stream("store", name), world.trace, process=name, faults=world.faults)
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
                    world.checks.durable_returned(name, h.seq, world.trace.events[-1])  # DUR-3
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
                    await fastclock.sleep(crash_after_s)
                    store.crash()
                    life.cancel()

                nursery.start_soon(crasher)
            if host.plan.jump_at_s is not None:

                async def jumper(at_s: float, delta_ms: int) -> None:
                    await fastclock.sleep(at_s)
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
                                                  for e in leaves(group)):
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


def _build(setup: Setup) -> World:
    choices, trace, faults = setup.choices, setup.trace, setup.faults
    rng = choices.stream("world")
    store_faults = StoreFaults.swarm(rng) if faults == "swarm" else StoreFaults()
    crash_rate = rng.choice([0.0, 0.5, 1.0]) if faults == "swarm" else 0.0  # swarm: crashes on or off
    swarm_rng = choices.stream("swarm")
    raw_settings = draw_settings(choices.stream("settings"))
    settings = Settings.from_dict(raw_settings)
    trace.record("world", "settings", **{k: v for k, v in sorted(raw_settings.items())})
    skew = faults == "swarm" and boolean(swarm_rng, 0.5)
    jumps = faults == "swarm" and boolean(swarm_rng, 0.3)
    world = World(setup.seed, choices, trace, setup.bucket, store_faults, settings, History(), setup.bugs, FlipOracle(),
                  setup.checkers["writer"])
    world.rng, world.crash_rate, world.skew = rng, crash_rate, skew
    # A bit flip in a stored object on some swarm seeds, from its own stream.
    world.flip_rng = choices.stream("bitflip")
    if faults == "swarm" and boolean(world.flip_rng, BITFLIP_RATE):
        kind = world.flip_rng.choices([c[0] for c in FLIP_CLASSES], weights=[c[3] for c in FLIP_CLASSES])[0]
        world.flip_at = (world.flip_rng.uniform(0.2, 4.0), kind)
    world.hosts = {name: Host(name, ClockPlan.draw(choices, name, skew, jumps), choices, trace)
                   for name in ("w1", "w2", "w3")}
    # The world's shape: three writers of 400, 200 and 200 operations in the seed's world; a
    # shrunk world may have fewer of either (the last writers go first).
    shape = choices.stream("shape")
    n_writers = shape.count(1, 3)
    world.n_ops = [shape.count(1, n) for n in (400, 200, 200)[:n_writers]]
    return world


async def _processes(world: World, nursery: trio.Nursery | None) -> None:
    """The writers (each may crash and restart) and the bit flipper."""
    assert nursery is not None
    rng = world.rng

    async def run(name: str, delay_s: float, n: int) -> None:
        await fastclock.sleep(delay_s)
        crash_after = rng.uniform(0.05, 3.0) if boolean(rng, world.crash_rate) else None
        world.outcomes[name] = await _writer(name, world.hosts[name], world, n, crash_after)

    if world.flip_at is not None:
        nursery.start_soon(_flipper, world, world.flip_rng, *world.flip_at)
    delays = (0.0, rng.uniform(0.05, 2.0), rng.uniform(1.0, 4.0))
    for i, n in enumerate(world.n_ops):
        nursery.start_soon(run, f"w{i + 1}", delays[i], n)


async def _final(world: World) -> None:
    """Every acknowledged-durable write must be readable by a last writer: its own value, or the
    value of a write of the same key with a higher seq (superseded, never rolled back). The
    last writer then reads every key, for LIN."""
    choices, trace = world.choices, world.trace
    final = Host("final", ClockPlan.draw(choices, "final", world.skew, False), choices, trace)
    final_rt = final.runtime("final")
    inner = MemoryStore(world.bucket, final_rt.now_ms, url="memory://sim")

    def corrupt(e: CorruptionError) -> bool:
        return world.flips is not None and world.flips.allows(e, "final", trace)

    try:
        async with aio.Db.open("memory://sim", world.settings, store=inner, runtime=final_rt) as db:
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
            me = world.history.opened("final", db.core.epoch)
            for i in range(N_KEYS):
                try:
                    await me.read(db, _key(i))
                except CorruptionError as e:
                    if not corrupt(e):
                        raise
    except* CorruptionError as group:
        # The database cannot be opened (its manifest, or a WAL object to replay, is damaged),
        # or closing it met the damage: detected, nothing more to check end to end.
        if not all(corrupt(e) for e in leaves(group)):
            raise
    if world.flips is None or world.flips.flip is None:  # a flipped bit is damage on purpose (FLIP-1 judges it)
        await check_world(world.bucket, [""], SIM_EPOCH_MS + int(trio.current_time() * 1000))


def _lin(world: World, _failed: bool) -> list[Violation]:
    """LIN on the client history, also of a run that stopped early (what the clients saw until then)."""
    lin, world.lin_ops, world.lin_reads_dropped = world.history.check()
    return [] if lin.ok else [Violation("LIN: " + lin.describe(), "LIN", ORACLE)]


_FAULT_KINDS = ("fault.transient", "store.reply-lost", "fault.stall", "crash", "clock.skew", "clock.jump",
                "fault.bitflip")


def _fault_counts(setup: Setup, _world: World | None) -> dict:
    checks = setup.checkers["writer"]
    counts = {k: checks.counts[k] for k in _FAULT_KINDS if checks.counts[k]}
    if checks.counts["corruption"]:
        counts["bitflip.detected"] = checks.counts["corruption"]
    return counts


def _figures(world: World) -> dict[str, Any]:
    return {"acked": len(world.acked), "fenced": sum(1 for o in world.outcomes.values() if o.endswith("fenced")),
            "lin_ops": world.lin_ops, "lin_reads_dropped": world.lin_reads_dropped, "silent_damage": (), "flip": ""}


SCENARIO = Scenario(
    "db", _build, _processes, nursery="join", final=_final, oracles=_lin, figures=_figures,
    fault_counts=_fault_counts, after=lambda result, world: after_flip(result, world.flips if world else None),
    checkers=(Checker("writer", lambda setup: WriterChecks()),
              Checker("manifest", manifest_checks)),
    limit_what="writers still running", processes_declared=("w1", "w2", "w3", "final"),
    fault_kinds=("fault.transient", "store.reply-lost", "fault.stall", "crash", "clock.skew", "clock.jump",
                 "fault.bitflip"))


def run_db_workload(seed: int, *, faults: str = "swarm", bugs: frozenset[str] = frozenset(),
                    choices: Choices | None = None) -> WorldResult:
    """Run one world; a violated invariant, a lost write or a non-linearizable history is
    reported in the result.

    ``bugs`` switches on catalogued bugs in every process of the world (``sim bugs``). Every
    random choice comes from ``choices`` (default: generated from ``seed``; a replayed or shrunk
    sequence, :mod:`sim.world.choices`)."""
    return run_world(SCENARIO, seed, choices=choices, bugs=bugs, faults=faults)
