"""The memory bucket's sorted key index: a listing is the scan it replaced, whatever changed the
bucket (the store's puts and deletes, or the dict's own methods, as tests and the simulator use)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slatedb.objstore.base import ObjectMeta
from slatedb.objstore.memory import MemoryBucket, MemoryStore

_KEYS = st.sampled_from(["a/1", "a/2", "a/10", "ab/1", "b/x", "b/y/z", "root/a/1", "root/b", "z"])
_OPS = st.lists(st.tuples(st.sampled_from(["put", "delete", "set", "pop", "del", "setdefault", "update",
                                           "list", "clear"]), _KEYS), max_size=40)


def _scan(bucket: MemoryBucket, root: str, prefix: str) -> list[ObjectMeta]:
    n = len(root)
    found = sorted((k, meta) for k, (_, meta) in list(bucket.objects.items()) if k.startswith(root + prefix))
    return [ObjectMeta(k[n:], m.size_bytes, m.last_modified_ms, m.etag) for k, m in found]


@settings(max_examples=60, deadline=None)
@given(_OPS, st.sampled_from(["", "root/"]))
def test_listings_equal_a_scan_of_the_bucket(ops: list, root: str) -> None:
    bucket = MemoryBucket()
    store = MemoryStore(bucket, lambda: 7, root=root)
    raw = bucket.objects
    for op, key in ops:
        rel = key[len(root):] if key.startswith(root) else key
        if op == "put":
            store.put_now(key, b"v")
        elif op == "delete":
            store.delete_now(key)
        elif op == "set":
            raw[key] = (b"x", ObjectMeta(key, 1, 1, '"e"'))
        elif op == "pop":
            raw.pop(key, None)
        elif op == "del" and key in raw:
            del raw[key]
        elif op == "setdefault":
            raw.setdefault(key, (b"y", ObjectMeta(key, 1, 2, '"f"')))
        elif op == "update":
            raw.update({key: (b"z", ObjectMeta(key, 1, 3, '"g"'))})
        elif op == "clear" and len(raw) > 6:
            raw.clear()
        for prefix in ("", "a", "a/", rel[:2], rel):
            assert store.list_now(prefix) == _scan(bucket, root, prefix)


def test_a_bucket_given_its_objects_shares_them() -> None:
    bucket = MemoryBucket()
    other = MemoryBucket(objects=bucket.objects)
    MemoryStore(bucket, lambda: 0).put_now("k", b"v")
    assert [m.key for m in MemoryStore(other, lambda: 0).list_now("")] == ["k"]
    plain = MemoryBucket(objects={"j": (b"w", ObjectMeta("j", 1, 0, '"e"'))})
    assert [m.key for m in MemoryStore(plain, lambda: 0).list_now("")] == ["j"]


def test_a_repeated_listing_is_a_fresh_list_with_each_roots_keys() -> None:
    """Listings repeated between two changes come from the bucket's last listing of that prefix:
    a caller changing its list changes no later listing, and two roots over the same keys keep
    their own names."""
    bucket = MemoryBucket()
    top, rooted = MemoryStore(bucket, lambda: 0), MemoryStore(bucket, lambda: 0, root="r/")
    top.put_now("r/a", b"v")
    first = rooted.list_now("")
    first.append(ObjectMeta("junk", 0, 0, '"e"'))
    assert [m.key for m in rooted.list_now("")] == ["a"]
    assert [m.key for m in top.list_now("r/")] == ["r/a"]
    top.put_now("r/b", b"v")
    assert [m.key for m in rooted.list_now("")] == ["a", "b"]


def test_a_change_leaves_the_listings_of_other_prefixes_as_they_were() -> None:
    """A change is seen by the listings under its key's prefixes and only by those: a put under
    ``wal/`` does not make the next listing of ``manifest/`` a new scan."""
    bucket = MemoryBucket()
    store = MemoryStore(bucket, lambda: 0, root="db/")
    store.put_now("manifest/1", b"v")
    store.put_now("wal/1", b"v")
    listings = bucket.objects._listings  # (full prefix, root length) -> (generation, metadata)
    assert [m.key for m in store.list_now("manifest/")] == ["manifest/1"]
    assert [m.key for m in store.list_now("wal/")] == ["wal/1"]
    manifests, wals = listings[("db/manifest/", 3)], listings[("db/wal/", 3)]
    store.put_now("wal/2", b"v")
    store.delete_now("wal/1")
    assert [m.key for m in store.list_now("manifest/")] == ["manifest/1"]
    assert listings[("db/manifest/", 3)] is manifests  # repeated, not scanned again
    assert [m.key for m in store.list_now("wal/")] == ["wal/2"] and listings[("db/wal/", 3)] is not wals
    store.put_now("manifest/2", b"v")
    assert [m.key for m in store.list_now("manifest/")] == ["manifest/1", "manifest/2"]
