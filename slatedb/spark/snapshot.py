"""The checkpoint a Spark read is pinned to: given, or made by the driver.

:func:`establish` makes a checkpoint the way a managed ``DbReader`` does (RFC 000
"Establishing the Checkpoint"): inside the manifest CAS it lists the WAL and raises
``wal_id_last_seen`` to the newest WAL object, so the pinned manifest's WAL range holds every
write durable at planning time (WAL-only rows included). The checkpoint carries a lifetime;
:func:`refresh_if_due` extends it once less than half remains, :func:`release` deletes it.
"""

from __future__ import annotations

import uuid

from slatedb.checkpoint import delete_checkpoint, find_checkpoint, is_expired, refresh_checkpoint
from slatedb.errors import CheckpointNotFoundError, InvalidDbStateError, ObjectNotFoundError
from slatedb.manifest.edits import AddReaderCheckpoint
from slatedb.manifest.segments import refuse_segments
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.objstore.base import ObjectStore
from slatedb.runtime import Runtime
from slatedb.wal.writer import list_wal_ids
from slatedb.redact import shown_url

#: The name of checkpoints made by Spark reads (``slatedb list-checkpoints --name spark-read``).
CHECKPOINT_NAME = "spark-read"


async def _latest(manifests: ManifestStore, url: str) -> StoredManifest:
    latest = await manifests.read_latest()
    if latest is None:
        raise InvalidDbStateError(f"no database at {shown_url(url)} (no manifest)")
    refuse_segments(latest.manifest, url, "read it with Spark")
    return latest


async def establish(store: ObjectStore, rt: Runtime, lifetime_s: float) -> tuple[uuid.UUID, StoredManifest]:
    """A new checkpoint pinning the manifest that adds it; returns its id and that manifest."""
    manifests = ManifestStore(store, rt)
    edit = AddReaderCheckpoint(rt.new_uuid(), lifetime_s=lifetime_s, name=CHECKPOINT_NAME,
                               refuse="read a database with Spark")
    added = await manifests.commit(edit, current=await _latest(manifests, store.url),
                                   list_wal=lambda: list_wal_ids(store, rt))
    stored, cp = added.stored, added.result.checkpoint
    rt.event("spark_checkpoint", id=str(cp.id), manifest_id=stored.id)
    return cp.id, stored


async def pinned(store: ObjectStore, rt: Runtime, checkpoint_id: uuid.UUID) -> StoredManifest:
    """The manifest a given checkpoint pins (it must be in the latest manifest and unexpired)."""
    manifests = ManifestStore(store, rt)
    latest = await _latest(manifests, store.url)
    cp = find_checkpoint(latest.manifest, checkpoint_id)
    if cp is None:
        raise CheckpointNotFoundError(checkpoint_id, f"the latest manifest ({latest.id}) of {shown_url(store.url)}")
    if is_expired(cp, rt.now_ms() // 1000):
        raise InvalidDbStateError(f"checkpoint {checkpoint_id} expired at {cp.checkpoint_expire_time_s} s")
    if cp.manifest_id == latest.id:
        return latest
    try:
        return await manifests.read(cp.manifest_id)
    except ObjectNotFoundError:
        raise InvalidDbStateError(f"checkpoint {checkpoint_id} pins manifest {cp.manifest_id}, which is gone") from None


async def refresh_if_due(store: ObjectStore, rt: Runtime, checkpoint_id: uuid.UUID, lifetime_s: float) -> bool:
    """Extend the checkpoint to now + ``lifetime_s`` once less than half of it remains.
    True when it refreshed. A checkpoint that is gone raises :class:`CheckpointNotFoundError`."""
    manifests = ManifestStore(store, rt)
    latest = await _latest(manifests, store.url)
    cp = find_checkpoint(latest.manifest, checkpoint_id)
    if cp is None:
        raise CheckpointNotFoundError(checkpoint_id, f"the latest manifest ({latest.id}) of {shown_url(store.url)}")
    remaining_s = cp.checkpoint_expire_time_s - rt.now_ms() / 1000
    if cp.checkpoint_expire_time_s == 0 or remaining_s >= lifetime_s / 2:
        return False
    await refresh_checkpoint(manifests, rt, checkpoint_id, lifetime_s)
    return True


async def release(store: ObjectStore, rt: Runtime, checkpoint_id: uuid.UUID) -> None:
    await delete_checkpoint(ManifestStore(store, rt), rt, checkpoint_id, missing_ok=True)
