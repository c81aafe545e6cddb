"""RFC 000's checkpoint procedures on the manifest (spec/protocols/checkpoints-gc.md step 1-4).

Each procedure is one :meth:`ManifestStore.update`: read the latest manifest ``V``, check it,
change the ``checkpoints`` list, create ``V+1`` (create-if-absent, boundary check), and on a lost
race start again from a fresh read. A checkpoint taken "from the current manifest" pins ``V+1``,
the very manifest that adds it (RFC 000: "manifest_id set to V or V+1").
"""

from __future__ import annotations

import enum
import math
import uuid

import attrs

from slatedb.errors import CheckpointNotFoundError, InvalidArgumentError, InvalidDbStateError
from slatedb.format.types import Checkpoint, ManifestV2, WriterCheckpoint
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.runtime import Runtime

#: ``checkpoint_expire_time_s`` is a u32 in the format.
_MAX_U32 = 2**32 - 1


class CheckpointScope(enum.Enum):
    """What a writer's checkpoint covers (RFC 000 ``CheckpointScope``): ``ALL`` writes issued so
    far (the WAL is flushed and the memtable flushed to L0 first), or only ``DURABLE`` ones."""

    ALL = "all"
    DURABLE = "durable"


@attrs.frozen
class CheckpointOptions:
    """``lifetime_s``: expire that long after creation (None: never). ``source``: copy the
    manifest id of this existing checkpoint instead of pinning the current manifest. ``name``:
    a label for :func:`list_checkpoints` (not unique)."""

    lifetime_s: float | None = None
    source: uuid.UUID | None = None
    name: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.lifetime_s is not None:
            if not isinstance(self.lifetime_s, (int, float)) or not math.isfinite(self.lifetime_s) or self.lifetime_s <= 0:
                raise InvalidArgumentError(f"checkpoint lifetime_s must be a positive number of seconds, got {self.lifetime_s!r}")
        if self.source is not None and not isinstance(self.source, uuid.UUID):
            raise InvalidArgumentError(f"checkpoint source must be a UUID, got {self.source!r}")
        if self.name is not None and not isinstance(self.name, str):
            raise InvalidArgumentError(f"checkpoint name must be a string, got {self.name!r}")


@attrs.frozen
class CheckpointCreateResult:
    id: uuid.UUID
    manifest_id: int


def is_expired(cp: Checkpoint, now_s: int) -> bool:
    """RFC 000: expired once ``checkpoint_expire_time_s`` is older than now; 0 never expires."""
    return cp.checkpoint_expire_time_s != 0 and cp.checkpoint_expire_time_s < now_s


def active_checkpoints(m: ManifestV2, now_s: int) -> tuple[Checkpoint, ...]:
    return tuple(c for c in m.checkpoints if not is_expired(c, now_s))


def expire_time_s(now_ms: int, lifetime_s: float | None) -> int:
    """The ``checkpoint_expire_time_s`` of a checkpoint made now with ``lifetime_s`` (0: never)."""
    if lifetime_s is None:
        return 0
    return min(_MAX_U32, max(1, math.ceil(now_ms / 1000 + lifetime_s)))


def new_checkpoint(runtime: Runtime, manifest_id: int, *, lifetime_s: float | None = None, name: str | None = None,
                   metadata: WriterCheckpoint | None = None, checkpoint_id: uuid.UUID | None = None) -> Checkpoint:
    """A checkpoint pinning ``manifest_id``; its id is ``checkpoint_id`` or a fresh UUID."""
    now_ms = runtime.now_ms()
    return Checkpoint(
        id=runtime.new_uuid() if checkpoint_id is None else checkpoint_id,
        manifest_id=manifest_id,
        checkpoint_expire_time_s=expire_time_s(now_ms, lifetime_s),
        checkpoint_create_time_s=min(_MAX_U32, max(0, now_ms // 1000)),
        metadata=metadata,
        name=name,
    )


def check_writable_state(m: ManifestV2, what: str) -> None:
    """RFC 000: checkpoints (and readers) need an initialized, not destroyed database."""
    if not m.initialized:
        raise InvalidDbStateError(f"cannot {what}: the database is not initialized (a clone that never finished)")
    if m.destroyed_at_s:
        raise InvalidDbStateError(f"cannot {what}: the database was destroyed at {m.destroyed_at_s} s")


def find_checkpoint(m: ManifestV2, checkpoint_id: uuid.UUID) -> Checkpoint | None:
    return next((c for c in m.checkpoints if c.id == checkpoint_id), None)


def _as_uuid(value: object) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidArgumentError(f"checkpoint id {value!r} is not a UUID") from None


async def create_checkpoint(manifests: ManifestStore, runtime: Runtime, options: CheckpointOptions = CheckpointOptions(),
                            *, checkpoint_id: uuid.UUID | None = None) -> CheckpointCreateResult:
    """RFC 000 "Creating a Checkpoint": from the current manifest, or from ``options.source``.

    ``checkpoint_id`` fixes the new checkpoint's id (a clone's ``final_checkpoint_id``, RFC 000
    "Clones"); the call is then idempotent: when a checkpoint with that id is already in the
    latest manifest nothing is written and it is returned as is (even if the source is gone).
    """
    made: list[Checkpoint] = []
    existed: list[bool] = [False]

    def change(cur: StoredManifest) -> ManifestV2 | None:
        m = cur.manifest
        if checkpoint_id is not None:
            found = find_checkpoint(m, checkpoint_id)
            if found is not None:
                made[:] = [found]
                existed[0] = True
                return None
        if made and find_checkpoint(m, made[0].id) is not None:
            # An earlier attempt landed although it was reported failed (RFC 004's boundary
            # check can say so when its read comes back late): do not add a second checkpoint,
            # which would pin a manifest nobody knows about (forever, without a lifetime).
            return None
        if options.source is None:
            check_writable_state(m, "create a checkpoint")
            manifest_id = cur.id + 1
        else:
            if m.destroyed_at_s:
                raise InvalidDbStateError(f"cannot create a checkpoint: the database was destroyed at {m.destroyed_at_s} s")
            source = find_checkpoint(m, options.source)
            if source is None:
                raise CheckpointNotFoundError(options.source, "the latest manifest (source checkpoint)")
            if is_expired(source, runtime.now_ms() // 1000):
                raise InvalidDbStateError(f"source checkpoint {options.source} has expired")
            manifest_id = source.manifest_id
        cp = new_checkpoint(runtime, manifest_id, lifetime_s=options.lifetime_s, name=options.name,
                            checkpoint_id=checkpoint_id)
        made[:] = [cp]
        existed[0] = False
        return attrs.evolve(m, checkpoints=m.checkpoints + (cp,))

    await manifests.update(change)
    cp = made[0]
    if not existed[0]:
        runtime.event("checkpoint_create", id=str(cp.id), manifest_id=cp.manifest_id,
                      expire_s=cp.checkpoint_expire_time_s)
    return CheckpointCreateResult(cp.id, cp.manifest_id)


async def refresh_checkpoint(manifests: ManifestStore, runtime: Runtime, checkpoint_id: uuid.UUID | str,
                             lifetime_s: float | None) -> Checkpoint:
    """Set the checkpoint's expiry to now + ``lifetime_s`` (None: never expires). A checkpoint
    that is gone (deleted, or expired and collected by GC) raises :class:`CheckpointNotFoundError`."""
    cid = _as_uuid(checkpoint_id)
    CheckpointOptions(lifetime_s=lifetime_s)  # validates
    out: list[Checkpoint] = []

    def change(cur: StoredManifest) -> ManifestV2:
        m = cur.manifest
        old = find_checkpoint(m, cid)
        if old is None:
            raise CheckpointNotFoundError(cid, "the latest manifest")
        new = attrs.evolve(old, checkpoint_expire_time_s=expire_time_s(runtime.now_ms(), lifetime_s))
        out[:] = [new]
        return attrs.evolve(m, checkpoints=tuple(new if c.id == cid else c for c in m.checkpoints))

    await manifests.update(change)
    runtime.event("checkpoint_refresh", id=str(cid), expire_s=out[0].checkpoint_expire_time_s)
    return out[0]


async def delete_checkpoint(manifests: ManifestStore, runtime: Runtime, checkpoint_id: uuid.UUID | str, *,
                            missing_ok: bool = False) -> None:
    """Write a manifest without the checkpoint."""
    cid = _as_uuid(checkpoint_id)

    attempted = [False]

    def change(cur: StoredManifest) -> ManifestV2 | None:
        m = cur.manifest
        if find_checkpoint(m, cid) is None:
            if missing_ok or attempted[0]:  # gone after our own attempt: that attempt landed
                return None
            raise CheckpointNotFoundError(cid, "the latest manifest")
        attempted[0] = True
        return attrs.evolve(m, checkpoints=tuple(c for c in m.checkpoints if c.id != cid))

    await manifests.update(change)
    runtime.event("checkpoint_delete", id=str(cid))


async def list_checkpoints(manifests: ManifestStore, name: str | None = None) -> list[Checkpoint]:
    """The checkpoints of the latest manifest (with ``name`` only those named so), expired ones
    included until GC removes them."""
    latest = await manifests.read_latest()
    if latest is None:
        raise InvalidDbStateError("no database at this path (no manifest)")
    return [c for c in latest.manifest.checkpoints if name is None or c.name == name]
