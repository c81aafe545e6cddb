"""The writer's write path (writer.md steps 6, 7, 10): ``put`` / ``delete`` / ``write`` into the
live memtable and the WAL buffer under the write lock, the thresholds that cut the memtable at a
WAL cut and wake the WAL flusher, back-pressure, and durability waits.

Hot path: plain synchronous methods on the caller's thread, under ``_lock`` (the lock of the
writer's state ``_w``, :class:`~slatedb.db.state.WriterState`, which owns the memtables, the WAL
buffer, the byte counters and the sequence numbers). Part of :class:`~slatedb.db.core.DbCore` (a
mixin: the gate and the thresholds are the engine's, set up in ``DbCore.__init__``).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import trio

import slatedb.batch as _batch
from slatedb.batch import (
    OpKind,
    WriteBatch,
    expire_ts_ms,
    validate_key,
    validate_expire_at_ms,
    validate_ttl_s,
    validate_value,
)
from slatedb.errors import ClosedError, InvalidArgumentError, MergeOperatorMissingError
from slatedb.row import RowKind
from slatedb.runtime import probes, switches

# The kinds as plain ints: the write path appends plain rows (slatedb.row.as_row; WriterState.append).
_VALUE = int(RowKind.VALUE)
_TOMBSTONE = int(RowKind.TOMBSTONE)
_MERGE = int(RowKind.MERGE_OPERAND)
_PUT_OP = OpKind.PUT
_MERGE_OP = OpKind.MERGE


def _resolve_futures(futs: list) -> None:
    """(On the futures' asyncio loop) Wake each waiter that is still waiting."""
    for fut in futs:
        if not fut.done():
            fut.set_result(None)


class MustWait(Exception):
    """Internal: the write must wait for room (back-pressure); the wrapper waits and retries."""


def _own_row(seq: int, taken_seq: int, durable_seq: int) -> int:
    """DUR-3: a durable wait returns once a WAL object holding its own row landed."""
    return seq


def _bug_in_flight_group(seq: int, taken_seq: int, durable_seq: int) -> int:
    """Catalogued bug ``group-ack-early`` (sim/scenarios/catalogue.py): a waiter that arrives while
    a WAL flush is in flight joins that group, although its row was written after the flush took
    the buffer: it returns when the in-flight object lands, before its own row's object does."""
    return min(seq, taken_seq) if taken_seq > durable_seq else seq



class WritePath:
    """``put`` / ``delete`` / ``write``, thresholds, back-pressure and durability waits."""

    def _kick_flush(self) -> None:
        """Wake the WAL flusher from any thread (called with ``_lock`` held), also from its sleep
        until a row arrives: a kick is for rows already buffered (a durable wait, a threshold)."""
        # Catalogued bug (UNIT_CAUGHT): the kick wakes only the interval wait, as before 0d1ac51.
        if self._flusher_idle and self._w.wal_bytes and switches.KICK_SKIPS_IDLE_FLUSHER not in self.runtime.bugs:
            self._flusher_idle = False
            self._set_from_any_thread("_wal_arrival")
        if self._kicked:
            return
        self._kicked = True
        self._set_from_any_thread("_flush_wakeup")

    def _set_from_any_thread(self, name: str) -> None:
        """Set the trio event named ``name`` (an attribute replaced after each use) from any thread."""
        if threading.get_ident() == self._trio_thread:
            getattr(self, name).set()
        elif self._trio_token is not None:
            try:
                self._trio_token.run_sync_soon(lambda: getattr(self, name).set())
            except trio.RunFinishedError:
                pass

    # ------------------------------------------------------------------------------------------
    # Write path (any thread)
    # ------------------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes, ttl_s: float | None = None, expire_at_ms: int | None = None) -> int:
        # The checks of validate_key/validate_value, inlined for the common case (hot path).
        if type(key) is not bytes or not key or len(key) > _batch.MAX_KEY_SIZE_BYTES:
            key = validate_key(key)
        if type(value) is not bytes or len(value) > _batch.MAX_VALUE_SIZE_BYTES:
            value = validate_value(value)
        now = self._now_ms()
        if expire_at_ms is None and ttl_s is None and self._default_ttl_ms is None:
            expire = None  # the common case, inline (hot path)
        else:
            expire = self._expiry(now, ttl_s, expire_at_ms)
        # _append, inline (hot path: one frame fewer per put).
        w = self._w
        with w.lock:
            if self._gate:
                self._check_gate()
            seq = w.append(key, _VALUE, value, expire, now)
            if w.unflushed_bytes >= self._next_check_bytes:
                self._on_threshold()
        return seq

    def _expiry(self, now: int, ttl_s: float | None, expire_at_ms: int | None) -> int | None:
        """The expiry of a row written at ``now``: ``expire_at_ms`` (an absolute expiry, the
        official Ttl.EXPIRE_AT_MILLIS), else ``ttl_s`` or the default TTL; validated here."""
        if expire_at_ms is not None:
            if ttl_s is not None:
                raise InvalidArgumentError("give ttl or expire_at_ms, not both")
            return validate_expire_at_ms(expire_at_ms)
        if ttl_s is None and self._default_ttl_ms is None:
            return None
        return expire_ts_ms(now, validate_ttl_s(ttl_s), self._default_ttl_ms)

    def delete(self, key: bytes) -> int:
        key = validate_key(key)
        return self._append(key, _TOMBSTONE, b"", None, self._now_ms())

    def merge(self, key: bytes, operand: bytes, ttl_s: float | None = None, expire_at_ms: int | None = None) -> int:
        """Append a merge operand (MERGE-8: refused, nothing written, without a merge operator)."""
        self._check_merge_operator()
        key, operand = validate_key(key), validate_value(operand)
        now = self._now_ms()
        return self._append(key, _MERGE, operand, self._expiry(now, ttl_s, expire_at_ms), now)

    def _check_merge_operator(self) -> None:
        if self.merge_operator is None:
            raise MergeOperatorMissingError(
                "merge needs a merge operator: open the database with merge_operator=... (nothing was written)")

    def _append(self, key: bytes, kind: int, value: bytes, expire: int | None, now: int) -> int:
        """One validated row into the live memtable and the WAL buffer, under the write lock."""
        w = self._w
        with w.lock:
            if self._gate:
                self._check_gate()
            seq = w.append(key, kind, value, expire, now)
            if w.unflushed_bytes >= self._next_check_bytes:
                self._on_threshold()
        return seq

    def write(self, batch: WriteBatch, check: Callable[[], None] | None = None) -> int:
        """Apply ``batch`` atomically (consecutive seqs, one lock hold); returns the last seq.
        ``check`` (a transaction's commit check) runs under the same lock hold, before any row
        is added: if it raises, nothing is written."""
        if not isinstance(batch, WriteBatch):
            raise InvalidArgumentError(f"write() takes a WriteBatch, not {type(batch).__name__}")
        ops = batch._ops  # validated when added
        if batch._consumed:
            batch._refuse_consumed()
        if not ops:
            raise InvalidArgumentError("write() of an empty WriteBatch")
        if self.merge_operator is None and not batch._plain:  # a plain batch holds only puts
            for op in ops:
                if op.kind is _MERGE_OP:
                    self._check_merge_operator()
        now = self._now_ms()
        default_ttl = self._default_ttl_ms
        w = self._w
        with w.lock:
            if self._gate:
                self._check_gate()
            if check is not None:
                check()
            if batch._consumed:  # written by another thread since the check above
                batch._refuse_consumed()
            batch._consumed = True
            ts = w.stamp(now)  # the rows' create time (DUR-5); expiries count from the clock's now
            first = w.last_seq + 1
            seqs = range(first, first + len(ops))
            if batch._plain and default_ttl is None:
                # Every op a put without a TTL (the common batch): one comprehension, no frame
                # per row; plain rows (tuples in Row's field order, see WriterState.append).
                rows = [(key, seq, _VALUE, value, None, ts) for (_, key, value, _), seq in zip(ops, seqs)]
            else:
                rows = []
                add = rows.append
                for (kind, key, value, ttl_s), seq in zip(ops, seqs):
                    if kind is _PUT_OP:
                        if ttl_s is None and default_ttl is None:
                            add((key, seq, _VALUE, value, None, ts))
                        else:
                            add((key, seq, _VALUE, value, expire_ts_ms(now, ttl_s, default_ttl), ts))
                    elif kind is _MERGE_OP:
                        add((key, seq, _MERGE, value, expire_ts_ms(now, ttl_s, default_ttl), ts))
                    else:
                        add((key, seq, _TOMBSTONE, b"", None, ts))
            w.append_rows(rows)
            if w.unflushed_bytes >= self._next_check_bytes:
                self._on_threshold()
        return seqs[-1]

    def _check_gate(self) -> None:
        """Slow path of a write (``_lock`` held): raise when closed or fenced, or
        :class:`MustWait` under back-pressure."""
        if self._error is not None:
            raise self._error
        if self._closing:
            raise ClosedError("the database is closed")
        if self._blocked:
            raise MustWait()

    def _on_threshold(self) -> None:
        """A size threshold was crossed (``_lock`` held): wake an idle flusher, cut a full
        memtable, kick the flusher, maybe block."""
        if self._flusher_idle and self._w.wal_bytes:
            self._flusher_idle = False
            self._set_from_any_thread("_wal_arrival")
        if self._w.memtable.size_bytes >= self._l0_size:
            self._w.cut()
            self._kicked = False
            self._kick_flush()
        elif self._w.wal_bytes >= self._l0_size:
            self._kick_flush()
        self._recompute_thresholds()

    def _recompute_thresholds(self) -> None:
        """Recompute ``_blocked``, ``_gate`` and the next byte count at which a write must call
        :meth:`_on_threshold` (``_lock`` held, or before the database is shared)."""
        # A full L0 stops the L0 flusher (see _next_imm_to_flush), not writes: memtables pile
        # up until max_unflushed_bytes, and only then do writes wait. Blocking writes on the L0
        # count itself would stall forever after an explicit flush pushed L0 past the limit.
        w = self._w
        u = w.unflushed_bytes
        self._blocked = u > self._max_unflushed
        self._gate = self._blocked or self._closing or self._error is not None
        if self._flusher_idle:  # the next row must wake the flusher (_on_threshold)
            self._next_check_bytes = u + 1
            return
        deltas = [self._max_unflushed - u + 1]
        deltas.append(self._l0_size - w.memtable.size_bytes)
        if not self._kicked:
            deltas.append(self._l0_size - w.wal_bytes)
        self._next_check_bytes = u + max(1, min(deltas))

    def wait_for_room_sync(self) -> None:
        with self._lock:
            while self._blocked and self._error is None and not self._closing:
                self._room_cv.wait(timeout=1.0)

    async def wait_for_room(self) -> None:
        while self._blocked and self._error is None and not self._closing:
            event = self._room_event
            await event.wait()

    def _signal_room(self) -> None:
        """(runtime thread, ``_lock`` not held) Wake writers waiting for room."""
        with self._lock:
            self._recompute_thresholds()
            self._room_cv.notify_all()
        self._room_event.set()
        self._room_event = trio.Event()

    # ------------------------------------------------------------------------------------------
    # Durability
    # ------------------------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        return self._w.last_seq

    @property
    def durable_seq(self) -> int:
        return self._w.durable_seq

    def _want_durable(self, seq: int) -> int:
        """Group commit (``_lock`` held): a waiter for ``seq`` starts a WAL flush at once unless
        its row is already handed to one in flight (which then makes it durable); waiters that
        arrive while a flush is in flight kick the next one, which takes all their rows together.
        Nobody waiting, nothing kicked: the flusher keeps its ``flush_interval``. Returns the seq
        the waiter waits for (DUR-3: its own)."""
        w = self._w
        if seq > w.taken_seq:
            if w.taken_seq > w.durable_seq:
                self.runtime.probe(probes.DURABLE_WAIT_JOINS_NEXT_GROUP)
            self._kick_flush()
        target = _bug_in_flight_group if switches.GROUP_ACK_EARLY in self.runtime.bugs else _own_row
        return target(seq, w.taken_seq, w.durable_seq)

    def wait_durable_sync(self, seq: int, timeout_s: float | None = None) -> None:
        """Block this thread until ``seq`` is durable; ``timeout_s`` bounds the whole wait (each
        WAL write that lands wakes every waiter, and a wait that restarted its timeout at each
        wake-up overshot it by a flush, or without end while other writes kept landing)."""
        w = self._w
        deadline = None if timeout_s is None else self.runtime.monotonic_s() + timeout_s
        with w.lock:
            if w.durable_seq < seq:
                self._check_waitable(seq)  # a stopped database: raised before any flush is kicked
                seq = self._want_durable(seq)
            while w.durable_seq < seq:
                self._check_waitable(seq)
                left = None if deadline is None else deadline - self.runtime.monotonic_s()
                if (left is not None and left <= 0) or not self._durable_cv.wait(timeout=left):
                    raise TimeoutError(f"seq {seq} not durable after {timeout_s} s")

    def add_asyncio_durable_waiter(self, seq: int, loop: Any, fut: Any) -> bool:
        """Register an asyncio future to be resolved (on ``loop``, by
        ``call_soon_threadsafe``) once ``seq`` is durable or the database stops, kicking a flush
        as :meth:`wait_durable_sync` does (group commit); False when ``seq`` is durable already.
        A stopped database raises at once. Any thread: an asyncio task waits on its own loop,
        with no task on the engine's loop per waiter (:meth:`_release_durable_waiters`)."""
        w = self._w
        with w.lock:
            if w.durable_seq >= seq:
                return False
            self._check_waitable(seq)
            self._aio_durable_waiters.append((self._want_durable(seq), loop, fut))
        return True

    def _release_durable_waiters(self) -> None:
        """(``_lock`` held) Wake the waiters of durability: every thread waiting in
        :meth:`wait_durable_sync`, and, once per asyncio loop, the asyncio futures whose seq is
        now durable (all of them once the database stopped: each re-checks and raises)."""
        self._durable_cv.notify_all()
        waiters = self._aio_durable_waiters
        if not waiters:
            return
        durable = self._w.durable_seq
        stopped = self._error is not None or self._closed
        keep: list = []
        ready: dict[Any, list] = {}
        for entry in waiters:
            if stopped or entry[0] <= durable:
                ready.setdefault(entry[1], []).append(entry[2])
            elif not entry[2].done():  # a cancelled wait is dropped here
                keep.append(entry)
        self._aio_durable_waiters = keep
        for loop, futs in ready.items():
            try:
                loop.call_soon_threadsafe(_resolve_futures, futs)
            except RuntimeError:  # that loop is closed: nobody waits there any more
                pass

    async def wait_durable(self, seq: int) -> None:
        w = self._w
        if w.durable_seq < seq:
            with w.lock:
                self._check_waitable(seq)  # a stopped database: raised before any flush is kicked
                seq = self._want_durable(seq)
        while w.durable_seq < seq:
            self._check_waitable(seq)
            await self._durable_event.wait()

    def _check_waitable(self, seq: int) -> None:
        """A durability wait for ``seq`` (not yet durable) on a stopped database raises: its
        error (fenced, failed), or ``ClosedError``."""
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ClosedError(f"the database closed before seq {seq} was durable")

