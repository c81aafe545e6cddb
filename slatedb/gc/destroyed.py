"""Removing a soft-destroyed database (RFC 000 § "Garbage Collector", § "Deleting a Database").

GC removes a database once ``destroyed_at_s`` is set, the grace period has passed and no
checkpoint is active (an unexpired checkpoint is someone's promise that the data stays). A
clone first releases the final checkpoints it holds on its parents, so their GC may reclaim the
shared SSTs. Then every object of the database goes, the latest manifest last: a GC that stops
half-way leaves a database still marked destroyed, and the next pass finishes the job.

Only SlateDB's own directories are removed (``manifest/``, ``wal/``, ``compacted/``,
``compactions/``, ``gc/``): anything else under the root (another database nested below it, a
user's file) is not this database's to delete. The boundary files go too -- the one exception to
BOUNDARY-2: a database created again at the path starts at manifest 1 and must not find an old
boundary above it; a stale process that had seen them gets ``BoundaryVanishedError``.
"""

from __future__ import annotations

from typing import Awaitable, Callable

from slatedb.checkpoint import active_checkpoints, delete_checkpoint
from slatedb.lsm.paths import SstLocator
from slatedb.format.types import ExternalDb
from slatedb.manifest.store import MANIFEST_DIR, ManifestStore, StoredManifest, parse_id, MANIFEST_SUFFIX
from slatedb.objstore.base import ObjectStore
from slatedb.format.layout import DB_DIRECTORIES as _LAYOUT_DIRECTORIES
from slatedb.objstore.retry import retry_transient
from slatedb.runtime import Runtime

#: The top-level directories a SlateDB database writes.
DB_DIRECTORIES = _LAYOUT_DIRECTORIES


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
    """Release the parents' final checkpoints, then delete every object of the database with
    ``delete`` (which emits the trace event), the manifests last in ascending id order so that
    the latest (destroyed) one goes last. Returns how many objects were deleted."""
    for db in latest.manifest.external_dbs:
        await release_parent_checkpoint(locator, runtime, db)
    count = 0
    for directory in DB_DIRECTORIES:
        if directory == MANIFEST_DIR:
            continue
        metas = await retry_transient(runtime, lambda: store.list(directory), what=f"list {directory}")
        for meta in metas:
            await delete(meta.key)
            count += 1
    metas = await retry_transient(runtime, lambda: store.list(MANIFEST_DIR), what=f"list {MANIFEST_DIR}")
    ordered = sorted(metas, key=lambda m: (parse_id(m.key, MANIFEST_DIR, MANIFEST_SUFFIX) is not None,
                                           parse_id(m.key, MANIFEST_DIR, MANIFEST_SUFFIX) or 0))
    for meta in ordered:
        await delete(meta.key)
        count += 1
    runtime.event("db_destroyed", manifest=latest.id, objects=count)
    return count
