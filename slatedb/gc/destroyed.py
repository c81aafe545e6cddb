"""Removing a soft-destroyed database (RFC 000 § "Garbage Collector", § "Deleting a Database").

GC removes a database once ``destroyed_at_s`` is set, the grace period has passed and no
checkpoint is active (an unexpired checkpoint is someone's promise that the data stays). A
clone first releases the final checkpoints it holds on its parents, so their GC may reclaim the
shared SSTs. Then every object of the database goes, the latest manifest last: a GC that stops
half-way leaves a database still marked destroyed, and the next pass finishes the job.

Other processes may still be writing while the objects go: a GC pass (this one's or another
process's) that read the manifest before the mark can create a boundary file after the
destroyer's listing (destroy seed 3). So the latest manifest is deleted only once a listing taken
after every other delete shows nothing else (:func:`delete_latest_last`, shared with the hard
destroy): every object that lands before that listing is deleted before the manifest. A request
still on the wire then (a stalled write of a process that read the database before the mark) can
land after the latest manifest is gone; nothing a destroyer does can prevent that one.

Only the database's own objects are removed (:func:`slatedb.format.layout.is_db_key`, DESTROY-8):
anything else under the root (another database nested below it, a user's file) is not this
database's to delete. GC lists the directories those lie in (``manifest/``, ``wal/``,
``compacted/``, ``compactions/``, ``gc/``, and a bulk load's ``bulk-load/`` and ``shards/``:
before, it left a load's intents and shard databases under the root for ever). The boundary files go too -- the one exception to
BOUNDARY-2: a database created again at the path starts at manifest 1 and must not find an old
boundary above it; a stale process that had seen them gets ``BoundaryVanishedError``.
"""

from __future__ import annotations

from typing import Awaitable, Callable

from slatedb.checkpoint import active_checkpoints, delete_checkpoint
from slatedb.lsm.paths import SstLocator
from slatedb.format.types import ExternalDb
from slatedb.manifest.store import (
    MANIFEST_DIR,
    MANIFEST_SUFFIX,
    ManifestStore,
    StoredManifest,
    parse_id,
    read_boundary_versioned,
)
from slatedb.objstore.base import ObjectStore
from slatedb.format.layout import DB_OBJECT_DIRECTORIES, SHARDS_DIR, is_db_key
from slatedb.errors import CorruptionError, InvalidDbStateError, ObjectNotFoundError
from slatedb.manifest.checkpoints import active_checkpoints as _active
from slatedb.objstore.retry import retry_transient
from slatedb.runtime import Runtime, probes, switches

#: Listings :func:`delete_latest_last` takes before it gives up on a database whose objects keep
#: appearing (a process still writing to it): the latest manifest stays, a re-run finishes.
REMOVE_ROUNDS = 5


def _manifest_id(key: str) -> int | None:
    return parse_id(key, MANIFEST_DIR, MANIFEST_SUFFIX)


def _removal_order(key: str) -> tuple[bool, int, str]:
    """Data and other metadata first, then the manifests in ascending id order."""
    mid = _manifest_id(key)
    return (mid is not None, mid or 0, key)


async def delete_latest_last(runtime: Runtime, what: str, list_keys: Callable[[], Awaitable[list[str]]],
                             delete: Callable[[str], Awaitable[None]]) -> int:
    """Delete every key of the database's own layout (:func:`is_db_key`) ``list_keys`` returns,
    the latest manifest (the highest id listed) last and only once a listing taken after every
    other delete holds nothing else of the database (destroy.md H4/H5, S5; DESTROY-4): an object
    that landed after an earlier listing (a GC's boundary file, a straggling commit) is found and
    deleted while the manifest still marks the database as one to destroy. Any other key listed
    (a database nested under the root, a user's file) is left where it is (DESTROY-8). Returns
    how many objects were deleted. :class:`InvalidDbStateError` when objects still appear after
    :data:`REMOVE_ROUNDS` listings: some process is still writing; the latest manifest is left,
    so running the destroy again finishes the job."""
    ours = _bug_every_key if switches.DESTROY_DELETES_FOREIGN in runtime.bugs else is_db_key
    count = 0
    for round_no in range(REMOVE_ROUNDS):
        listed = await list_keys()
        keys = sorted((k for k in listed if ours(k)), key=_removal_order)
        if len(keys) < len(listed) and round_no == 0:
            foreign = sorted(k for k in listed if not ours(k))
            runtime.probe(probes.DESTROY_FOREIGN_KEPT)
            runtime.event("destroy_foreign_kept", root=what, objects=len(foreign), keys=foreign[:3])
        manifests = [k for k in keys if _manifest_id(k) is not None]
        latest = manifests[-1] if manifests else None
        others = [k for k in keys if k != latest]
        if not others:
            if latest is not None:
                await delete(latest)
                count += 1
            return count
        if round_no:
            runtime.probe(probes.DESTROY_LATE_OBJECTS)
            runtime.event("destroy_late_objects", root=what, objects=len(others), keys=others[:3])
        for key in others:
            await delete(key)
            count += 1
    raise InvalidDbStateError(f"{what}: objects still appear after {REMOVE_ROUNDS} listings while the database "
                              f"is being destroyed (a process still writes to it); its latest manifest is "
                              f"kept, run the destroy again")


def shard_root(key: str) -> str | None:
    """``shards/<load>/<shard>`` of a key of a sharded load's shard database, else None."""
    if not key.startswith(SHARDS_DIR) or not is_db_key(key):
        return None
    return key.rsplit("/", key.count("/") - 2)[0]


async def shard_pinned(store: ObjectStore, runtime: Runtime, root: str) -> bool:
    """Does the shard database at ``<store>/<root>`` hold an active checkpoint (LOAD-9)? A clone
    of a sharded load's union pins every shard it names (clone.md step 4). One whose manifest is
    gone or does not decode pins nothing (nobody can read a checkpoint there). A pinned one is
    reported (event ``destroy_shard_kept``)."""
    url = f"{store.url.rstrip('/')}/{root}"
    shard = store.open_url(url)
    try:
        latest = await ManifestStore(shard, runtime).read_latest()
    except CorruptionError:
        latest = None
    finally:
        await shard.aclose()
    holders = _active(latest.manifest, runtime.now_ms() // 1000) if latest is not None else ()
    if holders:
        runtime.event("destroy_shard_kept", url=url, checkpoints=[str(c.id) for c in holders])
    return bool(holders)


async def delete_shard(store: ObjectStore, runtime: Runtime, root: str) -> int:
    """Delete every object under ``<root>/`` (a shard database), its manifests last: a shard
    half deleted has no manifest only once nothing else of it is left. Returns the count."""
    metas = await retry_transient(runtime, lambda: store.list(f"{root}/"), what=f"list {root}/")
    keys = sorted((m.key for m in metas), key=lambda k: (k[len(root) + 1:].startswith(MANIFEST_DIR), k))
    for key in keys:  # an absent key (deleted meanwhile) is a success (ObjectStore.delete)
        await retry_transient(runtime, lambda: store.delete(key), what=f"delete {key}")
    return len(keys)


def keep_pinned_shards(store: ObjectStore, runtime: Runtime,
                       list_keys: Callable[[], Awaitable[list[str]]]) -> Callable[[], Awaitable[list[str]]]:
    """``list_keys`` without the objects of a shard database (``shards/<load>/<shard>/``) that
    holds an active checkpoint (destroy.md "Shards another database still reads", LOAD-9):
    a clone of a sharded load's union pins every shard it names (clone.md step 4) and, its entry
    for the union holding no SST, detaches from the union and keeps only those pins -- a destroy
    of the union deleting its shards took the clone's rows. The database's own final checkpoints
    there are released before (H3, S5), so any left are another database's. Each shard is judged
    once, at the first listing that shows it (:func:`shard_pinned`)."""
    pinned: dict[str, bool] = {}

    async def listing() -> list[str]:
        keys: list[str] = []
        for key in await list_keys():
            root = shard_root(key)
            if root is not None:
                if root not in pinned:
                    pinned[root] = await shard_pinned(store, runtime, root)
                if pinned[root]:
                    continue
            keys.append(key)
        return keys

    return listing


def _bug_every_key(key: str) -> bool:
    """Catalogued bug ``destroy-deletes-foreign`` (sim/scenarios/catalogue.py): every listed key
    counts as the database's, as before DESTROY-8 -- a hard destroy (which lists the whole root)
    deletes the databases nested under it and the user's files there."""
    return True


def ready_to_destroy(latest: StoredManifest, now_ms: int, grace_s: float) -> bool:
    """RFC 000: destroyed, past ``destroyed_at_s + db_delete_grace``, no active checkpoints."""
    m = latest.manifest
    if not m.destroyed_at_s:
        return False
    if now_ms / 1000 <= m.destroyed_at_s + grace_s:
        return False
    return not active_checkpoints(m, now_ms // 1000)


async def release_parent_checkpoint(locator: SstLocator, runtime: Runtime, db: ExternalDb) -> bool:
    """Delete this database's final checkpoint from the external (parent) database ``db`` names;
    True if the parent has a manifest (then the checkpoint is gone, whether or not it was there)."""
    if db.final_checkpoint_id is None:
        return False
    root = await locator.root_of(db.path)
    parent = ManifestStore(root, runtime)
    if await parent.read_latest() is None:  # the parent is gone already: nothing holds its data
        return False
    await delete_checkpoint(parent, runtime, db.final_checkpoint_id, missing_ok=True)
    runtime.event("gc_release_parent_checkpoint", path=db.path, checkpoint=str(db.final_checkpoint_id))
    return True


async def destroy_database(store: ObjectStore, runtime: Runtime, latest: StoredManifest, locator: SstLocator,
                           delete: Callable[[str], Awaitable[None]]) -> int:
    """Release the parents' final checkpoints, then delete every object of the database
    (:func:`is_db_key`, in the directories :data:`DB_OBJECT_DIRECTORIES` names) with ``delete`` (which emits the trace event), the manifests last in ascending id order and
    the latest one only after a listing shows nothing else (:func:`delete_latest_last`).
    Returns how many objects were deleted."""
    for db in latest.manifest.external_dbs:
        await release_parent_checkpoint(locator, runtime, db)

    async def list_keys() -> list[str]:
        keys: list[str] = []
        for directory in DB_OBJECT_DIRECTORIES:
            metas = await retry_transient(runtime, lambda d=directory: store.list(d), what=f"list {directory}")
            keys.extend(m.key for m in metas)
        return keys

    count = await delete_latest_last(runtime, str(store.url), keep_pinned_shards(store, runtime, list_keys), delete)
    runtime.event("db_destroyed", manifest=latest.id, objects=count)
    await store.tidy_destroyed_root(DB_OBJECT_DIRECTORIES)  # a local root: no lock files, no empty directories
    return count


# -- DESTROY-7: a GC create that outlived a hard destroy ------------------------------------------
#
# GC decides on a manifest it read at the start of its pass. A hard destroy may run to its end
# between that read and GC's create landing (the pass stalled, destroy seeds 77, 94, 129, 256):
# the create-if-absent then succeeds on an emptied root and leaves an object -- a boundary file,
# or a manifest pointing at deleted SSTs -- with the database gone. No destroyer can see a write
# that has not landed yet, so the writer of the create looks after it landed and takes it back
# (destroy.md "Concurrent writers of metadata").


async def boundary_create_outlived(manifests: ManifestStore) -> bool:
    """After GC created a boundary file: is the database destroyed (marked) or gone? If the
    latest manifest read *after* the create is neither, any destroy marks it later, and its
    listing (taken after the mark) sees the boundary file and deletes it."""
    latest = await manifests.read_latest()
    return latest is None or bool(latest.manifest.destroyed_at_s)


async def manifest_create_outlived(manifests: ManifestStore, created_id: int) -> bool:
    """After GC committed manifest ``created_id`` on the manifest before it: was the database
    removed under the commit? The base ``created_id - 1`` was the latest until our create landed
    and GC never deletes the latest, so once gone it was deleted either by a GC after our create
    (which first makes the boundary durable at or above it, BOUNDARY-1) or by a destroyer. Base
    present: alive; base gone and the boundary below it: destroyed. (A GC that deletes manifests
    without boundary files gives no such proof: the caller skips this check then.)"""
    runtime, store = manifests.runtime, manifests.store
    base_key = manifests.key(created_id - 1)
    try:
        await retry_transient(runtime, lambda: store.head(base_key), what=f"head {base_key}")
        return False
    except ObjectNotFoundError:
        pass
    boundary, _etag = await read_boundary_versioned(store, runtime, manifests.boundary_key)
    return boundary < created_id - 1
