"""Checkpoint entries of a manifest (RFC 000 "Checkpoints"): pure functions on
:class:`~slatedb.format.types.ManifestV2` shared by the edits (:mod:`slatedb.manifest.edits`),
GC, readers and the checkpoint API (:mod:`slatedb.checkpoint`, which re-exports them)."""

from __future__ import annotations

import math
import uuid

from slatedb.errors import InvalidArgumentError, InvalidDbStateError
from slatedb.format import memo
from slatedb.format.types import Checkpoint, ManifestV2, WriterCheckpoint

#: ``checkpoint_expire_time_s`` is a u32 in the format.
MAX_U32 = 2**32 - 1


def is_expired(cp: Checkpoint, now_s: int) -> bool:
    """RFC 000: expired once ``checkpoint_expire_time_s`` is older than now; 0 never expires."""
    return cp.checkpoint_expire_time_s != 0 and cp.checkpoint_expire_time_s < now_s


def active_checkpoints(m: ManifestV2, now_s: int) -> tuple[Checkpoint, ...]:
    """``m``'s checkpoints that still pin: neither expired nor a stale writer checkpoint
    (:func:`is_stale_writer_checkpoint`)."""
    return split_checkpoints(m, now_s)[0]


def split_checkpoints(m: ManifestV2, now_s: int) -> tuple[tuple[Checkpoint, ...], tuple[Checkpoint, ...]]:
    """``m``'s checkpoints at ``now_s``: (those that still pin, as :func:`active_checkpoints`;
    the others, expired or a stale writer checkpoint), each in ``m``'s order.

    A pure function of the frozen manifest and the second: within a simulated run
    (:func:`slatedb.format.memo.active`) the answer for the same manifest object and second is
    remembered (every GC pass asks it of the manifest it read, in its checkpoint expiry and again
    in each directory's snapshot, and a manifest is read unchanged for many passes)."""
    remembering = memo.active()
    if remembering:
        got = _SPLIT.get((id(m), now_s))
        if got is not None and got[0] is m:
            return got[1]
    active: list[Checkpoint] = []
    gone: list[Checkpoint] = []
    for c in m.checkpoints:
        (gone if is_expired(c, now_s) or is_stale_writer_checkpoint(c, m) else active).append(c)
    split = (tuple(active), tuple(gone))
    if remembering:
        if len(_SPLIT) >= _MAX_SPLIT:
            _SPLIT.clear()
        _SPLIT[(id(m), now_s)] = (m, split)
    return split


#: :func:`split_checkpoints`' answers by (manifest object, second) within a simulated run (the
#: manifest kept in the entry, so its id stays its own).
_SPLIT: dict[tuple[int, int], tuple[ManifestV2, tuple[tuple[Checkpoint, ...], tuple[Checkpoint, ...]]]] = {}
_MAX_SPLIT = 1024
memo._AT_END.append(_SPLIT.clear)  # dropped when the simulated run ends


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


#: The top 32 bits of a writer checkpoint's id (ASCII ``"SDBW"``). See :func:`writer_checkpoint_id`.
WRITER_ID_MAGIC = 0x53444257
#: Bits of a writer checkpoint id that hold its epoch (the low 62; the variant takes the 2 above).
WRITER_ID_EPOCH_BITS = 62
_EPOCH_MASK = (1 << WRITER_ID_EPOCH_BITS) - 1


def writer_checkpoint_id(random_id: uuid.UUID, epoch: int) -> uuid.UUID:
    """The id of a writer checkpoint of ``epoch`` made from the fresh ``random_id``.

    The official 0.17 engine keeps our checkpoints when it rewrites a manifest but drops their
    ``WriterCheckpoint`` metadata (it does not encode the union; spec/protocols/writer.md,
    "Checkpoints across engines"). The id survives, so the id itself says "writer checkpoint of
    epoch E": an RFC 9562 version-8 UUID whose top 32 bits are :data:`WRITER_ID_MAGIC`, 28 bits
    random (from ``random_id``), and the low 62 bits the epoch (saturated; an epoch that large is
    never judged stale). Every checkpoint a user makes, with either engine, has a random
    version-4 id, and no API takes an id from the caller, so no user checkpoint matches."""
    r = random_id.int
    rand_hi = (r >> 80) & 0xFFFF  # 16 random bits
    rand_lo = (r >> 64) & 0xFFF  # 12 random bits
    value = ((WRITER_ID_MAGIC << 96) | (rand_hi << 80) | (0x8 << 76) | (rand_lo << 64)
             | (0b10 << 62) | min(epoch, _EPOCH_MASK))
    return uuid.UUID(int=value)


def id_epoch(checkpoint_id: uuid.UUID) -> int | None:
    """The epoch a writer checkpoint id (:func:`writer_checkpoint_id`) holds; None for any other id."""
    v = checkpoint_id.int
    if v >> 96 != WRITER_ID_MAGIC or (v >> 76) & 0xF != 0x8 or (v >> 62) & 0b11 != 0b10:
        return None
    return v & _EPOCH_MASK


def is_writer_checkpoint(cp: Checkpoint) -> bool:
    """A writer checkpoint: ``WriterCheckpoint`` metadata (ours, as written), or a writer id
    whose metadata another engine dropped (what the official 0.17 engine leaves of ours)."""
    return isinstance(cp.metadata, WriterCheckpoint) or id_epoch(cp.id) is not None


def writer_epoch_of(cp: Checkpoint) -> int | None:
    """The writer epoch a writer checkpoint belongs to (None: not a writer checkpoint)."""
    if isinstance(cp.metadata, WriterCheckpoint):
        return cp.metadata.epoch
    return id_epoch(cp.id)


def is_stale_writer_checkpoint(cp: Checkpoint, m: ManifestV2) -> bool:
    """A writer checkpoint of an epoch older than ``m``'s writer: its writer was fenced (by our
    writer, or the official one, which writes no checkpoint of its own and does not remove ours),
    so nothing it pinned is read through it any more. GC removes it like an expired one."""
    epoch = writer_epoch_of(cp)
    return epoch is not None and epoch < min(m.writer_epoch, _EPOCH_MASK)


def writer_checkpoint(checkpoint_id: uuid.UUID, manifest_id: int, epoch: int, now_ms: int,
                      legacy_id: bool = False) -> Checkpoint:
    """The writer's checkpoint (RFC 000): pins ``manifest_id``, never expires, names the epoch
    in its metadata and in its id (:func:`writer_checkpoint_id` of ``checkpoint_id``).

    ``legacy_id`` (catalogued bug ``writer-checkpoint-orphaned`` only): the plain random id a
    writer minted before the id rule, which nothing but the metadata recognises."""
    return Checkpoint(
        id=checkpoint_id if legacy_id else writer_checkpoint_id(checkpoint_id, epoch),
        manifest_id=manifest_id,
        checkpoint_expire_time_s=0,
        checkpoint_create_time_s=max(0, now_ms // 1000),
        metadata=WriterCheckpoint(epoch=epoch),
    )


def replace_writer_checkpoint(m: ManifestV2, cp: Checkpoint) -> tuple[Checkpoint, ...]:
    """``m``'s checkpoints without any writer checkpoint, plus ``cp``."""
    return without_writer_checkpoints(m) + (cp,)


def without_writer_checkpoints(m: ManifestV2) -> tuple[Checkpoint, ...]:
    """``m``'s checkpoints but the writer checkpoints (:func:`is_writer_checkpoint`): also those
    an earlier incarnation of either engine left without their metadata."""
    return tuple(c for c in m.checkpoints if not is_writer_checkpoint(c))


def without_checkpoints(checkpoints: tuple[Checkpoint, ...], ids: tuple[uuid.UUID, ...]) -> tuple[Checkpoint, ...]:
    """``checkpoints`` but those whose id is in ``ids``."""
    return tuple(c for c in checkpoints if c.id not in ids) if ids else checkpoints


def check_writable_state(m: ManifestV2, what: str) -> None:
    """RFC 000: checkpoints (and readers) need an initialized, not destroyed database."""
    if not m.initialized:
        raise InvalidDbStateError(f"cannot {what}: the database is not initialized (a clone, projection or union still being made, or one that never finished)")
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
    # The lifetime is a setting (at most 2^32 - 1 s): an expiry past the u32 range is held at its top.
    pin = Checkpoint(id=pin_id, manifest_id=manifest_id, checkpoint_expire_time_s=min(now_s + int(lifetime_s), MAX_U32),
                     checkpoint_create_time_s=now_s)
    return live + (pin,)
