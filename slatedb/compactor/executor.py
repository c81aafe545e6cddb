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
  versions in runs below. ``now`` is the database's clock, not the compactor's: the manifest's
  ``last_l0_clock_tick``, the writer's clock at its last L0 flush (:func:`expiry_clock_ms`, as
  upstream's ``compaction_clock_tick``), so a compactor whose clock runs ahead never drops a row
  the writer still reads (COMPACT-12). The clock of the process running the merge is read once,
  only for the probe ``compactor.ttl-kept-by-db-clock``: a row kept live that it calls expired;
* only when writing the bottom run (no run older than the destination) is that newest
  ``seq <= M`` version dropped if it is a tombstone: nothing below can resurface.

**Merge operands** (spec/protocols/merge.md MERGE-5, MERGE-6): an expired operand is dropped
(never turned into a tombstone, which would hide the older history). When the newest version
``<= M`` is an operand, the versions a reader at ``M`` folds are kept down to the key's base
(value or tombstone), older ones dropped. With a merge operator they are folded: consecutive
operands with the same ``expire_ts`` into one (a *partial* merge, still an operand, carrying the
newest seq), and the oldest group with the base when the base is a tombstone or a value with the
same ``expire_ts`` (a *full* merge: a value), or onto nothing when writing the bottom run without
a base. Versions above ``M`` are never folded (a snapshot may read between them). Without an
operator the operands and their base are kept as they are. A failing operator fails the job
(:class:`CompactionFailed`), writing nothing more.

**Outputs** are cut at ``max_sst_size``, by default only between two keys: all versions of a key
stay in one SST. With ``Job.cut_after_any_row`` (``compactor_options.worker.cut_after_any_row``)
an output is cut after whichever row takes it to the size, as the official compactor does
(upstream #1490): a key's versions may then end one output and start the next, newer versions
first, which point reads take into account (``SortedRunView.holding``, reader.md READ-7).

**Resume** (RFC 002 "Resuming Partial Compactions"). Given the output SSTs of an interrupted
attempt, the last row of the last one is the cursor ``(K, S)``. Every source is read again from
key ``K``; retention restarts at ``K`` (its decisions depend only on the versions of one key,
``M``, the bottom flag and the clock), and rows at or before the cursor — ``key < K``, or
``key == K`` and ``seq >= S`` — are skipped (a cursor in the middle of a key's versions, an output
cut after any row, resumes with the key's next older version). So the rows after the cursor are
exactly those an uninterrupted run writes after it: none repeated (RESUME-2), none missing
(RESUME-1).
"""

from __future__ import annotations

import heapq
from contextlib import aclosing
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

import attrs
import trio
from ulid import ULID

from slatedb.lsm.view import bounds_of, sst_key
from slatedb.errors import CorruptionError, MergeOperatorError, SlateDBError
from slatedb.format.sst import SstOptions
from slatedb.format.sst_reader import SstReader
from slatedb.format.sst_writer import SstWriter
from slatedb.format.types import CompactedSsTable, CompactedSsTableView, ManifestV2
from slatedb.objstore.base import OVERWRITE, ObjectStore
from slatedb.objstore.retry import RetryingReads, retry_transient
from slatedb.merge_operator import MergeFn, fold
from slatedb.row import Row, RowKind
from slatedb.runtime import Runtime, probes, switches

from slatedb.lsm.paths import SstLocator

from slatedb.manifest.compaction import CompactionSpec, L0Source

from .lifecycle import ulid_not_before
from .subcompactions import InputSst, sample

#: The input SSTs one job has opened, by SST id: planning and every range of the job read the
#: same readers (each open is a HEAD and a ranged GET of the footer and index).
InputReaders = dict[ULID, SstReader]

_VALUE = RowKind.VALUE
_TOMBSTONE = RowKind.TOMBSTONE
_MERGE = RowKind.MERGE_OPERAND

#: Rows merged between two yields to the event loop (a compaction shares the loop with the
#: writer's flushes; this keeps each slice of CPU short).
CHUNK_ROWS = 2048


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
    #: Cut an output after any row (the official rule), not only between two keys.
    cut_after_any_row: bool = False


def expiry_clock_ms(manifest: ManifestV2) -> int:
    """The time a compaction of ``manifest`` judges TTL expiry by (COMPACT-12): its
    ``last_l0_clock_tick``, the writer's clock when it last flushed an L0 SST (upstream's
    ``compaction_clock_tick``). Never the compactor's own clock: a standalone compactor on a host
    whose clock runs ahead would turn into tombstones rows that the writer, judging by its own
    clock, still returns (and with the bottom run drop them)."""
    return manifest.last_l0_clock_tick


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
    async with aclosing(reader.scan_blocks(lo, b.hi, end_inclusive=b.hi_inclusive)) as blocks:
        async for rows in blocks:
            if b.lo is not None and not b.lo_inclusive:
                rows = [r for r in rows if r.key != b.lo]
            yield rows


async def _run_blocks(readers: Sequence[tuple[SstReader, CompactedSsTableView]], start: bytes | None) -> AsyncIterator[list[Row]]:
    for reader, view in readers:
        last = reader.info.last_entry
        if start is not None and last is not None and last < start:
            continue
        async with aclosing(_view_blocks(reader, view, start)) as blocks:  # closed with the run's stream
            async for rows in blocks:
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

    def __init__(self, store: ObjectStore, runtime: Runtime, merge_operator: MergeFn | None = None) -> None:
        self.store = store
        self.runtime = runtime
        self.locator = SstLocator(store, runtime)
        #: Folds merge operands (None: they are kept unmerged, MERGE-6).
        self.merge_operator = merge_operator

    async def _open(self, sst_id: ULID, readers: InputReaders | None = None) -> SstReader:
        """Inputs may live in another database (a clone compacting its parent's SSTs); outputs
        are always this database's own (``last_row`` reads those). ``readers``: the SSTs this
        job already opened (an SST object never changes, so its reader is reused as is)."""
        if readers is not None and sst_id in readers:
            return readers[sst_id]
        store, key = self.locator.locate(sst_id)
        reader = await SstReader.open(RetryingReads(store, self.runtime), key)
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
        any_row = job.cut_after_any_row
        M, bottom, now = job.retention_min_seq, job.bottom, job.now_ms
        # The clock of the process running the merge, read only for the probe below (COMPACT-12:
        # expiry is judged at ``now``, the database's clock, whatever this one says).
        own_now = self.runtime.now_ms()
        watch_ttl = own_now > now  # until the probe's first hit in this run
        op = self.merge_operator
        cur_key: bytes | None = None
        versions: list[Row] = []  # the current key's versions, newest first
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

        async def emit(key: bytes, rows: list[Row]) -> None:
            """Retention of one key's versions, then the resume skip and the output."""
            nonlocal cursor, writer_last_key, watch_ttl
            try:
                kept = retain(rows, M, bottom, now, op)
            except MergeOperatorError as e:
                raise CompactionFailed(f"compaction {job.compaction_id}: {e}", e) from e
            if watch_ttl:  # (inline: this runs for every key until the probe's first hit)
                for row in kept:
                    expire = row.expire_ts_ms
                    if expire is not None and expire <= own_now and row.kind is not _TOMBSTONE:
                        # A row kept live (retain turns a value expired at ``now`` into a tombstone
                        # and drops such an operand) that this process's clock, ahead, calls
                        # expired (COMPACT-12).
                        self.runtime.probe(probes.COMPACTOR_TTL_KEPT_BY_DB_CLOCK)
                        watch_ttl = False
                        break
            for row in kept:
                # -- resume: skip what the interrupted attempt already wrote ---------------------
                if cursor is not None:
                    if written(key, row.seq, cursor):
                        continue
                    if key == cursor[0]:
                        self.runtime.probe(probes.COMPACTOR_RESUMED_MID_KEY)
                    cursor = None
                    if not first_after_cursor_kept():
                        continue  # pragma: no mutate -- only the catalogued bug resume-skip-entry's _bug_drop_first says False
                # -- output ------------------------------------------------------------------------
                if writer_last_key is not None and (key != writer_last_key or any_row) \
                        and writer.estimated_size_bytes() >= max_bytes:
                    await cut()
                writer.add(row)
                writer_last_key = key

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
            if key != cur_key:
                if versions:
                    await emit(cur_key, versions)  # type: ignore[arg-type]
                cur_key = key
                versions = [row]
            elif row.seq != prev_seq:  # the same version in two sources: keep the newer source's copy
                versions.append(row)
            prev_seq = row.seq
        if versions:
            await emit(cur_key, versions)  # type: ignore[arg-type]
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


def _expired(row: Row, now: int) -> bool:
    return row.expire_ts_ms is not None and row.expire_ts_ms <= now


def _as_tombstone(row: Row) -> Row:
    return Row(row.key, row.seq, _TOMBSTONE, b"", None, row.create_ts_ms)


def retain(rows: list[Row], M: int, bottom: bool, now: int, op: MergeFn | None) -> list[Row]:
    """The versions of one key a compaction writes (module docstring, "Retention" and "Merge
    operands"). ``rows``: the key's versions newest first, each seq once."""
    if len(rows) == 1:  # the common case
        row = rows[0]
        if row.kind is _MERGE:
            if _expired(row, now):
                return []
            if bottom and op is not None and row.seq <= M:
                return [_full(op, [row], None)]
            return [row]
        if row.kind is not _TOMBSTONE and _expired(row, now):
            row = _as_tombstone(row)
        if bottom and row.kind is _TOMBSTONE and row.seq <= M:
            return []
        return [row]
    out: list[Row] = []
    i, n = 0, len(rows)
    while i < n and rows[i].seq > M:  # every version a snapshot above M may read, as it is
        row = rows[i]
        i += 1
        if _expired(row, now):
            if row.kind is _MERGE:
                continue  # MERGE-4: reads skip it; a tombstone would hide older history
            if row.kind is not _TOMBSTONE:
                row = _as_tombstone(row)
        out.append(row)
    chain: list[Row] = []  # operands a reader at M folds, newest first
    base: Row | None = None
    while i < n:
        row = rows[i]
        i += 1
        if row.kind is _MERGE:
            if not _expired(row, now):
                chain.append(row)
            continue
        base = _as_tombstone(row) if row.kind is not _TOMBSTONE and _expired(row, now) else row
        break
    drop_base = base is not None and bottom and base.kind is _TOMBSTONE
    if op is None or not chain:  # MERGE-6: unmerged without an operator
        out.extend(chain)
        if base is not None and not drop_base:
            out.append(base)
        return out
    groups: list[list[Row]] = []  # consecutive operands with one expire_ts, newest first
    for row in chain:
        if groups and groups[-1][0].expire_ts_ms == row.expire_ts_ms:
            groups[-1].append(row)
        else:
            groups.append([row])
    last = groups.pop()
    for g in groups:
        out.append(_partial(op, g))
    if base is not None and (base.kind is _TOMBSTONE or base.expire_ts_ms == last[0].expire_ts_ms):
        out.append(_full(op, last, base))  # MERGE-5: full merge with the base
    elif base is None and bottom:
        out.append(_full(op, last, None))  # nothing below the bottom run: a full merge
    else:
        out.append(_partial(op, last))
        if base is not None and not drop_base:
            out.append(base)
    return out


def _meta(rows: list[Row]) -> tuple[int | None, int | None]:
    expires = [r.expire_ts_ms for r in rows if r.expire_ts_ms is not None]
    creates = [r.create_ts_ms for r in rows if r.create_ts_ms is not None]
    return (min(expires) if expires else None), (max(creates) if creates else None)


def _partial(op: MergeFn, group: list[Row]) -> Row:
    """Consecutive operands (newest first) folded into one operand (MERGE-5)."""
    if len(group) == 1:
        return group[0]
    first = group[0]
    expire, create = _meta(group)
    value = fold(op, first.key, None, [r.value for r in reversed(group)])
    return Row(first.key, first.seq, _MERGE, value, expire, create)


def _full(op: MergeFn, group: list[Row], base: Row | None) -> Row:
    """Operands (newest first) folded onto their base (a value, a tombstone, or None): a value."""
    first = group[0]
    rows = group if base is None or base.kind is _TOMBSTONE else group + [base]
    expire, create = _meta(rows)
    start = base.value if base is not None and base.kind is not _TOMBSTONE else None
    value = fold(op, first.key, start, [r.value for r in reversed(group)])
    return Row(first.key, first.seq, _VALUE, value, expire, create)


class CompactionFailed(SlateDBError):
    """A compaction that cannot complete: its worker releases the job and claims it again only
    after a backoff (``slatedb/compactor/worker.py``). ``error`` is the typed error that stopped
    it (a :class:`~slatedb.errors.MergeOperatorError` naming the key), kept as a field: the
    range runner re-raises the first range's error without its chain."""

    def __init__(self, message: str, error: SlateDBError | None = None) -> None:
        super().__init__(message)
        self.error = error
