"""Runs one compaction: merge the sources, apply retention, write output SSTs, resume.

**Merge.** Each source is a stream of rows in ``(key asc, seq desc)`` order: an L0 SST, or a
sorted run read SST after SST. The streams are merged block by block (a block's rows are
already decoded lists), so the per-row work is a heap step, not an ``await``.

**Retention** (per key, over its versions newest first; ``M`` is ``retention_min_seq``, the
oldest sequence an active snapshot may read at):

* every version with ``seq > M`` is kept (a snapshot may need it);
* the newest version with ``seq <= M`` is kept (it is what a reader at ``M`` or later sees),
  older ones are dropped;
* an expired value (``expire_ts <= now``) is kept as a tombstone, so that it still hides older
  versions in runs below;
* only when writing the bottom run (no run older than the destination) is that newest
  ``seq <= M`` version dropped if it is a tombstone: nothing below can resurface.

**Outputs** are cut at ``max_sst_size`` but only between two keys: all versions of a key stay
in one SST, so a point lookup in a sorted run (which picks the one SST whose key range may hold
the key) finds every version.

**Resume** (RFC 002 "Resuming Partial Compactions"). Given the output SSTs of an interrupted
attempt, the last row of the last one is the cursor ``(K, S)``. Every source is read again from
key ``K``; retention restarts at ``K`` (its decisions depend only on the versions of one key,
``M``, the bottom flag and the clock), and rows at or before the cursor — ``key < K``, or
``key == K`` and ``seq >= S`` — are skipped. So the rows after the cursor are exactly those an
uninterrupted run writes after it: none repeated (RESUME-2), none missing (RESUME-1).
"""

from __future__ import annotations

import heapq
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

import attrs
import trio
from ulid import ULID

from slatedb.lsm.view import bounds_of, sst_key
from slatedb.errors import CorruptionError, SlateDBError
from slatedb.format.sst import SstOptions
from slatedb.format.sst_reader import SstReader
from slatedb.format.sst_writer import SstWriter
from slatedb.format.types import CompactedSsTable, CompactedSsTableView, ManifestV2
from slatedb.objstore.base import OVERWRITE, ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.row import Row, RowKind
from slatedb.runtime import Runtime, probes, switches

from slatedb.lsm.paths import SstLocator

from slatedb.manifest.compaction import CompactionSpec, L0Source

from .lifecycle import ulid_not_before
from .subcompactions import InputSst, sample

#: The input SSTs one job has opened, by SST id: planning and every range of the job read the
#: same readers (each open is a HEAD and a ranged GET of the footer and index).
InputReaders = dict[ULID, SstReader]

_TOMBSTONE = RowKind.TOMBSTONE
_MERGE = RowKind.MERGE_OPERAND

#: Rows merged between two yields to the event loop (a compaction shares the loop with the
#: writer's flushes; this keeps each slice of CPU short).
CHUNK_ROWS = 2048


class _RetryingReads:
    """The ranged reads of :class:`SstReader`, with transient errors retried."""

    def __init__(self, store: ObjectStore, runtime: Runtime) -> None:
        self._store = store
        self._rt = runtime

    async def get(self, key: str, byte_range: tuple[int, int] | None = None) -> Any:
        return await retry_transient(self._rt, lambda: self._store.get(key, byte_range=byte_range), what=f"get {key}")

    async def head(self, key: str) -> Any:
        return await retry_transient(self._rt, lambda: self._store.head(key), what=f"head {key}")


@attrs.frozen
class Job:
    """Everything one execution of a compaction needs, fixed when it starts."""

    compaction_id: ULID
    spec: CompactionSpec
    manifest: ManifestV2
    retention_min_seq: int
    bottom: bool
    now_ms: int
    max_sst_size_bytes: int
    sst_options: SstOptions
    #: Outputs of an earlier, interrupted attempt (resume from the last one).
    resume_outputs: tuple[CompactedSsTable, ...] = ()
    #: The subcompaction range ``[key_lo, key_hi)`` this execution merges (None: unbounded).
    key_lo: bytes | None = None
    key_hi: bytes | None = None


def is_bottom(manifest: ManifestV2, spec: CompactionSpec) -> bool:
    """True when no sorted run older than the destination remains after the compaction."""
    return not any(r.id < spec.destination for r in manifest.compacted)


class _Stream:
    """One source: its blocks of rows, consumed row by row through ``rows``/``pos``."""

    __slots__ = ("blocks", "rows", "pos", "order")

    def __init__(self, blocks: AsyncIterator[list[Row]], order: int) -> None:
        self.blocks = blocks
        self.rows: list[Row] = []
        self.pos = 0
        self.order = order

    async def fill(self) -> bool:
        async for rows in self.blocks:
            if rows:
                self.rows, self.pos = rows, 0
                return True
        return False


async def _view_blocks(reader: SstReader, view: CompactedSsTableView, start: bytes | None) -> AsyncIterator[list[Row]]:
    """Blocks of one SST view, restricted to its visible range and to keys >= ``start``."""
    b = bounds_of(view.visible_range)
    lo = b.lo if start is None or (b.lo is not None and b.lo > start) else start
    async for rows in reader.scan_blocks(lo, b.hi, end_inclusive=b.hi_inclusive):
        if b.lo is not None and not b.lo_inclusive:
            rows = [r for r in rows if r.key != b.lo]
        yield rows


async def _run_blocks(readers: Sequence[tuple[SstReader, CompactedSsTableView]], start: bytes | None) -> AsyncIterator[list[Row]]:
    for reader, view in readers:
        last = reader.info.last_entry
        if start is not None and last is not None and last < start:
            continue
        async for rows in _view_blocks(reader, view, start):
            yield rows


def _written(key: bytes, seq: int, cursor: tuple[bytes, int]) -> bool:
    """Whether a resumed compaction's interrupted attempt already wrote this row (RFC 002
    "Resuming Partial Compactions"): every key before the cursor's, and the cursor key's
    versions down to the cursor's seq (rows come newest first within a key)."""
    return key < cursor[0] or (key == cursor[0] and seq >= cursor[1])


def _bug_written_reemit(key: bytes, seq: int, cursor: tuple[bytes, int]) -> bool:
    """Catalogued bug ``resume-reemit`` (sim/scenarios/catalogue.py): only versions newer than the cursor's seq
    count as written, so the cursor row itself is written again."""
    return key < cursor[0] or (key == cursor[0] and seq > cursor[1])


def _keep_first() -> bool:
    """The first row after the cursor is the next one to write."""
    return True


def _bug_drop_first() -> bool:
    """Catalogued bug ``resume-skip-entry`` (sim/scenarios/catalogue.py): the first row after the cursor is
    dropped along with the rows already written."""
    return False


class Executor:
    """Executes :class:`Job` s against one store. ``on_output`` is awaited after each output
    SST is stored, with every output so far (the compactor persists that progress)."""

    def __init__(self, store: ObjectStore, runtime: Runtime) -> None:
        self.store = store
        self.runtime = runtime
        self.locator = SstLocator(store, runtime)

    async def _open(self, sst_id: ULID, readers: InputReaders | None = None) -> SstReader:
        """Inputs may live in another database (a clone compacting its parent's SSTs); outputs
        are always this database's own (``last_row`` reads those). ``readers``: the SSTs this
        job already opened (an SST object never changes, so its reader is reused as is)."""
        if readers is not None and sst_id in readers:
            return readers[sst_id]
        store, key = self.locator.locate(sst_id)
        reader = await SstReader.open(_RetryingReads(store, self.runtime), key)
        if readers is not None:
            readers[sst_id] = reader
        return reader

    async def last_row(self, sst: CompactedSsTable) -> Row:
        reader = await self._open(sst.id)
        if reader.num_blocks == 0:
            raise CorruptionError(sst_key(sst.id), None, "output SST of a compaction has no rows")
        block = await reader.read_block(reader.num_blocks - 1)
        return block.rows[-1]

    async def _streams(self, job: Job, start: bytes | None, readers: InputReaders | None) -> list[_Stream]:
        m = job.manifest
        await self.locator.update(m)
        l0 = {v.id: v for v in m.l0}
        runs = {r.id: r for r in m.compacted}
        streams: list[_Stream] = []
        for order, src in enumerate(job.spec.sources):
            if isinstance(src, L0Source):
                view = l0[src.view_id]
                streams.append(_Stream(_view_blocks(await self._open(view.sst_id, readers), view, start), order))
            else:
                run = runs[src.run_id]
                opened = [(await self._open(v.sst_id, readers), v) for v in run.ssts]
                streams.append(_Stream(_run_blocks(opened, start), order))
        return streams

    async def run(self, job: Job, on_output: Callable[[tuple[CompactedSsTable, ...]], Awaitable[None]],
                  readers: InputReaders | None = None) -> tuple[CompactedSsTable, ...]:
        """Merge ``job``'s range. ``readers``: input SSTs the caller already opened for this job
        (planning, other ranges), shared rather than opened again; what this run opens is added."""
        outputs = list(job.resume_outputs)
        cursor: tuple[bytes, int] | None = None
        if outputs:
            last = await self.last_row(outputs[-1])
            cursor = (last.key, last.seq)
            self.runtime.probe(probes.COMPACTOR_RESUMED)
            self.runtime.event("compaction_resume", id=str(job.compaction_id), key=last.key.hex(), seq=last.seq,
                               outputs=len(outputs))
        if cursor is not None and ((job.key_lo is not None and cursor[0] < job.key_lo)
                                   or (job.key_hi is not None and cursor[0] >= job.key_hi)):
            raise CorruptionError(sst_key(outputs[-1].id), None, f"output of compaction {job.compaction_id} ends at "
                                  f"{cursor[0]!r}, outside its subcompaction range [{job.key_lo!r}, {job.key_hi!r})")
        start = cursor[0] if cursor else job.key_lo
        streams = await self._streams(job, start, readers)
        hi = job.key_hi
        heap: list[tuple[bytes, int, int, _Stream]] = []
        for st in streams:
            if await st.fill():
                r = st.rows[0]
                heap.append((r.key, -r.seq, st.order, st))
        heapq.heapify(heap)

        writer = SstWriter(job.sst_options)
        writer_last_key: bytes | None = None
        max_bytes = job.max_sst_size_bytes
        M, bottom, now = job.retention_min_seq, job.bottom, job.now_ms
        cur_key: bytes | None = None
        kept_at_or_below_m = False  # the key's newest version with seq <= M was seen
        prev_seq = -1
        rows_in = 0

        async def cut() -> None:
            nonlocal writer, writer_last_key
            encoded = writer.finish()
            sst_id = ulid_not_before(self.runtime, job.compaction_id.milliseconds)  # the ULID rule
            key = sst_key(sst_id)
            await retry_transient(self.runtime, lambda: self.store.put(key, encoded.data, OVERWRITE), what=f"put {key}")
            outputs.append(CompactedSsTable(sst_id, encoded.info, None, encoded.format_version))
            self.runtime.event("compaction_output", id=str(job.compaction_id), sst=str(sst_id), n=len(outputs))
            await on_output(tuple(outputs))
            writer = SstWriter(job.sst_options)
            writer_last_key = None

        written = _bug_written_reemit if switches.RESUME_REEMIT in self.runtime.bugs else _written
        first_after_cursor_kept = _bug_drop_first if switches.RESUME_SKIP_ENTRY in self.runtime.bugs else _keep_first
        while heap:
            key, _nseq, _order, st = heap[0]
            if hi is not None and key >= hi:
                break  # the rest belongs to the next subcompaction
            row = st.rows[st.pos]
            st.pos += 1
            if st.pos < len(st.rows):
                nxt = st.rows[st.pos]
                heapq.heapreplace(heap, (nxt.key, -nxt.seq, st.order, st))
            elif await st.fill():
                nxt = st.rows[0]
                heapq.heapreplace(heap, (nxt.key, -nxt.seq, st.order, st))
            else:
                heapq.heappop(heap)
            rows_in += 1
            if rows_in % CHUNK_ROWS == 0:
                await trio.lowlevel.checkpoint()

            # -- retention, per key ----------------------------------------------------------
            if key != cur_key:
                cur_key = key
                kept_at_or_below_m = False
            elif row.seq == prev_seq:
                continue  # the same version in two sources: keep the newer source's copy
            prev_seq = row.seq
            if row.kind is _MERGE:
                raise CompactionFailed(f"key {row.key!r} seq {row.seq} is a merge operand; merge operators are not supported")
            if row.seq <= M:
                if kept_at_or_below_m:
                    continue
                kept_at_or_below_m = True
            if row.kind is not _TOMBSTONE and row.expire_ts_ms is not None and row.expire_ts_ms <= now:
                row = Row(row.key, row.seq, _TOMBSTONE, b"", None, row.create_ts_ms)
            if bottom and row.kind is _TOMBSTONE and row.seq <= M:
                continue
            # -- resume: skip what the interrupted attempt already wrote ---------------------
            if cursor is not None:
                if written(key, row.seq, cursor):
                    continue
                cursor = None
                if not first_after_cursor_kept():
                    continue
            # -- output ------------------------------------------------------------------------
            if writer_last_key is not None and key != writer_last_key and writer.estimated_size_bytes() >= max_bytes:
                await cut()
            writer.add(row)
            writer_last_key = key
        for st in streams:  # a range ends before its sources do: close them now, not at GC time
            aclose = getattr(st.blocks, "aclose", None)
            if aclose is not None:
                await aclose()
        if writer_last_key is not None:
            await cut()
        return tuple(outputs)

    async def plan_inputs(self, spec: CompactionSpec, manifest: ManifestV2,
                          readers: InputReaders | None = None) -> list[InputSst]:
        """Each input SST view's size and anchor keys (its index's block first keys within the
        view), for :func:`slatedb.compactor.subcompactions.plan_ranges`. The readers it opens
        are left in ``readers`` for the ranges to merge from."""
        await self.locator.update(manifest)
        l0 = {v.id: v for v in manifest.l0}
        runs = {r.id: r for r in manifest.compacted}
        views: list[CompactedSsTableView] = []
        for src in spec.sources:
            views += [l0[src.view_id]] if isinstance(src, L0Source) else list(runs[src.run_id].ssts)
        sizes = {s.id: s.info for s in manifest.ssts}
        out = []
        for view in views:
            reader = await self._open(view.sst_id, readers)
            b = bounds_of(view.visible_range)
            first = reader.info.first_entry  # block 0's index key is empty: the SST's first key stands in
            keys = [k for k in ([first] if first else []) + list(reader.index.first_keys[1:])
                    if (b.lo is None or k > b.lo) and (b.hi is None or k < b.hi)]
            info = sizes.get(view.sst_id, reader.info)
            size = max(info.index_offset + info.index_len, info.filter_offset + info.filter_len,
                       info.stats_offset + info.stats_len)
            out.append(InputSst(size, sample(keys)))
        return out


class CompactionFailed(SlateDBError):
    """A compaction that cannot complete (its reason is recorded as ``Failed``)."""
