"""Helpers of the Db tests: a shared in-memory store, and a one-shot full compaction.

:func:`compact_all_l0` runs the real compactor (``slatedb.compactor``) as a separate process
would: it fences any other compactor, submits a full compaction and runs it to completion.
"""

from __future__ import annotations

import trio

from slatedb.compactor import Compactor, full_spec, submit_compaction
from slatedb.config import Settings
from slatedb.errors import FencedError, TransientObjectStoreError
from slatedb.format.manifest import decode_manifest_v2
from slatedb.manifest.compaction import CompactionSpec, L0Source
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.objstore.base import OVERWRITE
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.runtime.production import ProductionRuntime


def memory_store() -> MemoryStore:
    return MemoryStore(MemoryBucket(), ProductionRuntime().now_ms, url="memory://test")


def latest_manifest(store: MemoryStore):
    ids = sorted(int(m.key.split("/")[1].split(".")[0]) for m in store.list_now("manifest/"))
    key = f"manifest/{ids[-1]:020d}.manifest"
    return ids[-1], decode_manifest_v2(store.get_now(key).data, key)


async def _compact_all_l0(store: MemoryStore, merge_operator=None, l0_only: bool = False) -> int:
    rt = ProductionRuntime("compactor")
    settings = Settings.from_dict({"min_filter_keys": 1, "compactor_options": {"scheduler_options": {
        "min_compaction_sources": "1000", "max_compaction_sources": "1000"}}})  # only what we submit
    while True:  # a compactor starting at the same moment (the Db's own) may take our epoch
        compactor = Compactor(store, rt, settings, merge_operator=merge_operator)
        try:
            await compactor.start()
            break
        except FencedError:
            continue
    # Read the manifest only now: until our start fenced it, the Db's own compactor may commit.
    cur = await ManifestStore(store, rt).read_latest()
    assert cur is not None
    spec = full_spec(cur.manifest)
    if l0_only and spec is not None:  # the L0 SSTs into a new run above the others (not the bottom)
        spec = CompactionSpec(tuple(s for s in spec.sources if isinstance(s, L0Source)),
                              max((r.id for r in cur.manifest.compacted), default=-1) + 1)
    if not cur.manifest.l0 or spec is None:
        return 0
    await submit_compaction(store, rt, spec)
    await compactor.run_until_idle()
    assert compactor.stats["completed"] == 1, compactor.stats
    return len(cur.manifest.l0)


def compact_all_l0(store: MemoryStore, merge_operator=None, l0_only: bool = False) -> int:
    """Merge every L0 SST and sorted run into one run; return how many L0 SSTs went.
    ``merge_operator``: the compactor's (None: merge operands stay unmerged); ``l0_only``: only
    the L0 SSTs, into a new run above the existing ones."""
    return trio.run(_compact_all_l0, store, merge_operator, l0_only)


__all__ = ["OutageStore", "StoredManifest", "compact_all_l0", "latest_manifest", "memory_store"]


class OutageStore(MemoryStore):
    """A view of a bucket whose every call fails as a refused connection while ``down``."""

    down = False

    def _check(self, key: str) -> None:
        if self.down:
            raise TransientObjectStoreError(key, "EndpointConnectionError: connection refused (test outage)")

    async def get(self, key, byte_range=None):
        self._check(key)
        return await super().get(key, byte_range)

    async def head(self, key):
        self._check(key)
        return await super().head(key)

    async def put(self, key, data, mode=OVERWRITE):
        self._check(key)
        return await super().put(key, data, mode)

    async def list(self, prefix=""):
        self._check(prefix)
        return await super().list(prefix)

    async def delete(self, key):
        self._check(key)
        return await super().delete(key)

