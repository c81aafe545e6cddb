"""Concurrent transactions under store faults, flushes, crashes and writer takeovers, their history
checked (spec/protocols/transactions.md, TXN-1..5).

Writers ``w1``, ``w2`` (and in some seeds ``w3``) open one database one after the other, each
fencing its predecessor while the predecessor's clients are still running transactions; a writer
may crash at a random moment (memory lost, requests on the wire still land) and restart once
(reopening: fencing and replaying). Each writer serves a few clients, each running a quota of
operations on a small key space, so that transactions overlap and conflict:

* **increments** (SNAPSHOT or SERIALIZABLE_SNAPSHOT): read a counter, write it plus one -- a lost
  update shows in the count;
* **guarded pairs** (SERIALIZABLE_SNAPSHOT, or SNAPSHOT with ``mark_read`` of both keys): read
  both keys of a pair (``get``, or a ``scan`` then a ``get`` of what it did not return) and turn
  one off if both are on, else turn the off one on: the pair is never both off (write skew);
* **skew pairs** (SNAPSHOT, nothing marked): the same program, where write skew is allowed;
* **slots** (SERIALIZABLE_SNAPSHOT): scan a key range, insert a key of one's own there while it
  holds fewer than :data:`SLOT_LIMIT` keys, else delete one of them: the range never holds more
  (a phantom insert, the write skew a key-level check misses: TXN-5);
* **blind transactions**: read one key, write another, sometimes ``unmark_write`` or
  ``mark_read``; **plain puts and deletes** of the same keys (a plain put conflicts too);
* ``flush_memtable`` now and then; memtables are small (L0 flushes every few writes) and block
  caches small or off, so commit checks read SSTs while flushes move the view.

Commits wait for durability (mostly) or not. Every attempt is recorded (snapshot seq, reads
with the values returned, writes with unique values, outcome, returned seq); at the end the
rows of every WAL object are the committed history (no GC runs), and
:func:`sim.checks.txn.check_history` judges the attempts against it, with a final writer's
read of every key (TXN-1..5). The trace invariants of :class:`sim.checks.writer.WriterChecks`
(FENCE-1/3/4, DUR-1) and ``slatedb check`` at the end run too.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

import slatedb.aio as aio
from slatedb.api.txn import IsolationLevel
from slatedb.errors import ClosedError, FencedError, TransactionConflictError
from slatedb.objstore.memory import MemoryStore
from slatedb.wal.reader import WalReaderCore

from sim.checks.structure import check_world
from sim.checks.txn import SI, SSI, Attempt, Verdict, check_history, is_off, count_of, value_of
from sim.checks.writer import WriterChecks
from sim.world.choices import Choices, boolean
from sim.world.engine import Crash, crashable
from sim.world.harness import Checker, Scenario, Setup, WorldResult, run_world
from sim.world.runtime import SIM_EPOCH_MS, SimRuntime
from sim.world.store import SimObjectStore, StoreFaults

COUNTERS = (b"c0",)
GUARDED = ((b"g0x", b"g0y"), (b"g1x", b"g1y"))
SKEW = ((b"s0x", b"s0y"),)
BLIND = (b"b0", b"b1", b"b2")
KEYS = (*COUNTERS, *(k for p in GUARDED + SKEW for k in p), *BLIND)
#: The slots' range ``[lo, hi)`` (keys ``r/<tag>``) and how many keys it may hold (TXN-5).
SLOTS, SLOT_LIMIT = (b"r/", b"r0"), 2
#: A client's operations, weighted by repetition.
OPS = ("inc", "inc", "inc", "guard", "guard", "guard", "skew", "slot", "slot", "blind", "blind", "put", "delete",
       "flush")
CLIENTS = 4
OPS_PER_CLIENT = 8
SETTINGS = {
    "flush_interval": "20ms",
    "manifest_poll_interval": "300ms",
    "min_filter_keys": 8,
    "l0_max_ssts": 256,
    "compactor_options": None,
    "garbage_collector_options": None,
}


@attrs.define
class World:
    setup: Setup
    faults: StoreFaults
    settings: dict
    opens: list  # when each writer opens (virtual s)
    crash_rate: float
    think_s: float
    durable_rate: float
    clients: int
    ops: int
    healed: bool = False
    attempts: list = attrs.Factory(list)
    outcomes: dict = attrs.Factory(dict)
    verdict: Verdict | None = None

    @property
    def trace(self) -> Any:
        return self.setup.trace


def _build(setup: Setup) -> World:
    rng = setup.choices.stream("txn")
    faults = StoreFaults(
        latency_min_s=0.0005,
        latency_max_s=rng.choice([0.01, 0.05, 0.2]),
        transient_rate=rng.uniform(0.01, 0.1) if boolean(rng, 0.5) else 0.0,
        ambiguous_rate=rng.uniform(0.01, 0.1) if boolean(rng, 0.5) else 0.0,
        stall_rate=rng.uniform(0.02, 0.1) if boolean(rng, 0.6) else 0.0,
        stall_max_s=rng.choice([0.5, 2.0]),
    )
    settings = dict(SETTINGS, l0_sst_size_bytes=rng.choice([128, 256, 512]),
                    block_cache_size_bytes=0)
    shape = setup.choices.stream("shape")
    writers = shape.count(1, 3 if boolean(rng, 0.5) else 2)
    opens = [0.0]
    for _ in range(writers - 1):
        opens.append(opens[-1] + rng.uniform(0.2, 1.5))
    world = World(setup, faults, settings, opens, crash_rate=rng.choice([0.0, 0.3, 0.6]),
                  think_s=rng.choice([0.01, 0.05, 0.2]), durable_rate=rng.choice([0.7, 1.0]),
                  clients=shape.count(1, CLIENTS), ops=shape.count(1, OPS_PER_CLIENT))
    setup.trace.record("world", "config", faults=repr(faults), settings=repr(settings), opens=repr(opens),
                       crash_rate=world.crash_rate, think_s=world.think_s)
    return world


async def _writers(world: World, _nursery: trio.Nursery | None) -> None:
    async with trio.open_nursery() as nursery:
        for i, at in enumerate(world.opens):
            nursery.start_soon(_writer, world, f"w{i + 1}", at, 1, i == len(world.opens) - 1)


async def _writer(world: World, name: str, delay_s: float, restarts: int, last: bool) -> None:
    """One writer process and its clients; a crashed one restarts once (``<name>.r``). The
    clients of every writer but the last go on (up to three quotas) until a newer writer fences
    theirs, so that every takeover lands among running transactions."""
    setup = world.setup
    await trio.sleep(delay_s)
    rt = SimRuntime(name, setup.choices, setup.trace, bugs=setup.bugs)
    store = SimObjectStore(MemoryStore(setup.bucket, rt.now_ms, url="memory://sim"),
                           setup.choices.stream("store", name), setup.trace, process=name, faults=world.faults)
    wrng = setup.choices.stream("writer", name)
    crash = Crash(wrng.uniform(0.05, 2.0)) if boolean(wrng, world.crash_rate) else None

    async def body() -> str:
        outcome = "closed"
        try:
            async with aio.Db.open("memory://sim", world.settings, store=store, runtime=rt) as db:
                async with trio.open_nursery() as clients:
                    for c in range(world.clients):
                        clients.start_soon(_client, world, db, rt, f"{name}.c{c}", world.ops * (1 if last else 2))
        except* (FencedError, ClosedError):
            outcome = "fenced"
        return outcome

    outcome = await crashable(world, name, store, crash, body)
    world.outcomes[name] = "fenced" if world.outcomes.get(name) == "fenced" and outcome == "closed" else outcome
    if outcome == "crashed" and restarts > 0:
        await _writer(world, name + ".r", 0.0, restarts - 1, last)


async def _client(world: World, db: Any, rt: SimRuntime, name: str, n_ops: int) -> None:
    rng = world.setup.choices.stream("client", name)
    for i in range(n_ops):
        with rng.span("op"):
            op = rng.choice(OPS)
            level = SSI if boolean(rng, 0.5) else SI
            durable = boolean(rng, world.durable_rate)
            think = rng.uniform(0.0, world.think_s)
            which = rng.randrange(1 << 16)
            flags = rng.randrange(1 << 8)
        tag = f"{name}.{i}"
        try:
            if op == "flush":
                await db.flush_memtable()
            elif op in ("put", "delete"):
                await _plain(world, db, tag, op, BLIND[which % len(BLIND)], durable)
            else:
                await _txn(world, db, rt, tag, op, level, durable, think, which, flags)
        except FencedError:
            world.outcomes[name.split(".c")[0]] = "fenced"
            return
        except ClosedError:
            return
        await rt.sleep(think)


async def _plain(world: World, db: Any, tag: str, op: str, key: bytes, durable: bool) -> None:
    a = Attempt(tag, op, "blind", writes={key: value_of(b"p", tag) if op == "put" else None})
    world.attempts.append(a)
    try:
        h = await (db.put(key, a.writes[key]) if op == "put" else db.delete(key))
        a.seq, a.outcome = h.seq, "written"
        if durable:
            await h.wait_durable()
            a.outcome = "acked"
    except (FencedError, ClosedError):
        a.outcome = "failed"
        raise


async def _txn(world: World, db: Any, rt: SimRuntime, tag: str, role: str, level: str, durable: bool, think: float,
               which: int, flags: int) -> None:
    if role == "skew":
        level = SI
    elif role == "slot":
        level = SSI
    a = Attempt(tag, level, role)
    world.attempts.append(a)
    txn = await db.begin(IsolationLevel.SERIALIZABLE_SNAPSHOT if level == SSI else IsolationLevel.SNAPSHOT)
    a.snap = txn.seqnum
    try:
        if role == "inc":
            key = COUNTERS[which % len(COUNTERS)]
            a.reads[key] = v = await txn.get(key)
            await rt.sleep(think)
            a.writes[key] = value_of(b"%d" % (count_of(v) + 1), tag)
        elif role in ("guard", "skew"):
            x, y = (GUARDED if role == "guard" else SKEW)[which % (len(GUARDED) if role == "guard" else len(SKEW))]
            if flags & 1:  # a scan of the pair, then a get of what it did not return
                a.reads.update(await txn.scan(x[:-1], x[:-1] + b"\xff"))
                a.ranges.append((x[:-1], x[:-1] + b"\xff"))
            for k in (x, y):
                if k not in a.reads:
                    a.reads[k] = await txn.get(k)
            if role == "guard" and level == SI:
                await txn.mark_read([x, y])
                a.marked |= {x, y}
            await rt.sleep(think)
            off_x, off_y = is_off(a.reads[x]), is_off(a.reads[y])
            if not off_x and not off_y:
                k, payload = (x if flags & 2 else y), b"off"
            else:
                k, payload = (x if off_x else y), b"on"
            a.writes[k] = value_of(payload, tag)
        elif role == "slot":  # the range's keys; one more while it has room, else one fewer
            held = dict(await txn.scan(*SLOTS))
            a.reads.update(held)
            a.ranges.append(SLOTS)
            await rt.sleep(think)
            if len(held) < SLOT_LIMIT:
                a.writes[SLOTS[0] + tag.encode()] = value_of(b"s", tag)
            else:
                a.writes[sorted(held)[flags % len(held)]] = None
        else:  # blind: read one key, write another
            src, dst = BLIND[which % len(BLIND)], BLIND[(which >> 4) % len(BLIND)]
            a.reads[src] = await txn.get(src)
            await rt.sleep(think)
            a.writes[dst] = value_of(b"t", tag)
            if flags & 4 and dst != src:
                await txn.unmark_write([dst])
                a.unmarked.add(dst)
            if flags & 8:
                mark = BLIND[(which >> 8) % len(BLIND)]
                await txn.mark_read([mark])
                a.marked.add(mark)
        for k, v in a.writes.items():
            await (txn.put(k, v) if v is not None else txn.delete(k))
    except BaseException:
        await txn.rollback()
        a.outcome = "failed"
        raise
    try:
        h = await txn.commit(durable=durable)
    except TransactionConflictError:
        a.outcome = "conflict"
        return
    except (FencedError, ClosedError):
        a.outcome = "failed"
        raise
    a.seq, a.outcome = h.seq, "acked" if durable else "written"


async def _final(world: World) -> None:
    """The committed history (every WAL object's rows), a final writer's read of every key, the
    oracle, and ``slatedb check``."""
    setup = world.setup
    rt = SimRuntime("final", setup.choices, setup.trace)
    store = MemoryStore(setup.bucket, rt.now_ms, url="memory://sim")
    wal = WalReaderCore(store, rt)
    rows = []
    for wal_id in await wal.wal_ids():
        rows += [(r.seq, r.key, r.value if r.kind == "VALUE" else None) for r in (await wal.read(wal_id) or ())]
    final = {}
    async with aio.Db.open("memory://sim", world.settings, store=store, runtime=rt) as db:
        for key in KEYS:
            final[key] = await db.get(key)
        final.update([kv async for kv in db.scan(*SLOTS)])
    world.verdict = check_history(world.attempts, rows, counters=COUNTERS, guarded=GUARDED, skew_pairs=SKEW,
                                  slots=(SLOTS, SLOT_LIMIT), final=final)
    if not world.verdict.violations:
        await check_world(setup.bucket, [""], SIM_EPOCH_MS + int(trio.current_time() * 1000))


def _faults_seen(setup: Setup, _world: World | None) -> dict:
    checks = setup.checkers.get("writer")
    counts = checks.counts if checks is not None else {}
    return {k: counts[k] for k in ("fault.transient", "store.reply-lost", "fault.stall", "crash") if counts.get(k)}


def _figures(w: World) -> dict:
    out = {"attempts": len(w.attempts), "acked": sum(1 for a in w.attempts if a.outcome == "acked"),
           "fenced": sum(1 for o in w.outcomes.values() if o == "fenced")}
    if w.verdict is not None:
        out.update(w.verdict.figures)
    return out


SCENARIO = Scenario(
    "txn", _build, _writers, nursery="none", final=_final, fault_counts=_faults_seen, figures=_figures,
    oracles=lambda w, _failed: w.verdict.violations if w.verdict is not None else (),
    checkers=(Checker("writer", lambda setup: WriterChecks()),),
    limit_what="writers still running", processes_declared=("w<n>", "w<n>.r", "final"),
    fault_kinds=("fault.transient", "store.reply-lost", "fault.stall", "crash"))


def run_txn_workload(seed: int, *, bugs: frozenset[str] = frozenset(), choices: Choices | None = None) -> WorldResult:
    """Run one world of concurrent transactions and takeovers; a violated invariant is reported.
    Every random choice comes from ``choices`` (default: generated from ``seed``)."""
    return run_world(SCENARIO, seed, choices=choices, bugs=bugs)
