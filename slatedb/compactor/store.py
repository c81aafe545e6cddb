"""``compactions/<id:020>.compactions``: the compactor's job state, versioned like the manifest.

Same protocol as ``manifest/`` (spec/protocols/sequenced-metadata.md, RFC 002 "Persistent State
Storage", RFC 004): read the latest id N, create N+1 with create-if-absent, then read
``gc/compactions.boundary`` and treat an id at or behind it as not committed. Only then is the
write reported committed (event ``commit``).

Who writes: the live compactor (every state change), and ``submit_compaction`` (an external
spec appended as ``Submitted``; it keeps the file's ``compactor_epoch``).
"""

from __future__ import annotations

import attrs
from ulid import ULID

from slatedb.errors import CorruptionError, ObjectNotFoundError, ObjectVersionBehindBoundaryError
from slatedb.format.compactions import decode_compactions, encode_compactions
from slatedb.format.types import Compaction, CompactionsV1, CompactionStatus
from slatedb.manifest.store import parse_id, read_boundary
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.retry import create_if_absent, retry_transient
from slatedb.runtime import Runtime

from .spec import CompactionSpec

COMPACTIONS_DIR = "compactions/"
COMPACTIONS_SUFFIX = ".compactions"
COMPACTIONS_BOUNDARY_KEY = "gc/compactions.boundary"

#: Statuses after which a compaction never changes again (RFC 002 lifecycle).
TERMINAL = frozenset({CompactionStatus.COMPLETED, CompactionStatus.FAILED})


def compactions_key(compactions_id: int) -> str:
    assert 0 <= compactions_id < 2**64, compactions_id
    return f"{COMPACTIONS_DIR}{compactions_id:020d}{COMPACTIONS_SUFFIX}"


@attrs.frozen
class StoredCompactions:
    id: int
    compactions: CompactionsV1

    def find(self, compaction_id: ULID) -> Compaction | None:
        for c in self.compactions.recent_compactions:
            if c.id == compaction_id:
                return c
        return None


class CompactionsConflict(Exception):
    """Internal: the create of the next id lost the race (or landed behind the boundary)."""


class CompactionsStore:
    def __init__(self, store: ObjectStore, runtime: Runtime) -> None:
        self.store = store
        self.runtime = runtime

    async def list_ids(self) -> list[int]:
        metas = await retry_transient(self.runtime, lambda: self.store.list(COMPACTIONS_DIR), what="list compactions/")
        ids = [parse_id(m.key, COMPACTIONS_DIR, COMPACTIONS_SUFFIX) for m in metas]
        return sorted(i for i in ids if i is not None)

    async def read(self, compactions_id: int) -> StoredCompactions:
        key = compactions_key(compactions_id)
        got = await retry_transient(self.runtime, lambda: self.store.get(key), what=f"get {key}")
        return StoredCompactions(compactions_id, decode_compactions(bytes(got.data), key))

    async def read_latest(self) -> StoredCompactions | None:
        while True:
            ids = await self.list_ids()
            if not ids:
                return None
            try:
                return await self.read(ids[-1])
            except ObjectNotFoundError:
                continue  # deleted by GC after a newer one appeared: list again

    async def try_write(self, compactions_id: int, compactions: CompactionsV1) -> StoredCompactions:
        """Create ``compactions_id`` then check the boundary (see the module docstring)."""
        key = compactions_key(compactions_id)
        if not await create_if_absent(self.store, self.runtime, key, encode_compactions(compactions)):
            self.runtime.event("create", path=key, outcome="exists", epoch=compactions.compactor_epoch)
            raise CompactionsConflict(key)
        self.runtime.event("create", path=key, outcome="ok", epoch=compactions.compactor_epoch)
        boundary = await read_boundary(self.store, self.runtime, COMPACTIONS_BOUNDARY_KEY)
        self.runtime.event("boundary_read", ns="compactions", boundary=boundary)
        if compactions_id <= boundary:
            raise ObjectVersionBehindBoundaryError("compactions", compactions_id, boundary)
        self.runtime.event("commit", ns="compactions", id=compactions_id)
        return StoredCompactions(compactions_id, compactions)


async def submit_compaction(store: ObjectStore, runtime: Runtime, spec: CompactionSpec) -> Compaction:
    """Append ``spec`` to ``.compactions`` as ``Submitted`` (RFC 002 "Persisting External
    Compactions"). It is not validated here: the compactor validates it when it picks it up,
    and an invalid spec ends ``Failed``. Retries on conflicts with the compactor's own writes."""
    cs = CompactionsStore(store, runtime)
    compaction = Compaction(id=runtime.new_ulid(), spec=spec.to_format(), status=CompactionStatus.SUBMITTED)
    while True:
        cur = await cs.read_latest()
        base = cur.compactions if cur is not None else CompactionsV1(0, ())
        new = attrs.evolve(base, recent_compactions=base.recent_compactions + (compaction,))
        try:
            await cs.try_write((cur.id if cur is not None else 0) + 1, new)
            runtime.event("compaction_submitted", id=str(compaction.id), spec=spec.render())
            return compaction
        except (CompactionsConflict, ObjectVersionBehindBoundaryError):
            continue


def check_not_corrupt(stored: StoredCompactions) -> None:
    ids = [c.id for c in stored.compactions.recent_compactions]
    if len(ids) != len(set(ids)):
        raise CorruptionError(compactions_key(stored.id), None, "a compaction id appears twice")
