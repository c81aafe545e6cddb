"""Checkpoint entries of a manifest (RFC 000 "Checkpoints"): pure functions on
:class:`~slatedb.format.types.ManifestV2` shared by the edits (:mod:`slatedb.manifest.edits`),
GC, readers and the checkpoint API (:mod:`slatedb.checkpoint`, which re-exports them)."""

from __future__ import annotations

import math
import uuid

from slatedb.errors import InvalidArgumentError, InvalidDbStateError
from slatedb.format.types import Checkpoint, ManifestV2, WriterCheckpoint

#: ``checkpoint_expire_time_s`` is a u32 in the format.
MAX_U32 = 2**32 - 1


def is_expired(cp: Checkpoint, now_s: int) -> bool:
    """RFC 000: expired once ``checkpoint_expire_time_s`` is older than now; 0 never expires."""
    return cp.checkpoint_expire_time_s != 0 and cp.checkpoint_expire_time_s < now_s


def active_checkpoints(m: ManifestV2, now_s: int) -> tuple[Checkpoint, ...]:
    return tuple(c for c in m.checkpoints if not is_expired(c, now_s))


def absurd_lifetime(lifetime_s: float) -> str:
    """The refusal of a lifetime that ends past the u32 expiry range."""
    return (f"checkpoint lifetime {lifetime_s:g} s ends after 2106-02-07T06:28:15Z, the latest expiry time a "
            "manifest can hold (u32 seconds); leave the lifetime out for a checkpoint that never expires")


def expire_time_s(now_ms: int, lifetime_s: float | None) -> int:
    """The ``checkpoint_expire_time_s`` of a checkpoint made now with ``lifetime_s`` (0: never).
    A lifetime ending past the u32 range is refused, not clamped."""
    if lifetime_s is None:
        return 0
    expire = max(1, math.ceil(now_ms / 1000 + lifetime_s))
    if expire > MAX_U32:
        raise InvalidArgumentError(absurd_lifetime(lifetime_s))
    return expire


def make_checkpoint(checkpoint_id: uuid.UUID, manifest_id: int, now_ms: int, *, lifetime_s: float | None = None,
                    name: str | None = None, metadata: WriterCheckpoint | None = None) -> Checkpoint:
    """A checkpoint ``checkpoint_id`` pinning ``manifest_id``, created at ``now_ms``."""
    return Checkpoint(
        id=checkpoint_id,
        manifest_id=manifest_id,
        checkpoint_expire_time_s=expire_time_s(now_ms, lifetime_s),
        checkpoint_create_time_s=min(MAX_U32, max(0, now_ms // 1000)),
        metadata=metadata,
        name=name,
    )


def writer_checkpoint(checkpoint_id: uuid.UUID, manifest_id: int, epoch: int, now_ms: int) -> Checkpoint:
    """The writer's checkpoint (RFC 000): pins ``manifest_id``, never expires, names the epoch."""
    return Checkpoint(
        id=checkpoint_id,
        manifest_id=manifest_id,
        checkpoint_expire_time_s=0,
        checkpoint_create_time_s=max(0, now_ms // 1000),
        metadata=WriterCheckpoint(epoch=epoch),
    )


def replace_writer_checkpoint(m: ManifestV2, cp: Checkpoint) -> tuple[Checkpoint, ...]:
    """``m``'s checkpoints without any writer checkpoint, plus ``cp``."""
    return without_writer_checkpoints(m) + (cp,)


def without_writer_checkpoints(m: ManifestV2) -> tuple[Checkpoint, ...]:
    return tuple(c for c in m.checkpoints if not isinstance(c.metadata, WriterCheckpoint))


def check_writable_state(m: ManifestV2, what: str) -> None:
    """RFC 000: checkpoints (and readers) need an initialized, not destroyed database."""
    if not m.initialized:
        raise InvalidDbStateError(f"cannot {what}: the database is not initialized (a clone that never finished)")
    if m.destroyed_at_s:
        raise InvalidDbStateError(f"cannot {what}: the database was destroyed at {m.destroyed_at_s} s")


def find_checkpoint(m: ManifestV2, checkpoint_id: uuid.UUID) -> Checkpoint | None:
    return next((c for c in m.checkpoints if c.id == checkpoint_id), None)


def pinned_for_commit(m: ManifestV2, manifest_id: int, now_ms: int, pin_id: uuid.UUID,
                      lifetime_s: float) -> tuple[Checkpoint, ...]:
    """``m``'s unexpired checkpoints plus a fresh one pinning ``manifest_id`` (the manifest being
    replaced) for ``lifetime_s``: what the official compactor writes with each of its commits
    (readers of the replaced manifest keep its SSTs). Its fresh UUID also makes every manifest
    the compactor writes unique bytes."""
    now_s = max(0, now_ms // 1000)
    live = tuple(c for c in m.checkpoints if c.checkpoint_expire_time_s == 0 or c.checkpoint_expire_time_s > now_s)
    pin = Checkpoint(id=pin_id, manifest_id=manifest_id, checkpoint_expire_time_s=now_s + int(lifetime_s),
                     checkpoint_create_time_s=now_s)
    return live + (pin,)
