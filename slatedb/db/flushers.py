"""The writer's flushers (writer.md steps 8, 9, 12): the WAL flusher (group commit of the WAL
buffer, and of the memtables cut with it, as WAL SSTs) and the L0 flusher (a frozen memtable as an
L0 SST, committed with the manifest edit :class:`~slatedb.manifest.edits.AddL0`).

REQUIRES: the engine's loop (trio tasks); ``_flush_lock`` serialises WAL writes,
``_manifest_lock`` every manifest commit of the writer. The memtables and the WAL buffer are the
writer's state's (:class:`~slatedb.db.state.WriterState`): a flush takes its cuts with
``take_wal`` and reports durability with ``mark_durable``. Part of
:class:`~slatedb.db.core.DbCore` (a mixin).
"""

from __future__ import annotations

import logging

import trio

from slatedb.errors import ClosedError, FencedError, SlateDBError
from slatedb.format.kept_columns import KeptColumns
from slatedb.format.sst_reader import SstReader
from slatedb.format.sst_writer import SstWriter
from slatedb.format.types import CompactedSsTableV2
from slatedb.lsm.view import sst_key
from slatedb.manifest.edit import WriterFence
from slatedb.manifest.edits import AddL0
from slatedb.manifest.sst_ids import newest_l0_ms, not_before
from slatedb.objstore.base import OVERWRITE
from slatedb.objstore.retry import retry_transient
from slatedb.row import Row, as_row
from slatedb.runtime import probes, switches
from slatedb.wal.writer import wal_key

from .state import ImmEntry


#: Rows encoded between two yields of the L0 flusher to the loop (a few tens of milliseconds:
#: the bulk encoder, SstWriter.add_sorted, takes 1-3 µs a row).
L0_ENCODE_CHUNK_ROWS = 8192
#: An L0 flush of fewer rows adds them one at a time (the same SST, byte for byte): the bulk
#: encoder's numpy work costs more than it saves on a small memtable (the crossing lies near 250
#: rows). Kept low so that the simulator's flushes of 16 rows or more still take the bulk path.
L0_BULK_MIN_ROWS = 16
#: The least time between two warnings that a full L0 holds back the L0 flush of a database
#: that runs no compactor (:meth:`Flushers._warn_l0_full`).
L0_FULL_WARNING_INTERVAL_S = 60.0

LOG = logging.getLogger("slatedb")


def _may_ack(error: BaseException | None) -> bool:
    """FENCE-3: a WAL write is acknowledged only while the writer has not halted."""
    return error is None


def _bug_ack_anyway(error: BaseException | None) -> bool:
    """Catalogued bug ``zombie-ack`` (sim/scenarios/catalogue.py): a writer that halted while its WAL write was
    in flight still acknowledges it."""
    return True


class Flushers:
    """The WAL and L0 flush tasks and the explicit flushes."""

    async def _flush_loop(self) -> None:
        """Flush the WAL buffer ``flush_interval`` after its first row (or at once when kicked:
        a size threshold, a durable wait). With nothing buffered the flusher sleeps until a row
        arrives instead of waking every interval to find nothing: the same WAL objects, far
        fewer wake-ups of an idle database (and of a simulated one, whose every wake-up costs)."""
        interval = self.settings.flush_interval
        while True:
            if self._go_idle():
                await self._wal_arrival.wait()
                self._wal_arrival = trio.Event()
            await self.runtime.wait_event(self._flush_wakeup, interval)
            self._flush_wakeup = trio.Event()
            await self.flush_wal()

    def _go_idle(self) -> bool:
        """(runtime thread) With nothing buffered, mark the flusher idle: the next write then
        crosses its threshold at once and signals ``_wal_arrival`` (``_on_threshold``)."""
        w = self._w
        with w.lock:
            if w.wal_rows or w.wal_cuts or self._error is not None:
                return False
            self._flusher_idle = True
            self._recompute_thresholds()
            return True

    async def _l0_loop(self) -> None:
        while True:
            entry = self._next_imm_to_flush()
            if entry is None:
                await self._l0_wakeup.wait()
                self._l0_wakeup = trio.Event()
                continue
            await self._flush_imm(entry)

    def _next_imm_to_flush(self) -> ImmEntry | None:
        imms = self._w.imms
        if not imms or self._error is not None:
            return None
        entry = imms[-1]  # oldest
        # Its cut may still be on its way to the WAL (``last_wal_id`` None): the flush encodes
        # meanwhile and waits for it before writing anything (_flush_imm).
        if len(self._w.read_state.view.l0) >= self._l0_max_ssts and not (self._closing or self._force_l0):
            self._warn_l0_full()
            return None  # back-pressure: wait for a compactor to drain L0
        return entry

    def _warn_l0_full(self) -> None:
        """A database that runs no compactor of its own, whose L0 is full, flushes no memtable
        until a compactor elsewhere (``slatedb run-compactor``, a worker) drains L0, and its
        writes then wait for good once ``max_unflushed_bytes`` are buffered: say so (a log
        warning, at most once a minute), which nothing else would tell its user."""
        stopped = self.compactor_stopped
        if (self.settings.compactor_options is not None and stopped is None) or not self.runtime.retry_policy.log:
            # The in-process compactor drains L0: ordinary back-pressure. A runtime whose waits
            # are not logged (the simulator's: its traces say what waits) logs none.
            return
        now = self.runtime.monotonic_s()
        last = self._l0_full_warned_s
        if last is not None and now - last < L0_FULL_WARNING_INTERVAL_S:
            return
        self._l0_full_warned_s = now
        # A compactor elsewhere has claimed the database (its epoch is in the manifest): if it
        # still runs and L0 stays full, the likeliest cause is its scheduler's threshold, which
        # this writer cannot read (it lives in that compactor's settings): name the two settings.
        epoch = self._stored.manifest.compactor_epoch if self._stored is not None else 0
        elsewhere = ("" if not epoch else
                     f". A compactor has run against it (compactor epoch {epoch}): if it still runs and L0 stays "
                     f"full, check its compactor_options.scheduler_options.min_compaction_sources (default 4): "
                     f"it compacts L0 only from that many SSTs on, so above l0_max_ssts ({self._l0_max_ssts}) it "
                     f"never does; give it min_compaction_sources <= {self._l0_max_ssts}, or this database a "
                     f"larger l0_max_ssts")
        if stopped is None:
            none = ("this database runs no compactor (compactor_options is None): no memtable is flushed to L0 "
                    "until a compactor runs against it (`slatedb run-compactor`, or open it with compactor_options)")
        else:
            # Found: `slatedb run-compactor` beside a writer fences the writer's compactor, which
            # stops for good; once that one stopped too, L0 filled and the writer said nothing.
            none = (f"this database's own compactor {stopped}, and no longer runs: no memtable is flushed to L0 "
                    f"until a compactor runs against it (`slatedb run-compactor`, or reopen the database to start "
                    f"its own again)")
        LOG.warning("L0 holds %d SSTs (l0_max_ssts %d) and %s, and writes wait once max_unflushed_bytes (%d) "
                    "are buffered%s", len(self._w.read_state.view.l0), self._l0_max_ssts, none, self._max_unflushed,
                    elsewhere)

    # ------------------------------------------------------------------------------------------
    # Flushing
    # ------------------------------------------------------------------------------------------

    async def flush_wal(self, *, freeze: bool = False) -> None:
        """Write the WAL buffer as WAL SSTs (group commit: one per memtable cut, usually one);
        with ``freeze`` also cut the live memtable for its L0 flush."""
        async with self._flush_lock:
            if self._error is not None:
                raise self._error
            w = self._w
            with w.lock:
                if freeze and not w.memtable.is_empty:
                    w.cut()
                cuts = w.take_wal()
                live = w.memtable  # the rows taken without a memtable are the live table's
                self._kicked = False
                self._recompute_thresholds()
            if any(entry is not None for _, entry in cuts):
                self._l0_wakeup.set()  # the L0 flusher encodes while the cuts go to the WAL
            assert self._wal is not None
            for rows, entry in cuts:
                if rows:
                    await self._write_wal(rows, (live if entry is None else entry.mem).wal_columns)
                if entry is not None:
                    entry.last_wal_id = self._wal.last_id
                    self._l0_wakeup.set()

    async def _write_wal(self, rows: list[Row], keep: list | None = None) -> None:
        """Write ``rows`` as the next WAL object; ``keep``: where the encode leaves the columns it
        extracted (the rows' memtable's ``wal_columns``, for its L0 flush)."""
        assert self._wal is not None
        metrics = self.runtime.metrics
        with trio.CancelScope(shield=True):
            started = self.runtime.monotonic_s() if metrics is not None else 0.0
            try:
                wal_id = await self._wal.write(rows, keep)
            except SlateDBError as e:
                # Fenced, or the store gave up past the retry bound: these rows were taken from
                # the WAL buffer and are not written. Stop the database (as the WAL flusher's own
                # failure does), so that no later write's acknowledgement covers them -- a caller's
                # flush() that gave up here used to drop them and let the next one return "done".
                self._fail(e)
                raise
            self.stats["wal_ssts"] += 1
            if metrics is not None:
                metrics.observe("wal_write", self.runtime.monotonic_s() - started)
                metrics.inc("wal_writes")
                metrics.inc("wal_rows", len(rows))
            may_ack = _bug_ack_anyway if switches.ZOMBIE_ACK in self.runtime.bugs else _may_ack
            with self._lock:
                # FENCE-3: nothing is acknowledged after a halt.
                if may_ack(self._error):
                    self._w.mark_durable(rows[-1][1])  # a Row or a plain row (slatedb.row.as_row)
                    self.runtime.event("ack", path=wal_key(wal_id), epoch=self.epoch, seq=rows[-1][1])
                    self._release_durable_waiters()
            self._durable_event.set()
            self._durable_event = trio.Event()

    async def flush_memtable(self) -> None:
        """Freeze the live memtable at a WAL cut and wait until every frozen memtable is in L0
        (ignoring ``l0_max_ssts``: an explicit flush is the caller's decision)."""
        await self.flush_wal(freeze=True)
        self._force_l0 += 1
        try:
            while self._w.imms:
                if self._error is not None:
                    raise self._error
                progress = self._l0_progress
                self._l0_wakeup.set()
                await progress.wait()
        finally:
            self._force_l0 -= 1

    async def _flush_imm(self, entry: ImmEntry) -> None:
        """Write the oldest frozen memtable as an L0 SST and commit it to the manifest.

        The encode starts as soon as the table is frozen, while the WAL object of its cut may
        still be in flight (a close: the last WAL write and the L0 encode overlap); the SST is
        written only once that WAL object landed (``last_wal_id`` set, writer.md step 9), so the
        store sees the same order as before: WAL object, SST, manifest."""
        if self._error is not None:
            raise self._error
        metrics = self.runtime.metrics
        started = self.runtime.monotonic_s() if metrics is not None else 0.0
        encoded = await self._encode_l0(entry)
        while entry.last_wal_id is None:  # its cut is not in the WAL yet: flush_wal wakes us
            if self._error is not None:
                raise self._error
            await self._l0_wakeup.wait()
            self._l0_wakeup = trio.Event()
        # Never below the newest L0 this writer knows, whatever its clock says: GC's ULID cutoff
        # protects the upload until it commits (slatedb/manifest/sst_ids.py; sim gc seed 86).
        sst_id = not_before(self.runtime.new_ulid(), newest_l0_ms(self._stored.manifest))
        key = sst_key(sst_id)
        await retry_transient(self.runtime, lambda: self.store.put(key, encoded.data, OVERWRITE), what=f"put {key}")
        async with self._manifest_lock:
            if entry not in self._w.imms:
                # Only this task removes flushed entries, so the database closed (memory released)
                # while we waited for the lock -- e.g. the poller halted it, and the lock was handed
                # to us just before the close cancelled us.
                raise self._error or ClosedError("the database closed during an L0 flush")
            with trio.CancelScope(shield=True):
                epoch = self.epoch
                wal_last = self._wal.last_id if self._wal is not None else 0
                replay_after = entry.last_wal_id
                if switches.REPLAY_POINT_AHEAD in self.runtime.bugs:  # catalogued bug (sim/scenarios/catalogue.py)
                    replay_after = wal_last  # past WAL objects whose rows are in later memtables

                # catalogued bug (sim/scenarios/catalogue.py): no writer-epoch guard on the L0 commit (FENCE-5)
                fence = _UncheckedFence(epoch) if switches.L0_COMMIT_UNFENCED in self.runtime.bugs else WriterFence(epoch)
                last = self._is_last_flush_of_close(entry)
                edit = AddL0(
                    fence, CompactedSsTableV2(sst_id, encoded.info, encoded.format_version),
                    replay_after=replay_after, wal_last=wal_last, last_seq=entry.mem.last_seq or 0,
                    checkpoint_id=self.runtime.new_uuid(), snapshot_floor=min(self._snapshot_seqs.values(), default=None),
                    legacy_id=switches.WRITER_CHECKPOINT_ORPHANED in self.runtime.bugs,  # catalogued bug
                    tracked=entry.mem.first_write,
                    # catalogued bug: the tick is the commit's clock, not the table's newest row (DUR-5)
                    clock_tick=self.runtime.now_ms() if switches.L0_TICK_COMMIT_NOW in self.runtime.bugs
                    else entry.mem.last_write_ts_ms,
                    forget_tracker=switches.TRACKER_FORGETS in self.runtime.bugs,  # catalogued bug
                    # catalogued bug: every flush drops the writer checkpoint, not only a close's last (CKPT-4)
                    release_writer_checkpoint=last or switches.WRITER_CHECKPOINT_RELEASED_AT_FLUSH in self.runtime.bugs,
                    release_pins=self._close_pins() if last else (),
                )
                try:
                    stored = (await self.manifests.commit(edit, current=self._stored)).stored
                except FencedError as e:
                    self.runtime.probe(probes.WRITER_FENCED_AT_L0_COMMIT)
                    self.runtime.event("halt", epoch=epoch, reason="manifest")
                    self._fail(e)
                    raise
                self.stats["manifest_writes"] += 1
                self.stats["l0_ssts"] += 1
                if metrics is not None:
                    metrics.observe("l0_flush", self.runtime.monotonic_s() - started)
                    metrics.inc("l0_flushes")
                    metrics.inc("l0_flush_bytes", len(encoded.data))
                if self.compactor is not None:
                    self.compactor.wake()  # a new L0 SST may be what the scheduler waits for
                self._readers[sst_id] = SstReader(
                    self.store, encoded.layout(key), block_cache=self.cache, cache_id=str(sst_id)
                )
                await self._adopt(stored, flushed=entry)

    def _is_last_flush_of_close(self, entry: ImmEntry) -> bool:
        """writer.md step 12: closing (no write is taken any more), ``entry`` is the only frozen
        memtable and nothing is left to freeze or to write to the WAL: its L0 commit is the
        close's last manifest change, so it drops the writer checkpoint itself instead of
        refreshing it (one manifest write at close, not two)."""
        w = self._w
        with w.lock:
            return (self._closing and len(w.imms) == 1 and w.imms[0] is entry and w.memtable.is_empty
                    and not w.wal_rows and not w.wal_cuts)

    async def _encode_l0(self, entry: ImmEntry):
        """The frozen memtable encoded as an SST, yielding to the loop every
        :data:`L0_ENCODE_CHUNK_ROWS` rows: encoding a full memtable in Python takes seconds, and
        the WAL flusher (durable writes) and the manifest poller must not wait for all of it."""
        writer = SstWriter(self.sst_options)
        rows, arrival = entry.mem.sorted_rows_and_order()
        if len(rows) < L0_BULK_MIN_ROWS:
            # A small memtable: the row-at-a-time builder makes the same bytes (add_sorted's
            # contract) without the bulk encoder's fixed cost, which exceeds it below some
            # hundreds of rows (10 rows: about 110 us against 440 us).
            for row in rows:
                writer.add(as_row(row))
            return writer.finish()
        # Rows that arrived in key order are the WAL's rows in the same order: the columns the
        # WAL encodes extracted from them serve here too (not extracted twice).
        kept = KeptColumns(rows, entry.mem.wal_columns) if arrival and entry.mem.wal_columns else None
        chunk = L0_ENCODE_CHUNK_ROWS
        for i in range(0, len(rows), chunk):
            if i:
                await trio.lowlevel.checkpoint()
            writer.add_sorted(rows[i : i + chunk], kept, i)
        return writer.finish()

    async def _flush_l0_unless_blocked(self) -> None:
        """Flush the frozen memtables to L0, oldest first, stopping (without waiting) as soon as
        L0 holds ``l0_max_ssts`` SSTs: RFC 000's best-effort flush of ``CheckpointScope.ALL``."""
        w = self._w
        targets = list(w.imms)
        while any(e in w.imms for e in targets):
            if self._error is not None:
                raise self._error
            if len(w.read_state.view.l0) >= self._l0_max_ssts:
                self.runtime.event("checkpoint_flush_blocked", l0=len(w.read_state.view.l0))
                return
            progress = self._l0_progress
            self._l0_wakeup.set()
            await progress.wait()


class _UncheckedFence(WriterFence):
    """The ``l0-commit-unfenced`` catalogue switch's fence: carries the epoch, checks nothing."""

    def check(self, m) -> None:
        return None
