"""One contract, four real backends: memory, local directory, SeaweedFS and moto.

Every protocol of the database leans on these exact behaviours, so a backend that passes here can
carry the manifest CAS, WAL fencing and GC.
"""

from __future__ import annotations

import pytest
import trio

from slatedb.errors import (
    InvalidPathError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    PreconditionFailedError,
)
from slatedb.objstore import CREATE_IF_ABSENT, OVERWRITE, PutMode

pytestmark = pytest.mark.xdist_group("s3-servers")

PAYLOAD = bytes(range(256)) * 3


async def test_put_get_head_roundtrip(store):
    meta = await store.put("dir/obj", PAYLOAD)
    assert meta.key == "dir/obj" and meta.size_bytes == len(PAYLOAD) and meta.etag
    got = await store.get("dir/obj")
    assert got.data == PAYLOAD
    assert got.meta.etag == meta.etag and got.meta.size_bytes == len(PAYLOAD)
    head = await store.head("dir/obj")
    assert head.etag == meta.etag and head.size_bytes == len(PAYLOAD)
    assert head.last_modified_ms > 1_600_000_000_000


async def test_overwrite_changes_content_and_etag(store):
    first = await store.put("k", b"one")
    second = await store.put("k", b"two", OVERWRITE)
    assert second.etag != first.etag
    assert (await store.get("k")).data == b"two"


async def test_empty_object(store):
    await store.put("wal/00000000000000000001.sst", b"", CREATE_IF_ABSENT)
    got = await store.get("wal/00000000000000000001.sst")
    assert got.data == b"" and got.meta.size_bytes == 0


async def test_missing_object_is_not_found(store):
    with pytest.raises(ObjectNotFoundError):
        await store.get("nope")
    with pytest.raises(ObjectNotFoundError):
        await store.head("nope")
    with pytest.raises(ObjectNotFoundError):
        await store.get("nope", byte_range=(0, 4))


@pytest.mark.parametrize(
    "byte_range, expected",
    [((0, 5), PAYLOAD[0:5]), ((2, 4), PAYLOAD[2:4]), ((700, 10_000), PAYLOAD[700:]),
     ((5, 5), b""), ((len(PAYLOAD), len(PAYLOAD) + 10), b""), ((5000, 6000), b"")],
)
async def test_ranged_reads(store, byte_range, expected):
    await store.put("r", PAYLOAD)
    got = await store.get("r", byte_range=byte_range)
    assert got.data == expected
    assert got.meta.size_bytes == len(PAYLOAD)


async def test_invalid_range_is_refused(store):
    await store.put("r", PAYLOAD)
    for bad in [(-1, 3), (5, 2), (1,), "0-3"]:
        with pytest.raises(InvalidPathError):
            await store.get("r", byte_range=bad)


async def test_create_if_absent(store):
    meta = await store.put("manifest/00000000000000000001.manifest", b"v1", CREATE_IF_ABSENT)
    with pytest.raises(ObjectAlreadyExistsError):
        await store.put("manifest/00000000000000000001.manifest", b"v2", CREATE_IF_ABSENT)
    got = await store.get("manifest/00000000000000000001.manifest")
    assert got.data == b"v1" and got.meta.etag == meta.etag


async def test_update_if_match(store):
    m1 = await store.put("gc/manifest.boundary", b"1", CREATE_IF_ABSENT)
    m2 = await store.put("gc/manifest.boundary", b"2", PutMode.update_if_match(m1.etag))
    assert m2.etag != m1.etag
    with pytest.raises(PreconditionFailedError):  # stale etag
        await store.put("gc/manifest.boundary", b"3", PutMode.update_if_match(m1.etag))
    assert (await store.get("gc/manifest.boundary")).data == b"2"
    m3 = await store.put("gc/manifest.boundary", b"3", PutMode.update_if_match(m2.etag))
    assert (await store.head("gc/manifest.boundary")).etag == m3.etag


async def test_update_if_match_on_missing_key_is_not_found(store):
    with pytest.raises(ObjectNotFoundError):
        await store.put("gc/compactions.boundary", b"1", PutMode.update_if_match('"whatever"'))
    with pytest.raises(ObjectNotFoundError):
        await store.head("gc/compactions.boundary")


async def test_list_in_key_order_with_prefix(store):
    keys = ["wal/00000000000000000002.sst", "wal/00000000000000000010.sst", "wal/00000000000000000001.sst",
            "manifest/00000000000000000001.manifest", "a-b", "a/b", "a/c/d", "ab"]
    metas = {}
    for i, k in enumerate(keys):
        metas[k] = await store.put(k, b"x" * i)
    listed = await store.list()
    assert [m.key for m in listed] == sorted(keys)
    for m in listed:
        assert m.size_bytes == metas[m.key].size_bytes
        assert m.etag == metas[m.key].etag
        assert m.last_modified_ms > 1_600_000_000_000
    wal = await store.list("wal/")
    assert [m.key for m in wal] == sorted(k for k in keys if k.startswith("wal/"))
    assert [m.key for m in await store.list("a")] == ["a-b", "a/b", "a/c/d", "ab"]
    assert [m.key for m in await store.list("a/")] == ["a/b", "a/c/d"]
    assert await store.list("nothing-here/") == []


async def test_delete_is_idempotent(store):
    await store.put("compacted/x.sst", b"data")
    await store.delete("compacted/x.sst")
    with pytest.raises(ObjectNotFoundError):
        await store.get("compacted/x.sst")
    await store.delete("compacted/x.sst")
    assert await store.list("compacted/") == []


async def test_copy(store):
    await store.put("wal/00000000000000000003.sst", PAYLOAD)
    meta = await store.copy("wal/00000000000000000003.sst", "clone/wal/00000000000000000003.sst")
    assert meta.size_bytes == len(PAYLOAD)
    assert (await store.get("clone/wal/00000000000000000003.sst")).data == PAYLOAD
    with pytest.raises(ObjectNotFoundError):
        await store.copy("missing", "dst")


BAD_KEYS = ["", "/abs", "a//b", "a/", "..", "a/../b", "./a", "a/./b", "a\\b", "a\x00b", ".slatedb-locks/x"]


@pytest.mark.parametrize("key", BAD_KEYS)
async def test_bad_keys_are_refused(store, key):
    for call in (
        lambda: store.put(key, b"x"),
        lambda: store.get(key),
        lambda: store.head(key),
        lambda: store.delete(key),
        lambda: store.put(key, b"x", CREATE_IF_ABSENT),
    ):
        with pytest.raises(InvalidPathError) as info:
            await call()
        assert "object key" in str(info.value) or "reserved" in str(info.value)
    assert await store.list() == []


async def test_non_str_key_is_refused(store):
    with pytest.raises(InvalidPathError, match="must be str"):
        await store.put(b"bytes-key", b"x")


async def test_sixteen_concurrent_creates_have_one_winner(store):
    key = "manifest/00000000000000000007.manifest"
    winners: list[int] = []
    losers: list[int] = []

    async def contender(i: int) -> None:
        try:
            await store.put(key, f"writer-{i}".encode(), CREATE_IF_ABSENT)
            winners.append(i)
        except ObjectAlreadyExistsError:
            losers.append(i)

    async with trio.open_nursery() as nursery:
        for i in range(16):
            nursery.start_soon(contender, i)
    assert len(winners) == 1 and len(losers) == 15
    assert (await store.get(key)).data == f"writer-{winners[0]}".encode()


async def test_concurrent_updates_with_one_etag_have_one_winner(store):
    base = await store.put("gc/manifest.boundary", b"0", CREATE_IF_ABSENT)
    winners: list[int] = []

    async def contender(i: int) -> None:
        try:
            await store.put("gc/manifest.boundary", str(i).encode(), PutMode.update_if_match(base.etag))
            winners.append(i)
        except PreconditionFailedError:
            pass

    async with trio.open_nursery() as nursery:
        for i in range(1, 9):
            nursery.start_soon(contender, i)
    assert len(winners) == 1
    assert (await store.get("gc/manifest.boundary")).data == str(winners[0]).encode()
