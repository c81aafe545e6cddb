"""The read path shared by the writer (``DbCore``) and ``DbReader`` (``ReaderCore``).

A read consults a :class:`ReadState` (memtables newest first, then the SST view), taken in one
attribute read. The synchronous parts (memtables, cached blocks, building a merge) run on the
caller's thread; block reads run on the engine's loop. The front-ends
(:mod:`slatedb.api.sync_reads`, :mod:`slatedb.api.async_reads`) call only what
:class:`ReadPath` declares.

REQUIRES of a class using :class:`ReadPath`: ``runtime`` (its clock decides TTL expiry) and
``_lock`` (a ``threading.Lock`` held by whoever mutates the live memtable: creating a memtable
iterator orders its new keys, a mutation), plus ``read_state``, ``last_seq`` and ``check_open``.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator, Sequence

import attrs
from ulid import ULID

from slatedb.errors import ObjectNotFoundError
from slatedb.format.sst_reader import NEED_IO, SstReader
from slatedb.memtable import Memtable
from slatedb.merge import resolve_row, resolve_versions, visible
from slatedb.merge_operator import MergeFn
from slatedb.objstore.retry import retry_transient
from slatedb.row import Row, RowKind
from slatedb.runtime import Runtime, probes

from .scan import MemSource, MergeScan, SstSource
from .view import UNBOUNDED, KeyBounds, LsmView, SstHandle

_MERGE = RowKind.MERGE_OPERAND


@attrs.frozen(eq=False)
class ReadState:
    """What a read consults, swapped as one object: memtables newest first (the live one
    first), then the SST view."""

    mems: tuple[Memtable, ...]
    view: LsmView


#: How many times a point read starts again on a fresher state (:meth:`ReadPath._from_fresh_views`).
_MAX_FRESH_VIEWS = 8


def _sst_id_of(object_key: str) -> ULID | None:
    """The SST id of an object key ``.../compacted/<ULID>.sst`` (None for any other key)."""
    name = object_key.rsplit("/", 1)[-1]
    if not name.endswith(".sst"):
        return None
    try:
        return ULID.from_str(name[:-4])
    except ValueError:
        return None


class ReadPath:
    """``get`` (fast and slow halves), ``scan`` merges and block loads over a :class:`ReadState`."""

    # REQUIRES (declared here, provided by the engine):
    runtime: Runtime
    _lock: threading.Lock
    read_state: ReadState  # the current state (a property of the engine)
    last_seq: int  # the newest sequence number a read may see
    #: The merge operator given at open (None: none; reading an operand raises, MERGE-8).
    merge_operator: MergeFn | None = None

    def check_open(self) -> None:  # pragma: no cover - declared
        raise NotImplementedError

    def get_fast(self, key: bytes, rs: ReadState, max_seq: int | None) -> bytes | None | object:
        """``get`` from memtables and cached blocks; :data:`NEED_IO` when a block must be read.
        Any thread; no I/O."""
        for mem in rs.mems:
            if not mem.holds(key):
                continue
            row = mem.get_held(key, max_seq)  # maybe a plain row: fields by position
            if row is not None:
                if row[2] == _MERGE:
                    return _value_of(self.get_resolved_fast(key, rs, max_seq))
                return resolve_row(row, self.runtime.now_ms())
        for h in rs.view.point_candidates(key):
            got = h.reader.lookup_cached(key, max_seq, True)
            if got is None:
                continue
            if type(got) is bytes:
                return got  # a value without expiry: what the reader sees
            if got is NEED_IO:
                return NEED_IO
            if got.kind is _MERGE:  # type: ignore[union-attr]
                return NEED_IO  # the key's older versions: get_slow folds them (MERGE-1)
            return resolve_row(got, self.runtime.now_ms())  # type: ignore[arg-type]
        return None

    def get_direct(self, key: bytes, rs: ReadState, max_seq: int | None) -> bytes | None | object:
        """:meth:`get_fast` reading missing blocks on the calling thread where the SST's store
        can (a local directory: ``SstReader.lookup_cached(..., read_now=True)``), so the read is
        not queued behind the engine loop's other work (an in-process compaction);
        :data:`NEED_IO` when the read must go through the loop (another store, a failed read, a
        merge operand to fold from SSTs). Any thread."""
        for mem in rs.mems:
            if not mem.holds(key):
                continue
            row = mem.get_held(key, max_seq)  # maybe a plain row: fields by position
            if row is not None:
                if row[2] == _MERGE:
                    return _value_of(self.get_resolved_fast(key, rs, max_seq))
                return resolve_row(row, self.runtime.now_ms())
        for h in rs.view.point_candidates(key):
            got = h.reader.lookup_cached(key, max_seq, True, True)
            if got is None:
                continue
            if type(got) is bytes:
                return got  # a value without expiry: what the reader sees
            return self.sst_answer(got)
        return None

    def sst_answer(self, got: Row | object) -> bytes | None | object:
        """What a get answers when an SST's lookup (``lookup_cached``) gave ``got``, neither
        None nor a value as ``bytes``: :data:`NEED_IO` for a block to read through the loop or
        a merge operand (the key's older versions: ``get_slow`` folds them, MERGE-1); else the
        row resolved (a tombstone or an expired row: None)."""
        if got is NEED_IO or got.kind is _MERGE:  # type: ignore[union-attr]
            return NEED_IO
        return resolve_row(got, self.runtime.now_ms())  # type: ignore[arg-type]

    async def get_slow(self, key: bytes, rs: ReadState, max_seq: int | None) -> bytes | None:
        """``get`` with block reads (REQUIRES: the engine's loop)."""
        return _value_of(await self.get_resolved_slow(key, rs, max_seq))

    async def _from_fresh_views(self, read: Any, key: bytes, rs: ReadState, max_seq: int | None) -> Any:
        """``await read(key, rs, max_seq)``, again on the current state when an SST of ``rs`` was
        deleted before its block was read and has left the current view meanwhile: compacted
        away, then collected by GC once its pin expired while this read was stalled (db seed
        11583: one GET stalled 838 s). The current state holds the key's rows in the SSTs that
        replaced it. An SST still in the current view that is missing is damage: raised."""
        for _attempt in range(_MAX_FRESH_VIEWS):
            try:
                return await read(key, rs, max_seq)
            except ObjectNotFoundError as e:
                fresh = self.read_state
                gone = _sst_id_of(e.key)
                if fresh is rs or gone is None or gone in fresh.view.sst_ids:
                    raise
                self.runtime.probe(probes.READ_VIEW_COLLECTED)
                self.runtime.event("read_view_collected", sst=str(gone))
                rs = fresh
        return await read(key, rs, max_seq)

    # -- a scanned range's rows written after a seq (a transaction's commit check, TXN-5) --------

    def newer_in_mems(self, mems: Sequence[Memtable], bounds: KeyBounds, after_seq: int, *, locked: bool) -> Any:
        """A row of ``mems`` within ``bounds`` with a seq above ``after_seq`` (as held: ``row[0]``
        its key, ``row[1]`` its seq; a tombstone counts), or None. Only memtables holding a row
        above ``after_seq`` are read. ``locked``: the caller holds ``_lock`` (else it is taken to
        make the iterators, which orders a live memtable's new keys, and let go to read them:
        writers are not held up by a long range)."""
        newer = [m for m in mems if m.last_seq is not None and m.last_seq > after_seq]
        if not newer:
            return None

        def rows_of(mem: Memtable) -> Iterator[Any]:
            return mem.iter_range(bounds.lo, bounds.hi, start_inclusive=bounds.lo_inclusive,
                                  end_inclusive=bounds.hi_inclusive, held=True)
        if locked:
            iters = [rows_of(m) for m in newer]
        else:
            with self._lock:
                iters = [rows_of(m) for m in newer]
        for rows in iters:
            for row in rows:
                if row[1] > after_seq:
                    return row
        return None

    @staticmethod
    def ssts_not_in(rs: ReadState, known: set[ULID]) -> list[SstHandle]:
        """The SST views of ``rs`` whose SST is not in ``known`` (L0 newest first, then runs)."""
        out = [h for h in rs.view.l0 if h.sst_id not in known]
        out.extend(h for run in rs.view.runs for h in run.ssts if h.sst_id not in known)
        return out

    async def newer_in_ssts(self, rs: ReadState, ranges: Sequence[KeyBounds], after_seq: int,
                            known: set[ULID]) -> tuple[KeyBounds, Row] | None:
        """A row within one of ``ranges`` with a seq above ``after_seq`` in the SSTs of ``rs``
        that ``known`` leaves out, and its range; or None (REQUIRES: the engine's loop).

        ``known`` is the SSTs of the view a transaction's snapshot pinned: every row of those is
        at or below its seq (an SST enters a view with rows already written), so only the SSTs
        made since -- L0 flushes, compaction outputs -- can hold a newer row. An SST collected
        while this read was stalled: read again on the current state (:meth:`_from_fresh_views`;
        the commit then finds the view moved and checks everything again)."""
        async def once(_key: bytes, state: ReadState, _max_seq: int | None) -> tuple[KeyBounds, Row] | None:
            for h in self.ssts_not_in(state, known):
                for bounds in ranges:
                    found = await self._newer_in_sst(h, bounds, after_seq)
                    if found is not None:
                        return bounds, found
            return None
        return await self._from_fresh_views(once, b"", rs, None)

    async def _newer_in_sst(self, h: SstHandle, bounds: KeyBounds, after_seq: int) -> Row | None:
        b = bounds if h.bounds is UNBOUNDED else bounds.intersect(h.bounds)
        reader = h.reader
        info = reader.info
        first, last = info.first_entry, info.last_entry
        if b.is_empty() or (first is not None and b.hi is not None and b.hi < first) or \
                (last is not None and b.lo is not None and b.lo > last):
            return None

        async def scan() -> Row | None:
            async for row in reader.scan(b.lo, b.hi, end_inclusive=b.hi_inclusive):
                if row.seq > after_seq and (b.lo_inclusive or row.key != b.lo):
                    return row
            return None
        return await retry_transient(self.runtime, scan, what=f"scan {reader.object_name}")

    # -- merge operands: the key's versions down to its base, folded (MERGE-1..4) ------------------

    def get_resolved_fast(self, key: bytes, rs: ReadState, max_seq: int | None) -> Row | None | object:
        """The row a reader sees for ``key`` (a VALUE row, operands folded; None when absent)
        from memtables alone; :data:`NEED_IO` when the fold needs rows of SSTs. Any thread."""
        now = self.runtime.now_ms()
        rows: list[Row] = []
        for mem in rs.mems:
            if _gather(rows, mem.versions(key), max_seq):
                return resolve_versions(_newest_first(rows), self.merge_operator, now, max_seq)
        if not rows:
            row = self.get_row_fast(key, rs, max_seq)
            if row is NEED_IO or row is None or row.kind is _MERGE:  # type: ignore[union-attr]
                return NEED_IO if row is not None else None
            return row if resolve_row(row, now) is not None else None  # type: ignore[arg-type]
        return NEED_IO

    async def get_resolved_slow(self, key: bytes, rs: ReadState, max_seq: int | None) -> Row | None:
        """:meth:`get_resolved_fast` with block reads (REQUIRES: the engine's loop)."""
        return await self._from_fresh_views(self._get_resolved_once, key, rs, max_seq)

    async def _get_resolved_once(self, key: bytes, rs: ReadState, max_seq: int | None) -> Row | None:
        now = self.runtime.now_ms()
        rows: list[Row] = []
        for mem in rs.mems:
            if _gather(rows, mem.versions(key), max_seq):
                return resolve_versions(_newest_first(rows), self.merge_operator, now, max_seq)
        for h in rs.view.point_candidates(key):
            reader = h.reader
            if not rows:  # the common case: one row decides
                row = await retry_transient(self.runtime, lambda: reader.get(key, max_seq),
                                            what=f"get {reader.object_name}")
                if row is None:
                    continue
                if row.kind is not _MERGE:
                    return row if resolve_row(row, now) is not None else None
            elif not reader.might_contain(key):
                continue
            versions = await retry_transient(self.runtime, lambda: reader.get_versions(key),
                                             what=f"get {reader.object_name}")
            if _gather(rows, versions, max_seq):
                break
        return resolve_versions(_newest_first(rows), self.merge_operator, now, max_seq)

    def get_row_fast(self, key: bytes, rs: ReadState, max_seq: int | None) -> Row | None | object:
        """The row deciding ``key`` (newest with ``seq <= max_seq``, any kind) from memtables and
        cached blocks, for ``get_key_value``; :data:`NEED_IO` when a block must be read."""
        for mem in rs.mems:
            row = mem.get(key, max_seq)
            if row is not None:
                return row
        for h in rs.view.point_candidates(key):
            row = h.reader.get_cached(key, max_seq)
            if row is not None:
                return row
        return None

    def get_row_direct(self, key: bytes, rs: ReadState, max_seq: int | None) -> Row | None | object:
        """:meth:`get_row_fast` reading missing blocks on the calling thread where the SST's
        store can (as :meth:`get_direct`); :data:`NEED_IO` when the read must go through the
        loop (another store, a failed read). Any thread."""
        for mem in rs.mems:
            row = mem.get(key, max_seq)
            if row is not None:
                return row
        for h in rs.view.point_candidates(key):
            row = h.reader.lookup_cached(key, max_seq, False, True)
            if row is not None:
                return row
        return None

    async def get_row_slow(self, key: bytes, rs: ReadState, max_seq: int | None) -> Row | None:
        """:meth:`get_row_fast` with block reads (REQUIRES: the engine's loop)."""
        return await self._from_fresh_views(self._get_row_once, key, rs, max_seq)

    async def _get_row_once(self, key: bytes, rs: ReadState, max_seq: int | None) -> Row | None:
        for mem in rs.mems:
            row = mem.get(key, max_seq)
            if row is not None:
                return row
        for h in rs.view.point_candidates(key):
            reader = h.reader
            row = await retry_transient(self.runtime, lambda: reader.get(key, max_seq), what=f"get {reader.object_name}")
            if row is not None:
                return row
        return None

    def scan_merge(
        self, rs: ReadState, bounds: KeyBounds, reverse: bool, max_seq: int
    ) -> tuple[MergeScan | None, Iterator[tuple[bytes, bytes]] | None]:
        """A merge over every source of ``rs`` within ``bounds``; for a scan served by one
        memtable alone, a plain generator instead (the fast path). Any thread; no I/O (the merge
        raises ``NeedIO`` for a block, which the caller loads with :meth:`load_blocks`)."""
        now = self.runtime.now_ms()
        view = rs.view
        with self._lock:  # iterator creation orders the live memtable's new keys (a mutation)
            # One memtable alone: visible() reads its rows as held (plain rows: slatedb.row.as_row).
            alone = not view.l0 and not view.runs and sum(not m.is_empty for m in rs.mems) <= 1
            mem_iters = [
                m.iter_range(bounds.lo, bounds.hi, start_inclusive=bounds.lo_inclusive,
                             end_inclusive=bounds.hi_inclusive, reverse=reverse, max_seq=max_seq, held=alone)
                for m in rs.mems
                if not m.is_empty
            ]
        if alone:
            it = mem_iters[0] if mem_iters else iter(())
            return None, visible(it, snapshot_seq=max_seq, now_ms=now, op=self.merge_operator)
        sources: list[Any] = [MemSource(it) for it in mem_iters]
        ceiling = view.seq_ceiling
        sources.extend(SstSource([h], bounds, reverse, ceiling) for h in view.l0)
        sources.extend(SstSource(run.ssts, bounds, reverse, ceiling) for run in view.runs)
        return MergeScan(sources, reverse=reverse, max_seq=max_seq, now_ms=now, op=self.merge_operator), None

    async def load_blocks(self, reader: SstReader, first: int, last_exclusive: int):
        """Blocks ``[first, last_exclusive)`` of ``reader`` (REQUIRES: the engine's loop)."""
        return await retry_transient(
            self.runtime, lambda: reader.read_blocks(first, last_exclusive), what=f"read {reader.object_name}"
        )


def _value_of(row: Row | None | object) -> bytes | None | object:
    if row is None or row is NEED_IO:
        return row
    return row.value  # type: ignore[union-attr]


def _gather(rows: list[Row], versions: list[Row], max_seq: int | None) -> bool:
    """Add a source's versions of a key (newest first) to ``rows``; True once a base (a value
    or a tombstone at or below ``max_seq``) is among them: older sources cannot matter."""
    done = False
    for row in versions:
        if max_seq is not None and row.seq > max_seq:
            continue
        rows.append(row)
        if row.kind is not _MERGE:
            done = True
            break
    return done


def _newest_first(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: -r.seq)  # stable: a repeated seq keeps the earlier source's copy
