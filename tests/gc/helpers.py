"""Shared set-up of the GC tests: a virtual clock, and databases built object by object.

:class:`VirtualRuntime` reads trio's clock, so under ``trio.testing.MockClock(autojump_threshold=0)``
(:func:`run_virtual`) sleeping costs nothing and :meth:`VirtualRuntime.advance` moves the wall
clock forward at once: ``min_age`` and checkpoint expiry pass instantly. The store stamps
``last_modified`` with the same clock.

:class:`DbBuilder` writes manifests, WAL objects and SST objects directly (the GC only lists,
reads manifests and deletes: the SST bytes need not decode), so each test states exactly the
state an RFC rule speaks about.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, Callable

import attrs
import trio
import trio.testing
from ulid import ULID

from slatedb.compactor.store import CompactionsStore
from slatedb.config import GarbageCollectorDirectoryOptions, GarbageCollectorOptions
from slatedb.format.types import (
    Checkpoint,
    Compaction,
    CompactedSsTable,
    CompactedSsTableV2,
    CompactedSsTableView,
    CompactionsV1,
    CompactionStatus,
    ManifestV2,
    SortedRunV2,
    SsTableInfo,
    TieredCompactionSpec,
)
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.objstore.base import OVERWRITE, ObjectMeta, PutMode
from slatedb.objstore.memory import MemoryBucket, MemoryRegistry, MemoryStore
from slatedb.objstore.url import resolve_store
from slatedb.runtime import ulid_from_parts, uuid4_from_int
from slatedb.runtime.production import ProductionRuntime
from slatedb.wal.writer import wal_key

#: The wall-clock time at virtual time 0 (2026-01-01T00:00:00Z).
EPOCH_MS = 1_767_225_600_000


class VirtualRuntime(ProductionRuntime):
    """Wall clock = ``EPOCH_MS`` + trio's (mock) clock + manual jumps; seeded ids; events kept."""

    def __init__(self, name: str = "gc", seed: int = 0, events: list | None = None) -> None:
        super().__init__(name)
        self._seeded = random.Random(seed)
        self.offset_ms = 0
        self.events: list[tuple[str, str, dict]] = [] if events is None else events

    def now_ms(self) -> int:
        return EPOCH_MS + self.offset_ms + int(trio.current_time() * 1000)

    def monotonic_s(self) -> float:
        return trio.current_time()

    def advance(self, seconds: float) -> None:
        """Jump the wall clock forward (the store's ``last_modified`` follows it)."""
        self.offset_ms += int(seconds * 1000)

    @property
    def rng(self) -> random.Random:
        return self._seeded

    def new_ulid(self) -> ULID:
        """A ULID of now; the clock then moves 1 ms, so ids minted one after the other are
        ordered by time (what the ULID cutoffs of SST GC read)."""
        minted = ulid_from_parts(self.now_ms(), self._seeded.getrandbits(80))
        self.offset_ms += 1
        return minted

    def new_uuid(self) -> uuid.UUID:
        return uuid4_from_int(self._seeded.getrandbits(128))

    def event(self, kind: str, **fields: Any) -> None:
        self.events.append((self.name, kind, fields))

    def kinds(self, kind: str) -> list[dict]:
        return [f for _n, k, f in self.events if k == kind]


def run_virtual(fn: Callable[..., Any], *args: Any) -> Any:
    return trio.run(fn, *args, clock=trio.testing.MockClock(autojump_threshold=0))


def memory_store(rt: VirtualRuntime, registry: MemoryRegistry | None = None, path: str = "db") -> MemoryStore:
    if registry is None:
        return MemoryStore(MemoryBucket(), rt.now_ms, url=f"memory://gc-test/{path}")
    store = resolve_store(f"memory://gc-test/{path}", clock_ms=rt.now_ms, memory_registry=registry)
    assert isinstance(store, MemoryStore)
    return store


def directory(min_age_s: float = 60.0, interval_s: float | None = 10.0, dry_run: bool = False
              ) -> GarbageCollectorDirectoryOptions:
    return GarbageCollectorDirectoryOptions(interval=interval_s, min_age=min_age_s, dry_run=dry_run)


def gc_options(min_age_s: float = 60.0, interval_s: float | None = 10.0, dry_run: bool = False,
               **overrides: Any) -> GarbageCollectorOptions:
    """Every directory on (WAL fences too, unlike the default), with one min_age/interval."""
    d = directory(min_age_s, interval_s, dry_run)
    base = GarbageCollectorOptions(manifest_options=d, wal_options=d, wal_fence_options=d, compacted_options=d,
                                   compactions_options=d)
    return attrs.evolve(base, **overrides)


def sst(sst_id: ULID) -> tuple[CompactedSsTableV2, CompactedSsTableView]:
    return CompactedSsTableV2(sst_id, SsTableInfo(first_entry=b"a", last_entry=b"z")), CompactedSsTableView(sst_id, sst_id)


class DbBuilder:
    """Writes one database's objects directly, on the real ManifestStore / CompactionsStore."""

    def __init__(self, store: MemoryStore, rt: VirtualRuntime) -> None:
        self.store = store
        self.rt = rt
        self.manifests = ManifestStore(store, rt)
        self.compactions = CompactionsStore(store, rt)

    async def commit(self, change: Callable[[ManifestV2], ManifestV2] = lambda m: m) -> StoredManifest:
        """Write the next manifest (the first one is ``ManifestV2(initialized=True)``)."""
        cur = await self.manifests.read_latest()
        if cur is None:
            return await self.manifests.try_write(1, change(ManifestV2(initialized=True)))
        return await self.manifests.try_write(cur.id + 1, change(cur.manifest))

    async def commits(self, n: int) -> StoredManifest:
        stored = None
        for _ in range(n):
            stored = await self.commit()
        assert stored is not None
        return stored

    def put_sst(self) -> ULID:
        """An SST object minted now (``compacted/<ULID>.sst``)."""
        sst_id = self.rt.new_ulid()
        self.store.put_now(f"compacted/{sst_id}.sst", b"sst-bytes")
        return sst_id

    def put_wal(self, wal_id: int, *, fence: bool = False) -> None:
        self.store.put_now(wal_key(wal_id), b"" if fence else b"wal-bytes")

    async def add_l0(self, *sst_ids: ULID) -> StoredManifest:
        def change(m: ManifestV2) -> ManifestV2:
            tables, views = zip(*(sst(i) for i in sst_ids))
            return attrs.evolve(m, ssts=m.ssts + tuple(tables), l0=tuple(reversed(views)) + m.l0)
        return await self.commit(change)

    async def replace_all(self, *sst_ids: ULID) -> StoredManifest:
        """A compaction's commit: every SST replaced by one sorted run of ``sst_ids``."""
        def change(m: ManifestV2) -> ManifestV2:
            tables, views = zip(*(sst(i) for i in sst_ids)) if sst_ids else ((), ())
            last = m.l0[0].id if m.l0 else m.last_compacted_l0_sst_view_id
            return attrs.evolve(m, ssts=tuple(tables), l0=(), compacted=(SortedRunV2(0, tuple(views)),) if views else (),
                                last_compacted_l0_sst_view_id=last)
        return await self.commit(change)

    async def add_checkpoint(self, manifest_id: int | None = None, *, expire_in_s: float | None = None,
                             ) -> tuple[Checkpoint, StoredManifest]:
        """A checkpoint on ``manifest_id`` (default: the manifest that adds it, as RFC 000 does)."""
        cur = await self.manifests.read_latest()
        assert cur is not None
        now_s = self.rt.now_ms() // 1000
        cp = Checkpoint(id=self.rt.new_uuid(), manifest_id=manifest_id or cur.id + 1,
                        checkpoint_expire_time_s=0 if expire_in_s is None else int(now_s + expire_in_s),
                        checkpoint_create_time_s=now_s)
        stored = await self.commit(lambda m: attrs.evolve(m, checkpoints=m.checkpoints + (cp,)))
        return cp, stored

    async def write_compactions(self, *compactions: Compaction) -> None:
        cur = await self.compactions.read_latest()
        next_id = 1 if cur is None else cur.id + 1
        await self.compactions.try_write(next_id, CompactionsV1(1, tuple(compactions)))

    def compaction(self, status: CompactionStatus, outputs: tuple[ULID, ...] = (), l0_view_ids: tuple[ULID, ...] = (),
                   ) -> Compaction:
        return Compaction(id=self.rt.new_ulid(), spec=TieredCompactionSpec(l0_view_ids=l0_view_ids), status=status,
                          output_ssts=tuple(CompactedSsTable(o, SsTableInfo(first_entry=b"a")) for o in outputs))

    # -- looking --------------------------------------------------------------------------------

    def keys(self, prefix: str) -> list[str]:
        return [m.key for m in self.store.list_now(prefix)]

    def manifest_ids(self) -> list[int]:
        return [int(k.split("/")[1].split(".")[0]) for k in self.keys("manifest/")]

    def compactions_ids(self) -> list[int]:
        return [int(k.split("/")[1].split(".")[0]) for k in self.keys("compactions/") if k.endswith(".compactions")]

    def wal_ids(self) -> list[int]:
        return [int(k.split("/")[1].split(".")[0]) for k in self.keys("wal/")]

    def sst_ids(self) -> set[ULID]:
        return {ULID.from_str(k.split("/")[1][:-4]) for k in self.keys("compacted/")}

    def boundary(self, ns: str = "manifest") -> int | None:
        try:
            return int(bytes(self.store.get_now(f"gc/{ns}.boundary").data))
        except Exception:
            return None

    async def latest(self) -> StoredManifest:
        cur = await self.manifests.read_latest()
        assert cur is not None
        return cur


# -- stores that play a race at the moment a create lands (DESTROY-7; tests/gc/test_destroy_race.py,
# tests/db/test_open_after_destroy.py) --------------------------------------------------------------


class DestroyedBeforeCreate(MemoryStore):
    """Empties the database just before the first put of a key starting with ``prefix`` lands."""

    def __init__(self, inner: MemoryStore, prefix: str) -> None:
        super().__init__(inner._bucket, inner._clock_ms, url=inner.url)
        self.prefix = prefix
        self.fired = False

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        if key.startswith(self.prefix) and not self.fired:
            self.fired = True
            for meta in self.list_now(""):
                self.delete_now(meta.key)
        return await super().put(key, data, mode)


class OtherGcAfterCreate(MemoryStore):
    """Right after the first manifest create lands, another GC raises the boundary to the manifest
    below it and deletes that one (what a concurrent collector may do once it is not the latest);
    with ``boundary=False`` a collector with boundary files off: it only deletes."""

    def __init__(self, inner: MemoryStore, boundary: bool = True) -> None:
        super().__init__(inner._bucket, inner._clock_ms, url=inner.url)
        self.boundary = boundary
        self.fired = False

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        meta = await super().put(key, data, mode)
        if key.startswith("manifest/") and not self.fired:
            self.fired = True
            base = int(key.split("/")[1].split(".")[0]) - 1
            if self.boundary:
                self.put_now("gc/manifest.boundary", str(base).encode(), OVERWRITE)
            self.delete_now(f"manifest/{base:020d}.manifest")
        return meta
