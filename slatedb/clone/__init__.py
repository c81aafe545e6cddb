"""Clones (RFC 000 "Clones"): a new database that starts as its parent at a checkpoint, reads
the parent's SSTs in place (``external_dbs``) and writes only under its own path.

:func:`create_clone` makes (or finishes) one on open stores; :func:`create_clone_url` does the
same from URLs. Once made, ``slatedb.Db.open(clone_url)`` opens it like any database. See
``docs/clones.md`` and ``spec/protocols/clone.md``.
"""

from __future__ import annotations

import uuid

from slatedb.manifest.store import StoredManifest
from slatedb.objstore.url import resolve_store
from slatedb.runtime import Runtime
from slatedb.runtime.anyloop import on_any_loop
from slatedb.runtime.production import default_runtime

from .ops import EPHEMERAL_CHECKPOINT_LIFETIME_S, CloneMismatchError, create_clone


@on_any_loop
async def create_clone_url(clone_url: str, parent_url: str, parent_checkpoint: uuid.UUID | str | None = None,
                           runtime: Runtime | None = None) -> StoredManifest:
    """:func:`create_clone` with both databases named by URL (``memory://``, ``file:///``,
    ``s3://``); the stores are opened here and closed on return."""
    if runtime is None:
        runtime = default_runtime()
    clone_store = resolve_store(clone_url, clock_ms=runtime.now_ms)
    try:
        parent_store = clone_store.open_url(parent_url)
        try:
            return await create_clone(clone_store, parent_store, runtime, parent_checkpoint)
        finally:
            await parent_store.aclose()
    finally:
        await clone_store.aclose()


__all__ = ["EPHEMERAL_CHECKPOINT_LIFETIME_S", "CloneMismatchError", "create_clone", "create_clone_url"]
