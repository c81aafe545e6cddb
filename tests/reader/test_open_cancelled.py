"""A ``DbReader`` open the caller gives up on leaves no checkpoint behind.

Found by cancelling ``aio.DbReader.open`` with ``asyncio.wait_for`` (and trio's
``move_on_after``) at timeouts of 0.5..30 ms: of 27 cancelled opens, 17 left a reader checkpoint
in the manifest, each pinning the database's manifests, WAL and SSTs against GC for its whole
lifetime (600 s by default). The cancel arrived inside the manifest commit that adds the
checkpoint, after the manifest object was written: the open's clean-up deletes the checkpoints
it knows of, and it did not know that one yet. Now a commit that raises, cancelled or not,
hands its checkpoint id to that clean-up (a delete that finds nothing writes nothing).

The cancel is placed deterministically: a store that, once the checkpoint's manifest is
written, cancels the caller's scope before the commit returns.
"""

from __future__ import annotations

import trio

import slatedb
from slatedb import admin, aio
from slatedb.objstore import resolve_store
from slatedb.objstore.base import OVERWRITE, ObjectStore


class CancelAfterManifestPut(ObjectStore):
    """``inner``; the first manifest put that lands cancels ``scope`` (``armed`` puts later)."""

    def __init__(self, inner: ObjectStore, scope: trio.CancelScope) -> None:
        self.inner = inner
        self.scope = scope
        self.url = inner.url
        self.fired = False

    async def get(self, key, byte_range=None):
        return await self.inner.get(key, byte_range)

    async def head(self, key):
        return await self.inner.head(key)

    async def list(self, prefix=""):
        return await self.inner.list(prefix)

    async def put(self, key, data, mode=OVERWRITE):
        meta = await self.inner.put(key, data, mode)
        if key.startswith("manifest/") and not self.fired:
            self.fired = True
            self.scope.cancel()
            await trio.lowlevel.checkpoint()  # the cancel is delivered here, the manifest written
        return meta

    async def delete(self, key):
        return await self.inner.delete(key)

    async def aclose(self):
        await self.inner.aclose()


def test_a_reader_open_cancelled_after_its_checkpoint_landed_deletes_it(tmp_path) -> None:
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        db.put(b"k", b"v", durable=True)
    store = resolve_store(url)
    before = trio.run(admin.read_manifest, store).id

    async def main() -> CancelAfterManifestPut:
        with trio.CancelScope() as scope:
            wrapped = CancelAfterManifestPut(resolve_store(url), scope)
            async with aio.DbReader.open(url, store=wrapped):
                raise AssertionError("the open should have been cancelled")
        assert scope.cancelled_caught
        return wrapped

    assert trio.run(main).fired
    latest = trio.run(admin.read_manifest, store)
    assert latest.id > before  # the checkpoint's manifest was written ...
    assert trio.run(admin.list_checkpoints, store) == []  # ... and its checkpoint deleted again
    with slatedb.DbReader.open(url) as reader:  # and the database reads on
        assert reader.get(b"k") == b"v"
    assert trio.run(admin.list_checkpoints, store) == []
