"""Range scans: every source merged by key, newest version first, without an event-loop hop
per row.

The merge is written *sans I/O*: sources hand out rows they already hold; an SST source that
has run out of loaded blocks makes :meth:`MergeScan.next_batch` raise :class:`NeedIO` naming
itself, *without* changing any state. The caller loads the blocks (the sync API by a blocking
call into the runtime thread, the async API with ``await``), hands them to the source and calls
again. So one merge serves both APIs, and rows in memory or in the block cache are produced in
plain synchronous Python.

Visibility is decided per key group: among a key's rows (each source yields a key's versions
contiguously) the highest ``seq <= max_seq`` wins; a tombstone or an expired value hides the key;
a merge operand is folded with the key's older rows (MERGE-1, :func:`slatedb.merge.resolve_versions`).
Picking the maximum rather than "the first row seen" keeps reverse scans right when one key's
versions straddle two blocks of an SST.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from typing import Iterator, Sequence

from slatedb.format.block import Block
from slatedb.format.sst_reader import SstReader
from slatedb.merge import resolve_versions
from slatedb.merge_operator import MergeFn
from slatedb.row import Row, RowKind

from .view import KeyBounds, SstHandle

_VALUE = RowKind.VALUE
_TOMBSTONE = RowKind.TOMBSTONE
_MERGE = RowKind.MERGE_OPERAND
_EMPTY: list[Row] = []

#: Consecutive uncached blocks are fetched in reads of about this many bytes.
SCAN_READ_BYTES = 256 * 1024


class NeedIO(Exception):
    """Raised by :meth:`MergeScan.next_batch` when ``source`` must load blocks first."""

    def __init__(self, source: "SstSource") -> None:
        self.source = source


class MemSource:
    """Rows of a memtable iterator (already in merge order and bounded by seq)."""

    __slots__ = ("_it", "_row")

    def __init__(self, rows: Iterator[Row]) -> None:
        self._it = rows
        self._row: Row | None = next(rows, None)

    def head(self) -> Row | None:
        return self._row

    def advance(self) -> None:
        self._row = next(self._it, None)


class SstSource:
    """Rows of one or more SSTs visited in key order (an L0 SST, or a sorted run's SSTs),
    clipped to the scan bounds and each view's visible range."""

    def __init__(self, handles: Sequence[SstHandle], bounds: KeyBounds, reverse: bool,
                 seq_ceiling: int | None = None) -> None:
        #: No row of these SSTs is above it (their view's ``LsmView.seq_ceiling``; None: unknown).
        self._seq_ceiling = seq_ceiling
        self._plan: list[tuple[SstReader, KeyBounds, int, int]] = []
        for h in reversed(handles) if reverse else handles:
            b = bounds.intersect(h.bounds)
            if b.is_empty():
                continue
            index = h.reader.index
            n = len(index)
            if n == 0:
                continue
            first = 0 if b.lo is None else index.find_block(b.lo)
            last = n - 1 if b.hi is None else index.find_last_block(b.hi)
            if first < 0:
                first = 0
            if last < first:
                continue
            self._plan.append((h.reader, b, first, last))
        self._reverse = reverse
        self._plan_pos = 0
        self._next_block: int | None = None
        self._fetched: dict[int, Block] = {}
        # The current block's rows ``[_pos, _end)`` of ``_rows`` (forward: the block's own rows
        # list, built on first use; reverse: the clipped rows reversed). ``_block``/``_rows`` is
        # None until a row is asked for, so a plain block can be read as columns instead
        # (:meth:`plain_pairs`) without building any row.
        self._block: Block | None = None
        self._rows: list[Row] | None = _EMPTY
        self._pos = 0
        self._end = 0

    # -- the source protocol ------------------------------------------------------------------

    def head(self) -> Row | None | NeedIO:
        pos = self._pos
        if pos < self._end:
            rows = self._rows
            if rows is None:
                rows = self._rows = self._block.rows  # type: ignore[union-attr]
            return rows[pos]
        got = self._load_next()
        if got is not True:
            return got  # type: ignore[return-value]
        return self.head()

    def advance(self) -> None:
        self._pos += 1

    def plain_pairs(self, limit: int, max_seq: int, after: bytes | None,
                    before: bytes | None = None) -> list[tuple[bytes, bytes]] | None | object:
        """Forward scans: up to ``limit`` visible ``(key, value)`` pairs of the current block,
        taken as columns, when its remaining rows are values without expiry, one per key, at or
        below ``max_seq``, and the first is not ``after`` (the merge's current key: older
        versions of a key may continue into the next block); only keys below ``before`` (the
        smallest key another source of a merge holds; None: no bound). None when the slow path
        must take the next row (or the source is exhausted: :meth:`head` says which);
        :data:`NEED_IO_MARK` when a block must be loaded first."""
        if self._pos >= self._end:
            got = self._load_next()
            if got is not True:
                return None if got is None else got
        block = self._block
        if block is None or self._reverse:
            return None
        ceiling = self._seq_ceiling
        if ceiling is not None and max_seq >= ceiling:  # no row is above max_seq (DUR-2)
            if not block.plain:
                return None
        else:
            plain = block.plain_max_seq
            if plain is None or plain > max_seq:
                return None
        pos = self._pos
        keys = block.keys
        if keys[pos] == after:
            return None
        end = min(self._end, pos + limit)
        if before is not None:
            if keys[pos] >= before:
                return None
            end = bisect_left(keys, before, pos, end)
        self._pos = end
        return list(zip(keys[pos:end], block.values[pos:end]))

    def last_key(self) -> bytes:
        """The key of the row before the current position (after :meth:`plain_pairs`)."""
        return self._block.keys[self._pos - 1]  # type: ignore[union-attr]

    # -- loading ----------------------------------------------------------------------------

    def io_request(self) -> tuple[SstReader, int, int]:
        """``(reader, first, last_exclusive)``: the blocks to fetch before calling again."""
        reader, _b, first, last = self._plan[self._plan_pos]
        i = self._current_block()
        offsets = reader.index.offsets
        if self._reverse:
            lo = i
            while lo > first and offsets[i + 1] - offsets[lo - 1] <= SCAN_READ_BYTES:
                lo -= 1
            return reader, lo, i + 1
        hi = i + 1
        while hi <= last and offsets[hi + 1] - offsets[i] <= SCAN_READ_BYTES:
            hi += 1
        return reader, i, hi

    def supply(self, first: int, blocks: Sequence[Block]) -> None:
        for k, block in enumerate(blocks):
            self._fetched[first + k] = block

    def _current_block(self) -> int:
        reader, _b, first, last = self._plan[self._plan_pos]
        if self._next_block is None:
            self._next_block = last if self._reverse else first
        return self._next_block

    def _load_next(self) -> bool | None | object:
        """Move to the next block with rows in the scan's bounds: True; None when the source is
        exhausted; :data:`NEED_IO_MARK` when that block must be loaded first."""
        while self._plan_pos < len(self._plan):
            reader, b, first, last = self._plan[self._plan_pos]
            i = self._current_block()
            if (i < first) if self._reverse else (i > last):
                self._plan_pos += 1
                self._next_block = None
                self._fetched.clear()
                continue
            block = self._fetched.pop(i, None)
            if block is None:
                block = reader.cached_block(i)
                if block is None:
                    return NEED_IO_MARK
            self._next_block = i - 1 if self._reverse else i + 1
            lo, hi = _clip(block, b)
            if lo >= hi:
                continue
            if self._reverse:
                self._block = None
                self._rows = block.rows[lo:hi][::-1]
                self._pos, self._end = 0, hi - lo
            else:
                self._block = block
                self._rows = None
                self._pos, self._end = lo, hi
            return True
        self._block = None
        self._rows = _EMPTY
        self._pos = self._end = 0
        return None


#: What :meth:`SstSource.head` returns when it needs blocks loaded.
NEED_IO_MARK = object()


def _clip(block: Block, b: KeyBounds) -> tuple[int, int]:
    """The rows ``[lo, hi)`` of ``block`` within ``b``."""
    keys = block.keys
    lo = 0
    if b.lo is not None:
        lo = bisect_left(keys, b.lo) if b.lo_inclusive else bisect_right(keys, b.lo)
    hi = len(keys)
    if b.hi is not None:
        hi = bisect_right(keys, b.hi) if b.hi_inclusive else bisect_left(keys, b.hi)
    return lo, hi


class MergeScan:
    """Merge of sources into visible ``(key, value)`` pairs (see the module docstring).

    ``sources`` are in read order (memtables newest first, L0 newest first, runs newest first);
    for equal ``(key, seq)`` the earlier source wins, as in the point-lookup order.
    """

    def __init__(self, sources: Sequence[MemSource | SstSource], *, reverse: bool, max_seq: int, now_ms: int,
                 op: MergeFn | None = None) -> None:
        self._sources = list(sources)
        self._pending = list(range(len(self._sources)))
        self._heap: list[tuple] = []
        self._reverse = reverse
        self._max_seq = max_seq
        self._now_ms = now_ms
        self._key: bytes | None = None
        self._best: Row | None = None
        #: The key's rows with seq <= max_seq, for a merge fold (None: not needed).
        self._group: list[Row] | None = None
        self._op = op
        self._done = False
        self._out: list[tuple[bytes, bytes]] = []
        #: A forward scan of one SST source (a reopened database's usual scan) needs no heap,
        #: and takes plain blocks as columns (:meth:`SstSource.plain_pairs`).
        self._single = sources[0] if (self.PAIRS and not reverse and len(sources) == 1
                                      and isinstance(sources[0], SstSource)) else None

    #: Batches are ``(key, value)`` pairs (a subclass emitting rows sets False).
    PAIRS = True

    def next_batch(self, n: int) -> list[tuple[bytes, bytes]]:
        """Up to ``n`` visible pairs; fewer (possibly none) only at the end of the scan.

        Raises :class:`NeedIO` when a source needs blocks; nothing is lost: call again after
        loading them.
        """
        if self._single is not None:
            return self._next_batch_single(n)
        # Rows gathered before a NeedIO are kept in ``_out`` for the call after the load.
        out = self._out
        self._out = []
        if self._done:
            return out
        heap = self._heap
        sources = self._sources
        reverse = self._reverse
        gallop = self.PAIRS and not reverse
        max_seq = self._max_seq
        while len(out) < n:
            pending = self._pending
            while pending:
                idx = pending[-1]
                row = sources[idx].head()
                if row is NEED_IO_MARK:
                    self._out = out
                    raise NeedIO(sources[idx])  # type: ignore[arg-type]
                pending.pop()
                if row is not None:
                    if reverse:
                        heapq.heappush(heap, (_Desc(row.key), -row.seq, idx, row))
                    else:
                        heapq.heappush(heap, (row.key, -row.seq, idx, row))
            if not heap:
                self._emit(out)
                self._key = None
                self._done = True
                return out
            entry = heapq.heappop(heap)
            idx = entry[2]
            row = entry[3]
            sources[idx].advance()
            pending.append(idx)
            key = row.key
            if key != self._key:
                self._emit(out)
                self._key = key
                self._best = None
                self._group = None
            if row.seq <= max_seq:
                best = self._best
                if best is None:
                    self._best = row
                    # A forward scan meets a key's rows newest first: the first decides, and
                    # the rest matter only under an operand. A reverse scan may meet them in
                    # any order (an SST's blocks are reversed): keep them all.
                    if reverse or row.kind is _MERGE:
                        self._group = [row]
                elif self._group is not None:
                    self._group.append(row)
                    if row.seq > best.seq:
                        self._best = row
            if gallop and type(sources[idx]) is SstSource:
                self._gallop(sources[idx], heap[0][0] if heap else None, out, n)  # type: ignore[arg-type]
        return out

    def _gallop(self, src: SstSource, before: bytes | None, out: list[tuple[bytes, bytes]], n: int) -> None:
        """Forward merge: the rows of ``src`` (the source just popped) below ``before``, the
        smallest key the other sources hold, need no heap step: take them as columns while its
        blocks are plain (the L0 SSTs and runs of a sequential load are disjoint, so a scan
        then walks each source's blocks as the one-source path does)."""
        max_seq = self._max_seq
        while True:
            best = self._best
            room = n - len(out) - (best is not None and best is not _DECIDED)  # _emit may add the current key
            if room <= 0:
                return
            pairs = src.plain_pairs(room, max_seq, self._key, before)
            if pairs is None or pairs is NEED_IO_MARK:
                return  # the next row goes through the heap (head() loads or ends the source)
            self._emit(out)
            out += pairs  # type: ignore[arg-type]
            self._key = src.last_key()  # decided: its older versions further on are skipped
            self._best = _DECIDED
            self._group = None

    def _next_batch_single(self, n: int) -> list[tuple[bytes, bytes]]:
        """:meth:`next_batch` of a forward scan of one SST source: the heap loop without a
        heap, and a plain block's rows as columns."""
        out = self._out
        self._out = []
        if self._done:
            return out
        src: SstSource = self._single  # type: ignore[assignment]
        max_seq = self._max_seq
        while len(out) < n:
            best = self._best
            room = n - len(out) - (best is not None and best is not _DECIDED)  # _emit may add the current key
            pairs = src.plain_pairs(room, max_seq, self._key) if room > 0 else None
            if pairs is NEED_IO_MARK:
                self._out = out
                raise NeedIO(src)
            if pairs:
                self._emit(out)
                out += pairs  # type: ignore[arg-type]
                # The last key is decided: older versions of it in the next block are skipped.
                self._key = src.last_key()
                self._best = _DECIDED
                self._group = None
                continue
            row = src.head()
            if row is NEED_IO_MARK:
                self._out = out
                raise NeedIO(src)
            if row is None:
                self._emit(out)
                self._key = None
                self._done = True
                return out
            src.advance()
            key = row.key  # type: ignore[union-attr]
            if key != self._key:
                self._emit(out)
                self._key = key
                self._best = None
                self._group = None
            if row.seq <= max_seq:  # type: ignore[union-attr]
                best = self._best
                if best is None:
                    self._best = row  # type: ignore[assignment]
                    if row.kind is _MERGE:  # type: ignore[union-attr]
                        self._group = [row]  # type: ignore[list-item]
                elif self._group is not None:
                    self._group.append(row)  # type: ignore[arg-type]
                    if row.seq > best.seq:  # type: ignore[union-attr]
                        self._best = row  # type: ignore[assignment]
        return out

    def _emit(self, out: list[tuple[bytes, bytes]]) -> None:
        row = self._best
        self._best = None
        if row is None:
            return
        kind = row.kind
        if kind is _VALUE:
            expire = row.expire_ts_ms
            if expire is None or expire > self._now_ms:
                out.append((row.key, row.value))
        elif kind is _MERGE:
            # A reverse scan meets a key's versions in any order (blocks are reversed): sort.
            got = resolve_versions(sorted(self._group or [row], key=_neg_seq), self._op, self._now_ms, self._max_seq)
            if got is not None:
                out.append((got.key, got.value))


#: The merge's ``_best`` once a key was emitted from columns: its older rows change nothing, and
#: emitting it adds nothing (a tombstone).
_DECIDED = Row(b"", -1, _TOMBSTONE)


def _neg_seq(row: Row) -> int:
    return -row.seq


class _Desc:
    """Wraps a key so that the min-heap pops the largest key first (reverse scans)."""

    __slots__ = ("key",)

    def __init__(self, key: bytes) -> None:
        self.key = key

    def __lt__(self, other: "_Desc") -> bool:
        return self.key > other.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.key == other.key
