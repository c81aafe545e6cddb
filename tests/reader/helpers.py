"""Shared set-up of the reader tests: a writer that leaves small L0 SSTs, a clock the test moves."""

from __future__ import annotations

from typing import Any

import attrs
import trio

import slatedb
from slatedb.checkpoint import CheckpointOptions, create_checkpoint
from slatedb.format.manifest import encode_manifest
from slatedb.format.types import ManifestV2
from slatedb.manifest.store import ManifestStore, manifest_key
from slatedb.objstore.memory import MemoryStore
from slatedb.runtime.production import ProductionRuntime

from ..db.helpers import compact_all_l0, latest_manifest, memory_store

#: A writer without compactor whose memtables go to small L0 SSTs.
WRITER = {"l0_sst_size_bytes": 4096, "compactor_options": None, "l0_max_ssts": 1000, "min_filter_keys": 1,
          "flush_interval": "10ms"}

#: A reader whose background task never fires during a test: tests call ``refresh()``.
QUIET = slatedb.DbReaderOptions(manifest_poll_interval_s=3600, checkpoint_lifetime_s=3 * 3600)


class Clock(ProductionRuntime):
    """The production runtime with a wall clock the test can move forward; keeps the events."""

    def __init__(self, name: str = "reader") -> None:
        super().__init__(name)
        self.offset_ms = 0
        self.events: list[tuple[str, dict]] = []
        self.probes: list[str] = []  # the coverage probes the engine reports (production ignores them)

    def now_ms(self) -> int:
        return super().now_ms() + self.offset_ms

    def advance(self, seconds: float) -> None:
        self.offset_ms += int(seconds * 1000)

    def event(self, kind: str, **fields: Any) -> None:
        self.events.append((kind, fields))

    def probe(self, name: str) -> None:
        self.probes.append(name)

    def kinds(self, kind: str) -> list[dict]:
        return [f for k, f in self.events if k == kind]


def open_reader(store: MemoryStore, checkpoint_id=None, *, clock: Clock | None = None,
                options: slatedb.DbReaderOptions = QUIET, **kw: Any) -> slatedb.DbReader:
    return slatedb.DbReader.open("memory://test", checkpoint_id, options=options, store=store,
                                 runtime=(lambda: clock) if clock is not None else None, **kw)


def make_checkpoint(store: MemoryStore, lifetime_s: float | None = None):
    rt = ProductionRuntime("admin")
    return trio.run(create_checkpoint, ManifestStore(store, rt), rt, CheckpointOptions(lifetime_s=lifetime_s))


def checkpoints(store: MemoryStore):
    return latest_manifest(store)[1].checkpoints


def manifest_ids(store: MemoryStore) -> list[int]:
    return sorted(int(m.key.split("/")[1].split(".")[0]) for m in store.list_now("manifest/"))


def write_next_manifest(store: MemoryStore, change) -> None:
    """Commit the latest manifest changed by ``change`` (an attrs evolve of it) as the next id."""
    mid, m = latest_manifest(store)
    store.put_now(manifest_key(mid + 1), encode_manifest(change(m)))


def fill(db: slatedb.Db, prefix: bytes, n: int, tag: bytes = b"") -> dict[bytes, bytes]:
    out = {}
    for i in range(n):
        k, v = prefix + b"%04d" % i, tag + b"v%d-" % i + b"." * 40
        db.put(k, v)
        out[k] = v
    return out


__all__ = ["WRITER", "QUIET", "Clock", "open_reader", "make_checkpoint", "checkpoints", "manifest_ids",
           "write_next_manifest", "fill", "compact_all_l0", "latest_manifest", "memory_store", "attrs", "ManifestV2"]
