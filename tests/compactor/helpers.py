"""Shared set-up of the compactor tests: a database with L0 SSTs, compactors, recording runtimes."""

from __future__ import annotations

from typing import Any

import slatedb
from slatedb.config import Settings
from slatedb.format.compactions import decode_compactions
from slatedb.objstore.memory import MemoryStore
from slatedb.runtime.production import ProductionRuntime

from ..db.helpers import latest_manifest, memory_store

#: A writer that leaves its data in small L0 SSTs and never compacts.
WRITER = {"l0_sst_size_bytes": 4096, "compactor_options": None, "l0_max_ssts": 1000, "min_filter_keys": 1}


def compactor_settings(min_sources: int = 2, max_sst_size: int = 1 << 30, **extra: Any) -> Settings:
    d = {"min_filter_keys": 1, "compactor_options": {
        "poll_interval": "50ms", "commit_compacted_interval": "20ms", "worker_heartbeat_timeout": "3s",
        "scheduler_options": {"min_compaction_sources": str(min_sources),
                                                       "max_compaction_sources": str(max(8, min_sources))},
        "worker": {"max_sst_size": max_sst_size, "heartbeat_interval": "200ms", "compactions_poll_interval": "50ms"}}}
    d.update(extra)
    return Settings.from_dict(d)


def filled_store(n_keys: int = 600, rounds: int = 3, deletes: int = 40) -> tuple[MemoryStore, dict[bytes, bytes]]:
    """A database of several L0 SSTs (overwrites and deletes), and the expected contents."""
    store = memory_store()
    expected: dict[bytes, bytes] = {}
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        for r in range(rounds):
            for i in range(n_keys):
                k, v = b"k%05d" % i, b"v%d-%d" % (r, i) + b"." * 20
                db.put(k, v)
                expected[k] = v
        for i in range(0, deletes * 7, 7):
            db.delete(b"k%05d" % i)
            expected.pop(b"k%05d" % i, None)
    return store, expected


def clone_store(store: MemoryStore) -> MemoryStore:
    """An independent copy of every object (to run two histories from one starting point)."""
    copy_ = memory_store()
    for m in store.list_now(""):
        copy_.put_now(m.key, bytes(store.get_now(m.key).data))
    return copy_


def read_all(store: MemoryStore) -> dict[bytes, bytes]:
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        return dict(db.scan(None, None))


def latest_compactions(store: MemoryStore):
    keys = sorted(m.key for m in store.list_now("compactions/") if m.key.endswith(".compactions"))
    return int(keys[-1].split("/")[1].split(".")[0]), decode_compactions(store.get_now(keys[-1]).data, keys[-1])


class RecordingRuntime(ProductionRuntime):
    """The production runtime, keeping the protocol events (the simulator's trace vocabulary)
    and the coverage probes hit (production ignores both)."""

    def __init__(self, name: str = "compactor", events: list | None = None) -> None:
        super().__init__(name)
        self.events: list[tuple[str, str, dict]] = [] if events is None else events
        self.probes: list[str] = []

    def event(self, kind: str, **fields: Any) -> None:
        self.events.append((self.name, kind, fields))

    def probe(self, name: str) -> None:
        self.probes.append(name)


__all__ = ["latest_manifest", "memory_store"]
