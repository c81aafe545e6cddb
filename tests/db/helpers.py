"""Helpers of the Db tests: a shared in-memory store, and a stand-in compactor.

The stand-in compactor is deliberately naive (merge every L0 SST into one new sorted run,
commit with the manifest CAS): enough to drive the writer's back-pressure and manifest
polling before the real compactor exists.
"""

from __future__ import annotations

import attrs
import trio

from slatedb.db.view import sst_key
from slatedb.format.manifest import decode_manifest_v2
from slatedb.format.sst import SstOptions
from slatedb.format.sst_reader import SstReader
from slatedb.format.sst_writer import write_sst
from slatedb.format.types import CompactedSsTableV2, CompactedSsTableView, SortedRunV2
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.merge import merge_rows
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.runtime.production import ProductionRuntime


def memory_store() -> MemoryStore:
    return MemoryStore(MemoryBucket(), ProductionRuntime().now_ms, url="memory://test")


def latest_manifest(store: MemoryStore):
    ids = sorted(int(m.key.split("/")[1].split(".")[0]) for m in store.list_now("manifest/"))
    key = f"manifest/{ids[-1]:020d}.manifest"
    return ids[-1], decode_manifest_v2(store.get_now(key).data, key)


async def _compact_all_l0(store: MemoryStore) -> int:
    rt = ProductionRuntime("compactor")
    ms = ManifestStore(store, rt)
    while True:
        cur = await ms.read_latest()
        assert cur is not None
        m = cur.manifest
        if not m.l0:
            return 0
        streams = []
        for view in m.l0:  # newest first: merge keeps the newest version first
            reader = await SstReader.open(store, sst_key(view.sst_id))
            streams.append([row async for row in reader.scan()])
        for run in m.compacted:
            for view in run.ssts:
                reader = await SstReader.open(store, sst_key(view.sst_id))
                streams.append([row async for row in reader.scan()])
        rows = list(merge_rows(streams))
        encoded = write_sst(rows, SstOptions(min_filter_keys=1))
        sst_id = rt.new_ulid()
        await store.put(sst_key(sst_id), encoded.data)
        new = attrs.evolve(
            m,
            compactor_epoch=m.compactor_epoch + 1,
            ssts=m.ssts + (CompactedSsTableV2(sst_id, encoded.info, encoded.format_version),),
            l0=(),
            last_compacted_l0_sst_view_id=m.l0[0].id,
            compacted=(SortedRunV2(0, (CompactedSsTableView(sst_id, sst_id, None),)),),
        )
        from slatedb.manifest.store import ManifestConflict

        try:
            await ms.try_write(cur.id + 1, new)
            return len(m.l0)
        except ManifestConflict:
            continue


def compact_all_l0(store: MemoryStore) -> int:
    """Merge every L0 SST and sorted run into one sorted run 0; return how many L0 SSTs went."""
    return trio.run(_compact_all_l0, store)


__all__ = ["StoredManifest", "compact_all_l0", "latest_manifest", "memory_store"]
