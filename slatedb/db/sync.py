"""The synchronous API: ``with slatedb.Db.open(url) as db: db.put(b"k", b"v")``.

The engine's background work (WAL and L0 flushes, manifest polling, and every object-store
call) runs on a trio event loop in a **runtime thread** owned by the :class:`Db`. Calls that
can be answered from memory -- a write into the memtable, a ``get`` served by a memtable or the
block cache, an iterator step over rows already loaded -- run on the caller's thread without
touching that loop. Only a cache miss, an explicit flush, a durability wait's wake-up and
``close`` cross over (``trio.from_thread.run``).

Exiting the process without :meth:`Db.close` loses at most the writes that were never
acknowledged durable: the runtime thread is a daemon thread, so buffered (not yet flushed)
writes die with the process, and reopening replays every WAL object written before.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import trio

from slatedb.batch import WriteBatch, validate_key
from slatedb.checkpoint import CheckpointCreateResult, CheckpointOptions, CheckpointScope
from slatedb.config import Settings
from slatedb.errors import ClosedError, ReadOnlyError
from slatedb.format.sst_reader import NEED_IO
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.url import resolve_store
from slatedb.runtime import Runtime

from .common import SnapshotLifecycle, check_create_mode, coerce_settings, prefix_bounds, scan_bounds
from .core import DbCore, MustWait, ReadState
from .scan import MergeScan, NeedIO
from .view import KeyBounds

#: Rows pulled per refill by iterators that merge several sources.
ITER_BATCH_ROWS = 256


class WriteHandle:
    """What a write returns: its sequence number, and a way to wait until it is durable."""

    __slots__ = ("_core", "seq")

    def __init__(self, core: DbCore, seq: int) -> None:
        self._core = core
        self.seq = seq

    @property
    def durable(self) -> bool:
        return self._core.durable_seq >= self.seq

    def wait_durable(self, timeout_s: float | None = None) -> None:
        """Block until the write is in a WAL object (raises ``FencedError`` if the writer was
        fenced first, ``ClosedError`` if the database closed, ``TimeoutError`` on timeout)."""
        if self._core.durable_seq < self.seq:
            self._core.wait_durable_sync(self.seq, timeout_s)

    def __repr__(self) -> str:
        return f"WriteHandle(seq={self.seq}, durable={self.durable})"


class _Portal:
    """Runs coroutine functions on the runtime thread's event loop."""

    def __init__(self, token: trio.lowlevel.TrioToken) -> None:
        self.token = token

    def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return trio.from_thread.run(fn, *args, trio_token=self.token)
        except trio.RunFinishedError:
            raise ClosedError("the database is closed") from None


class DbIterator:
    """Iterator of ``(key, value)`` pairs of a scan, in key order (or reverse order).

    Also offers :meth:`next_batch`. Rows are produced lazily; the scan sees the database as of
    the moment it was created (a snapshot bound by sequence number).
    """

    def __init__(self, portal: _Portal, core: DbCore, merge: MergeScan | None, gen: Iterator[tuple[bytes, bytes]] | None) -> None:
        self._portal = portal
        self._core = core
        self._merge = merge
        self._gen = gen
        self._buf: list[tuple[bytes, bytes]] = []
        self._pos = 0

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        if self._gen is not None:
            return self._gen  # fast path: the memtable's own generator, no wrapper per step
        return self

    def __next__(self) -> tuple[bytes, bytes]:
        if self._gen is not None:
            return next(self._gen)
        if self._pos >= len(self._buf):
            self._buf = self._pull(ITER_BATCH_ROWS)
            self._pos = 0
            if not self._buf:
                raise StopIteration
        item = self._buf[self._pos]
        self._pos += 1
        return item

    def next_batch(self, n: int = 1000) -> list[tuple[bytes, bytes]]:
        """Up to ``n`` pairs; an empty list at the end of the scan."""
        if self._gen is not None:
            out = []
            append = out.append
            for item in self._gen:
                append(item)
                if len(out) >= n:
                    break
            return out
        out = self._buf[self._pos : self._pos + n]
        self._pos += len(out)
        if len(out) < n:
            out.extend(self._pull(n - len(out)))
        return out

    def _pull(self, n: int) -> list[tuple[bytes, bytes]]:
        merge = self._merge
        assert merge is not None
        while True:
            try:
                return merge.next_batch(n)
            except NeedIO as e:
                source = e.source
                reader, first, last = source.io_request()
                source.supply(first, self._portal(self._core.load_blocks, reader, first, last))


class _ReadMixin:
    """``get`` / ``scan`` / ``scan_prefix`` over a read state and a sequence bound."""

    _core: DbCore
    _portal: _Portal

    def _state(self) -> tuple[ReadState, int | None]:
        raise NotImplementedError

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or None if absent, deleted or expired."""
        key = validate_key(key)
        rs, max_seq = self._state()
        value = self._core.get_fast(key, rs, max_seq)
        if value is NEED_IO:
            value = self._portal(self._core.get_slow, key, rs, max_seq)
        return value  # type: ignore[return-value]

    def _scan(self, bounds: KeyBounds, reverse: bool) -> DbIterator:
        rs, max_seq = self._state()
        if max_seq is None:
            max_seq = self._core.last_seq
        merge, gen = self._core.scan_merge(rs, bounds, reverse, max_seq)
        return DbIterator(self._portal, self._core, merge, gen)

    def scan(self, start: bytes | None = None, end: bytes | None = None, *, reverse: bool = False) -> DbIterator:
        """``(key, value)`` pairs with ``start <= key < end`` (None: open), ascending unless
        ``reverse``. Deleted and expired keys are skipped."""
        return self._scan(scan_bounds(start, end), bool(reverse))

    def scan_prefix(self, prefix: bytes, *, reverse: bool = False) -> DbIterator:
        """``(key, value)`` pairs whose key starts with ``prefix``."""
        return self._scan(prefix_bounds(prefix), bool(reverse))


class Snapshot(SnapshotLifecycle, _ReadMixin):
    """A consistent read view: every read sees the database as of :meth:`Db.snapshot`."""

    def __init__(self, db: "Db", token: int, seq: int, rs: ReadState) -> None:
        super().__init__(db._core, token, seq, rs)
        self._portal = db._portal

    def put(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError("a snapshot is read-only: write through the Db")

    delete = write = put


class Db(_ReadMixin):
    """An open database (the writer). Build it with :meth:`open`; see the module docstring."""

    def __init__(self, core: DbCore, portal: _Portal, thread: threading.Thread, stop: Callable[[], None]) -> None:
        self._core = core
        self._portal = portal
        self._thread = thread
        self._stop = stop

    # -- opening and closing -------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str,
        settings: Settings | Mapping[str, Any] | str | Path | None = None,
        *,
        store_options: Mapping[str, str] | None = None,
        store: ObjectStore | None = None,
        runtime: Callable[[], Runtime] | None = None,
        create: str = "if_missing",
    ) -> "Db":
        """Open (or create) the database at ``url`` (``file:///dir``, ``s3://bucket/prefix``,
        ``memory://name``) as its writer, fencing any previous writer.

        ``create``: ``"if_missing"`` (default) creates a new database where the path holds
        nothing of one; ``"never"`` only opens an existing one (:class:`NotFoundError`);
        ``"force"`` creates a new, empty database even where WAL objects, SSTs or boundary files
        are left without a manifest. Without it such a path raises
        :class:`~slatedb.errors.ManifestsMissingError` naming what it holds (its manifests were
        lost: a new database would orphan the SSTs).

        ``store`` overrides the store ``url`` names; ``runtime`` is a factory for the runtime
        (production by default), called on the runtime thread.
        """
        settings = coerce_settings(settings)
        create = check_create_mode(create)
        started = threading.Event()
        box: dict[str, Any] = {}

        async def main() -> None:
            if runtime is None:
                from slatedb.runtime.production import ProductionRuntime

                rt: Runtime = ProductionRuntime()
            else:
                rt = runtime()
            own_store = store is None
            st = None
            try:
                st = store if store is not None else resolve_store(url, options=store_options, clock_ms=rt.now_ms)
                core = await DbCore.open(st, settings, rt, create)
            except BaseException as e:
                box["error"] = e
                started.set()
                if st is not None and own_store:
                    await st.aclose()
                return
            stop = trio.Event()
            try:
                async with core.background():
                    box["core"] = core
                    box["token"] = trio.lowlevel.current_trio_token()
                    box["stop"] = stop
                    started.set()
                    await stop.wait()
            finally:
                if own_store:
                    with trio.CancelScope(shield=True):
                        await st.aclose()

        thread = threading.Thread(target=trio.run, args=(main,), name="slatedb-runtime", daemon=True)
        thread.start()
        started.wait()
        if "error" in box:
            thread.join()
            raise box["error"]
        token = box["token"]
        stop_event = box["stop"]

        def stop() -> None:
            try:
                token.run_sync_soon(stop_event.set)
            except trio.RunFinishedError:
                pass

        return cls(box["core"], _Portal(token), thread, stop)

    def close(self) -> None:
        """Flush everything (WAL, then memtables to L0), stop the runtime thread. Idempotent.

        A fenced database closes without flushing and raises nothing here.
        """
        if not self._thread.is_alive():
            return
        try:
            if not self._core.closed:
                self._portal(self._core.aclose)
        except ClosedError:
            pass
        finally:
            self._stop()
            self._thread.join()

    def abort(self) -> None:
        """Stop at once without flushing anything: what a crash looks like to the store
        (for tests and fault drills). Unflushed writes are lost; durable ones are not."""
        if not self._thread.is_alive():
            return
        try:
            trio.from_thread.run_sync(self._core.abort, trio_token=self._portal.token)
        except trio.RunFinishedError:
            pass
        self._stop()
        self._thread.join()

    def __enter__(self) -> "Db":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- writes --------------------------------------------------------------------------------

    def _write(self, op: Callable[..., int], args: tuple, durable: bool) -> WriteHandle:
        """Run a core write, waiting out back-pressure (:class:`MustWait`) on this thread."""
        core = self._core
        while True:
            try:
                seq = op(*args)
                break
            except MustWait:
                core.wait_for_room_sync()
        handle = WriteHandle(core, seq)
        if durable:
            handle.wait_durable()
        return handle

    def put(self, key: bytes, value: bytes, ttl: float | None = None, *, durable: bool = False) -> WriteHandle:
        """Write ``value`` under ``key``. ``ttl``: seconds until the row expires (None: the
        database default, ``slatedb.NO_EXPIRY``: never). Returns once the write is readable;
        ``durable=True`` also waits until it is in a WAL object."""
        return self._write(self._core.put, (key, value, ttl), durable)

    def delete(self, key: bytes, *, durable: bool = False) -> WriteHandle:
        """Delete ``key`` (writes a tombstone)."""
        return self._write(self._core.delete, (key,), durable)

    def write(self, batch: WriteBatch, *, durable: bool = False) -> WriteHandle:
        """Apply every operation of ``batch`` atomically; the handle's seq is the batch's last."""
        return self._write(self._core.write, (batch,), durable)

    def flush(self, wal: bool = True) -> None:
        """``wal=True``: write the WAL buffer now (every write so far becomes durable).
        ``wal=False``: also flush the memtables to L0 SSTs."""
        self._core.check_open()
        if wal:
            self._portal(self._core.flush_wal)
        else:
            self._portal(self._core.flush_memtable)

    def flush_memtable(self) -> None:
        self.flush(wal=False)

    # -- checkpoints ---------------------------------------------------------------------------

    def create_checkpoint(self, scope: CheckpointScope = CheckpointScope.ALL,
                          options: CheckpointOptions = CheckpointOptions()) -> CheckpointCreateResult:
        """Pin the current state with a checkpoint (RFC 000). ``CheckpointScope.ALL``: every write
        issued so far (the WAL is written and memtables flushed to L0 unless L0 is full);
        ``DURABLE``: the writes already durable. ``options``: lifetime, source checkpoint, name.
        Returns the checkpoint's id and the manifest id it pins."""
        self._core.check_open()
        return self._portal(self._core.create_checkpoint, scope, options)

    # -- reads ---------------------------------------------------------------------------------

    def _state(self) -> tuple[ReadState, int | None]:
        core = self._core
        if core.closed:
            raise ClosedError("the database is closed")
        return core.read_state, None

    def snapshot(self) -> Snapshot:
        """A consistent read view as of now (release it with ``close()`` or a ``with`` block)."""
        token, seq, rs = self._core.register_snapshot()
        return Snapshot(self, token, seq, rs)

    # -- introspection -------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._core.settings

    @property
    def stats(self) -> dict[str, int]:
        return dict(self._core.stats)

    def refresh_manifest(self) -> None:
        """Poll the manifest now (as the background poller does every ``manifest_poll_interval``)."""
        self._portal(self._core.refresh_manifest)

    def __repr__(self) -> str:
        return f"Db({self._core.store.url!r}, epoch={self._core.epoch})"
