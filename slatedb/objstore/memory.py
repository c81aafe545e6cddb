"""An in-process object store, shared by name within a process.

It is the reference backend: the simulator wraps it, and the contract suite checks that every
other backend behaves like it. Operations are atomic (one dict update between two awaits; a
conditional put's check and update hold the bucket's lock, so two threads sharing a bucket -- a
sync ``Db``'s engine thread and a compactor or admin on another -- cannot both create one key),
and ETags are a per-store counter, so no two versions of a key ever share an ETag (stricter than
S3's content MD5, which repeats for identical content).
"""

from __future__ import annotations

import bisect
import itertools
import threading
from typing import Callable

import attrs
import trio

from slatedb.errors import ObjectAlreadyExistsError, ObjectNotFoundError, PreconditionFailedError

from .base import (
    OVERWRITE,
    GetResult,
    ObjectMeta,
    ObjectStore,
    PutKind,
    PutMode,
    validate_key,
    validate_prefix,
    validate_range,
    url_resolver,
)


#: Prefixes whose listings a bucket repeats (registered for good; others are listed afresh).
_MAX_PREFIXES = 1024


class _Objects(dict):
    """A bucket's objects by full key, with the keys kept sorted for listings.

    The sorted key list is rebuilt on the first listing after a change (a generation number
    from ``itertools.count``, taken on every change, tells a stale list from a fresh one even
    when another thread changes the dict while a listing copies its keys): a listing is then a
    bisection and the matches, not a scan of every key in the bucket (a simulated world lists
    hundreds of times between two changes, over a bucket holding every database's objects).
    A listing is repeated until a change under its prefix: each listed prefix keeps the
    generation of the last change of a key under it (a put of a WAL object leaves the listings
    of ``manifest/`` as they were)."""

    __slots__ = ("_gen", "_counter", "_sorted", "_listings", "_prefixes", "_touched", "_all")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._counter = itertools.count(1)
        self._gen = 0
        self._sorted: tuple[int, list[str]] = (-1, [])
        #: (full prefix, root length) -> (generation, the listing's metadata): most listings of
        #: a simulated world repeat one made since the last change (polls of ``manifest/``).
        self._listings: dict[tuple[str, int], tuple[int, tuple[ObjectMeta, ...]]] = {}
        #: The prefixes listed (each registered before its first listing reads the generation),
        #: the generation of the last change of a key under each, and of the last change of
        #: keys not named (``update``, ``clear``, ``popitem``: every listing is stale).
        self._prefixes: set[str] = set()
        self._touched: dict[str, int] = {}
        self._all = 0

    def _changed(self, key: object = None) -> None:
        gen = self._gen = next(self._counter)
        if type(key) is not str:
            self._all = gen
            return
        touched = self._touched
        for prefix in tuple(self._prefixes):  # tuple(): one C call, atomic under the GIL
            if key.startswith(prefix):
                touched[prefix] = gen

    def __setitem__(self, key: str, value: tuple[bytes, ObjectMeta]) -> None:
        super().__setitem__(key, value)
        self._changed(key)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._changed(key)

    def pop(self, key, *args):  # type: ignore[override]
        try:
            return super().pop(key, *args)
        finally:
            self._changed(key)

    def popitem(self):  # type: ignore[override]
        try:
            return super().popitem()
        finally:
            self._changed()

    def setdefault(self, key, default=None):  # type: ignore[override]
        try:
            return super().setdefault(key, default)
        finally:
            self._changed(key)

    def update(self, *args, **kwargs) -> None:  # type: ignore[override]
        super().update(*args, **kwargs)
        self._changed()

    def __ior__(self, other):  # type: ignore[override]
        self.update(other)
        return self

    def clear(self) -> None:
        super().clear()
        self._changed()

    def sorted_keys(self) -> list[str]:
        """Every key, sorted (do not change the list)."""
        gen, keys = self._sorted
        if gen != self._gen:
            gen = self._gen
            keys = sorted(list(self))  # list(): one C call, atomic under the GIL
            self._sorted = (gen, keys)
        return keys

    def keys_under(self, prefix: str) -> list[str]:
        """The keys starting with ``prefix``, sorted."""
        keys = self.sorted_keys()
        lo = bisect.bisect_left(keys, prefix)
        if prefix and prefix[-1] != "\U0010ffff":
            # The keys starting with ``prefix`` are those in [prefix, prefix with its last
            # character the next one): two bisections and a slice.
            return keys[lo:bisect.bisect_left(keys, prefix[:-1] + chr(ord(prefix[-1]) + 1), lo)]
        out = []
        for i in range(lo, len(keys)):
            k = keys[i]
            if not k.startswith(prefix):
                break
            out.append(k)
        return out

    def listing(self, full_prefix: str, root_len: int) -> list[ObjectMeta]:
        """The metadata of every object under ``full_prefix``, sorted by key, each key without
        its first ``root_len`` characters. Repeated from the last such listing when nothing
        changed since (a change between reading the generation and storing the result leaves
        an entry that never matches again)."""
        prefixes = self._prefixes
        kept = full_prefix in prefixes
        if not kept and len(prefixes) < _MAX_PREFIXES:
            prefixes.add(full_prefix)  # before the generation is read (see _changed)
            kept = True
        gen = self._gen
        cached = self._listings.get((full_prefix, root_len)) if kept else None
        if cached is not None and cached[0] >= self._all and cached[0] >= self._touched.get(full_prefix, 0):
            return list(cached[1])
        out = []
        for k in self.keys_under(full_prefix):
            got = self.get(k)
            if got is not None:  # deleted by another thread since the sorted list was made
                meta = got[1]
                # The stored metadata itself when its key is the one listed (stored through the
                # same root; frozen, so sharing it is safe), else a copy under the listed key.
                rel = k[root_len:] if root_len else k
                out.append(meta if meta.key == rel else ObjectMeta(rel, meta.size_bytes, meta.last_modified_ms, meta.etag))
        if kept:
            if len(self._listings) > 4096:
                self._listings.clear()
            self._listings[(full_prefix, root_len)] = (gen, tuple(out))
        return out


def _as_objects(objects: dict) -> _Objects:
    return objects if isinstance(objects, _Objects) else _Objects(objects)


@attrs.define
class MemoryBucket:
    """The shared state behind every ``MemoryStore`` opened on one name."""

    objects: dict[str, tuple[bytes, ObjectMeta]] = attrs.field(factory=_Objects, converter=_as_objects)
    etag_counter: int = 0
    #: Held across a put's check and update: between them Python code runs (the clock, the
    #: ETag), where another thread could otherwise create the same key (both creates would
    #: succeed, the later one overwriting the earlier: a lost manifest update).
    lock: threading.Lock = attrs.field(factory=threading.Lock, eq=False, repr=False)

    def next_etag(self) -> str:
        self.etag_counter += 1
        return f'"m{self.etag_counter}"'


class MemoryRegistry:
    """Buckets by name. The process-wide default lives in :data:`DEFAULT_REGISTRY`; the
    simulator makes one per world so simulated worlds never share state."""

    def __init__(self) -> None:
        self._buckets: dict[str, MemoryBucket] = {}

    def bucket(self, name: str) -> MemoryBucket:
        return self._buckets.setdefault(name, MemoryBucket())

    def drop(self, name: str) -> None:
        self._buckets.pop(name, None)

    def adopt(self, name: str, bucket: MemoryBucket) -> None:
        """Serve ``bucket`` as ``name`` (a read-only view of a simulated world's bucket)."""
        self._buckets[name] = bucket


DEFAULT_REGISTRY = MemoryRegistry()


class MemoryStore(ObjectStore):
    """Keys live in a :class:`MemoryBucket`, under an optional key prefix (``memory://name/path``)."""

    def __init__(self, bucket: MemoryBucket, clock_ms: Callable[[], int], *, root: str = "", url: str = "memory://",
                 registry: "MemoryRegistry | None" = None) -> None:
        self._bucket = bucket
        self._clock_ms = clock_ms
        self._root = root
        self.url = url
        self._registry = registry

    def open_url(self, url: str) -> ObjectStore:
        """``memory://`` URLs resolve in this store's registry with this store's clock."""
        if url.lower().startswith("memory://"):
            return url_resolver()(url, clock_ms=self._clock_ms, memory_registry=self._registry or DEFAULT_REGISTRY)
        return super().open_url(url)

    def _full(self, key: str) -> str:
        return self._root + validate_key(key)

    def get_now(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        """The read itself, with no await (the simulator applies it at a moment of its choosing)."""
        full = self._full(key)
        byte_range = validate_range(key, byte_range)
        try:
            data, meta = self._bucket.objects[full]
        except KeyError:
            raise ObjectNotFoundError(key, "no such object") from None
        if byte_range is not None:
            data = data[byte_range[0] : byte_range[1]]
        if meta.key != key:  # stored through another root (frozen: the stored one is shared otherwise)
            meta = ObjectMeta(key, meta.size_bytes, meta.last_modified_ms, meta.etag)
        return GetResult(data, meta)

    async def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        self._full(key)
        await trio.lowlevel.checkpoint()
        return self.get_now(key, byte_range)

    def head_now(self, key: str) -> ObjectMeta:
        full = self._full(key)
        try:
            meta = self._bucket.objects[full][1]
        except KeyError:
            raise ObjectNotFoundError(key, "no such object") from None
        if meta.key != key:
            meta = ObjectMeta(key, meta.size_bytes, meta.last_modified_ms, meta.etag)
        return meta

    async def head(self, key: str) -> ObjectMeta:
        self._full(key)
        await trio.lowlevel.checkpoint()
        return self.head_now(key)

    def put_now(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        """The put itself, with no await: the simulator applies it at a moment of its choosing."""
        full = self._full(key)
        data = bytes(data)
        bucket = self._bucket
        with bucket.lock:
            current = bucket.objects.get(full)
            if mode.kind is PutKind.CREATE_IF_ABSENT and current is not None:
                raise ObjectAlreadyExistsError(key, "object already exists (create-if-absent)")
            if mode.kind is PutKind.UPDATE_IF_MATCH:
                if current is None:
                    raise ObjectNotFoundError(key, "no such object (update-if-match)")
                if current[1].etag != mode.etag:
                    raise PreconditionFailedError(key, f"etag is {current[1].etag}, expected {mode.etag}")
            meta = ObjectMeta(key, len(data), self._clock_ms(), bucket.next_etag())
            bucket.objects[full] = (data, meta)
        return meta

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        self._full(key)
        await trio.lowlevel.checkpoint()
        return self.put_now(key, data, mode)

    def list_now(self, prefix: str = "") -> list[ObjectMeta]:
        full_prefix = self._root + validate_prefix(prefix)
        # The bucket keeps its keys sorted (a bisection, not a scan of every database's
        # objects) and its last listing of each prefix until the next change.
        return self._bucket.objects.listing(full_prefix, len(self._root))

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        validate_prefix(prefix)
        await trio.lowlevel.checkpoint()
        return self.list_now(prefix)

    def delete_now(self, key: str) -> None:
        self._bucket.objects.pop(self._full(key), None)

    async def delete(self, key: str) -> None:
        self._full(key)
        await trio.lowlevel.checkpoint()
        self.delete_now(key)

    def corrupt_now(self, key: str, data: bytes) -> None:
        """Replace an object's bytes in place, keeping its metadata (simulated bit rot)."""
        full = self._full(key)
        _, meta = self._bucket.objects[full]
        self._bucket.objects[full] = (bytes(data), attrs.evolve(meta, size_bytes=len(data)))
