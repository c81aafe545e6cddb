"""Helpers of the clone and destroy tests: sibling databases in a private memory bucket, a
store that crashes after a number of mutating calls, and manifest peeks."""

from __future__ import annotations

import uuid

import trio

import slatedb
from slatedb.errors import ObjectNotFoundError
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.objstore import resolve_store
from slatedb.objstore.base import ObjectStore, PutMode, OVERWRITE
from slatedb.objstore.memory import MemoryStore
from slatedb.runtime.production import ProductionRuntime

#: The writer alone (no in-process compactor): the tests count SSTs and compact by hand.
NO_COMPACTOR = {"compactor_options": None, "flush_interval": "10ms"}


def bucket() -> str:
    """A fresh ``memory://`` bucket name: databases in it are siblings (``<bucket>/parent``)."""
    return f"memory://clone-test-{uuid.uuid4().hex[:12]}"


def store(url: str) -> MemoryStore:
    s = resolve_store(url)
    assert isinstance(s, MemoryStore)
    return s


def latest(url: str) -> StoredManifest:
    async def main():
        got = await ManifestStore(store(url), ProductionRuntime()).read_latest()
        assert got is not None, url
        return got

    return trio.run(main)


def write(url: str, rows: dict[bytes, bytes | None], *, l0: bool = True) -> None:
    """Open a writer, apply ``rows`` (None deletes), flush (to L0 too unless ``l0=False``), close."""
    with slatedb.Db.open(url, settings=NO_COMPACTOR) as db:
        for k, v in rows.items():
            db.put(k, v) if v is not None else db.delete(k)
        db.flush(wal=not l0)


def write_wal_only(url: str, rows: dict[bytes, bytes]) -> None:
    """Rows that stay in the WAL: written durable, then the process 'exits' without close()."""
    db = slatedb.Db.open(url, settings={**NO_COMPACTOR, "flush_interval": "1h"})
    for k, v in rows.items():
        db.put(k, v)
    db.flush()  # WAL only
    db.abort()  # no close(): leave the rows in the WAL, not L0


def contents(url: str) -> dict[bytes, bytes]:
    with slatedb.Db.open(url, settings=NO_COMPACTOR) as db:
        return dict(db.scan())


def keys_under(url: str, prefix: str = "") -> list[str]:
    return [m.key for m in store(url).list_now(prefix)]


class Crash(Exception):
    """The simulated process died at a store call."""


class Budget:
    """Mutating calls allowed before the crash (None: unlimited); counts the calls made."""

    def __init__(self, allowed: int | None, *, applied: bool) -> None:
        self.allowed = allowed
        self.applied = applied  # crash after the call landed (True) or before (False)
        self.calls = 0

    def spend(self) -> bool:
        """True: this call should crash."""
        self.calls += 1
        return self.allowed is not None and self.calls > self.allowed


class CrashingStore(ObjectStore):
    """``inner`` whose put/delete/copy raise :class:`Crash` once ``budget`` is spent; stores it
    opens (a clone's parent, grandparents) share the budget."""

    def __init__(self, inner: ObjectStore, budget: Budget) -> None:
        self.inner = inner
        self.budget = budget
        self.url = inner.url

    async def _mutate(self, fn):
        crash = self.budget.spend()
        if crash and not self.budget.applied:
            raise Crash()
        out = await fn()
        if crash:
            raise Crash()
        return out

    async def get(self, key, byte_range=None):
        return await self.inner.get(key, byte_range)

    async def head(self, key):
        return await self.inner.head(key)

    async def list(self, prefix=""):
        return await self.inner.list(prefix)

    async def put(self, key, data, mode: PutMode = OVERWRITE):
        return await self._mutate(lambda: self.inner.put(key, data, mode))

    async def delete(self, key):
        return await self._mutate(lambda: self.inner.delete(key))

    async def copy(self, src_key, dst_key):
        return await self._mutate(lambda: self.inner.copy(src_key, dst_key))

    def open_url(self, url):
        return CrashingStore(self.inner.open_url(url), self.budget)

    async def aclose(self):
        await self.inner.aclose()


__all__ = ["NO_COMPACTOR", "Budget", "Crash", "CrashingStore", "ObjectNotFoundError", "bucket", "contents",
           "keys_under", "latest", "store", "write", "write_wal_only"]
