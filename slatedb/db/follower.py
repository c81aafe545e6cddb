"""The writer's manifest follower (writer.md step 11, RFC 000 checkpoints): poll the manifest,
halt on a newer writer epoch, adopt the L0 / sorted-run changes of others (a compactor), keep the
writer checkpoint on the manifest in force, and ``Db.create_checkpoint``.

REQUIRES: the engine's loop; ``_manifest_lock`` held around every commit and adoption. Part of
:class:`~slatedb.db.core.DbCore` (a mixin: the state is the engine's).
"""

from __future__ import annotations

from typing import Any

import trio

from slatedb.checkpoint import CheckpointCreateResult, CheckpointOptions, CheckpointScope
from slatedb.errors import (
    FencedError,
    InvalidArgumentError,
    ObjectStoreRetriesExhaustedError,
    TransientObjectStoreError,
)
from slatedb.lsm.view import build_view
from slatedb.manifest.edit import WriterFence
from slatedb.manifest.edits import AddCheckpoint, RefreshWriterCheckpoint
from slatedb.manifest.store import StoredManifest
from slatedb.runtime import probes, switches

from .state import ImmEntry


class ManifestFollower:
    """Manifest polling, adoption, the writer checkpoint, and user checkpoints of the writer."""

    async def _poll_loop(self) -> None:
        while True:
            await self.runtime.wait_event(self._poll_wakeup, self.settings.manifest_poll_interval)
            self._poll_wakeup = trio.Event()
            try:
                await self.refresh_manifest()
            except (ObjectStoreRetriesExhaustedError, TransientObjectStoreError):
                # The store did not answer within the retry bound (logged as retry_exhausted):
                # poll again next round. Nothing was adopted or lost; stopping here killed an
                # idle writer on an S3 outage of ~7 s that the official engine rides out.
                continue

    # ------------------------------------------------------------------------------------------
    # Manifest adoption (runtime thread, _manifest_lock held)
    # ------------------------------------------------------------------------------------------

    async def _adopt(self, stored: StoredManifest, *, flushed: ImmEntry | None = None) -> None:
        await self.locator.update(stored.manifest)
        view = await build_view(stored.id, stored.manifest, self._readers, self._open_reader, self.runtime)
        self._stored = stored
        w = self._w
        with w.lock:
            if flushed is not None:
                w.flushed(flushed)
                # The unflushed bytes fell: the write thresholds follow in this same hold. A write
                # measured against the old, higher one did not wake an idle WAL flusher, and its
                # durable wait never returned (tests/db/test_durable_wait_idle_flusher.py).
                self._recompute_thresholds()
            w.publish(view)
            live = view.sst_ids
        for sst_id in [s for s in self._readers if s not in live]:
            del self._readers[sst_id]
        self._signal_room()
        self._l0_wakeup.set()
        self._l0_progress.set()
        self._l0_progress = trio.Event()

    async def refresh_manifest(self) -> None:
        """Poll: adopt changes made by others (a compactor); halt if a newer writer exists.

        When the L0 / sorted-run set changed, re-establish the writer checkpoint on the new
        manifest (RFC 000 "Refreshing the Checkpoint").
        """
        async with self._manifest_lock:
            if self._error is not None:
                return
            latest = await self.manifests.read_latest_required()
            assert self._stored is not None
            if latest.id == self._stored.id:
                return
            if latest.manifest.writer_epoch > self.epoch:
                self.runtime.probe(probes.WRITER_HALTED_BY_POLL)
                self.runtime.event("halt", epoch=self.epoch, newer=latest.manifest.writer_epoch)
                self._fail(FencedError(f"writer epoch {self.epoch} was fenced by epoch {latest.manifest.writer_epoch}"))
                return
            old = self._stored.manifest
            changed = (old.l0, old.compacted) != (latest.manifest.l0, latest.manifest.compacted)
            if changed and not self._closing:  # closing: aclose releases the writer checkpoint
                epoch = self.epoch

                with trio.CancelScope(shield=True):
                    try:
                        edit = RefreshWriterCheckpoint(  # legacy_id: catalogued bug writer-checkpoint-orphaned
                            WriterFence(epoch), self.runtime.new_uuid(),
                            legacy_id=switches.WRITER_CHECKPOINT_ORPHANED in self.runtime.bugs)
                        latest = (await self.manifests.commit(edit, current=latest)).stored
                    except FencedError as e:
                        self._fail(e)
                        return
                    self.stats["manifest_writes"] += 1
            await self._adopt(latest)

    # ------------------------------------------------------------------------------------------
    # Checkpoints (runtime thread)
    # ------------------------------------------------------------------------------------------

    async def create_checkpoint(self, scope: Any, options: Any) -> Any:
        """RFC 000 ``Db::create_checkpoint``. ``ALL``: write the WAL buffer, cut the memtable and
        flush the frozen memtables to L0 unless L0 is full (best effort: back-pressure is not
        waited out); ``DURABLE``: nothing is flushed. Then one manifest update (fenced by the
        writer epoch) adds the checkpoint, pinning the very manifest that adds it, and raises
        its ``wal_id_last_seen`` to the last WAL object written: a reader of the pinned manifest
        (its SSTs, then WAL ids in ``(replay_after_wal_id, wal_id_last_seen]``) sees every write
        issued before the call (``ALL``) or every write durable at the call (``DURABLE``)."""
        if not isinstance(scope, CheckpointScope):
            raise InvalidArgumentError(f"scope must be a CheckpointScope, got {scope!r}")
        options = CheckpointOptions.of(options)  # before the flush below: a bad one changes nothing
        if self._error is not None:
            raise self._error
        if scope is CheckpointScope.ALL:
            await self.flush_wal(freeze=True)
            await self._flush_l0_unless_blocked()
        async with self._manifest_lock:
            if self._error is not None:
                raise self._error
            with trio.CancelScope(shield=True):
                epoch = self.epoch
                assert self._wal is not None
                wal_last = self._wal.last_id
                edit = AddCheckpoint(self.runtime.new_uuid(), lifetime_s=options.lifetime_s, name=options.name,
                                     source=options.source, wal_last_seen=wal_last, fence=WriterFence(epoch))
                try:
                    added = await self.manifests.commit(edit, current=self._stored)
                except FencedError as e:
                    self.runtime.event("halt", epoch=epoch, reason="manifest")
                    self._fail(e)
                    raise
                self.stats["manifest_writes"] += 1
                await self._adopt(added.stored)
        cp = added.result.checkpoint
        self.runtime.event("checkpoint_create", id=str(cp.id), manifest_id=cp.manifest_id,
                           expire_s=cp.checkpoint_expire_time_s, scope=scope.value)
        return CheckpointCreateResult(cp.id, cp.manifest_id)

