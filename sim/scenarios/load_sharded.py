"""A sharded bulk load (the union route, spec/protocols/bulk-load.md S1-S4) racing a live
writer for the database at the URL: the ``load`` scenario's sharded seeds (``sim/scenarios/load.py``).

The writer ``w`` opens the URL after a random delay; the sharded load's driver ``s1`` begins at
a random moment too, so each of these happens in some seeds:

* the writer's database exists when the load begins: ``begin_sharded`` refuses it;
* the load begins first, the writer creates the database while the shards are staged: the
  commit is refused (another process created the database first) and aborted;
* the load's union creates the database first: the writer cannot open it until the union is
  initialized (it retries), then writes over it, every write's seq above the load's.

Each partition stages a shard database by one attempt, or one killed part-way and retried, or
two speculative attempts where the driver takes the first to finish and the other may still run
after the load ended (committed or aborted): it must find the open marker gone and delete its
own shard (LOAD-10; probe ``load.stage-ended``). After a commit the driver collects the losing
attempts' shards (``collect_shards(min_age_s=0)``, as the Spark driver does); a refused or
failed commit is aborted (``abort_sharded``). The driver may crash; an operator then aborts the
load in some seeds. The oracle is the plain loads' (:func:`sim.checks.load.check`: LOAD-1,
LOAD-4, DUR-1 over every manifest, with the shards' SSTs read where the union's manifest names
them) and LOAD-10 (:func:`sim.checks.load_leftovers.leftovers`).
"""

from __future__ import annotations

import math
import re
from typing import Any

import trio

from slatedb.format.manifest import decode_manifest_v2
from slatedb.spark.load import LoadEndedError, LoadRefusedError
from slatedb.spark.sharded import abort_sharded, begin_sharded, collect_shards, commit_sharded, stage_shard

from sim.checks.load import Load
from sim.scenarios.load_tasks import WorldStore, operator_abort, partition_draws, process_io, run_attempt, take
from sim.world.choices import boolean
from sim.world.engine import Crash, crashable

__all__ = ["WorldStore", "sharded_driver", "sharded_loads"]

_ROOT_MANIFEST = re.compile(r"^manifest/[0-9]{20}\.manifest$")


def sharded_loads(choices: Any) -> tuple[list[Load], float, float] | None:
    """The loads of a sharded seed (30 % of the seeds, stream ``sharded``; each mode from a stream
    of its own, so the seeds without it keep their draws), with the writer's and the plain load's
    delays; None for a seed without a sharded load:

    * ``s1`` races the writer for the URL, the writer opening 0-2 s late;
    * in 40 % of them a plain load ``l1`` races them both, beginning up to 4 s later than usual;
    * in half a second sharded load ``s2`` begins in turn (LOAD-13); in half of the others the
      operator's re-run: ``s1``'s driver crashes and is aborted, ``s2`` runs the job again, the
      writer opens once the loads are done, so ``s2`` may find the URL free and commit (unless
      ``s1``'s commit landed first)."""
    sharded = choices.stream("sharded")
    if not boolean(sharded, 0.3):
        return None
    loads, writer_delay_s, plain_delay_s = [Load("s1", sharded=True)], sharded.uniform(0.0, 2.0), 0.0
    mixed = choices.stream("sharded-mixed")
    if boolean(mixed, 0.4):
        loads, plain_delay_s = [Load("l1"), *loads], mixed.uniform(0.0, 4.0)
    if boolean(choices.stream("sharded-second"), 0.5):
        loads.append(Load("s2", sharded=True))
    elif boolean(choices.stream("sharded-second-alone"), 0.5):
        loads.append(Load("s2", sharded=True))
        writer_delay_s = math.inf
        loads[-2].crash_then_abort = True
    return loads, writer_delay_s, plain_delay_s


async def sharded_driver(world: Any, load: Load, store_of, keys_all: tuple[bytes, ...], sst_options: Any,
                         after: Load | None = None) -> None:
    """The driver ``load.name`` of one sharded load and its task attempts (module docstring);
    with ``after``, a second sharded load into the same URL, begun once ``after``'s driver called
    its commit or ended (:func:`_second_start`)."""
    setup = world.setup
    rng = setup.choices.stream("driver", load.name)
    await trio.sleep(rng.uniform(0.0, 0.4))
    if after is not None:
        await _second_start(world, rng, after)
    partitions = rng.randint(1, 3)
    wait_s = rng.uniform(0.0, 0.8)
    crash = Crash(rng.uniform(0.05, 1.5)) if boolean(rng, 0.2) else None
    abort = boolean(rng, 0.6)
    if load.crash_then_abort:  # the job an operator aborts, then re-runs (the second load)
        crash = crash or Crash(setup.choices.stream("driver-crash", load.name).uniform(0.05, 1.5))
        abort = True
    rt, store = process_io(world, load.name, store_of)
    plan_box: list = []
    load.sharded = True

    async def body() -> str:
        try:
            plan = await begin_sharded(store, rt)
        except LoadRefusedError as e:
            load.outcome, load.why = "refused", str(e)
            return load.outcome  # nothing written: no load id
        plan_box.append(plan)
        load.seq, load.load_id = plan.seq, plan.load_id
        keys = sorted(k for k in keys_all if boolean(rng, 0.7)) or [keys_all[0]]
        size = -(-len(keys) // partitions)
        parts = [keys[i:i + size] for i in range(0, len(keys), size)]  # range-partitioned: disjoint shards
        results: list = [None] * len(parts)
        rows: dict = {}
        async with trio.open_nursery() as tasks:
            for p, part in enumerate(parts):
                tasks.start_soon(_partition, world, load, plan, p, part, results, rows, store_of, sst_options)
        # Every partition has its result; a losing speculative attempt may still be staging (the
        # commit does not wait for it, as Spark's does not).
        await trio.sleep(wait_s)
        load.rows = rows
        load.commit_called_s = trio.current_time()
        load.outcome = "committing"
        try:
            got = await commit_sharded(store, rt, plan, results)
        except LoadRefusedError as e:  # a CloneMismatchError escaped here once (a writer made the database mid-union)
            load.outcome, load.why = "refused", str(e)
            await abort_sharded(store, rt, plan)
            load.ended = True
            return load.outcome
        load.outcome = "committed" if got.shards else "empty"
        load.returned_s = trio.current_time()
        await collect_shards(store, rt, min_age_s=0)
        load.ended = True
        return load.outcome

    outcome = await crashable(world, load.name, store, crash, body)
    if outcome == "crashed":
        if load.outcome == "committing":
            load.outcome = "crashed"  # it may have committed: the manifests say
        load.done = True
        if plan_box and abort:
            load.aborted = True
            await operator_abort(world, load, rng, store_of, lambda s, r: abort_sharded(s, r, plan_box[0]))
    load.done = True


async def _partition(world: Any, load: Load, plan: Any, p: int, keys: list, results: list, rows: dict,
                     store_of, sst_options: Any) -> None:
    """One partition: one attempt, a killed one and its retry, or two speculative ones of which
    the first to finish is taken (the other runs on in the world's nursery)."""
    rng, shape, deletes = partition_draws(world, load, p, keys, ["one", "killed", "speculative", "speculative"])

    async def stage(store: Any, rt: Any, a: int, vals: list) -> Any:
        try:
            res = await stage_shard(store, rt, plan, p, a, keys, vals, sst_options=sst_options, sst_size_bytes=200)
        except LoadEndedError:
            return None  # LOAD-10: it found the load over and deleted its shard
        _note_shard(world, load, res)
        return res

    async def attempt(a: int, kill_s: float | None, delay_s: float = 0.0) -> Any:
        await trio.sleep(delay_s)
        return await run_attempt(world, load, p, a, keys, deletes, kill_s, store_of, stage)

    picked = None
    if shape == "speculative":
        first = trio.Event()
        both: list = []

        async def run(a: int, delay_s: float) -> None:
            got = await attempt(a, None, delay_s)
            if got is not None:
                both.append(got)
                first.set()

        world.background.start_soon(run, 0, 0.0)
        world.background.start_soon(run, 1, rng.uniform(0.0, 2.0))  # a straggler, often past the end
        await first.wait()
        picked = both[0]
    else:
        picked = await attempt(0, rng.uniform(0.0, 0.05) if shape == "killed" else None)
        if picked is None:
            picked = await attempt(1, None)
    take(picked, p, keys, results, rows)


async def _second_start(world: Any, rng: Any, first: Load) -> None:
    """A second sharded load (``s2``, in some sharded seeds) begins in turn, as an operator
    re-running the job that seems stuck: once the first one's driver called its commit and the URL
    holds a manifest (the first load's union being made, or the writer's database), or the first
    driver ended, a drawn moment later. LOAD-13: its begin must not destroy a union being made."""
    objects = world.setup.bucket.objects
    while not first.done and (first.commit_called_s is None or not any(_ROOT_MANIFEST.match(k) for k in objects)):
        await trio.sleep(0.01)
    await trio.sleep(rng.uniform(0.0, 0.1))


def _note_shard(world: Any, load: Load, res: Any) -> None:
    """What the oracle needs of a staged shard: its SSTs' infos (read from the fault-free bucket)."""
    if res.url is None:
        return
    prefix = res.url.split("memory://sim/", 1)[1].rstrip("/") + "/manifest/"
    objects = world.setup.bucket.objects
    for key in [k for k in objects if k.startswith(prefix)]:
        m = decode_manifest_v2(bytes(objects[key][0]), key)
        load.staged_ids.update(s.id for s in m.ssts)
        load.staged_infos.update(s.info for s in m.ssts)
