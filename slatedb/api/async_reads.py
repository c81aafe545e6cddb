"""The asynchronous read API (trio or asyncio) over any engine with the read interface
(:class:`slatedb.lsm.read_path.ReadPath`: ``DbCore`` and ``ReaderCore``): ``get``, ``scan``,
``scan_prefix`` and their async iterator. A read answered from memory does not yield to the loop;
a block read (``NeedIO`` / ``NEED_IO``) is read on the caller's thread where the store can (a
local directory: a copy out of a memory map), else awaits the engine's loader through the
front-end's host (:mod:`slatedb.api.portal`: a plain await on the caller's trio loop, or a call
into the runtime thread from asyncio). A scan yields to the caller's loop after each block read
on its thread (:func:`_yield_to_loop`), as it did at each load through the engine: a long scan
neither starves the loop's other tasks nor escapes a cancellation. A get (``get_key_value``)
does the same once every few blocks it read on its thread (:data:`_YIELD_SHIFT`).
"""

from __future__ import annotations

import asyncio
from itertools import islice
from typing import Any, Iterator, Mapping

import sniffio
import trio

from slatedb.batch import validate_key
from slatedb.errors import ClosedError
from slatedb.api.args import check_batch_size, prefix_bounds, scan_bounds
from slatedb.api.options import KeyValue, ReadOptions, ScanOptions
from slatedb.api.read_kit import bound_for, key_value, scan_options, seek_bounds
from slatedb.lsm.scan import MergeScan, NeedIO
from slatedb.objstore.local import DIRECT_READS as _DIRECT_READS
from slatedb.row import RowKind
from slatedb.lsm.view import KeyBounds
from slatedb.format.sst_reader import NEED_IO
from slatedb.api.unpicklable import Unpicklable

#: Rows pulled per refill by iterators that merge several sources.
ITER_BATCH_ROWS = 256
#: A get that read a block on the caller's thread (a local directory) yields to the loop once
#: every ``2**_YIELD_SHIFT`` such reads (any thread's, counted in ``DIRECT_READS``): a long loop
#: of cold gets lets the loop's other tasks run and a cancellation land, without the ~7 us of a
#: yield on each (a third of a cold get's CPU under asyncio, measured).
_YIELD_SHIFT = 3


async def _yield_to_loop() -> None:
    """A scheduling point of the caller's library (and so a cancellation point)."""
    if sniffio.current_async_library() == "trio":
        await trio.lowlevel.checkpoint()
    else:
        await asyncio.sleep(0)


class Released:
    """What a release with no I/O of the async API returns (an iterator's or a snapshot's
    ``close()``): the release is done when the call returns, and ``await x.close()`` (as for
    ``await db.close()``) works too, under asyncio or trio."""

    __slots__ = ()

    def __await__(self) -> Iterator[None]:
        return iter(())

    def __repr__(self) -> str:
        return "<released>"


RELEASED = Released()


class DbIterator:
    """Async iterator of ``(key, value)`` pairs; also :meth:`next_batch`. :meth:`close` (or
    leaving ``async with db.scan() as it:``, or ``with``) stops it early and lets go of what it
    holds."""

    def __init__(self, host: Any, core: Any, merge: MergeScan | None, gen: Any, scan: tuple | None = None) -> None:
        self._host = host
        self._core = core
        self._merge = merge
        self._gen = gen
        self._scan = scan  # (read state, bounds, reverse, max_seq): what seek() restarts
        self._buf: list[tuple[bytes, bytes]] = []
        self._pos = 0

    def __aiter__(self) -> "DbIterator":
        return self

    async def __anext__(self) -> tuple[bytes, bytes]:
        if self._gen is not None:
            try:
                return next(self._gen)
            except StopIteration:
                raise StopAsyncIteration from None
        if self._pos >= len(self._buf):
            self._buf = await self._pull(ITER_BATCH_ROWS)
            self._pos = 0
            if not self._buf:
                raise StopAsyncIteration
        item = self._buf[self._pos]
        self._pos += 1
        return item

    async def next_batch(self, n: int = 1000) -> list[tuple[bytes, bytes]]:
        """Up to ``n`` pairs; an empty list at the end of the scan. A step cancelled while it
        waits for blocks returns nothing and moves nothing: the next step returns its rows."""
        n = check_batch_size(n)
        if self._gen is not None:
            return list(islice(self._gen, n))  # n == 0 takes nothing
        out = self._buf[self._pos : self._pos + n]
        if len(out) < n:
            # The buffered rows are consumed only once the pull is back: a step cancelled in its
            # block read (a timeout, a cancelled task) leaves them for the next step.
            more = await self._pull(n - len(out))
            self._buf, self._pos = [], 0
            return out + more
        self._pos += len(out)
        return out

    async def seek(self, key: bytes) -> None:
        """Continue the scan from ``key``: the next row is the first at or after ``key`` in the
        scan's direction (ascending: ``>= key``; descending: ``<= key``). A key outside the scan
        range raises :class:`~slatedb.errors.SeekKeyOutOfRangeError` and leaves the iterator as
        it was. Rows are still those of the scan's own snapshot. A closed iterator:
        :class:`~slatedb.errors.ClosedError`."""
        if self._scan is None:
            raise ClosedError("the scan iterator was closed")
        rs, bounds, reverse, max_seq = self._scan
        rest = seek_bounds(bounds, key, reverse)
        self._merge, self._gen = self._core.scan_merge(rs, rest, reverse, max_seq)
        self._buf, self._pos = [], 0

    def close(self) -> Released:
        """Stop the scan early: it yields no more rows (``async for`` ends, ``__anext__`` raises
        ``StopAsyncIteration``, :meth:`next_batch` returns ``[]``; :meth:`seek` raises
        ``ClosedError``) and lets go of what it held (its read state's memtables and SST readers,
        the rows pulled ahead, its hold on the database). No I/O: done when the call returns;
        ``await it.close()`` works too. Idempotent."""
        gen = self._gen
        self._merge = self._gen = self._scan = None
        self._core = self._host = None
        self._buf, self._pos = [], 0
        close = getattr(gen, "close", None)
        if close is not None:
            close()
        return RELEASED

    async def aclose(self) -> None:
        """:meth:`close`, as an async generator's (``contextlib.aclosing``)."""
        self.close()

    async def __aenter__(self) -> "DbIterator":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def __enter__(self) -> "DbIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def _pull(self, n: int) -> list[tuple[bytes, bytes]]:
        merge = self._merge
        if merge is None:  # closed
            return []
        while True:
            try:
                return merge.next_batch(n)
            except NeedIO as e:
                if self._core.closed:  # as every front-end and store: no block read after close
                    raise ClosedError("the database is closed: its scans read no more blocks") from None
                source = e.source
                reader, first, last = source.io_request()
                blocks = reader.read_blocks_now(first, last)  # a local directory: on this thread, as get
                if blocks is None:
                    blocks = await self._host.acall(self._core.load_blocks, reader, first, last)
                    source.supply(first, blocks)
                else:
                    source.supply(first, blocks)
                    await _yield_to_loop()  # the loop's other tasks run, a cancellation lands


class AsyncReads(Unpicklable):
    _core: Any
    _host: Any  # slatedb.api.portal: LocalHost, SpawnedHost or RuntimeThread

    def _state(self) -> tuple[Any, int | None]:
        raise NotImplementedError

    async def get(self, key: bytes, options: ReadOptions | Mapping[str, Any] | None = None) -> bytes | None:
        key = validate_key(key)
        rs, max_seq = self._state()
        metrics = self._core.runtime.metrics
        if metrics is not None:
            metrics.count_get()
        if options is not None:
            max_seq = bound_for(self._core, max_seq, ReadOptions.of(options).durability_filter)
        # Blocks are read on this thread where the store can (a local directory: a page-cache
        # copy from a memory map, microseconds), as the sync API does; a hop to the engine's loop
        # for each such read cost ~400 us of CPU (1M keys, cold blocks: 1.5k gets/s against
        # 16.5k). Other stores, failed reads and merge operands still go through the loop.
        reads = _DIRECT_READS[0]
        value = self._core.get_direct(key, rs, max_seq)
        if value is NEED_IO:
            value = await self._host.acall(self._core.get_slow, key, rs, max_seq)
        elif _DIRECT_READS[0] >> _YIELD_SHIFT != reads >> _YIELD_SHIFT:  # see _YIELD_SHIFT
            await _yield_to_loop()
        return value  # type: ignore[return-value]

    async def get_key_value(self, key: bytes, options: ReadOptions | Mapping[str, Any] | None = None) -> KeyValue | None:
        """The row of ``key`` with its metadata (``seq``, ``create_ts``, ``expire_ts``), or None
        if absent, deleted or expired."""
        key = validate_key(key)
        opts = ReadOptions.of(options)
        rs, max_seq = self._state()
        metrics = self._core.runtime.metrics
        if metrics is not None:
            metrics.count_get()
        max_seq = bound_for(self._core, max_seq, opts.durability_filter)
        reads = _DIRECT_READS[0]
        row = self._core.get_row_direct(key, rs, max_seq)
        if row is NEED_IO:
            row = await self._host.acall(self._core.get_row_slow, key, rs, max_seq)
        elif _DIRECT_READS[0] >> _YIELD_SHIFT != reads >> _YIELD_SHIFT:  # as get's
            await _yield_to_loop()
        if row is not None and row.kind is RowKind.MERGE_OPERAND:  # type: ignore[union-attr]
            row = self._core.get_resolved_fast(key, rs, max_seq)  # operands folded (MERGE-1)
            if row is NEED_IO:
                row = await self._host.acall(self._core.get_resolved_slow, key, rs, max_seq)
        return key_value(row, self._core.runtime.now_ms())  # type: ignore[arg-type]

    def _scan(self, bounds: KeyBounds, reverse: bool, options: Any = None) -> DbIterator:
        opts, reverse = scan_options(options, reverse)
        rs, max_seq = self._state()
        if max_seq is None:
            max_seq = self._core.last_seq
        max_seq = bound_for(self._core, max_seq, opts.durability_filter)
        merge, gen = self._core.scan_merge(rs, bounds, reverse, max_seq)
        return DbIterator(self._host, self._core, merge, gen, (rs, bounds, reverse, max_seq))

    def scan(self, start: bytes | None = None, end: bytes | None = None, *, reverse: bool = False,
             options: ScanOptions | Mapping[str, Any] | None = None) -> DbIterator:
        return self._scan(scan_bounds(start, end), reverse, options)

    def scan_prefix(self, prefix: bytes, *, reverse: bool = False,
                    options: ScanOptions | Mapping[str, Any] | None = None) -> DbIterator:
        return self._scan(prefix_bounds(prefix), reverse, options)


