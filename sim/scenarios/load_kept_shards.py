"""The shards a destroy keeps for another reader of them (spec/protocols/destroy.md "Shards another
database still reads", LOAD-9, DESTROY-4): the ``load`` scenario's epilogue in its sharded seeds
whose union committed (``sim/scenarios/load.py``).

A sharded load's result reads its rows from the shard databases under its own ``shards/``; a clone
of it pins every shard it names (clone.md step 4), and once its GC detached it from the union,
those pins are all that keep its rows. A destroy of the union keeps a shard that holds an active
checkpoint; the path then holds no database, and the clean-up of ended loads (bulk-load.md step
8: ``slatedb.spark.collect_loads``, every sharded load's begin) deleted it under its holder
(``tests/spark/test_sharded.py`` shows it with a clone). Here the holder is a reader's checkpoint
on one shard (a clone needs the union to hold no SST of its own to detach, and the world's
writer always writes into the union): the same judge (``shard_pinned``) keeps either.

After the final read (every verdict of the run is taken before this), the epilogue process ``e``
works on the world's bucket without faults, as an operator would after the job:

1. it takes a checkpoint on one of the union's shards (30 s lifetime) and reads the shard at
   it;
2. it hard-destroys the union (refused while another checkpoint is active on the union, a
   crashed plain load's, DESTROY-1: the epilogue ends there, event ``kept_shards``
   ``step=refused``); the pinned shard stays (``keep_pinned_shards``);
3. a clean-up of the path, which now holds no database: ``collect_ended_shards`` or the hard
   destroy again (H1 on a path holding only shard databases), drawn;
4. **LOAD-9**: the shard reads at the checkpoint what it read in step 1 (the old step 8 deleted
   it: catalogued as ``ended-shards-ignore-pins``);
5. it lets go of the checkpoint (deleted, or left to expire; and waits out any checkpoint the
   union's creation left on the shard to expire, its ephemeral source checkpoint when deleting it
   failed), then cleans up again (step 3's draw): **DESTROY-4**: no object of a database's layout
   is left at the path.
"""

from __future__ import annotations

from typing import Any

import trio

from slatedb.checkpoint import CheckpointOptions, create_checkpoint, delete_checkpoint
from slatedb.destroy import destroy
from slatedb.errors import InvalidDeletionError, SlateDBError
from slatedb.format.layout import is_db_key
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.memory import MemoryStore
from slatedb.reader.aio import DbReader
from slatedb.spark.sharded import collect_ended_shards

from sim.world.runtime import SimRuntime

#: The reader's checkpoint on a shard (long enough for the fault-free steps in between, which take
#: well under a virtual second; short, so that letting it expire adds little virtual time).
LIFETIME_S = 30.0


def applies(world: Any, latest: Any) -> bool:
    """A sharded load committed and the latest manifest (initialized) names its shards."""
    return (any(ld.sharded and ld.outcome == "committed" for ld in world.loads) and latest is not None
            and latest.initialized and any(_is_shard(e.path) for e in latest.external_dbs))


def _is_shard(path: str) -> bool:
    return path.startswith("shards/")


async def _read(url: str, cid: Any, store: Any, rt: SimRuntime) -> dict:
    async with DbReader.open(url, cid, settings={"block_cache_size_bytes": 0}, store=store, runtime=rt) as r:
        return {k: v async for k, v in r.scan()}


async def kept_shards(world: Any, latest: Any) -> list[str]:
    """The epilogue (module docstring); its violations, as ``"ID: what"`` messages."""
    setup = world.setup
    rng = setup.choices.stream("kept-shards")
    rt = SimRuntime("e", setup.choices, setup.trace, bugs=setup.bugs)
    store = MemoryStore(setup.bucket, rt.now_ms, url="memory://sim", registry=world.registry)
    paths = sorted(e.path for e in latest.external_dbs if _is_shard(e.path))
    path = paths[rng.randrange(len(paths))]
    first, second = rng.choice(["collect", "destroy"]), rng.choice(["collect", "destroy"])
    let_go = rng.choice(["delete", "expire"])
    url = f"memory://sim/{path}"
    shard = store.open_url(url)

    async def clean_up(how: str) -> None:
        if how == "collect":
            await collect_ended_shards(store, rt)
        else:
            await destroy(store, rt, soft=False)

    cid = (await create_checkpoint(ManifestStore(shard, rt), rt, CheckpointOptions(lifetime_s=LIFETIME_S))).id
    before = await _read(url, cid, shard, rt)
    try:
        await destroy(store, rt, soft=False)
    except InvalidDeletionError as e:  # another checkpoint on the union (a crashed plain load's)
        rt.event("kept_shards", step="refused", why=str(e))
        return []
    rt.event("kept_shards", step="destroyed", shard=path, then=first)
    try:
        await clean_up(first)
    except SlateDBError as e:
        return [f"DESTROY-4: a clean-up ({first}) of the destroyed union's path, {path} pinned, failed: "
                f"{type(e).__name__}: {e}"]
    try:
        after = await _read(url, cid, shard, rt)
    except SlateDBError as e:
        return [f"LOAD-9: after a destroy of the union and a clean-up ({first}), {path}, pinned by checkpoint "
                f"{cid}, cannot be read: {type(e).__name__}: {e}"]
    if after != before:
        return [f"LOAD-9: after a destroy of the union and a clean-up ({first}), {path} at checkpoint {cid} reads "
                f"{len(after)} rows, {len(before)} before"]
    if let_go == "delete":
        await delete_checkpoint(ManifestStore(shard, rt), rt, cid)
    else:
        await trio.sleep(LIFETIME_S + 1.0)
    # A checkpoint the union's creation left on the shard to expire (its ephemeral source
    # checkpoint, five minutes, when deleting it failed) pins it until then: wait that out.
    ends = [c.checkpoint_expire_time_s for c in (await ManifestStore(shard, rt).read_latest()).manifest.checkpoints
            if c.checkpoint_expire_time_s]
    # Expired once its end is older than now in whole seconds (``is_expired``): sleep half a second
    # past the next second, since a sleep to the boundary itself may read back a millisecond short
    # (float time truncated to ms; load seed 1771 judged the checkpoint active at its last second).
    if ends and max(ends) >= rt.now_ms() // 1000:
        await trio.sleep(max(ends) + 1.5 - rt.now_ms() / 1000)
    rt.event("kept_shards", step="released", how=let_go, then=second)
    try:
        await clean_up(second)
    except SlateDBError as e:
        return [f"DESTROY-4: with {path} released, a clean-up ({second}) of the destroyed union's path failed: "
                f"{type(e).__name__}: {e}"]
    left = sorted(k for k in setup.bucket.objects if is_db_key(k))
    if left:
        return [f"DESTROY-4: with {path} released and a clean-up ({second}), {len(left)} objects of a database "
                f"are left at the destroyed union's path, e.g. {left[0]}"]
    return []
