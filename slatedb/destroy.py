"""Destroying a database (RFC 000 "Deleting a Database"; spec/protocols/destroy.md).

A database may hold checkpoints that other databases (its clones) rely on, so it is not simply
deleted. :func:`destroy` does one of:

**soft** (``soft=True``): claim write ownership by bumping ``writer_epoch`` (with a writer
checkpoint of that epoch, as a writer's open does, so that a retried bump recognises its own)
and fencing the WAL (any live writer is fenced, FENCE-2), then in one manifest write that only lands while that
epoch is still the latest: delete the writer checkpoint and set ``destroyed_at_s`` to now
(DESTROY-2). Nothing is deleted; the garbage collector finishes once the grace period has
passed and no checkpoint is active (it releases the clone's final checkpoints on its parents,
then deletes every object). From then on a writer, a checkpoint or a reader refuses to open
(:class:`InvalidDbStateError`, DESTROY-3).

**hard** (``soft=False``; the caller makes sure no writer is running): refuse with
:class:`InvalidDeletionError` while any unexpired checkpoint other than a writer checkpoint exists
(DESTROY-1); set ``destroyed_at_s`` if unset (CAS, the checkpoint check redone on every
attempt); release the database's final checkpoints on its external databases (a clone's
parents; ``missing_ok``, DESTROY-5); delete every object of the database's layout under the
root except the latest manifest, list again until a listing shows nothing else of it (objects a
concurrent GC wrote after the first listing are deleted too), then delete the latest manifest
(DESTROY-4: an interrupted hard destroy can be re-run). Objects under the root that are not the
database's (another database nested below it, a user's file) stay (DESTROY-8).

Writer checkpoints do not block a hard destroy: the writer they belong to is gone by the
caller's guarantee (the soft path deletes the writer checkpoint explicitly for the same reason).
"""

from __future__ import annotations

from slatedb.checkpoint import delete_checkpoint
from slatedb.batch import validate_flag
from slatedb.lsm.paths import SstLocator
from slatedb.errors import BoundaryVanishedError, CorruptionError, FencedError, InvalidDbStateError, NotFoundError
from slatedb.format.layout import DB_OBJECT_DIRECTORIES, is_db_key
from slatedb.format.sst import SstOptions
from slatedb.gc.destroyed import delete_latest_last, delete_shard, keep_pinned_shards, shard_pinned, shard_root
from slatedb.manifest.edit import WriterFence
from slatedb.manifest.edits import BumpWriterEpoch, DeletionRefused, HardDestroy, SoftDestroy
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.objstore.url import resolve_store
from slatedb.runtime import Runtime, probes, switches
from slatedb.runtime.anyloop import on_any_loop
from slatedb.runtime.production import default_runtime
from slatedb.wal.writer import WalWriter
from slatedb.redact import shown_url


async def destroy(store: ObjectStore, runtime: Runtime, *, soft: bool) -> None:
    """Destroy the database at ``store`` (see the module docstring). A soft destroy of a
    database already destroyed does nothing; a hard destroy of an empty path does nothing.
    :class:`NotFoundError` when there is no database (objects but no manifest). ``soft`` must be
    a bool: a hard destroy deletes everything, so ``None`` or ``0`` must not ask for one."""
    validate_flag("soft", soft)
    if soft:
        await _soft(store, runtime)
    else:
        await _hard(store, runtime)


@on_any_loop
async def destroy_url(url: str, *, soft: bool, runtime: Runtime | None = None) -> None:
    """:func:`destroy` of the database at ``url``; the store is opened and closed here."""
    validate_flag("soft", soft)
    if runtime is None:
        runtime = default_runtime()
    store = resolve_store(url, clock_ms=runtime.now_ms)
    try:
        await destroy(store, runtime, soft=soft)
    finally:
        await store.aclose()


async def _latest(ms: ManifestStore, store: ObjectStore) -> StoredManifest:
    latest = await ms.read_latest()
    if latest is None:
        raise NotFoundError(f"no database at {shown_url(store.url)} (no manifest)")
    return latest


# -- soft ------------------------------------------------------------------------------------


async def _soft(store: ObjectStore, rt: Runtime) -> None:
    ms = ManifestStore(store, rt)
    try:
        await _soft_steps(store, rt, ms)
    except (BoundaryVanishedError, InvalidDbStateError):
        # A hard destroy deleted the boundary file under one of our commits (destroy seed 115;
        # the commit reports it as InvalidDbStateError), or GC removed the database between our
        # read and our commit: it is destroyed or gone, which is what we were asked for. Anything
        # else stands (RFC 004: GC never deletes boundary files of a live database).
        latest = await ms.read_latest()
        if latest is not None and not latest.manifest.destroyed_at_s:
            raise
        rt.event("destroy", destroy_step="already", soft=True, destroyed_at_s=latest.manifest.destroyed_at_s if latest else 0)


async def _soft_steps(store: ObjectStore, rt: Runtime, ms: ManifestStore) -> None:
    while True:
        latest = await _latest(ms, store)
        if latest.manifest.destroyed_at_s:
            rt.event("destroy", destroy_step="already", soft=True, destroyed_at_s=latest.manifest.destroyed_at_s)
            return
        # Step 1: claim write ownership (epoch bump, then the WAL fence).
        bumped = (await ms.commit(BumpWriterEpoch(rt.new_uuid(), allow_destroyed=True))).stored
        epoch = bumped.manifest.writer_epoch
        rt.event("destroy", destroy_step="epoch", soft=True, epoch=epoch, manifest=bumped.id)
        fence = _bug_no_fence if switches.SOFT_DESTROY_NO_FENCE in rt.bugs else _fence
        try:
            fence_id = await fence(store, rt, ms, bumped, epoch)
        except FencedError:
            rt.event("destroy", destroy_step="fenced", soft=True, epoch=epoch)
            continue  # a newer writer opened meanwhile: claim again
        rt.event("destroy", destroy_step="fence", soft=True, epoch=epoch, id=fence_id)

        # Steps 2 and 3 in one write: drop the writer checkpoint, set destroyed_at_s.
        try:
            done = (await ms.commit(SoftDestroy(WriterFence(epoch)))).stored
        except FencedError:
            rt.event("destroy", destroy_step="epoch_moved", soft=True, epoch=epoch)
            continue
        rt.event("destroy", destroy_step="marked", soft=True, manifest=done.id, destroyed_at_s=done.manifest.destroyed_at_s)
        return


async def _fence(store: ObjectStore, rt: Runtime, ms: ManifestStore, bumped: StoredManifest, epoch: int) -> int:
    """Soft destroy step 1, second half: fence the WAL at ``epoch`` (any live writer is fenced)."""
    m = bumped.manifest
    wal = await WalWriter.fence(store=store, runtime=rt, manifests=ms, epoch=epoch,
                                floor_id=max(m.replay_after_wal_id, m.wal_id_last_seen), sst_options=SstOptions())
    return wal.fence_id


async def _bug_no_fence(store: ObjectStore, rt: Runtime, ms: ManifestStore, bumped: StoredManifest,
                        epoch: int) -> int:
    """Catalogued bug ``soft-destroy-no-fence`` (sim/scenarios/catalogue.py): the epoch bump alone,
    no WAL fence, so a live writer goes on creating WAL objects after the mark until it polls
    the manifest (DESTROY-2)."""
    return 0


# -- hard ------------------------------------------------------------------------------------


async def _no_manifest(store: ObjectStore, rt: Runtime) -> None:
    """Step 1 without a manifest: a path holding no object of a database's layout is done
    (whatever else lies there: a database nested below it, a user's file, DESTROY-8); objects of
    the layout but no manifest is not a database."""
    left = [m for m in await retry_transient(rt, lambda: store.list(""), what="list") if is_db_key(m.key)]
    roots = sorted({r for r in (shard_root(m.key) for m in left) if r is not None})
    others = [m for m in left if shard_root(m.key) is None]
    if others:
        raise NotFoundError(f"{shown_url(store.url)} holds {len(others)} objects (e.g. {others[0].key}) but no manifest: not a "
                            f"database, not deleting")
    # Only shard databases of a sharded load are left (no load is open: its marker would be
    # listed above): the ones an earlier destroy kept because a clone pinned them (destroy.md
    # "Shards another database still reads"). Those still pinned stay; the rest go now.
    kept = 0
    for root in roots:
        if await shard_pinned(store, rt, root):
            kept += 1
            continue
        rt.probe(probes.DESTROY_KEPT_SHARD_REMOVED)
        count = await delete_shard(store, rt, root)
        rt.event("destroy", destroy_step="shard_removed", soft=False, root=root, objects=count)
    rt.event("destroy", destroy_step="already", soft=False)
    if not kept:
        await store.tidy_destroyed_root(DB_OBJECT_DIRECTORIES)  # a re-run finishes an interrupted tidy


async def _hard(store: ObjectStore, rt: Runtime) -> None:
    ms = ManifestStore(store, rt)
    latest = await ms.read_latest()
    if latest is None:
        await _no_manifest(store, rt)
        return

    # Steps 1 and 2: no active checkpoint, then destroyed_at_s (checked again on every CAS try).
    try:
        marked = (await ms.commit(HardDestroy(label=str(store.url)))).stored
    except DeletionRefused as e:
        rt.event("destroy", destroy_step="refused", soft=False, checkpoints=e.checkpoints)
        raise
    except (CorruptionError, InvalidDbStateError):  # the commit's "no database" (no manifest) is the latter
        if await ms.read_latest() is not None:
            raise
        # GC removed the (soft-destroyed) database between our read and our mark: step 1 again.
        await _no_manifest(store, rt)
        return
    rt.event("destroy", destroy_step="marked", soft=False, manifest=marked.id, destroyed_at_s=marked.manifest.destroyed_at_s)

    # Release the final checkpoints this database holds on its external databases.
    locator = SstLocator(store, rt)
    try:
        for e in marked.manifest.external_dbs:
            if e.final_checkpoint_id is None:
                continue
            ext = await locator.root_of(e.path)
            ext_ms = ManifestStore(ext, rt)
            if await ext_ms.read_latest() is None:
                continue  # that database is gone already
            await delete_checkpoint(ext_ms, rt, e.final_checkpoint_id, missing_ok=True)
            rt.event("destroy", destroy_step="release", soft=False, path=e.path, id=str(e.final_checkpoint_id))
    finally:
        await locator.aclose()

    # Steps 4 and 5: everything of the database but the latest manifest, then the latest manifest
    # -- only once a listing taken after the other deletes shows nothing else of it (objects not
    # of its layout stay, DESTROY-8): a GC pass that read the database before the mark may still
    # create a boundary file after our first listing (seed 3).
    async def list_keys() -> list[str]:
        return [m.key for m in await retry_transient(rt, lambda: store.list(""), what="list")]

    async def delete(key: str) -> None:
        await retry_transient(rt, lambda: store.delete(key), what=f"delete {key}")

    deleted = await delete_latest_last(rt, str(store.url), keep_pinned_shards(store, rt, list_keys), delete)
    rt.event("destroy", destroy_step="deleted", soft=False, objects=deleted)
    await store.tidy_destroyed_root(DB_OBJECT_DIRECTORIES)  # a local root: no lock files, no empty directories
