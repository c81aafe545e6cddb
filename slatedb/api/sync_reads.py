"""The synchronous read API over any engine with the read interface
(:class:`slatedb.lsm.read_path.ReadPath`: ``DbCore`` and ``ReaderCore``): ``get``, ``scan``,
``scan_prefix`` and their iterator. A read answered from memory runs on the caller's thread; a
block read (``NeedIO`` from the I/O-free merge, ``NEED_IO`` from ``get_fast``) crosses to the
runtime thread through the front-end's :class:`~slatedb.api.portal.RuntimeThread`.
"""

from __future__ import annotations

from itertools import chain, islice
from typing import Any, Iterator, Mapping

from slatedb.batch import validate_key
from slatedb.errors import ClosedError
from slatedb.api.args import check_batch_size, prefix_bounds, scan_bounds
from slatedb.api.options import KeyValue, ReadOptions, ScanOptions
from slatedb.api.read_kit import bound_for, key_value, scan_options, seek_bounds
from slatedb.lsm.scan import MergeScan, NeedIO
from slatedb.row import RowKind
from slatedb.lsm.view import KeyBounds
from slatedb.format.sst_reader import NEED_IO

from .portal import RuntimeThread
from slatedb.api.unpicklable import Unpicklable

#: Rows pulled per refill by iterators that merge several sources.
ITER_BATCH_ROWS = 256


class DbIterator:
    """Iterator of ``(key, value)`` pairs of a scan, in key order (or reverse order).

    Also offers :meth:`next_batch`. Rows are produced lazily; the scan sees the database as of
    the moment it was created (a snapshot bound by sequence number). :meth:`close` (or leaving
    ``with db.scan() as it:``) stops it early and lets go of what it holds.
    """

    def __init__(self, portal: RuntimeThread, core: Any, merge: MergeScan | None, gen: Iterator[tuple[bytes, bytes]] | None,
                 scan: tuple | None = None) -> None:
        self._portal = portal
        self._core = core
        self._merge = merge
        self._gen = gen
        self._scan = scan  # (read state, bounds, reverse, max_seq): what seek() restarts
        #: The rows pulled and not yet taken, as an iterator over the list that holds them
        #: (``_buf``): every way of taking rows (``for``, ``next()``, ``next_batch``) advances it.
        self._buf: list[tuple[bytes, bytes]] = []
        self._it: Iterator[tuple[bytes, bytes]] = iter(self._buf)

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        if self._gen is not None:
            return self._gen  # fast path: the memtable's own generator, no wrapper per step
        return chain.from_iterable(self._walks())

    def _walks(self) -> Iterator[Iterator[tuple[bytes, bytes]]]:
        """What ``for kv in it`` walks, one iterator after another (``chain.from_iterable``:
        each row step is a C call, no bytecode of this generator): the pulled rows' iterator,
        then, once it is done, the next pull's. It keeps no state of its own: ``next()`` and
        :meth:`next_batch` between steps advance the same iterator, and :meth:`seek` empties
        the list it walks (so that walk ends) before the next pull."""
        while True:
            it = self._it
            yield it
            if self._it is not it:  # next() refilled or seek() restarted meanwhile: walk that
                continue
            if self._gen is not None:  # a seek moved the scan to the memtable's generator
                yield self._gen
                return
            buf = self._pull(ITER_BATCH_ROWS)
            if not buf:
                return
            self._buf = buf
            self._it = iter(buf)

    def __next__(self) -> tuple[bytes, bytes]:
        if self._gen is not None:
            return next(self._gen)
        for item in self._it:
            return item
        buf = self._pull(ITER_BATCH_ROWS)
        if not buf:
            raise StopIteration
        self._buf = buf
        self._it = it = iter(buf)
        return next(it)

    def next_batch(self, n: int = 1000) -> list[tuple[bytes, bytes]]:
        """Up to ``n`` pairs; an empty list at the end of the scan."""
        n = check_batch_size(n)
        if self._gen is not None:
            return list(islice(self._gen, n))  # n == 0 takes nothing
        out = list(islice(self._it, n))
        if len(out) < n:
            out.extend(self._pull(n - len(out)))
        return out

    def seek(self, key: bytes) -> None:
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
        self._buf.clear()  # ends a running ``for`` step's walk of the rows pulled before
        self._buf = []
        self._it = iter(self._buf)

    def close(self) -> None:
        """Stop the scan early: it yields no more rows (``next`` raises ``StopIteration``,
        :meth:`next_batch` returns ``[]``, a ``for`` loop over it ends; :meth:`seek` raises
        ``ClosedError``) and lets go of what it held: the memtables and SST readers of its read
        state, the rows pulled ahead, and its hold on the database (a ``Db`` dropped without
        ``close()`` is closed once nothing holds it, an open iterator included). Idempotent."""
        gen = self._gen
        self._merge = self._gen = self._scan = None
        self._core = self._portal = None  # type: ignore[assignment]
        self._buf.clear()  # ends a running ``for`` step's walk of the rows pulled before
        self._buf = []
        self._it = iter(self._buf)
        close = getattr(gen, "close", None)  # the memtable's generator: a running ``for`` ends
        if close is not None:
            close()

    def __enter__(self) -> "DbIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _pull(self, n: int) -> list[tuple[bytes, bytes]]:
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
                blocks = reader.read_blocks_now(first, last)  # a local directory: on this thread
                if blocks is None:
                    blocks = self._portal(self._core.load_blocks, reader, first, last)
                source.supply(first, blocks)


class SyncReads(Unpicklable):
    """``get`` / ``scan`` / ``scan_prefix`` over a read state and a sequence bound."""

    _core: Any
    _portal: RuntimeThread

    def _state(self) -> tuple[Any, int | None]:
        raise NotImplementedError

    def get(self, key: bytes, options: ReadOptions | Mapping[str, Any] | None = None) -> bytes | None:
        """The value of ``key``, or None if absent, deleted or expired."""
        key = validate_key(key)
        rs, max_seq = self._state()
        metrics = self._core.runtime.metrics
        if metrics is not None:
            metrics.count_get()
        if options is not None:
            max_seq = bound_for(self._core, max_seq, ReadOptions.of(options).durability_filter)
        core = self._core
        value = core.get_direct(key, rs, max_seq)
        if value is NEED_IO:
            value = self._portal(core.get_slow, key, rs, max_seq)
        return value  # type: ignore[return-value]

    def get_key_value(self, key: bytes, options: ReadOptions | Mapping[str, Any] | None = None) -> KeyValue | None:
        """The row of ``key`` with its metadata (``seq``, ``create_ts``, ``expire_ts``), or None
        if absent, deleted or expired."""
        key = validate_key(key)
        opts = ReadOptions.of(options)
        rs, max_seq = self._state()
        metrics = self._core.runtime.metrics
        if metrics is not None:
            metrics.count_get()
        max_seq = bound_for(self._core, max_seq, opts.durability_filter)
        row = self._core.get_row_direct(key, rs, max_seq)
        if row is NEED_IO:
            row = self._portal(self._core.get_row_slow, key, rs, max_seq)
        if row is not None and row.kind is RowKind.MERGE_OPERAND:  # type: ignore[union-attr]
            row = self._core.get_resolved_fast(key, rs, max_seq)  # operands folded (MERGE-1)
            if row is NEED_IO:
                row = self._portal(self._core.get_resolved_slow, key, rs, max_seq)
        return key_value(row, self._core.runtime.now_ms())  # type: ignore[arg-type]

    def _scan(self, bounds: KeyBounds, reverse: bool, options: Any = None) -> DbIterator:
        opts, reverse = scan_options(options, reverse)
        rs, max_seq = self._state()
        if max_seq is None:
            max_seq = self._core.last_seq
        max_seq = bound_for(self._core, max_seq, opts.durability_filter)
        merge, gen = self._core.scan_merge(rs, bounds, reverse, max_seq)
        return DbIterator(self._portal, self._core, merge, gen, (rs, bounds, reverse, max_seq))

    def scan(self, start: bytes | None = None, end: bytes | None = None, *, reverse: bool = False,
             options: ScanOptions | Mapping[str, Any] | None = None) -> DbIterator:
        """``(key, value)`` pairs with ``start <= key < end`` (None: open), ascending unless
        ``reverse``. Deleted and expired keys are skipped."""
        return self._scan(scan_bounds(start, end), reverse, options)

    def scan_prefix(self, prefix: bytes, *, reverse: bool = False,
                    options: ScanOptions | Mapping[str, Any] | None = None) -> DbIterator:
        """``(key, value)`` pairs whose key starts with ``prefix``."""
        return self._scan(prefix_bounds(prefix), reverse, options)


