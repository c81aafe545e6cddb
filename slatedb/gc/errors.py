"""Typed errors of the garbage collector."""

from __future__ import annotations

from slatedb.errors import SlateDBError


class GcInvariantError(SlateDBError):
    """GC was about to delete something its own rules say it must keep (the latest manifest, a
    checkpointed manifest, an id above the boundary, a referenced SST...). Never expected: the
    check sits right before each delete, so a bug in the selection stops GC instead of losing
    data. Never swallowed by the collector's retry loop."""


class PinnedManifestMissingError(SlateDBError):
    """A manifest named by an active checkpoint of the latest manifest could not be read, even
    after reading the latest manifest again. Without it GC cannot know what the checkpoint
    pins, so the pass is skipped (nothing is deleted) and tried again at the next interval."""
