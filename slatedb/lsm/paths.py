"""SST path resolution across databases (RFC 000 "SST Path Resolution").

A clone's manifest references SSTs that live in its parent (and, for a clone of a clone, in
the parent's parents): every such SST id is listed in one ``ExternalDb.sst_ids`` entry, whose
``path`` names that database. Everything else is ``compacted/<ULID>.sst`` under the database's
own root. :class:`SstLocator` materialises that map from each manifest it is shown.

``ExternalDb.path`` is a path inside the same object store (that is how the official engine
writes it, e.g. ``"parent"`` next to ``"clone"``), or a full URL for a database elsewhere (only
this implementation writes those, see :func:`slatedb.objstore.url.relative_db_path`). A relative
path is tried under each ancestor of this database's URL, nearest first; the first that holds
a manifest and one of the entry's SSTs wins (and is remembered): with the parent deleted, an
unrelated database at an ancestor with the same relative path is not taken for it.
"""

from __future__ import annotations

from typing import Sequence

from ulid import ULID

from slatedb.errors import ObjectNotFoundError
from slatedb.format.layout import MANIFEST_DIR
from slatedb.format.types import ManifestV2
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.objstore.url import db_url_candidates
from slatedb.runtime import Runtime

from .view import sst_key


class SstLocator:
    """Where each SST of one database lives: its own store, or an external database's."""

    def __init__(self, store: ObjectStore, runtime: Runtime) -> None:
        self.store = store
        self.runtime = runtime
        self._external: dict[ULID, ObjectStore] = {}
        self._roots: dict[str, ObjectStore] = {}

    async def update(self, manifest: ManifestV2) -> None:
        """Learn the external SSTs of ``manifest`` (ids it no longer lists are forgotten)."""
        external: dict[ULID, ObjectStore] = {}
        for db in manifest.external_dbs:
            if not db.sst_ids:
                continue
            root = await self.root_of(db.path, db.sst_ids)
            for sst_id in db.sst_ids:
                external[sst_id] = root
        self._external = external

    def locate(self, sst_id: ULID) -> tuple[ObjectStore, str]:
        return self._external.get(sst_id, self.store), sst_key(sst_id)

    def is_external(self, sst_id: ULID) -> bool:
        return sst_id in self._external

    async def root_of(self, path: str, sst_ids: Sequence[ULID] = ()) -> ObjectStore:
        """The store of the database that ``path`` (an ``ExternalDb.path``) names: the nearest
        candidate (:func:`db_url_candidates`) holding a manifest and, given the entry's
        ``sst_ids``, one of them (ids are ULIDs: a database holding one is the one the entry
        names, not an unrelated database at an ancestor with the same relative path)."""
        found = self._roots.get(path)
        if found is not None:
            return found
        candidates = db_url_candidates(self.store.url, path)
        chosen: ObjectStore | None = None
        for url in candidates:
            store = self.store.open_url(url)
            metas = await retry_transient(self.runtime, lambda: store.list(MANIFEST_DIR), what=f"list {url}/{MANIFEST_DIR}")
            if metas and await self._holds_one(store, sst_ids):
                chosen = store
                break
            await store.aclose()
        if chosen is None:  # no such database anywhere (a deleted parent): the nearest; reads will say what is missing
            chosen = self.store.open_url(candidates[0])
        self._roots[path] = chosen
        return chosen

    async def _holds_one(self, store: ObjectStore, sst_ids: Sequence[ULID]) -> bool:
        """Whether ``store`` holds one of the first few of ``sst_ids`` (True without any)."""
        if not sst_ids:
            return True
        for sst_id in list(sst_ids)[:3]:
            key = sst_key(sst_id)
            try:
                await retry_transient(self.runtime, lambda: store.head(key), what=f"head {key}")
                return True
            except ObjectNotFoundError:
                continue
        return False

    async def aclose(self) -> None:
        for store in self._roots.values():
            await store.aclose()
        self._roots.clear()
