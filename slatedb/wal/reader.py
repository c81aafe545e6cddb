"""A WAL reader for change data capture (the official binding's ``SlateDbWalReader``).

Every write of a database is a row of a WAL object (``wal/<id>.sst``) before it reaches an L0
SST, in sequence order. :class:`WalReader` lists those objects and decodes them into
:class:`ChangeRow` values (kind VALUE / TOMBSTONE / MERGE, key, value, seq, create and expire
timestamps, and the WAL id the row came from); :meth:`WalReader.changes` yields the rows of
every WAL object from a starting id onwards and, with ``follow=True``, waits for the next
object at the tail (the writer's next flush). It never writes to the store. WAL objects are
kept until GC removes them (after ``replay_after_wal_id`` passed them and their ``min_age``):
a consumer that falls behind GC finds the next id gone and gets :class:`WalGapError` naming it.
Fence objects (0 bytes, written by a writer's open) have no rows.
"""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Iterator

import attrs

from slatedb.errors import ObjectNotFoundError, SlateDBError
from slatedb.format.layout import wal_key
from slatedb.format.wal_sst import decode_wal_sst
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.row import RowKind
from slatedb.runtime import Runtime

from .writer import list_wal_ids

_KINDS = {RowKind.VALUE: "VALUE", RowKind.TOMBSTONE: "TOMBSTONE", RowKind.MERGE_OPERAND: "MERGE"}


class WalGapError(SlateDBError):
    """A WAL object expected next is gone (GC removed it before it was read)."""


def whole_from(ids: list[int]) -> int:
    """The first id of the run of consecutive ids that ends at the newest (``ids`` ascending,
    not empty): where a reader that did not pick a start begins. GC removes WAL objects from the
    oldest on but keeps the 0-byte fences writers' opens leave (``wal_fence_options`` is a dry
    run by default), so the oldest id left, ``wal/1`` say, may be followed by a gap; reading
    from it would meet :class:`WalGapError` at once."""
    start = ids[-1]
    for i in reversed(ids[:-1]):
        if i != start - 1:
            break
        start = i
    return start


@attrs.frozen
class ChangeRow:
    kind: str  # "VALUE", "TOMBSTONE" or "MERGE" (the official RowEntryKind names)
    key: bytes
    value: bytes | None
    seq: int
    create_ts: int | None
    expire_ts: int | None
    wal_id: int


class WalReaderCore:
    """The engine of a WAL reader: reads only, no background tasks."""

    def __init__(self, store: ObjectStore, runtime: Runtime) -> None:
        self.store = store
        self.runtime = runtime
        self.closed = False
        self.id = uuid.UUID(int=0)

    @asynccontextmanager
    async def background(self) -> AsyncIterator[None]:
        """No background tasks; the block's end closes the reader (``async with
        aio.WalReader.open(url)`` under trio runs it on the caller's loop)."""
        try:
            yield
        finally:
            self.closed = True

    async def aclose(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    async def wal_ids(self) -> list[int]:
        return await list_wal_ids(self.store, self.runtime)

    async def read(self, wal_id: int) -> list[ChangeRow] | None:
        """The rows of WAL object ``wal_id``, or None if there is no such object."""
        key = wal_key(wal_id)
        try:
            got = await retry_transient(self.runtime, lambda: self.store.get(key), what=f"get {key}")
        except ObjectNotFoundError:
            return None
        wal = decode_wal_sst(bytes(got.data), key)
        return [ChangeRow(_KINDS[r.kind], r.key, None if r.kind is RowKind.TOMBSTONE else r.value, r.seq,
                          r.create_ts_ms, r.expire_ts_ms, wal_id) for r in wal.rows]

    async def next_rows(self, wal_id: int, follow: bool, poll_interval_s: float) -> list[ChangeRow] | None:
        """The rows of ``wal_id``; when it does not exist yet: None (``follow=False``) or wait
        for it, polling. :class:`WalGapError` when a later object exists but this one is gone."""
        while True:
            rows = await self.read(wal_id)
            if rows is not None:
                return rows
            ids = await self.wal_ids()
            if any(i > wal_id for i in ids):
                raise WalGapError(f"WAL object {wal_key(wal_id)} is gone (GC removed it before it was read); "
                                  f"the WAL is whole from {wal_key(whole_from(ids))} on")
            if not follow:
                return None
            await self.runtime.sleep(poll_interval_s)


def iterate(call: Any, core: WalReaderCore, start_id: int | None, follow: bool, poll_interval_s: float) -> Iterator[ChangeRow]:
    """The synchronous iterator of :meth:`slatedb.WalReader.changes` (``call`` runs a coroutine
    function on the reader's loop)."""
    if start_id is None:
        ids = call(core.wal_ids)
        if not ids:
            if not follow:
                return
            start_id = 1
        else:
            start_id = whole_from(ids)
    wal_id = start_id
    while True:
        rows = call(core.next_rows, wal_id, follow, poll_interval_s)
        if rows is None:
            return
        yield from rows
        wal_id += 1
