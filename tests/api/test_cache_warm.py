"""Issue 22 item 4: ``warm_sst`` / ``evict_cached_sst`` on Db and DbReader, sync and async.

The store is made to refuse ranged reads of one SST: a warmed SST is then served from the block
cache, an evicted one goes to the store (and fails), and bad ids fail at the call."""

from __future__ import annotations

import asyncio

import pytest
from ulid import ULID

import slatedb
import slatedb.aio as aio
from slatedb.errors import InvalidArgumentError, NotFoundError, PermanentObjectStoreError
from slatedb.objstore.local import LocalStore

S = {"flush_interval": "1h", "manifest_poll_interval": "1h", "compactor_options": None,
     "garbage_collector_options": None, "l0_sst_size_bytes": 4096, "min_filter_keys": 10,
     "block_size_bytes": 512}
KEYS = [b"k%04d" % i for i in range(400)]


class RefusingStore(LocalStore):
    """Refuses ranged reads of objects whose key contains ``refuse`` (when set)."""

    refuse: str | None = None

    async def get(self, key, byte_range=None):
        if self.refuse is not None and byte_range is not None and self.refuse in key:
            raise PermanentObjectStoreError(key, f"refused read of {byte_range}")
        return await super().get(key, byte_range)


def _fill(db) -> None:
    for k in KEYS:
        db.put(k, b"v" * 40 + k)
    db.flush(wal=False)


def _sst_and_keys(core):
    h = core.read_state.view.l0[-1]  # the oldest L0 SST
    info = h.reader.info
    keys = [k for k in KEYS if info.first_entry <= k <= info.last_entry]
    assert len(h.reader.index) > 1 and keys
    return h.sst_id, keys


def test_warm_serves_reads_from_the_cache_and_evict_sends_them_to_the_store(tmp_path) -> None:
    store = RefusingStore(str(tmp_path))
    with slatedb.Db.open(f"file://{tmp_path}", S, store=store) as db:
        _fill(db)
        sid, keys = _sst_and_keys(db._core)
        db.evict_cached_sst(sid)
        store.refuse = str(sid)
        with pytest.raises(PermanentObjectStoreError):  # nothing cached: the read goes to the store
            db.get(keys[0])
        store.refuse = None
        assert db.warm_sst(str(sid)) == len(db._core.read_state.view.l0[-1].reader.index)
        store.refuse = str(sid)
        assert [db.get(k) for k in keys] == [b"v" * 40 + k for k in keys]  # all from the cache
        assert db.evict_cached_sst(sid) > 0
        with pytest.raises(PermanentObjectStoreError):
            db.get(keys[-1])
        store.refuse = None
        # a range warms only the blocks that may hold it
        n = db.warm_sst(sid, start=keys[0], end=keys[1])
        assert n == 1
        store.refuse = str(sid)
        assert db.get(keys[0]) == b"v" * 40 + keys[0]
        with pytest.raises(PermanentObjectStoreError):
            db.get(keys[-1])
        store.refuse = None


def test_bad_sst_ids_fail_at_the_call(tmp_path) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        _fill(db)
        with pytest.raises(NotFoundError, match="not in the database's current manifest"):
            db.warm_sst(ULID())
        with pytest.raises(NotFoundError):
            db.evict_cached_sst(str(ULID()))
        with pytest.raises(InvalidArgumentError, match="not an SST id"):
            db.warm_sst("no-such-sst")
        with pytest.raises(InvalidArgumentError):
            db.evict_cached_sst(42)
        sid, _ = _sst_and_keys(db._core)
        with pytest.raises(InvalidArgumentError, match="after end"):
            db.warm_sst(sid, start=b"z", end=b"a")


def test_reader_warm_and_evict(tmp_path) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        _fill(db)
    store = RefusingStore(str(tmp_path))
    with slatedb.DbReader.open(f"file://{tmp_path}", store=store) as r:
        sid, keys = _sst_and_keys(r._core)
        r.evict_cached_sst(sid)
        r.warm_sst(sid)
        store.refuse = str(sid)
        assert r.get(keys[0]) == b"v" * 40 + keys[0]
        r.evict_cached_sst(sid)
        with pytest.raises(PermanentObjectStoreError):
            r.get(keys[0])


def test_async_warm_and_evict_under_asyncio(tmp_path) -> None:
    store = RefusingStore(str(tmp_path))

    async def main() -> None:
        async with aio.Db.open(f"file://{tmp_path}", S, store=store) as db:
            for k in KEYS:
                await db.put(k, b"v" * 40 + k)
            await db.flush(wal=False)
            sid, keys = _sst_and_keys(db._core)
            await db.evict_cached_sst(sid)
            assert await db.warm_sst(sid) > 1
            store.refuse = str(sid)
            assert await db.get(keys[-1]) == b"v" * 40 + keys[-1]
            await db.evict_cached_sst(sid)
            with pytest.raises(PermanentObjectStoreError):
                await db.get(keys[-1])
            store.refuse = None
            with pytest.raises(NotFoundError):
                await db.warm_sst(ULID())

    asyncio.run(main())
