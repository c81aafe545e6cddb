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

from slatedb.errors import ObjectVersionBehindBoundaryError
from slatedb.format.compactions import decode_compactions, encode_compactions
from slatedb.format.types import Compaction, CompactionsV1, CompactionStatus
from slatedb.format.layout import (  # noqa: F401 (re-exported)
    COMPACTIONS_BOUNDARY_KEY,
    COMPACTIONS_DIR,
    COMPACTIONS_SUFFIX,
    compactions_key,
)
from slatedb.manifest.store import SequenceConflict, SequencedStore
from slatedb.objstore.base import ObjectStore
from slatedb.runtime import Runtime

from slatedb.manifest.compaction import CompactionSpec


#: Statuses after which a compaction never changes again (RFC 002 lifecycle).
TERMINAL = frozenset({CompactionStatus.COMPLETED, CompactionStatus.FAILED})


@attrs.frozen
class StoredCompactions:
    id: int
    compactions: CompactionsV1

    def find(self, compaction_id: ULID) -> Compaction | None:
        for c in self.compactions.recent_compactions:
            if c.id == compaction_id:
                return c
        return None


class CompactionsConflict(SequenceConflict):
    pass


class CompactionsStore(SequencedStore[CompactionsV1, StoredCompactions]):
    namespace = "compactions"
    directory = COMPACTIONS_DIR
    suffix = COMPACTIONS_SUFFIX
    boundary_key = COMPACTIONS_BOUNDARY_KEY
    conflict = CompactionsConflict

    def encode(self, value: CompactionsV1) -> bytes:
        return encode_compactions(value)

    def decode(self, data: bytes, key: str) -> CompactionsV1:
        return decode_compactions(data, key)

    def stored(self, file_id: int, value: CompactionsV1) -> StoredCompactions:
        return StoredCompactions(file_id, value)

    def event_fields(self, value: CompactionsV1) -> dict:
        return {"epoch": value.compactor_epoch}


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

