"""A simulated world of destroying a database while everyone still uses it (spec/protocols/destroy.md).

One bucket, two databases (``parent/`` and, in most seeds, its ``clone/``), swarm store faults,
and these processes:

* the parent's **writer** ``w`` (no in-process compactor or GC: their pins would outlive the
  run) writing in paced bursts until it is fenced by a destroy;
* a **managed reader** ``r1`` scanning the parent until the destroy fails it for good;
* an **admin** creating short-lived checkpoints on the parent (refused once it is destroyed);
* a **clone** of the parent made early (it holds a final checkpoint on the parent), a writer
  ``cw`` on it, then a **hard destroy** of the clone ``hdc`` (it must release the final
  checkpoint before the clone's last manifest goes, DESTROY-5);
* one or two **soft destroyers** ``d1``, ``d2`` of the parent at random moments (racing each
  other within half a second in half the seeds);
* in half the seeds a **hard destroyer** ``hdp`` of the parent once its writer, reader, admin,
  clone maker and soft destroyers have all ended and their last requests landed (the caller's
  guarantee, DESTROY-A2), retrying while a checkpoint (the clone's final one, the admin's) still
  blocks it (DESTROY-1);
* standalone **GC** processes ``g1`` (parent) and ``g2`` (clone), running throughout, the parent's
  with a ``db_delete_grace`` above the longest stall (DESTROY-A1) so that it finishes the soft
  destroy in the run.

The world keeps the two promises of spec/protocols/destroy.md "Assumptions" (the RFC's); with
``contract=False`` it breaks them as it did before 2026-11-27 (a 1-20 s grace, the hard destroyer
right after the first soft destroy), for the regression seeds of the defences beyond them. Only
the contract world is registered and campaigned.

Under the parent's root lie objects that are not the parent's (:data:`FOREIGN`: a user's file,
a database nested below the root, one nested inside the parent's ``compacted/``), put into the
bucket before the run: every destroy of the parent meets them and must leave them (DESTROY-8).

Checked: :class:`sim.checks.destroy.DestroyChecks` (DESTROY-1..5, 7, 8) on every landing, the
manifest fences, and liveness: once faults
stop, every destroyed database is gone (DESTROY-6) within its grace plus a few GC rounds, and
the foreign objects are intact (DESTROY-8).
Catalogued bugs ``soft-destroy-no-fence`` (a soft destroy that skips the WAL fence) fires
DESTROY-2, ``destroy-deletes-foreign`` (a destroy deleting every object it lists) DESTROY-8.
"""

from __future__ import annotations

import trio

import slatedb.aio as aio
from slatedb.api.args import coerce_settings
from slatedb.checkpoint import CheckpointOptions, create_checkpoint
from slatedb.clone import create_clone
from slatedb.destroy import destroy
from slatedb.errors import ClosedError, FencedError, InvalidDbStateError, InvalidDeletionError, NotFoundError
from slatedb.gc import GarbageCollector
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.base import CREATE_IF_ABSENT, OVERWRITE, PutMode
from slatedb.reader import DbReaderOptions
from slatedb.reader.aio import DbReader

from sim.checks.destroy import DestroyChecks, destroyed_and_gone, foreign_intact
from sim.checks.manifest import manifest_checks
from sim.checks.structure import check_world, world_store
from sim.scenarios.gc_world import CLONE, PARENT, STALL_MAX_S, World, fault_counts, run_gc
from sim.world import fastclock
from sim.world.choices import Choices, boolean
from sim.world.harness import Checker, Scenario, Setup, WorldResult, run_world
from sim.world.rooted import RootedStore
from sim.world.runtime import SIM_EPOCH_MS

N_KEYS = 32
#: ``db_delete_grace`` of the parent's GC. RFC 000 ("Deleting a Database", soft): "We assume that
#: the writer will detect that it's fenced and exit by the time the GC goes to delete the data" --
#: every process of the database notices a soft destroy within the grace (DESTROY-A1). A request
#: here takes at most two legs of :data:`~sim.scenarios.gc_world.STALL_MAX_S` (20 s) each, and a
#: process decides a create on a read and sends it a few legs later, so the grace is drawn above
#: the longest such window. Seeds 674, 1169, 1336, 1790, 2059, 2197 and 2303 (destroy campaign of
#: 2026-11-27) drew 1-20 s, shorter than one stalled leg: a process stalled past the grace wrote
#: to the database after GC removed it, which the RFC's assumption rules out. Three values, as
#: the old world's three: the world's random stream after this draw is the old world's, so every
#: seed runs the same processes in both (destroy seed 3, the coverage campaign's, keeps its clone).
GRACE_CHOICES_S = (60.0, 90.0, 120.0)
#: After the last process of the parent (writer, reader, admin, clone maker, soft destroyers)
#: ended, the hard destroyer waits this long (virtual s) before it starts: a request a crashed or
#: cancelled process sent lands within one leg (at most ``STALL_MAX_S`` plus latency). RFC 000
#: (hard): "It is up to the user to ensure that there is no active writer at the time of
#: deletion" (DESTROY-A2); seeds 1551, 1853 and 2457 ran it while a soft destroyer (a writer: it
#: bumps the epoch and fences the WAL) still had its bump or fence on the wire.
HARD_DESTROY_DRAIN_S = 2 * STALL_MAX_S + 5.0
#: The world before 2026-11-27, which broke both promises (``run_destroy_workload(seed,
#: contract=False)``, never in a campaign): the regression tests of the defences that reach beyond
#: them (DESTROY-7's take-backs: destroy seeds 44, 77, 409, ...) replay its seeds, trace for trace.
BEYOND_CONTRACT_GRACE_CHOICES_S = (1.0, 5.0, 20.0)
#: Once faults stop, destroyed databases must be gone within their grace plus this (virtual s):
#: a clone's ephemeral source checkpoint on its parent lives 300 s (clone.md).
GONE_WITHIN_S = 400.0
#: Objects under the parent's root that are not the parent's (destroy.md DESTROY-8), by bucket
#: key, with their bytes: a user's file at the root; a database nested below the root
#: (``parent/nested``: a hard destroy lists the whole root and meets it); one nested inside the
#: parent's own ``compacted/`` (``parent/compacted/archive``: GC's removal lists ``compacted/``
#: and meets it too). Put into the bucket before the run, without store traffic; no destroy reads
#: their bytes, only their names tell them from the parent's objects.
FOREIGN: dict[str, bytes] = {
    "parent/NOTES.txt": b"a user's file beside the database",
    "parent/nested/manifest/00000000000000000001.manifest": b"the manifest of a database nested below",
    "parent/nested/wal/00000000000000000001.sst": b"a WAL object of the nested database",
    "parent/nested/compacted/01HZZZZZZZZZZZZZZZZZZZZZZZ.sst": b"an SST of the nested database",
    "parent/compacted/archive/manifest/00000000000000000001.manifest": b"a database nested in compacted/",
    "parent/compacted/archive/wal/00000000000000000001.sst": b"its WAL object",
}
FOREIGN_KEYS = frozenset(FOREIGN)


#: The "create held" mode (stream ``destroy:create-held``, half the seeds with a clone): the
#: clone's hard destroy ``hdc`` waits (up to this many virtual s) for the clone's GC ``g2`` to
#: send its next create (a boundary file or a manifest), holds that request on the wire (a
#: stalled leg) while the destroy runs, and lets it land after: GC's create on an emptied root,
#: which it must take back (DESTROY-7). Without the mode the race needs a stall drawn at that
#: moment (destroy seeds 77, 129, 256 of the old world); a GC poll that reads an unchanged latest
#: manifest by its listing alone (sequenced-metadata.md) left the window to 1 seed in 600.
CREATE_HELD_WAIT_S = 60.0


class HeldCreates(RootedStore):
    """``g2``'s store: once :attr:`armed`, its next create-if-absent under ``gc/`` or ``manifest/``
    is held (:attr:`held` set, a ``world hold`` event) until :attr:`release` is set, then sent on."""

    def __init__(self, world: World, process: str, url: str) -> None:
        super().__init__(world, process, url)
        self.armed = False
        self.held = trio.Event()
        self.release = trio.Event()

    def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE):
        if self.armed and mode == CREATE_IF_ABSENT and key.startswith(("gc/", "manifest/")):
            self.armed = False
            return self._held_put(key, data, mode)
        return super().put(key, data, mode)

    async def _held_put(self, key: str, data: bytes, mode: PutMode):
        self.trace.record("world", "hold", of=self.process, key=self.root + key)
        self.held.set()
        await self.release.wait()
        return await super().put(key, data, mode)


def _exists(world: World, root: str) -> bool:
    return bool(world.bucket.objects.keys_under(f"{root}/manifest/"))  # the bucket's sorted keys


async def _wait_for(world: World, root: str) -> bool:
    """Until the database under ``root`` exists (read from the bucket: no store traffic); False
    when the parent is gone for good (destroyed and removed: nobody makes it again; seed 202's
    admin waited for it for ever)."""
    while not _exists(world, root):
        if root == "parent" and world.destroyed.is_set():
            return False
        await fastclock.sleep(0.5)
    return True


def _build(setup: Setup) -> World:
    world = World(setup.seed, setup.choices, setup.faults, setup.trace, setup.bucket, setup.bugs)
    world.setup = setup
    rng = world.rng
    world.contract = setup.options.get("contract", True)
    world.grace_s = rng.choice(GRACE_CHOICES_S if world.contract else BEYOND_CONTRACT_GRACE_CHOICES_S)
    world.outcomes = {}
    world.parent_users = 0  # processes of the parent other than GC still running (see _using_parent)
    world.parent_quiet = trio.Event()
    world.parent_released = set()
    world.writer_gone = trio.Event()
    world.destroyed = trio.Event()
    world.db_settings = dict(world.settings_map, compactor_options=None, garbage_collector_options=None)
    world.g2_store = None  # made by _processes: HeldCreates
    setup.trace.record("world", "settings", grace_s=world.grace_s, crash_rate=world.crash_rate,
                       pause_rate=world.pause_rate)
    store = world_store(world.bucket, "", lambda: SIM_EPOCH_MS)
    for key, data in FOREIGN.items():
        store.put_now(key, data)
    return world


# -- processes ----------------------------------------------------------------------------------


def _release_parent(world: World, name: str) -> None:
    """``name`` no longer uses the parent (once for each :func:`_using_parent`)."""
    if name in world.parent_released:
        return
    world.parent_released.add(name)
    world.parent_users -= 1
    if world.parent_users == 0:
        world.parent_quiet.set()


def _using_parent(world: World, name: str, fn, *args):
    """``fn(world, *args)`` as a process of the parent, counted from now (the spawn) until it
    returns or calls :func:`_release_parent` (the hard destroyer waits for none to be left)."""
    world.parent_users += 1

    async def run() -> None:
        try:
            await fn(world, *args)
        finally:
            _release_parent(world, name)
    return run


async def _writer(world: World) -> None:
    rt, rng = world.runtime("w"), world.choices.stream("workload", "w")
    try:
        async with aio.Db.open(PARENT, world.db_settings, store=world.store("w", PARENT), runtime=rt) as db:
            for i in range(rng.randint(60, 240)):
                wh = await db.put(b"k%03d" % rng.randrange(N_KEYS), b"w:%d:" % i + b"v" * rng.randrange(32))
                if boolean(rng, 0.3):
                    await wh.wait_durable()
                await rt.sleep(rng.uniform(0, 0.2))
        world.outcomes["w"] = "closed"
    except* (FencedError, ClosedError):
        world.outcomes["w"] = "fenced"  # by a destroyer's epoch bump and fence
    except* InvalidDbStateError:
        world.outcomes["w"] = "refused"  # its open met a destroyed manifest (DESTROY-3)
    finally:
        world.writer_gone.set()


async def _reader(world: World) -> None:
    rt, rng = world.runtime("r1"), world.choices.stream("workload", "r1")
    await fastclock.sleep(rng.uniform(0.5, 3.0))
    if not await _wait_for(world, "parent"):
        world.outcomes["r1"] = "gone"
        return
    opts = DbReaderOptions(manifest_poll_interval_s=rng.choice([0.3, 1.0]), checkpoint_lifetime_s=10.0)
    try:
        async with DbReader.open(PARENT, options=opts, store=world.store("r1", PARENT), runtime=rt) as r:
            while not world.writer_gone.is_set():
                _ = {k: v async for k, v in r.scan()}
                await fastclock.sleep(rng.uniform(0.2, 1.0))
        world.outcomes["r1"] = "closed"
    except* InvalidDbStateError:
        world.outcomes["r1"] = "destroyed"  # a reader fails for good on a destroyed database (READ-4)


async def _admin(world: World) -> None:
    rt, rng = world.runtime("admin"), world.choices.stream("workload", "admin")
    ms = ManifestStore(world.store("admin", PARENT), rt)
    if not await _wait_for(world, "parent"):
        world.outcomes["admin"] = "gone"
        return
    for _ in range(rng.randint(1, 4)):
        await fastclock.sleep(rng.uniform(0.5, 5.0))
        try:
            await create_checkpoint(ms, rt, CheckpointOptions(lifetime_s=rng.uniform(3.0, 15.0)))
        except InvalidDbStateError:
            world.outcomes["admin"] = "refused"  # destroyed meanwhile (DESTROY-3)
            return


async def _clone(world: World) -> None:
    rng = world.choices.stream("workload", "clone")
    await fastclock.sleep(rng.uniform(0.5, 3.0))
    if not await _wait_for(world, "parent"):
        world.outcomes["clone"] = "gone"
        return
    rt = world.runtime("clone")
    try:
        await create_clone(world.store("clone", CLONE), world.store("clone", PARENT), rt, None)
    except InvalidDbStateError:
        # The parent was destroyed first (DESTROY-3): the half-made clone (its manifest written,
        # not initialized) is the user's to remove.
        world.outcomes["clone"] = "refused"
        _release_parent(world, "clone")
        await destroy(world.store("hdc", CLONE), world.runtime("hdc"), soft=False)
        return
    _release_parent(world, "clone")  # the clone's own life goes on; it only holds its final checkpoint
    cw_rt = world.runtime("cw")
    async with aio.Db.open(CLONE, world.db_settings, store=world.store("cw", CLONE), runtime=cw_rt) as db:
        for i in range(rng.randint(5, 30)):
            await db.put(b"c%03d" % rng.randrange(8), b"cw:%d" % i)
        await db.flush()
    delay_s = rng.uniform(0.5, 20.0)
    held = world.g2_store if boolean(world.choices.stream("destroy", "create-held"), 0.5) else None
    if held is None:
        await fastclock.sleep(delay_s)
    else:  # the "create held" mode (CREATE_HELD_WAIT_S)
        held.armed = True
        waited = 0.0
        while not held.held.is_set() and waited < CREATE_HELD_WAIT_S:
            await fastclock.sleep(0.5)
            waited += 0.5
        held.armed = False
    try:
        await destroy(world.store("hdc", CLONE), world.runtime("hdc"), soft=False)
    finally:
        if held is not None:
            held.release.set()
    world.outcomes["clone"] = "hard-destroyed"


async def _soft_destroyer(world: World, name: str, at_s: float) -> None:
    await fastclock.sleep(at_s)
    if not await _wait_for(world, "parent"):
        world.outcomes[name] = "gone"
        return
    try:
        await destroy(world.store(name, PARENT), world.runtime(name), soft=True)
        world.outcomes[name] = "destroyed"
    except NotFoundError:
        world.outcomes[name] = "gone"  # GC already removed the other destroyer's database (S1; seed 123)
    world.destroyed.set()


async def _hard_destroyer(world: World) -> None:
    """The parent, hard, once its writer is gone and a soft destroy landed; refused while a
    checkpoint blocks it (DESTROY-1), retried."""
    rng = world.choices.stream("workload", "hdp")
    await world.writer_gone.wait()
    await world.destroyed.wait()
    if world.contract:
        await world.parent_quiet.wait()  # the caller's guarantee (DESTROY-A2): nobody else uses it
        await fastclock.sleep(HARD_DESTROY_DRAIN_S)
    while _exists(world, "parent"):
        try:
            await destroy(world.store("hdp", PARENT), world.runtime("hdp"), soft=False)
            world.outcomes["hdp"] = "hard-destroyed"
            return
        except InvalidDeletionError:
            world.outcomes["hdp"] = "refused"
        except NotFoundError:
            return  # GC removed the database under it (objects left, the manifest gone last)
        await fastclock.sleep(rng.uniform(1.0, 5.0))


#: A GC directory's interval once the world is healed: what is left then is to notice that a
#: destroyed database became ready (its grace over, the clone's 300 s source checkpoint expired)
#: and remove it, well inside :data:`GONE_WITHIN_S`; at the drawn 0.5-2 s, the polls of that wait
#: were half of a seed's events.
HEALED_GC_INTERVAL = "10s"


async def _gc(world: World, name: str, url: str, root: str, grace_s: float) -> None:
    """A standalone GC of one database until the heal; then restarted (the same process) at
    :data:`HEALED_GC_INTERVAL` until the end, unless it finished (the database removed)."""
    await _wait_for(world, root)
    store, rt = (world.g2_store if name == "g2" else world.store(name, url)), world.runtime(name)
    healed = {d: dict(o, interval=HEALED_GC_INTERVAL) for d, o in world.settings_map["garbage_collector_options"].items()}
    drawn, slow = (world.settings.garbage_collector_options,
                   coerce_settings({"garbage_collector_options": healed}).garbage_collector_options)
    for options in ((slow,) if world.healed else (drawn, slow)):
        gc = GarbageCollector(store, rt, options, db_delete_grace_s=grace_s)
        async with trio.open_nursery() as n:
            if not world.healed:
                async def until_healed() -> None:
                    await world.healed_event.wait()
                    n.cancel_scope.cancel()

                n.start_soon(until_healed)
            await run_gc(gc)
            n.cancel_scope.cancel()
        if gc.finished or not world.healed:
            return


async def _processes(world: World, background: trio.Nursery | None) -> None:
    assert background is not None
    rng = world.rng
    world.g2_store = HeldCreates(world, "g2", CLONE)
    background.start_soon(_gc, world, "g1", PARENT, "parent", world.grace_s)
    background.start_soon(_gc, world, "g2", CLONE, "clone", world.grace_s)
    async with trio.open_nursery() as n:
        n.start_soon(_using_parent(world, "w", _writer))
        n.start_soon(_using_parent(world, "r1", _reader))
        n.start_soon(_using_parent(world, "admin", _admin))
        if boolean(rng, 0.8):
            n.start_soon(_using_parent(world, "clone", _clone))
        at = rng.uniform(2.0, 12.0)
        n.start_soon(_using_parent(world, "d1", _soft_destroyer, "d1", at))
        if boolean(rng, 0.5):
            n.start_soon(_using_parent(world, "d2", _soft_destroyer, "d2", at + rng.uniform(0.0, 0.5)))
        if boolean(rng, 0.5):
            n.start_soon(_hard_destroyer, world)


async def _gone(world: World, _background: trio.Nursery | None) -> None:
    """Liveness (DESTROY-6): faults stop; GC finishes the destroyed databases."""
    deadline = trio.current_time() + world.grace_s + GONE_WITHIN_S
    while trio.current_time() < deadline and (_exists(world, "parent") or _exists(world, "clone")):
        await fastclock.sleep(1.0)
    # slatedb check on what is left (a database gone entirely is skipped; a soft-destroyed one
    # that GC has not finished must still be a healthy database).
    await check_world(world.bucket, ["parent", "clone"], SIM_EPOCH_MS + int(trio.current_time() * 1000))


def _oracles(world: World, failed: bool) -> list[str]:
    if failed:
        return []
    return (destroyed_and_gone(world.bucket, "parent/", foreign=FOREIGN_KEYS) + destroyed_and_gone(world.bucket, "clone/")
            + foreign_intact(world.bucket, FOREIGN))


SCENARIO = Scenario(
    "destroy", _build, _processes, liveness=_gone, heals=True, oracles=_oracles,
    figures=lambda w: {"outcomes": dict(sorted(w.outcomes.items()))},
    fault_counts=lambda setup, _world: fault_counts(setup.trace),
    checkers=(Checker("manifest", manifest_checks),
              Checker("destroy", lambda setup: DestroyChecks(setup.bucket, ("parent/", "clone/"), FOREIGN_KEYS))),
    processes_declared=("w", "r1", "admin", "clone", "cw", "hdc", "d1", "d2", "hdp", "g1", "g2"),
    fault_kinds=("fault.transient", "store.reply-lost", "fault.stall"))


def run_destroy_workload(seed: int, *, faults: str = "swarm", bugs: frozenset[str] = frozenset(),
                         choices: Choices | None = None, contract: bool = True) -> WorldResult:
    """Run one world; a violated invariant or a database left behind is reported in the result.
    ``contract=False``: the world that breaks DESTROY-A1/A2 (:data:`BEYOND_CONTRACT_GRACE_CHOICES_S`),
    for regression seeds of the defences beyond them; some of its seeds fail by design (destroy.md
    "Assumptions")."""
    return run_world(SCENARIO, seed, choices=choices, bugs=bugs, faults=faults, contract=contract)


__all__ = ["SCENARIO", "run_destroy_workload"]
