"""``compactions/<id:020>.compactions``: the compactor's job state, versioned like the manifest.

Same protocol as ``manifest/`` (spec/protocols/sequenced-metadata.md, RFC 002 "Persistent State
Storage", RFC 004): read the latest id N, create N+1 with create-if-absent, then read
``gc/compactions.boundary`` and treat an id at or behind it as not committed. Only then is the
write reported committed (event ``commit``).

Who writes: the live compactor (every state change), and ``submit_compaction`` (an external
spec appended as ``Submitted``; it keeps the file's ``compactor_epoch``).
"""

from __future__ import annotations

from typing import Callable

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

from .lifecycle import check_compactions, ulid_not_before


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


#: A transition of the latest ``.compactions`` value: the next value, or None for no change.
Update = Callable[[CompactionsV1], "CompactionsV1 | None"]


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

    async def update(self, fn: Update, *, edit: str | None = None,
                     cur: StoredCompactions | None = None) -> StoredCompactions | None:
        """Compare-and-set: apply ``fn`` to the latest file (``cur`` if given, else read) and create
        the next id; on a lost race re-read and apply ``fn`` again. ``fn`` may raise (the
        transition no longer applies: nothing is written). Returns the file written, or the
        latest one when ``fn`` returned None. Bad input (:func:`check_compactions`) is refused
        with a :class:`~slatedb.errors.CorruptionError` naming the file."""
        while True:
            if cur is None:
                cur = await self.read_latest()
            base = cur.compactions if cur is not None else CompactionsV1(0, ())
            if cur is not None:
                check_compactions(base, self.key(cur.id))
            new = fn(base)
            if new is None:
                return cur
            try:
                next_id = (cur.id if cur is not None else 0) + 1
                return await (self.try_write(next_id, new) if edit is None else self.try_write(next_id, new, edit=edit))
            except (CompactionsConflict, ObjectVersionBehindBoundaryError):
                cur = None


async def submit_compaction(store: ObjectStore, runtime: Runtime, spec: CompactionSpec) -> Compaction:
    """Append ``spec`` to ``.compactions`` as ``Submitted`` (RFC 002 "Persisting External
    Compactions"). It is not validated here: the compactor validates it when it picks it up,
    and an invalid spec ends ``Failed``. Retries on conflicts with the compactor's own writes."""
    cs = CompactionsStore(store, runtime)
    compaction = Compaction(id=runtime.new_ulid(), spec=spec.to_format(), status=CompactionStatus.SUBMITTED)
    while True:
        cur = await cs.read_latest()
        base = cur.compactions if cur is not None else CompactionsV1(0, ())
        newest = max((c.id.milliseconds for c in base.recent_compactions), default=0)
        if compaction.id.milliseconds < newest:  # ULID rule: not older than the newest job
            compaction = attrs.evolve(compaction, id=ulid_not_before(runtime, newest))
        new = attrs.evolve(base, recent_compactions=base.recent_compactions + (compaction,))
        try:
            await cs.try_write((cur.id if cur is not None else 0) + 1, new)
            runtime.event("compaction_submitted", id=str(compaction.id), spec=spec.render())
            return compaction
        except (CompactionsConflict, ObjectVersionBehindBoundaryError):
            continue

