"""``delete_shard`` (slatedb/gc/destroyed.py): a shard database kept for a clone goes once it is
released (destroy.md "Shards another database still reads", LOAD-9), every object under its
root, its manifests last: a shard half deleted has no manifest only once nothing else is left."""

from __future__ import annotations

from slatedb.gc.destroyed import delete_shard
from slatedb.runtime.production import ProductionRuntime
from tests.db.helpers import memory_store


async def test_a_shard_is_deleted_whole_with_its_manifests_after_every_other_object() -> None:
    """The manifests go last even where other objects sort after them (``wal/``: a shard opened
    by a writer; `sim mutate` seed 23: the manifest test made on the key with its leading ``/``
    deleted in plain key order, unnoticed: a shard's own SSTs sort before ``manifest/``)."""
    store = memory_store()
    root = "shards/L1/000000-0-U"
    keys = [f"{root}/compacted/01.sst", f"{root}/gc/manifest.boundary", f"{root}/manifest/00000000000000000001.manifest",
            f"{root}/manifest/00000000000000000002.manifest", f"{root}/wal/00000000000000000001.sst"]
    beside = ["shards/L1/000001-0-V/manifest/00000000000000000001.manifest", "manifest/00000000000000000001.manifest"]
    for key in keys + beside:
        store.put_now(key, b"x")
    deleted: list[str] = []
    real_delete = store.delete

    async def delete(key: str) -> None:
        deleted.append(key)
        await real_delete(key)

    store.delete = delete  # type: ignore[method-assign]
    assert await delete_shard(store, ProductionRuntime(), root) == len(keys)
    assert deleted == [keys[0], keys[1], keys[4], keys[2], keys[3]]
    assert sorted(m.key for m in store.list_now("")) == sorted(beside)
