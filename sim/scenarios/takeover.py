"""Takeovers at the protocol's critical moments: writers opening one database in rounds, with
crash and pause points at protocol events.

The db workload (:mod:`sim.scenarios.db`) spreads three takeovers over seconds and crashes at
random moments, so some narrow windows of the writer protocol are rarely hit there: an older
writer that bumped its epoch pauses and lists ``wal/`` only after a newer writer wrote its fence
(RFC 001: without the epoch re-check its own fence lands *above* the newer one), or a writer
dies right after a manifest commit (where what is durable and what is only in memory differ
most). Here every seed draws

* rounds of four writers that start within 10 ms (open sequences interleave in every order),
  200 ms or 1 s (a writer has written and flushed memtables to L0 before the next fences it);
* small memtables (``l0_sst_size_bytes`` 128-512), so every writer flushes L0 several times;
* swarm store faults (latency up to 200 ms a leg, transient errors, lost replies, stalls);
* **crash points**: a writer dies right after its n-th event of one kind (manifest ``commit``,
  ``ack``, ``fence_written``, ``replay`` of a WAL object): memory lost, requests already on the
  wire still land; it restarts once at once (reopening, so replaying what it left);
* **pause points**: a writer's next request leaves up to 5 s late after such an event (mostly
  right after its epoch bump, ``writer_epoch``): the process was descheduled.

Each writer writes 30 keys of 10,000 (few acknowledged writes are superseded, which would hide
their loss), waiting for durability on half, and closes; the losers learn they were fenced.

Checked on every run: the trace invariants of :class:`sim.checks.writer.WriterChecks` (FENCE-1/3/4,
DUR-1, BOUNDARY-3) and durability end to end (a final writer reads every acknowledged write, or
a newer value of its key). ``bugs`` switches on catalogued bugs (:mod:`sim.scenarios.catalogue`) in every
writer.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

import slatedb.aio as aio
from slatedb.errors import ClosedError, FencedError
from slatedb.objstore.memory import MemoryStore

from sim.checks.manifest import manifest_checks
from sim.checks.structure import check_world
from sim.checks.writer import WriterChecks
from sim.world import fastclock
from sim.world.choices import Choices, boolean
from sim.world.engine import LatePauseStore
from sim.world.harness import Checker, Scenario, Setup, WorldResult, run_world
from sim.world.runtime import SIM_EPOCH_MS, SimRuntime
from sim.world.store import ProcessCrashed, StoreFaults

ROUNDS = 3
WRITERS_PER_ROUND = 4
WRITES_PER_WRITER = 30
N_KEYS = 10_000
#: Where a fault point may sit: (event kind, its n-th occurrence in the process).
#: The commits right after an open (epoch bump, then the first checkpoint refresh or L0 flush,
#: which may carry replayed rows) weigh double.
CRASH_POINTS = (*[("commit", n) for n in (1, 2, 2, 3, 3, 4, 5, 6)], ("ack", 1), ("ack", 3), ("fence_written", 1),
                ("replay", 1), ("replay", 2))
PAUSE_POINTS = (("writer_epoch", 1), ("writer_epoch", 1), ("writer_epoch", 1), ("fence_written", 1), ("commit", 2),
                ("ack", 1))
SETTINGS = {
    "l0_sst_size_bytes": 2048,  # drawn per seed below
    "flush_interval": "20ms",
    "manifest_poll_interval": "300ms",
    "min_filter_keys": 8,
    "l0_max_ssts": 64,
}


@attrs.define
class World:
    """The knobs of one world and what its writers acknowledged."""

    setup: Setup
    faults: StoreFaults
    rng: Any
    spread_s: float
    crash_rate: float
    pause_rate: float
    settings: dict
    rounds: int
    writers: list[int]
    writes: int
    acked: dict = attrs.Factory(dict)  # (writer, seq) -> (key, value) acknowledged durable
    written: dict = attrs.Factory(dict)  # value -> seq
    outcomes: dict = attrs.Factory(dict)


def _build(setup: Setup) -> World:
    choices, trace = setup.choices, setup.trace
    rng = choices.stream("takeover")
    faults = StoreFaults(
        latency_min_s=0.0005,
        latency_max_s=rng.choice([0.05, 0.2]),
        transient_rate=rng.uniform(0.01, 0.1) if boolean(rng, 0.5) else 0.0,
        ambiguous_rate=rng.uniform(0.01, 0.1) if boolean(rng, 0.5) else 0.0,
        stall_rate=rng.uniform(0.05, 0.2) if boolean(rng, 0.7) else 0.0,
        stall_max_s=rng.choice([1.0, 5.0]),
    )
    # How far apart the writers of a round start: a storm (opens interleave) or a staggered
    # round (a writer has written, and flushed memtables to L0, before the next fences it).
    spread_s = rng.choice([0.01, 0.2, 1.0])
    crash_rate = rng.choice([0.0, 0.5, 0.9])
    pause_rate = rng.choice([0.0, 0.5, 0.9])
    settings = dict(SETTINGS, l0_sst_size_bytes=rng.choice([128, 256, 512]))
    trace.record("world", "config", faults=repr(faults), spread_s=spread_s, crash_rate=crash_rate,
                 pause_rate=pause_rate, settings=repr(settings))
    # The world's shape (the seed's is the full one; a shrunk world may have less of it).
    shape = choices.stream("shape")
    rounds = shape.count(1, ROUNDS)
    writers = [shape.count(1, WRITERS_PER_ROUND) for _ in range(rounds)]
    writes = shape.count(1, WRITES_PER_WRITER)
    return World(setup, faults, rng, spread_s, crash_rate, pause_rate, settings, rounds, writers, writes)


async def _writer(world: World, name: str, delay_s: float, n_writes: int, restarts: int = 1) -> None:
    """One writer process; a crashed one restarts (as ``<name>.r``, reopening the database
    and replaying what it left) with the writes it had left."""
    setup = world.setup
    choices, trace = setup.choices, setup.trace
    await fastclock.sleep(delay_s)
    rt = SimRuntime(name, choices, trace, bugs=setup.bugs)
    wrng = choices.stream("workload", name)
    store = LatePauseStore(MemoryStore(setup.bucket, rt.now_ms, url="memory://sim"), choices.stream("store", name),
                           trace, process=name, faults=world.faults)
    # Fault points, at protocol events of this process (its n-th event of one kind): a crash
    # right there (memory lost; the moments after a manifest commit or an acknowledgement are
    # where what is durable and what is only in memory differ most), or a pause of the
    # process before its next request (e.g. between its epoch bump and its WAL listing: the
    # fencing race of RFC 001).
    crash_at = wrng.choice(CRASH_POINTS) if boolean(wrng, world.crash_rate) else None
    pause_at = wrng.choice(PAUSE_POINTS) if boolean(wrng, world.pause_rate) else None
    pause_s = wrng.uniform(0.2, 5.0)
    life = trio.CancelScope()
    seen: dict[str, int] = {}

    def crash_point(e) -> None:
        if e.process != name or store.crashed:
            return
        n = seen[e.kind] = seen.get(e.kind, 0) + 1
        if pause_at == (e.kind, n):
            store.pause_s = pause_s
        if crash_at == (e.kind, n):
            store.crash()
            life.cancel()

    trace.listeners.append(crash_point)
    world.outcomes[name] = "crashed"
    done = 0
    try:
        with life:
            async with aio.Db.open("memory://sim", world.settings, store=store, runtime=rt) as db:
                for i in range(n_writes):
                    with wrng.span("op"):  # one operation's draws, then the operation
                        key = b"k%04d" % wrng.randrange(N_KEYS)
                        durable = boolean(wrng, 0.5)
                        pause = wrng.uniform(0.0, 0.02)
                    value = b"%s:%d" % (name.encode(), i)
                    h = await db.put(key, value)
                    world.written[value] = h.seq
                    if durable:
                        await h.wait_durable()
                        world.acked[(name, h.seq)] = (key, value)
                    done = i + 1
                    await rt.sleep(pause)
            world.outcomes[name] = "closed"
    except* (FencedError, ClosedError):
        world.outcomes[name] = "fenced"
    except* ProcessCrashed:
        pass
    finally:
        trace.listeners.remove(crash_point)
    if world.outcomes[name] == "crashed" and restarts > 0:
        await _writer(world, name + ".r", 0.0, max(1, n_writes - done), restarts - 1)


async def _rounds(world: World, _nursery: trio.Nursery | None) -> None:
    """Rounds of writers, each round's writers starting within ``spread_s``."""
    for r in range(world.rounds):
        async with trio.open_nursery() as nursery:
            for w in range(world.writers[r]):
                nursery.start_soon(_writer, world, f"r{r}w{w}", world.rng.uniform(0.0, world.spread_s), world.writes)


async def _final(world: World) -> None:
    """DUR-1 end to end: a final writer reads every acknowledged write, or a newer value of its key."""
    setup = world.setup
    final_rt = SimRuntime("final", setup.choices, setup.trace)
    async with aio.Db.open("memory://sim", SETTINGS, store=MemoryStore(setup.bucket, final_rt.now_ms,
                                                                       url="memory://sim"), runtime=final_rt) as db:
        for (_name, seq), (key, value) in world.acked.items():
            got = await db.get(key)
            assert got is not None, f"DUR-1: acknowledged durable write {value!r} of {key!r} (seq {seq}) lost"
            assert got == value or world.written.get(got, -1) > seq, (
                f"DUR-1: {key!r} holds {got!r} (seq {world.written.get(got)}), older than acknowledged {value!r} "
                f"(seq {seq})")
    await check_world(setup.bucket, [""], SIM_EPOCH_MS + int(trio.current_time() * 1000))  # slatedb check


def _faults_seen(setup: Setup, _world: World | None) -> dict:
    counts = setup.checkers["writer"].counts
    return {k: counts[k] for k in ("fault.transient", "store.reply-lost", "fault.stall", "fault.pause", "crash")
            if counts[k]}


SCENARIO = Scenario(
    "takeover", _build, _rounds, nursery="none", final=_final, fault_counts=_faults_seen,
    figures=lambda w: {"acked": len(w.acked), "fenced": sum(1 for o in w.outcomes.values() if o == "fenced")},
    checkers=(Checker("writer", lambda setup: WriterChecks()),
              Checker("manifest", manifest_checks)),
    limit_what="writers still running", processes_declared=("r<round>w<n>", "final"),
    fault_kinds=("fault.transient", "store.reply-lost", "fault.stall", "fault.pause", "crash"))


def run_takeover_workload(seed: int, *, bugs: frozenset[str] = frozenset(),
                          choices: Choices | None = None) -> WorldResult:
    """Run one world of takeover storms; a violated invariant or a lost write is reported.
    Every random choice comes from ``choices`` (default: generated from ``seed``)."""
    return run_world(SCENARIO, seed, choices=choices, bugs=bugs)
