"""Checkpoints (RFC 000): durable, named pins on a manifest version.

A checkpoint is an entry of the latest manifest's ``checkpoints`` list that names a manifest id.
GC keeps that manifest and every SST and WAL object it references while the checkpoint is
present and unexpired (spec/protocols/checkpoints-gc.md, CKPT-1/2, GC-1/2). The functions here
run RFC 000's procedures on a :class:`~slatedb.manifest.store.ManifestStore`; the writer, the
:class:`~slatedb.reader.DbReader`, clones, the admin API and the CLI all use them.
"""

from .duration import format_duration, parse_duration
from .ops import (
    CheckpointCreateResult,
    CheckpointOptions,
    CheckpointScope,
    active_checkpoints,
    check_writable_state,
    create_checkpoint,
    delete_checkpoint,
    expire_time_s,
    find_checkpoint,
    is_expired,
    list_checkpoints,
    new_checkpoint,
    refresh_checkpoint,
)

__all__ = [
    "CheckpointCreateResult",
    "CheckpointOptions",
    "CheckpointScope",
    "active_checkpoints",
    "check_writable_state",
    "create_checkpoint",
    "delete_checkpoint",
    "expire_time_s",
    "find_checkpoint",
    "format_duration",
    "is_expired",
    "list_checkpoints",
    "new_checkpoint",
    "parse_duration",
    "refresh_checkpoint",
]
