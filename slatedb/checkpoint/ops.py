"""RFC 000's checkpoint procedures on the manifest (spec/protocols/checkpoints-gc.md step 1-4).

Each procedure is one typed edit committed by :meth:`ManifestStore.commit`: read the latest
manifest ``V``, check it, change the ``checkpoints`` list, create ``V+1`` (create-if-absent,
boundary check), and on a lost race re-apply the same edit to a fresh read. A checkpoint taken "from the current manifest" pins ``V+1``,
the very manifest that adds it (RFC 000: "manifest_id set to V or V+1").
"""

from __future__ import annotations

import enum
import math
import uuid
from typing import Any, Mapping

import attrs

from slatedb.errors import CheckpointExpiredError, InvalidArgumentError, InvalidDbStateError
from slatedb.format.types import Checkpoint, WriterCheckpoint
from slatedb.manifest.checkpoints import (  # noqa: F401 (re-exported by slatedb.checkpoint)
    MAX_U32,
    absurd_lifetime,
    active_checkpoints,
    check_writable_state,
    expire_time_s,
    find_checkpoint,
    is_expired,
    make_checkpoint,
)
from slatedb.manifest.edits import AddCheckpoint, DeleteCheckpoint, RefreshCheckpoint
from slatedb.manifest.store import ManifestStore
from slatedb.runtime import Runtime, probes

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

    def __new__(cls, *args: Any, **kwargs: Any) -> "CheckpointOptions":
        # A misspelt field (``lifetime=``) is a typed error naming it, not attrs' bare TypeError.
        unknown = sorted(k for k in kwargs if k not in _OPTION_NAMES)
        if unknown:
            raise InvalidArgumentError(f"unknown CheckpointOptions field: {', '.join(unknown)} "
                                       f"(known: {', '.join(_OPTION_NAMES)})")
        return object.__new__(cls)

    @classmethod
    def of(cls, value: Any) -> "CheckpointOptions":
        """``value`` as options: None (the defaults), a CheckpointOptions, or a dict of its
        fields (as the read, scan and reader options take one); anything else is refused here,
        at the call, before a writer flushes anything for the checkpoint."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            if not all(isinstance(k, str) for k in value):
                raise InvalidArgumentError(f"CheckpointOptions keys must be field names (str), got {sorted(map(repr, value))}")
            return cls(**value)
        raise InvalidArgumentError(f"options must be a CheckpointOptions or a dict, not {type(value).__name__}")

    def __attrs_post_init__(self) -> None:
        if self.lifetime_s is not None:
            if (isinstance(self.lifetime_s, bool) or not isinstance(self.lifetime_s, (int, float))
                    or not math.isfinite(self.lifetime_s) or self.lifetime_s <= 0):
                raise InvalidArgumentError(f"checkpoint lifetime_s must be a positive number of seconds, got {self.lifetime_s!r}")
            if self.lifetime_s >= MAX_U32:
                raise InvalidArgumentError(absurd_lifetime(self.lifetime_s))
        if self.source is not None and not isinstance(self.source, uuid.UUID):
            raise InvalidArgumentError(f"checkpoint source must be a UUID, got {self.source!r}")
        if self.name is not None and not isinstance(self.name, str):
            raise InvalidArgumentError(f"checkpoint name must be a string, got {self.name!r}")
        if self.name is not None and not self.name.strip():
            raise InvalidArgumentError("checkpoint name must not be empty (leave it out for an unnamed checkpoint)")
        if self.name is not None:
            try:
                self.name.encode("utf-8")  # the manifest holds it as a UTF-8 string
            except UnicodeEncodeError as e:
                raise InvalidArgumentError(
                    f"checkpoint name must be UTF-8 text: {self.name!r} has {self.name[e.start]!r} at {e.start} (a lone "
                    "surrogate, as a command-line name that is not UTF-8 becomes)") from None


_OPTION_NAMES = ("lifetime_s", "source", "name")


@attrs.frozen
class CheckpointCreateResult:
    id: uuid.UUID
    manifest_id: int


def new_checkpoint(runtime: Runtime, manifest_id: int, *, lifetime_s: float | None = None, name: str | None = None,
                   metadata: WriterCheckpoint | None = None, checkpoint_id: uuid.UUID | None = None) -> Checkpoint:
    """A checkpoint pinning ``manifest_id`` made now; its id is ``checkpoint_id`` or a fresh UUID."""
    cid = runtime.new_uuid() if checkpoint_id is None else checkpoint_id
    return make_checkpoint(cid, manifest_id, runtime.now_ms(), lifetime_s=lifetime_s, name=name, metadata=metadata)


def _as_uuid(value: object) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidArgumentError(f"checkpoint id {value!r} is not a UUID") from None


async def create_checkpoint(manifests: ManifestStore, runtime: Runtime, options: CheckpointOptions = CheckpointOptions(),
                            *, checkpoint_id: uuid.UUID | None = None) -> CheckpointCreateResult:
    """RFC 000 "Creating a Checkpoint": from the current manifest, or from ``options.source``
    (edit :class:`~slatedb.manifest.edits.AddCheckpoint`).

    ``checkpoint_id`` fixes the new checkpoint's id (a clone's ``final_checkpoint_id``, RFC 000
    "Clones"); the call is then idempotent: when a checkpoint with that id is already in the
    latest manifest nothing is written and it is returned as is (even if the source is gone).
    """
    cid = runtime.new_uuid() if checkpoint_id is None else checkpoint_id
    edit = AddCheckpoint(cid, lifetime_s=options.lifetime_s, name=options.name, source=options.source)
    added = (await manifests.commit(edit)).result
    cp = added.checkpoint
    if not added.existed:
        runtime.event("checkpoint_create", id=str(cp.id), manifest_id=cp.manifest_id,
                      expire_s=cp.checkpoint_expire_time_s)
    return CheckpointCreateResult(cp.id, cp.manifest_id)


async def refresh_checkpoint(manifests: ManifestStore, runtime: Runtime, checkpoint_id: uuid.UUID | str,
                             lifetime_s: float | None) -> Checkpoint:
    """Set the checkpoint's expiry to now + ``lifetime_s`` (None: never expires). A checkpoint
    that is gone (deleted, or expired and collected by GC) raises :class:`CheckpointNotFoundError`;
    one that expired and is not collected yet :class:`CheckpointExpiredError` (a subclass): it is
    not revived (checkpoints-gc.md step 3, GC-2)."""
    cid = _as_uuid(checkpoint_id)
    CheckpointOptions(lifetime_s=lifetime_s)  # validates
    try:
        new = (await manifests.commit(RefreshCheckpoint(cid, lifetime_s))).result
    except CheckpointExpiredError:
        runtime.probe(probes.CHECKPOINT_REFRESH_EXPIRED)
        runtime.event("checkpoint_refresh_refused", id=str(cid), reason="expired")
        raise
    runtime.event("checkpoint_refresh", id=str(cid), expire_s=new.checkpoint_expire_time_s)
    return new


async def delete_checkpoint(manifests: ManifestStore, runtime: Runtime, checkpoint_id: uuid.UUID | str, *,
                            missing_ok: bool = False) -> None:
    """Write a manifest without the checkpoint."""
    cid = _as_uuid(checkpoint_id)
    await manifests.commit(DeleteCheckpoint(cid, missing_ok=missing_ok))
    runtime.event("checkpoint_delete", id=str(cid))


async def list_checkpoints(manifests: ManifestStore, name: str | None = None) -> list[Checkpoint]:
    """The checkpoints of the latest manifest (with ``name`` only those named so), expired ones
    included until GC removes them."""
    latest = await manifests.read_latest()
    if latest is None:
        raise InvalidDbStateError("no database at this path (no manifest)")
    return [c for c in latest.manifest.checkpoints if name is None or c.name == name]
