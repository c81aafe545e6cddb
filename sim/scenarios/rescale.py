"""A simulated rescale: split a database into shards by projection, write to the shards, merge them
back by union -- with store faults, stalls, process freezes and crashes of the rescaler at random
store calls, and GC running on every database (RFC 000 "Manifest Projection and Union";
spec/protocols/projection-union.md).

One bucket of the gc scenario's world (``sim/scenarios/gc.py``: rooted stores, swarm faults, crash
and freeze plans, the same settings with an in-process compactor and aggressive GC):

* a **writer** ``w`` on ``src/`` puts and deletes 48 keys; midway, quiescent, it takes a checkpoint
  with scope ALL (its contents are then known exactly) and writes on after it;
* a **rescaler** ``rs`` splits ``src/`` at that checkpoint into 2-4 shards at random cut keys, one
  :func:`~slatedb.projection.create.create_database` call per shard; a crash (at a random virtual
  time, so at a random store call, ambiguous creates included) restarts it as ``rs.r1``, ... which
  re-runs the call (resumable);
* a **writer per shard** ``s<i>w`` writes keys inside the shard's range (its compactor and GC run
  on the shard, compacting the source's SSTs into the shard's own) and closes;
* a **union** ``un`` (crashing and re-running the same way) merges the shards into ``merged/``; a
  reader and a writer then use it; half the seeds take some shards at a second checkpoint of
  ``src/`` and then clone ``merged/`` (``cl``: two entries name ``src/``);
* **GC** processes on the source, every shard and the merged database, the whole time.

Oracles on every run (each violation names its id):

* **PROJ-1** a shard read (a DbReader, before its writer) equals the checkpoint's state inside its
  range and has nothing outside;
* **PROJ-2** every view of a shard's first manifest shows at most what the same view showed in the
  checkpointed source manifest (visible range within the source view's effective range);
* **PROJ-3** the merged manifest's ``last_l0_seq`` is at least every shard's, and a write after the
  union wins over the carried-over rows;
* **PROJ-4** the merged database reads exactly the union of the shards' final states;
* **PROJ-5** the merged manifest has one ``external_dbs`` entry per ``(path, source checkpoint)``;
* **READ-3** a DbReader on the merged database reads that exact state, before and after GC rounds;
* **CLONE-1** every creation finishes (its final checkpoints exist; a source checkpoint released
  too early makes that impossible); a re-run after a crash that finds the database finished and
  GC's detach under way or done is refused with ``CloneMismatchError`` (RFC 000), which counts as
  finished (:func:`_resumable`); **CLONE-2** after GC rounds, every SST the latest manifest of a
  shard or of the merged database references exists where ``external_dbs`` says.

Same seed, same trace digest. ``./just sim run --workload rescale --seed S [--bug NAME]``.
"""

from __future__ import annotations

import uuid
from typing import Any

import attrs
import trio

import slatedb.aio as aio
from slatedb.checkpoint import CheckpointOptions, CheckpointScope
from slatedb.clone import CloneMismatchError
from slatedb.errors import CloneSourceWithWalError, SlateDBError
from slatedb.projection import KeyRange
from slatedb.projection.create import SourceSpec, create_database
from slatedb.reader.aio import DbReader

from sim.checks.manifest import manifest_checks
from sim.checks.projection import Violation, check_proj2, detached_by_gc, manifest_in
from sim.checks.structure import check_world, final_checkpoints_pin, references_resolve
from sim.scenarios.gc_world import World, fault_counts, gc_slack_s, gc_through_heal, healed_gc_options
from sim.world import fastclock
from sim.world.choices import Choices, boolean
from sim.world.engine import Crash, PausableStore, crashable
from sim.world.harness import Checker, Scenario, Setup, WorldResult, run_world
from sim.world.runtime import SIM_EPOCH_MS

VIRTUAL_LIMIT_S = 4 * 3600
N_KEYS = 48
KEYS = [b"k%03d" % i for i in range(N_KEYS)]
SRC, MERGED, CLONED = "memory://sim/src", "memory://sim/merged", "memory://sim/cloned"


def shard_url(i: int) -> str:
    return f"memory://sim/shard{i}"


class Rescale:
    """What the scenario knows: the checkpoint's state, each shard's expected state."""

    def __init__(self) -> None:
        self.model: dict[bytes, bytes] = {}
        self.checkpoint: uuid.UUID | None = None
        self.snapshot: dict[bytes, bytes] = {}
        self.checkpoint_ready = trio.Event()
        # Some seeds: a second checkpoint, shards taken at either, then a clone of the union.
        self.second: uuid.UUID | None = None
        self.second_snapshot: dict[bytes, bytes] = {}
        self.second_done = trio.Event()  # set once the writer took it, or finished without it
        self.two_checkpoints = False
        self.shard_checkpoints: list[int] = []  # per shard: 1 or 2
        self.ranges: list[KeyRange] = []
        self.expected: list[dict[bytes, bytes]] = []
        self.restarts = 0
        self.outcome = ""
        self.clone_entries = -1  # the clone of the union: entries repeating a database (-1: no clone)
        self.reruns_after_detach = 0  # re-runs refused because GC had detached a finished result


def _manifest(world: World, root: str, manifest_id: int | None = None):
    return manifest_in(world.bucket, root, manifest_id)


async def _read_all(world: World, who: str, url: str) -> dict[bytes, bytes]:
    rt = world.runtime(who)
    async with DbReader.open(url, store=world.store(who, url), runtime=rt) as r:
        return {k: v async for k, v in r.scan()}


# -- processes ----------------------------------------------------------------------------------


async def _writer(world: World, rs: Rescale) -> None:
    rt = world.runtime("w")
    store = world.store("w", SRC)
    rng = world.choices.stream("workload", "w")
    n_ops = rng.randint(60, 160)
    at = rng.randint(20, n_ops - 10)
    # the second checkpoint's op, in its own stream (the other seeds keep their traces)
    at2 = world.choices.stream("workload", "w", "second").randint(at + 3, n_ops - 1) if rs.two_checkpoints else None
    async with aio.Db.open(SRC, world.settings_map, store=store, runtime=rt) as db:
        for i in range(n_ops):
            with rng.span("op"):  # one operation's draws: the shrinker may delete it whole
                key = KEYS[rng.randrange(N_KEYS)]
                value = None if boolean(rng, 0.15) else b"w:%d:" % i + b"v" * rng.randrange(48)
            if value is None:
                wh = await db.delete(key)
                rs.model.pop(key, None)
            else:
                wh = await db.put(key, value)
                rs.model[key] = value
            if i == at or i == at2:
                await wh.wait_durable()
                await db.flush(wal=False)  # everything in L0 (a checkpoint with WAL rows cannot be projected)
                res = await db.create_checkpoint(CheckpointScope.ALL, CheckpointOptions(
                    lifetime_s=4 * 3600, name="rescale" if i == at else "rescale2"))
                if i == at:
                    rs.checkpoint, rs.snapshot = res.id, dict(rs.model)
                    rs.checkpoint_ready.set()
                else:
                    rs.second, rs.second_snapshot = res.id, dict(rs.model)
                    rs.second_done.set()
            elif boolean(rng, 0.3):
                await rt.sleep(rng.uniform(0, 0.3))
    rs.second_done.set()
    if not rs.checkpoint_ready.is_set():  # pragma: no cover - at < n_ops
        raise AssertionError("the writer took no checkpoint")


def _root(url: str) -> str:
    return url[len("memory://sim/"):].strip("/")


async def _resumable(world: World, rs: Rescale, who: str, dest: str, sources: list[tuple[str, Any, Any]]) -> bool:
    """Run one creation until it finishes, restarting after each crash. False: refused (WAL).

    An attempt may finish the database (its ``initialized`` manifest lands) without seeing it: a
    crash, or a commit that landed but was reported failed. GC may then detach the entries that
    name its sources (all of them when the result holds no source SST: checkpoints-gc.md step
    9), and the next read of the destination (a re-run, or the same run going back to C2) finds
    a database that no longer names its sources: refused with ``CloneMismatchError`` (RFC 000
    "Clones": the existing manifest must name the parent, "if not, exit with error";
    docs/rescaling.md). That creation is finished, not failed (CLONE-1, projection-union.md;
    seed 800) -- only when the destination is initialized (nothing but this creation makes it
    in this world) and GC's detach explains the refusal (:func:`sim.checks.projection.detached_by_gc`)."""
    rng = world.choices.stream("crash", who)
    roots = [_root(url) for url, _, _ in sources]
    for attempt in range(6):
        name = who if attempt == 0 else f"{who}.r{attempt}"
        rt = world.runtime(name)
        dest_store = world.store(name, dest)
        specs = [SourceSpec(world.store(name, url), cp, r) for url, cp, r in sources]
        crash = Crash(rng.uniform(0.0, 3.0)) if attempt < 4 and boolean(rng, world.crash_rate) else None

        async def body() -> str:
            try:
                await create_database(dest_store, specs, rt)
            except CloneSourceWithWalError:
                return "refused-wal"
            except CloneMismatchError as e:
                if detached_by_gc(world.bucket, _root(dest), roots):
                    rs.reruns_after_detach += 1
                    return "done"
                raise Violation("CLONE-1", f"{who}: creating {dest} failed: {type(e).__name__}: {e}") from None
            except SlateDBError as e:
                raise Violation("CLONE-1", f"{who}: creating {dest} failed: {type(e).__name__}: {e}") from None
            return "done"

        outcome = await crashable(world, name, dest_store, crash, body)
        if outcome == "crashed":
            rs.restarts += 1
            continue
        return outcome == "done"
    raise Violation("CLONE-1", f"{who}: {dest} not finished after 6 attempts")


async def _rescaler(world: World, rs: Rescale, shards_done: trio.Event) -> None:
    rng = world.choices.stream("workload", "rs")
    await rs.checkpoint_ready.wait()
    await fastclock.sleep(rng.uniform(0, 5))
    n = rng.randint(2, 4)
    cuts = sorted(rng.sample(KEYS[1:], n - 1))
    edges = [None, *cuts, None]
    rs.ranges = [KeyRange(a, b) for a, b in zip(edges, edges[1:])]
    which = world.choices.stream("workload", "rs", "second")
    for i, r in enumerate(rs.ranges):
        # Shards at different checkpoints of src/ (RFC 000): the union's clone pins each entry.
        second = rs.two_checkpoints and (i == len(rs.ranges) - 1 or (i > 0 and boolean(which, 0.5)))
        if second:
            await rs.second_done.wait()
            second = rs.second is not None
        cp, snapshot = (rs.second, rs.second_snapshot) if second else (rs.checkpoint, rs.snapshot)
        rs.shard_checkpoints.append(2 if second else 1)
        if not await _resumable(world, rs, "rs", shard_url(i), [(SRC, cp, r)]):
            rs.outcome = "refused-wal"
            shards_done.set()
            return
        check_proj2(world.bucket, i, cp)
        want = {k: v for k, v in snapshot.items() if r.contains(k)}
        got = await _read_all(world, f"rd{i}", shard_url(i))
        if got != want:
            raise Violation("PROJ-1", f"shard{i} {r} reads {len(got)} rows, the checkpoint holds {len(want)} there"
                                      f" (extra {sorted(set(got) - set(want))[:3]}, differing "
                                      f"{sorted(k for k in want if got.get(k) != want[k])[:3]})")
        rs.expected.append(want)
    shards_done.set()


async def _shard_writer(world: World, rs: Rescale, i: int) -> None:
    name = f"s{i}w"
    rt = world.runtime(name)
    rng = world.choices.stream("workload", name)
    keys = [k for k in KEYS if rs.ranges[i].contains(k)]
    async with aio.Db.open(shard_url(i), world.settings_map, store=world.store(name, shard_url(i)), runtime=rt) as db:
        for j in range(rng.randint(0, 40)):
            with rng.span("op"):
                key = rng.choice(keys)
                value = None if boolean(rng, 0.15) else b"%s:%d:" % (name.encode(), j) + b"s" * rng.randrange(40)
            if value is None:
                await db.delete(key)
                rs.expected[i].pop(key, None)
            else:
                await db.put(key, value)
                rs.expected[i][key] = value
            if boolean(rng, 0.2):
                await rt.sleep(rng.uniform(0, 0.5))


async def _gc(world: World, name: str, url: str, ready) -> None:
    await ready()
    await gc_through_heal(world, name, PausableStore(world.store(name, url)), world.runtime(name))


async def _check_refs(world: World, root: str) -> None:
    """CLONE-2: every SST the latest manifest of ``root`` references exists where it lives
    (slatedb check's reference rule, :func:`sim.checks.structure.references_resolve`)."""
    m = _manifest(world, root)
    if m is None or not m.initialized:
        return
    try:
        await references_resolve(world.bucket, root, SIM_EPOCH_MS + int(trio.current_time() * 1000))
    except AssertionError as e:
        raise Violation("CLONE-2", str(e)) from None


def _exists(world: World, root: str):
    async def wait() -> None:
        while _manifest(world, root) is None or not _manifest(world, root).initialized:
            await fastclock.sleep(1.0)
    return wait


def _build(setup: Setup) -> World:
    world = World(setup.seed, setup.choices, setup.faults, setup.trace, setup.bucket, setup.bugs)
    world.rs = Rescale()
    world.rng_main = setup.choices.stream("workload", "main")
    world.rs.two_checkpoints = boolean(setup.choices.stream("workload", "two-checkpoints"), 0.5)
    if world.rs.two_checkpoints:  # recorded only when drawn: the other seeds keep their traces
        setup.trace.record("world", "two-checkpoints")
    setup.trace.record("world", "settings", crash_rate=world.crash_rate, pause_rate=world.pause_rate)
    return world


async def _processes(world: World, background: trio.Nursery | None) -> None:
    """GC on every database (until the end), the source's writer and the rescaler, then the
    shard writers and the union (which heals the world and runs the final checks)."""
    assert background is not None
    rs, rng = world.rs, world.rng_main
    shards_done = trio.Event()

    exists = lambda root: _exists(world, root)  # noqa: E731
    world.bg = background
    background.start_soon(_gc, world, "gsrc", SRC, exists("src"))
    background.start_soon(_gc, world, "gm", MERGED, exists("merged"))
    for i in range(4):
        background.start_soon(_gc, world, f"g{i}", shard_url(i), exists(f"shard{i}"))
    async with trio.open_nursery() as work:
        work.start_soon(_writer, world, rs)
        work.start_soon(_rescaler, world, rs, shards_done)
    if rs.outcome != "refused-wal":
        async with trio.open_nursery() as writers:
            for i in range(len(rs.ranges)):
                writers.start_soon(_shard_writer, world, rs, i)
        await fastclock.sleep(rng.uniform(0, 10))
        await _union(world, rs)


async def _union(world: World, rs: Rescale) -> None:
    shard_seqs = [_manifest(world, f"shard{i}").last_l0_seq for i in range(len(rs.ranges))]
    if not await _resumable(world, rs, "un", MERGED, [(shard_url(i), None, None) for i in range(len(rs.ranges))]):
        rs.outcome = "union-refused-wal"
        return
    m = _manifest(world, "merged")
    if m.last_l0_seq < max(shard_seqs):
        raise Violation("PROJ-3", f"the union's last_l0_seq {m.last_l0_seq} < a shard's {max(shard_seqs)}")
    keys = [(e.path, e.source_checkpoint_id) for e in m.external_dbs]
    if len(keys) != len(set(keys)):
        raise Violation("PROJ-5", f"the union lists {len(keys)} external_dbs entries, {len(set(keys))} distinct")
    want: dict[bytes, bytes] = {}
    for part in rs.expected:
        want.update(part)
    got = await _read_all(world, "ur", MERGED)
    if got != want:
        raise Violation("PROJ-4", f"the union reads {len(got)} rows, the shards hold {len(want)} (differing "
                                  f"{sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))[:4]})")
    # A write after the union wins over every carried-over row (PROJ-3 end to end).
    rt = world.runtime("mw")
    key = sorted(want)[0] if want else KEYS[0]
    async with aio.Db.open(MERGED, world.settings_map, store=world.store("mw", MERGED), runtime=rt) as db:
        await db.put(key, b"after-union")
        await db.flush()
        if await db.get(key) != b"after-union":
            raise Violation("PROJ-3", f"a write of {key!r} after the union is shadowed by an older row")
    want[key] = b"after-union"
    cloned = rs.two_checkpoints and await _clone_of_union(world, rs, want)
    # GC rounds everywhere (every collector restarted at the healed interval), faults healed,
    # then every reference still resolves.
    world.heal()
    await fastclock.sleep(gc_slack_s(healed_gc_options(world.settings_map)))
    for root in ["merged"] + [f"shard{i}" for i in range(len(rs.ranges))] + (["cloned"] if cloned else []):
        await _check_refs(world, root)
    got = await _read_all(world, "ur2", MERGED)
    if got != want:
        raise Violation("READ-3", f"after GC rounds the union reads {len(got)} rows, {len(want)} expected")
    if cloned:
        got = await _read_all(world, "clr2", CLONED)
        if got != want:
            raise Violation("READ-3", f"after GC rounds the clone of the union reads {len(got)} rows, {len(want)} "
                                      "expected")


async def _clone_of_union(world: World, rs: Rescale, want: dict[bytes, bytes]) -> bool:
    """A clone of the union (``cl``, crashing and re-running like the others), GC on it; in the
    seeds whose shards were taken at two checkpoints of src/ the union lists an entry for each,
    and the clone needs a final checkpoint on src/ for each (clone.md step 4; probe
    ``clone.repeated-database``). CLONE-1 right after (``slatedb check``'s rule: every entry's
    final checkpoint pins a manifest listing the entry's SSTs), then the clone reads exactly the
    union's state (PROJ-4: each shard's model at its checkpoint, the shard writes, the write
    after the union). False: refused (the union still had WAL rows)."""
    world.bg.start_soon(_gc, world, "gcl", CLONED, _exists(world, "cloned"))
    if not await _resumable(world, rs, "cl", CLONED, [(MERGED, None, None)]):
        rs.outcome = "clone-refused-wal"
        return False
    m = _manifest(world, "cloned")
    await final_checkpoints_pin(world.bucket, "cloned", SIM_EPOCH_MS + int(trio.current_time() * 1000))
    paths = [e.path for e in m.external_dbs]
    rs.clone_entries = len(paths) - len(set(paths))  # entries naming a database an earlier one names
    got = await _read_all(world, "clr", CLONED)
    if got != want:
        raise Violation("PROJ-4", f"the clone of the union reads {len(got)} rows, the union holds {len(want)} "
                                  f"(differing {sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))[:4]})")
    return True


async def _final(world: World) -> None:
    """slatedb check on every database of the world (sim/checks/structure.py)."""
    await check_world(world.bucket, ["src", "merged", "cloned"] + [f"shard{i}" for i in range(4)],
                      SIM_EPOCH_MS + int(trio.current_time() * 1000))


def _after(result: WorldResult, _world: World | None) -> WorldResult:
    return result if result.ok else attrs.evolve(result, figures={**result.figures, "outcome": "failed"})


SCENARIO = Scenario(
    "rescale", _build, _processes, virtual_limit_s=VIRTUAL_LIMIT_S, final=_final,
    checkers=(Checker("manifest", manifest_checks),),
    figures=lambda w: {"shards": len(w.rs.ranges), "outcome": w.rs.outcome or "merged", "restarts": w.rs.restarts,
                       "shard_checkpoints": tuple(w.rs.shard_checkpoints), "clone_entries": w.rs.clone_entries,
                       "reruns_after_detach": w.rs.reruns_after_detach},
    fault_counts=lambda setup, _world: fault_counts(setup.trace), after=_after,
    processes_declared=("w", "rescaler", "s<i>", "gsrc", "gm", "g<i>", "un", "mw", "cl", "gcl"),
    fault_kinds=("fault.transient", "store.reply-lost", "fault.stall", "crash", "pause"))


def run_rescale_workload(seed: int, *, faults: str = "swarm", bugs: frozenset[str] = frozenset(),
                         choices: Choices | None = None) -> WorldResult:
    """Run one world; a violated invariant, a wrong read or a stuck run is reported in the result.
    Every random choice comes from ``choices`` (default: generated from ``seed``)."""
    return run_world(SCENARIO, seed, choices=choices, bugs=bugs, faults=faults)
