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
* in some seeds a standalone **GC** ``g1`` (until the heal) and a standalone **compactor** ``c1``,
  crashing, restarting and freezing too;
* **managed readers** ``r1``, ``r2`` (DbReader with its own checkpoint: lifetime 6-60 s, poll
  0.5-2 s, follow mode or not) scanning every key over and over; they freeze for up to five
  virtual minutes, often past their checkpoint's lifetime;
* an **admin** ``admin`` holding checkpoints: it creates them (from the latest manifest or from an
  existing one, lifetime 60-300 s), refreshes and deletes them, and reads each through a
  DbReader opened on the fixed checkpoint, as do the writer's checkpoints;
* a **clone** ``clone`` of the parent (from a writer checkpoint or the latest state) created at a
  random time, then a writer ``cw`` on it (with its own compactor and GC) writing its own keys
  and reading back everything; then, in most seeds, a reader ``cr`` of a clone checkpoint that
  still references the parent's SSTs reads on while an admin ``cadmin`` compacts the clone fully
  and GC passes run (``sim/scenarios/gc_clone.py``, CLONE-4); when the compactor's pins are short
  (half the seeds: 30 or 60 s instead of 900 s), the parent is then compacted fully (``pc``) and
  collected (``pgc``) under that reader, whose reads must still succeed.

Checked on every run:

* the trace checks of :class:`sim.checks.gc.GcChecks`: GC-1..4, CKPT-1/2, READ-1/2,
  BOUNDARY-1/2, CLONE-1..4;
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
* **liveness**: once the writer is done, faults stop (and the store's latency drops to at most
  0.02 s a leg), readers close, the admin drops its checkpoints; the writer ``wfinal`` writes a
  little more (it must be acknowledged and compacted) and its GC runs on, every poller at the
  slowest drawn rate (:func:`healed_settings`). After two GC rounds past min_age, twice, no
  garbage is left:
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

from typing import Any

import trio

import slatedb.aio as aio
from slatedb.api.args import coerce_settings
from slatedb.errors import SlateDBError
from slatedb.reader import DbReaderOptions
from slatedb.reader.aio import DbReader

from sim.checks.gc import GcChecks
from sim.checks.gc_liveness import READER_CATCH_UP_POLLS, no_garbage, reader_catches_up, \
    reader_holds_only_what_it_needs
from sim.checks.manifest import manifest_checks
from sim.checks.structure import check_world
from sim.scenarios.gc_processes import _admin, _clone, _compactor_process, _gc_process, _managed_reader, _writer
from sim.scenarios.gc_world import N_KEYS, PARENT, World, _scan, fault_counts, gc_slack_s, healed_gc_options
from sim.world import fastclock
from sim.world.choices import Choices, boolean
from sim.world.harness import Checker, Scenario, Setup, WorldResult, run_world
from sim.world.runtime import SIM_EPOCH_MS
from sim.world.trace import listens

__all__ = ["SCENARIO", "run_gc_workload", "READER_CATCH_UP_POLLS", "World", "SlateDBError"]


def _build(setup: Setup) -> World:
    world = World(setup.seed, setup.choices, setup.faults, setup.trace, setup.bucket, setup.bugs)
    world.setup = setup
    _compactor_pins(world)
    setup.trace.record("world", "settings", gc=str(world.settings_map["garbage_collector_options"]),
                       crash_rate=world.crash_rate, pause_rate=world.pause_rate)
    return world


def _compactor_pins(world: World) -> None:
    """In half the seeds the compactor's pins (the checkpoint every compaction commit puts on the
    manifest it replaces, ``checkpoint_lifetime``) last 30 or 60 s instead of 900 s: they expire
    within the world, so GC collects what only they kept (``sim/scenarios/gc_clone.py`` step 5
    needs that). Its own stream, recorded only when drawn: the other seeds keep their traces."""
    rng = world.choices.stream("world", "compactor-pins")
    if not boolean(rng, 0.5):
        return
    world.compactor_pins_s = float(rng.choice([30, 60]))
    world.settings_map["compactor_options"]["checkpoint_lifetime"] = f"{world.compactor_pins_s:.0f}s"
    world.settings = coerce_settings(world.settings_map)
    world.trace.record("world", "compactor-pins", lifetime_s=world.compactor_pins_s)


async def _processes(world: World, everything: trio.Nursery | None) -> None:
    """A standalone GC and compactor in some seeds (they run until the end), readers, the admin,
    a clone in half the seeds, and the writer."""
    assert everything is not None
    rng = world.rng
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


async def _liveness(world: World, _everything: trio.Nursery | None) -> None:
    """Faults stop; the writer goes on a little; GC must leave no garbage."""
    await _final_phase(world, world.setup.checkers["gc"], trio.current_time())


async def _final_phase(world: World, checks: GcChecks, healed_at: float) -> None:
    """After the heal: the writer writes and waits for a compaction; then, once every checkpoint
    but the writer's and the clone's final ones has expired (or was dropped) and GC had time for
    a few rounds, nothing GC should delete is left."""
    rt = world.runtime("wfinal")
    store = world.store("wfinal", PARENT)
    h = world.history
    mine = h.new_incarnation()
    settings_map = healed_settings(world.settings_map)
    slack = gc_slack_s(settings_map["garbage_collector_options"])
    parent = checks.dbs["parent/"]
    # READ-5: a managed reader opened now must catch up with the writer's durable state within
    # a few polls and hold no checkpoint it replaced; it stays open through the garbage check.
    r_rt = world.runtime("rfinal")
    r_rng = world.choices.stream("workload", "rfinal")
    r_poll = r_rng.choice([0.5, 1.0, 2.0])
    r_opts = DbReaderOptions(manifest_poll_interval_s=r_poll, checkpoint_lifetime_s=r_rng.choice([6.0, 15.0, 60.0]),
                             follow_latest=boolean(r_rng, 0.5))
    made: set[str] = set()  # the checkpoints the reader made (its reader_checkpoint events)

    @listens("reader_checkpoint")
    def note(e) -> None:
        if e.process == "rfinal" and e.kind == "reader_checkpoint":
            made.add(e.f["id"])

    world.trace.listeners.append(note)
    async with aio.Db.open(PARENT, settings_map, store=store, runtime=rt) as db, \
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
            await fastclock.sleep(0.5)
        await reader_catches_up(reader, r_opts, await _scan(db), _scan)
        # GC goes on for a few rounds (what checkpoints still pin is not garbage).
        await fastclock.sleep(slack)
        await db.flush(wal=False)  # a fresh L0 moves GC's ULID cutoff past the heal
        # What is garbage now must be gone one slack later; what a checkpoint pins until it
        # expires in that window is excused (gc seeds 102, 160: a checkpoint expired a moment
        # before the check, the objects it pinned were still there).
        since = parent.latest
        await fastclock.sleep(slack)
        no_garbage(world.bucket, checks, healed_at, since)  # with the reader still open
        reader_holds_only_what_it_needs(parent, reader, made)
        # Contents: the final state is the whole durable history.
        h.observations.append(("final", "final read", await _scan(db), (mine[-1][0], 2**62)))


def healed_settings(settings_map: dict) -> dict:
    """The healed world's writer polls at the slowest rate a seed draws: 1 s for the manifest and
    its compactor's ticks (drawn 0.1-1 s), 2 s for each GC directory (drawn 0.5-2 s), and its
    compactor takes up to 8 L0 SSTs a job (drawn 2-8). After the heal nothing changes but what it
    writes itself, and every poll is store calls: two thirds of a seed's calls came after the
    heal before this. What the liveness phase proves is unchanged: a compaction must commit, GC
    must leave no garbage (the waits follow its min_age and interval), READ-5's reader polls as
    drawn."""
    healed = dict(settings_map, manifest_poll_interval="1s")
    compactor = settings_map["compactor_options"]
    healed["compactor_options"] = dict(compactor, poll_interval="1000ms", scheduler_options=dict(
        compactor["scheduler_options"], max_compaction_sources="8"))
    healed["garbage_collector_options"] = healed_gc_options(settings_map)
    return healed


async def _final(world: World) -> None:
    """slatedb check on both databases (sim/checks/structure.py)."""
    await check_world(world.bucket, ["parent", "clone"], SIM_EPOCH_MS + int(trio.current_time() * 1000))


def _db_of(process: str) -> str:
    return "clone/" if process.startswith("cw") else "parent/"


def _figures(world: World) -> dict[str, Any]:
    checks = world.setup.checkers["gc"]
    return dict(
        acked=world.history.acked, gc_deletes=sum(v for k, v in checks.counts.items() if k.startswith("gc_delete.")),
        reader_scans=world.reader_scans, checkpoint_scans=world.checkpoint_scans,
        read_failures_excused=world.read_failures_excused, reestablished=world.reestablished,
        clone=world.clone_outcome, clone_detach=world.clone_detach,
        clone_checkpoint_scans=world.clone_checkpoint_scans, double_apply=checks.counts["double_apply"])


SCENARIO = Scenario(
    "gc", _build, _processes, liveness=_liveness, heals=True, final=_final,
    oracles=lambda world, failed: () if failed else world.history.check(),
    figures=_figures, fault_counts=lambda setup, _world: fault_counts(setup.trace),
    checkers=(Checker("manifest", manifest_checks),
              Checker("gc", lambda setup: GcChecks(setup.bucket, ("parent/", "clone/"), _db_of,
                                                  frozenset(setup.options.get("skip_checks", ()))))),
    processes_declared=("w", "w.r<n>", "g1", "c1", "r1", "r2", "admin", "clone", "cw", "cadmin", "cr",
                        "pc", "pgc", "wfinal",
                        "rfinal"),
    fault_kinds=("fault.transient", "store.reply-lost", "fault.stall", "crash", "pause"))


def run_gc_workload(seed: int, *, faults: str = "swarm", bugs: frozenset[str] = frozenset(),
                    choices: Choices | None = None, skip_checks: frozenset[str] = frozenset()) -> WorldResult:
    """Run one world; a violated invariant, a wrong read or a stuck run is reported in the result.
    Every random choice comes from ``choices`` (default: generated from ``seed``); ``skip_checks``:
    trace checks left out (by invariant id), to show what the end-to-end oracles catch alone."""
    return run_world(SCENARIO, seed, choices=choices, bugs=bugs, faults=faults, skip_checks=skip_checks)
