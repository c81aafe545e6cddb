"""The synchronous API: ``with slatedb.Db.open(url) as db: db.put(b"k", b"v")``.

The engine's background work (WAL and L0 flushes, manifest polling, and every object-store
call) runs on a trio event loop in a **runtime thread** owned by the :class:`Db`
(:class:`slatedb.api.portal.RuntimeThread`, shared with ``DbReader``). Calls that
can be answered from memory -- a write into the memtable, a ``get`` served by a memtable or the
block cache, an iterator step over rows already loaded -- run on the caller's thread without
touching that loop. Only a cache miss, an explicit flush, a durability wait's wake-up and
``close`` cross over (``trio.from_thread.run``).

Exiting the process without :meth:`Db.close` loses at most the writes that were never
acknowledged durable: the runtime thread is a daemon thread, so buffered (not yet flushed)
writes die with the process, and reopening replays every WAL object written before. A ``Db``
dropped without :meth:`Db.close` (and with no snapshot, iterator or transaction of it left) is
closed on its runtime thread, flushing, without blocking the caller
(:class:`slatedb.api.portal.RuntimeThread`).
"""

from __future__ import annotations

from slatedb.api.cache_control import SyncCacheControl

import threading
from pathlib import Path
from typing import Any, Callable, Mapping

from slatedb.api.args import check_create_mode, coerce_settings
from slatedb.api.portal import RuntimeArg, RuntimeThread
from slatedb.api.options import DbStatus, ReadOptions
from slatedb.api.read_kit import db_status
from slatedb.api.txn import IsolationLevel, Transaction, isolation_of
from slatedb.api.sync_reads import ITER_BATCH_ROWS, DbIterator, SyncReads  # noqa: F401 (DbIterator: public)
from slatedb.format.sst_reader import NEED_IO
from slatedb.batch import WriteBatch, validate_flag
from slatedb.checkpoint import CheckpointCreateResult, CheckpointOptions, CheckpointScope
from slatedb.config import Settings
from slatedb.settings_writer import check_writer_settings
from slatedb.api.metrics_export import collector_of_core
from slatedb.errors import ClosedError, InvalidArgumentError, ReadOnlyError
from slatedb.lsm.read_path import ReadState
from slatedb.objstore.base import ObjectStore
from slatedb.merge_operator import merge_operator_of
from slatedb.runtime import Runtime

from .common import SnapshotLifecycle
from .core import DbCore, MustWait
from slatedb.redact import shown_url


def _timeout_arg(timeout_s: object) -> float | None:
    """``wait_durable``'s ``timeout_s``: None or a number of seconds >= 0 (inf: no limit)."""
    if timeout_s is None:
        return None
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s >= 0:
        raise InvalidArgumentError(f"timeout_s must be None or a number of seconds >= 0, not {timeout_s!r}")
    # Beyond what a thread can wait for (threading.TIMEOUT_MAX, some 292 years; a wait of
    # 2**64 s raised OverflowError from the condition variable): no limit, as inf.
    return None if timeout_s > threading.TIMEOUT_MAX else float(timeout_s)


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
        fenced first, ``ClosedError`` if the database closed, ``TimeoutError`` on timeout).
        ``timeout_s``: None (no limit) or seconds >= 0; anything else is refused at the call."""
        timeout_s = _timeout_arg(timeout_s)
        if self._core.durable_seq < self.seq:
            self._core.wait_durable_sync(self.seq, timeout_s)

    def __repr__(self) -> str:
        return f"WriteHandle(seq={self.seq}, durable={self.durable})"


class Snapshot(SnapshotLifecycle, SyncReads):
    """A consistent read view: every read sees the database as of :meth:`Db.snapshot`."""

    def __init__(self, db: "Db", token: int, seq: int, rs: ReadState) -> None:
        super().__init__(db._core, token, seq, rs)
        self._portal = db._portal

    def put(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError("a snapshot is read-only: write through the Db")

    delete = write = merge = put


class Db(SyncReads, SyncCacheControl):
    """An open database (the writer). Build it with :meth:`open`; see the module docstring."""

    def __init__(self, portal: RuntimeThread) -> None:
        self._core: DbCore = portal.core
        self._portal = portal

    # -- opening and closing -------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str,
        settings: Settings | Mapping[str, Any] | str | Path | None = None,
        *,
        store_options: Mapping[str, str] | None = None,
        store: ObjectStore | None = None,
        runtime: RuntimeArg = None,
        create: str = "if_missing",
        merge_operator: Any = None,
    ) -> "Db":
        """Open (or create) the database at ``url`` (``file:///dir``, ``s3://bucket/prefix``,
        ``memory://name``) as its writer, fencing any previous writer.

        ``create``: ``"if_missing"`` (default) creates a new database where the path holds
        nothing of one; ``"never"`` only opens an existing one (:class:`NotFoundError`);
        ``"force"`` creates a new, empty database even where WAL objects, SSTs or boundary files
        are left without a manifest. Without it such a path raises
        :class:`~slatedb.errors.ManifestsMissingError` naming what it holds (its manifests were
        lost: a new database would orphan the SSTs).

        ``merge_operator``: a callable ``(key, existing_value, operand) -> bytes`` or an object
        with such a ``merge`` method (spec/protocols/merge.md); it folds the operands of
        :meth:`merge` on reads and in the in-process compactor.

        ``store`` overrides the store ``url`` names; ``runtime`` is a runtime, or a factory of
        one called on the runtime thread (None: production; see :func:`slatedb.api.portal.make_runtime`).
        """
        settings = check_writer_settings(coerce_settings(settings))
        create = check_create_mode(create)
        op = merge_operator_of(merge_operator)

        async def open_core(st: ObjectStore, rt: Runtime) -> DbCore:
            return await DbCore.open(st, settings, rt, create, op)

        return cls(RuntimeThread.start("slatedb-runtime", open_core, url, store=store, store_options=store_options,
                                       runtime=runtime, closed_message="the database is closed"))

    def close(self) -> None:
        """Flush everything (WAL, then memtables to L0), stop the runtime thread. Idempotent.

        A fenced database closes without flushing and raises nothing here.
        """
        self._portal.close()

    def abort(self) -> None:
        """Stop at once without flushing anything: what a crash looks like to the store
        (for tests and fault drills). Unflushed writes are lost; durable ones are not."""
        self._portal.abort()

    def __enter__(self) -> "Db":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- writes --------------------------------------------------------------------------------

    def _write(self, op: Callable[..., int], args: tuple, durable: bool) -> WriteHandle:
        """Run a core write, waiting out back-pressure (:class:`MustWait`) on this thread."""
        core = self._core
        validate_flag("durable", durable)
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

    def put(self, key: bytes, value: bytes, ttl: float | None = None, *, durable: bool = False,
            expire_at_ms: int | None = None) -> WriteHandle:
        """Write ``value`` under ``key``. ``ttl``: seconds until the row expires (None: the
        database default, ``slatedb.NO_EXPIRY``: never); or ``expire_at_ms``: the Unix time in
        milliseconds at which it expires. Returns once the write is readable;
        ``durable=True`` also waits until it is in a WAL object."""
        if durable is False:  # the common case without _write's frame (hot path)
            core = self._core
            try:
                return WriteHandle(core, core.put(key, value, ttl, expire_at_ms))
            except MustWait:
                pass  # nothing was written: wait for room in _write
        return self._write(self._core.put, (key, value, ttl, expire_at_ms), durable)

    def delete(self, key: bytes, *, durable: bool = False) -> WriteHandle:
        """Delete ``key`` (writes a tombstone)."""
        return self._write(self._core.delete, (key,), durable)

    def merge(self, key: bytes, operand: bytes, ttl: float | None = None, *, durable: bool = False,
              expire_at_ms: int | None = None) -> WriteHandle:
        """Append a merge operand for ``key``: reads see the merge operator applied to the
        key's value and its operands in write order (spec/protocols/merge.md). ``ttl`` /
        ``expire_at_ms`` as for :meth:`put`. Without a merge operator given at open:
        :class:`~slatedb.errors.MergeOperatorMissingError`, nothing written."""
        return self._write(self._core.merge, (key, operand, ttl, expire_at_ms), durable)

    def write(self, batch: WriteBatch, *, durable: bool = False) -> WriteHandle:
        """Apply every operation of ``batch`` atomically; the handle's seq is the batch's last."""
        return self._write(self._core.write, (batch,), durable)

    def flush(self, wal: bool = True) -> None:
        """``wal=True``: write the WAL buffer now (every write so far becomes durable).
        ``wal=False``: also flush the memtables to L0 SSTs."""
        validate_flag("wal", wal)
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
        options = CheckpointOptions.of(options)  # a bad one refused here, before any flush
        self._core.check_open()
        return self._portal(self._core.create_checkpoint, scope, options)

    # -- reads ---------------------------------------------------------------------------------

    def get(self, key: bytes, options: ReadOptions | Mapping[str, Any] | None = None) -> bytes | None:
        """The value of ``key``, or None if absent, deleted or expired."""
        core = self._core
        if options is not None or type(key) is not bytes or not key or core._closed:
            return SyncReads.get(self, key, options)  # checks, options, ClosedError
        # SyncReads.get without its frames (a valid key, no options, an open database).
        metrics = core.runtime.metrics
        if metrics is not None:
            metrics.count_get()
        rs = core._w.read_state
        for mem in rs.mems:
            if mem.holds(key):
                value = core.get_direct(key, rs, None)
                break
        else:  # ReadPath.get_direct's SST half without its frame (no memtable holds the key)
            view = rs.view
            sole = view.sole_lookup
            if sole is not None:  # one SST: its lookup is the whole answer
                got = sole(key, None, True, True)
                if got is None or type(got) is bytes:
                    return got  # type: ignore[return-value]
                value = core.sst_answer(got)
            else:
                for h in view.point_candidates(key):
                    got = h.reader.lookup_cached(key, None, True, True)
                    if got is None:
                        continue
                    if type(got) is bytes:
                        return got  # type: ignore[return-value]
                    value = core.sst_answer(got)
                    break
                else:
                    return None
        if value is NEED_IO:
            value = self._portal(core.get_slow, key, rs, None)
        return value  # type: ignore[return-value]

    def _state(self) -> tuple[ReadState, int | None]:
        core = self._core
        if core.closed:
            core.check_open()  # raises: the database is closed (or was opened by the parent of this forked process)
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

    def begin(self, isolation: IsolationLevel | str = IsolationLevel.SNAPSHOT) -> Transaction:
        """A transaction at a snapshot of now (see :mod:`slatedb.api.txn`): SNAPSHOT or
        SERIALIZABLE_SNAPSHOT; ``with db.begin() as txn:`` commits on leaving the block (rolls
        back on an exception)."""
        level = isolation_of(isolation)
        self._core.check_open()
        return Transaction(self, level)

    def metrics(self) -> dict:
        """Counters and histograms of this database (puts, gets, WAL writes and latency, L0
        flushes, bytes and latency, compactions and their bytes, GC deletes, retries) as a dict;
        :meth:`metrics_prometheus` gives the Prometheus text format."""
        return self._core.metrics()

    def metrics_prometheus(self) -> str:
        """:meth:`metrics` in the Prometheus text exposition format (``prometheus_client``)."""
        m = self._core.runtime.metrics
        return "" if m is None else m.prometheus_text()

    def metrics_collector(self, **labels: str) -> Any:
        """This database's :meth:`metrics` as one ``prometheus_client`` collector, each sample
        carrying ``labels`` (:func:`slatedb.api.metrics_export.collector_of_core`); several
        databases in one registry: :func:`slatedb.metrics_collector`."""
        return collector_of_core(self._core, labels)

    def status(self) -> DbStatus:
        """The newest durable seq and, once closed, why (``CloseReason``; None while open)."""
        return db_status(self._core)

    def refresh_manifest(self) -> None:
        """Poll the manifest now (as the background poller does every ``manifest_poll_interval``)."""
        self._portal(self._core.refresh_manifest)

    def __repr__(self) -> str:
        return f"Db({shown_url(self._core.store.url)!r}, epoch={self._core.epoch})"
