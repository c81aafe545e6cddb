"""The manifest edits: every change any process makes to a manifest, as a frozen value applied by
:func:`slatedb.manifest.edit.apply_edit` through :meth:`ManifestStore.commit` (see
:mod:`slatedb.manifest.edit` for the order: guards, already applied, change).

==========================  ============================================  =====================
edit                        who                                            already applied when
==========================  ============================================  =====================
:class:`BumpWriterEpoch`    writer open (writer.md 2), soft destroy 1     its writer checkpoint is there
:class:`AddL0`              L0 flush (writer.md 9)                         replay point and last L0 seq reached
:class:`RefreshWriterCheckpoint`  manifest follower (writer.md 11)        its writer checkpoint is there
:class:`ReleaseWriterCheckpoint`  writer close (writer.md 12)             no writer checkpoint left
:class:`AdvanceReplay`      the ``replay-progress-early`` bug only         (idempotent)
:class:`AddCheckpoint`      Db / admin / reader / clone (ckpt 1, 2)        its checkpoint id is there
:class:`RefreshCheckpoint`  reader, admin (ckpt 3)                         (idempotent)
:class:`DeleteCheckpoint`   reader, admin, GC, destroy (ckpt 4)            retried and the id is gone
:class:`ExpireCheckpoints`  GC (ckpt 5)                                    retried and what it removed is gone
:class:`DetachExternalDb`   GC (ckpt 9)                                    retried and what it removed is gone
:class:`ClaimCompactorEpoch`  compactor start (compaction.md 1)            its pin is there with its epoch
:class:`ApplyCompaction`    compactor commit (compaction.md)               retried and its outputs are there
:class:`CommitBulkLoad`   bulk load commit (bulk-load.md 6)             every load SST is in ``ssts``
:class:`SoftDestroy`        destroy (destroy.md soft 2-3)                  ``destroyed_at_s`` set
:class:`HardDestroy`        destroy (destroy.md hard 1-2)                  retried and ``destroyed_at_s`` set
:class:`MarkInitialized`    clone (clone.md 7)                             ``initialized`` set
==========================  ============================================  =====================

To add an edit: a frozen attrs subclass of :class:`~slatedb.manifest.edit.Edit` with a ``kind``,
an optional ``fence`` field, :meth:`landed` if a repeated application would not be a no-op, and
a pure :meth:`apply`; a row in the table above and in ``tests/manifest/test_edits.py``'s
false-negative test; ``ManifestStore.commit(edit)`` at the call site.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

import attrs

from slatedb.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    FencedError,
    InvalidDbStateError,
    InvalidDeletionError,
)
from slatedb.format import seq_tracker
from slatedb.format.layout import manifest_key
from slatedb.format.types import (
    Checkpoint,
    CompactedSsTable,
    CompactedSsTableV2,
    CompactedSsTableView,
    ExternalDb,
    ManifestV2,
    WriterCheckpoint,
)

from .checkpoints import (
    active_checkpoints,
    check_writable_state,
    expire_time_s,
    find_checkpoint,
    is_expired,
    is_writer_checkpoint,
    make_checkpoint,
    pinned_for_commit,
    replace_writer_checkpoint,
    split_checkpoints,
    without_checkpoints,
    without_writer_checkpoints,
    writer_checkpoint,
    writer_checkpoint_id,
)
from .compaction import (COMMITTED, CompactionCommit, CompactionSpec, apply_compaction, commit_landed,
                          committed_already, validate_spec)
from .edit import Attempt, Change, CompactorFence, Edit, WriterFence

NOT_LANDED: tuple[bool, None] = (False, None)


# -- the writer ------------------------------------------------------------------------------


@attrs.frozen
class BumpWriterEpoch(Edit[int]):
    """``writer_epoch + 1`` with the writer checkpoint ``checkpoint_id`` of the new epoch in
    place of any other (writer.md step 2; a soft destroy's claim, destroy.md step 1, which its
    mark then drops). Refuses a destroyed database (DESTROY-3) unless ``allow_destroyed``.
    Already applied when its checkpoint is there with the manifest's epoch. Result: the epoch."""

    kind: ClassVar[str] = "bump_writer_epoch"
    checkpoint_id: uuid.UUID
    allow_destroyed: bool = False
    #: Catalogued bug ``writer-checkpoint-orphaned`` (sim/scenarios/catalogue.py): the previous
    #: writer's checkpoint is kept with its metadata stripped instead of being replaced, and
    #: writer checkpoints have plain ids (no id rule), so nothing recognises the orphan again.
    orphan_previous: bool = False

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, int | None]:
        cp_id = self.checkpoint_id if self.orphan_previous else writer_checkpoint_id(self.checkpoint_id, m.writer_epoch)
        cp = find_checkpoint(m, cp_id)
        if cp is not None and isinstance(cp.metadata, WriterCheckpoint) and cp.metadata.epoch == m.writer_epoch:
            return True, m.writer_epoch
        return NOT_LANDED

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[int]:
        if m.destroyed_at_s and not self.allow_destroyed:
            raise InvalidDbStateError(f"the database was destroyed at {m.destroyed_at_s} s")
        epoch = m.writer_epoch + 1
        cp = writer_checkpoint(self.checkpoint_id, attempt.base_id + 1, epoch, attempt.now_ms, self.orphan_previous)
        if self.orphan_previous:
            kept = tuple(attrs.evolve(c, metadata=None) if isinstance(c.metadata, WriterCheckpoint) else c
                         for c in m.checkpoints)
            return Change(attrs.evolve(m, writer_epoch=epoch, checkpoints=kept + (cp,)), epoch)
        return Change(attrs.evolve(m, writer_epoch=epoch, checkpoints=replace_writer_checkpoint(m, cp)), epoch)


@attrs.frozen
class AddL0(Edit[None]):
    """An L0 flush (writer.md step 9): the SST, its view in front of L0, the replay point
    ``replay_after`` (the last WAL id of the flushed memtable), ``wal_id_last_seen`` raised to
    ``wal_last``, ``last_l0_seq`` to ``last_seq``, ``recent_snapshot_min_seq`` to the oldest of
    that and ``snapshot_floor`` (open snapshots), and a refreshed writer checkpoint -- or, with
    ``release_writer_checkpoint`` (a close's last flush, writer.md step 12), no writer checkpoint:
    the edit then also does what :class:`ReleaseWriterCheckpoint` does, in the same manifest.

    Already applied when the replay point and ``last_l0_seq`` are reached: only this writer moves
    them, one frozen memtable at a time, so reaching them means this flush is in (a compactor may
    have compacted the L0 away since). Adding it again would put old rows in front of newer ones."""

    kind: ClassVar[str] = "add_l0"
    fence: WriterFence
    sst: CompactedSsTableV2
    replay_after: int
    wal_last: int
    last_seq: int
    checkpoint_id: uuid.UUID
    snapshot_floor: int | None = None
    #: Catalogued bug ``writer-checkpoint-orphaned``: a plain checkpoint id (see BumpWriterEpoch).
    legacy_id: bool = False
    #: The flushed table's first ``(seq, create_ts_ms)`` for the sequence tracker (RFC 0012).
    tracked: tuple[int, int] | None = None
    #: Catalogued bug ``tracker-forgets``: the pair is recorded on an empty tracker (TRACK-2).
    forget_tracker: bool = False
    #: A close's last L0 flush: drop every writer checkpoint (as :class:`ReleaseWriterCheckpoint`)
    #: instead of refreshing ours, so that the close writes one manifest, not two.
    release_writer_checkpoint: bool = False
    #: With ``release_writer_checkpoint``: the close's own pins dropped too (its in-process
    #: compactor's startup pin, writer.md step 12, CKPT-5).
    release_pins: tuple[uuid.UUID, ...] = ()
    clock_tick: int | None = None  #: the table's newest create time: last_l0_clock_tick (writer.md 9)

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, None]:
        return (m.replay_after_wal_id >= self.replay_after and m.last_l0_seq >= self.last_seq), None

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[None]:
        last_l0_seq = max(m.last_l0_seq, self.last_seq)
        snapshot_min = last_l0_seq if self.snapshot_floor is None else min(last_l0_seq, self.snapshot_floor)
        if self.release_writer_checkpoint:
            checkpoints = without_checkpoints(without_writer_checkpoints(m), self.release_pins)
        else:
            cp = writer_checkpoint(self.checkpoint_id, attempt.base_id + 1, self.fence.epoch, attempt.now_ms, self.legacy_id)
            checkpoints = replace_writer_checkpoint(m, cp)
        return Change(attrs.evolve(
            m,
            ssts=m.ssts + (self.sst,),
            l0=(CompactedSsTableView(self.sst.id, self.sst.id, None),) + m.l0,
            replay_after_wal_id=max(m.replay_after_wal_id, self.replay_after),
            wal_id_last_seen=max(m.wal_id_last_seen, self.wal_last),
            last_l0_seq=last_l0_seq,
            last_l0_clock_tick=max(m.last_l0_clock_tick, self.clock_tick or m.last_l0_clock_tick),
            recent_snapshot_min_seq=snapshot_min,
            checkpoints=checkpoints,
            sequence_tracker=_tracked(m, self.tracked, attempt, self.forget_tracker),
        ), None)


def _tracked(m: ManifestV2, tracked: tuple[int, int] | None, attempt: Attempt, forget: bool = False) -> bytes | None:
    """``m``'s sequence tracker with ``tracked`` recorded (unchanged bytes when it is not);
    corrupt tracker bytes raise :class:`~slatedb.errors.CorruptionError` naming the manifest
    instead of being copied forward. Pairs are only appended (TRACK-1, TRACK-2)."""
    if tracked is None:
        return m.sequence_tracker
    seq, ts_ms = tracked
    old = seq_tracker.decode(m.sequence_tracker, manifest_key(attempt.base_id))
    # Catalogued bug tracker-forgets: the pair goes on an empty tracker (the interval kept).
    base = seq_tracker.SequenceTracker() if forget and old else old
    new = base.insert(seq, ts_ms // 1000, old.timestamps_s[-1] if old else None)
    return m.sequence_tracker if new is base else new.encode()


@attrs.frozen
class RefreshWriterCheckpoint(Edit[None]):
    """Re-establish the writer checkpoint on the manifest being written (RFC 000 "Refreshing
    the Checkpoint", writer.md step 11)."""

    kind: ClassVar[str] = "refresh_writer_checkpoint"
    fence: WriterFence
    checkpoint_id: uuid.UUID
    #: Catalogued bug ``writer-checkpoint-orphaned``: a plain checkpoint id (see BumpWriterEpoch).
    legacy_id: bool = False

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, None]:
        cp_id = self.checkpoint_id if self.legacy_id else writer_checkpoint_id(self.checkpoint_id, self.fence.epoch)
        return find_checkpoint(m, cp_id) is not None, None

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[None]:
        cp = writer_checkpoint(self.checkpoint_id, attempt.base_id + 1, self.fence.epoch, attempt.now_ms, self.legacy_id)
        return Change(attrs.evolve(m, checkpoints=replace_writer_checkpoint(m, cp)), None)


@attrs.frozen
class ReleaseWriterCheckpoint(Edit[None]):
    """A clean close drops the writer checkpoint (writer.md step 12): a closed writer reads
    nothing through it, and the official 0.17 engine, which may open the database next, writes
    no writer checkpoint and would keep ours (metadata dropped) forever. Also drops what earlier
    incarnations of either engine left (:func:`without_writer_checkpoints`). Nothing to drop:
    nothing written."""

    kind: ClassVar[str] = "release_writer_checkpoint"
    fence: WriterFence
    #: The close's own pins, dropped in the same manifest: its in-process compactor's startup
    #: pin (writer.md step 12, CKPT-5).
    release_pins: tuple[uuid.UUID, ...] = ()

    def _kept(self, m: ManifestV2) -> tuple[Checkpoint, ...]:
        return without_checkpoints(without_writer_checkpoints(m), self.release_pins)

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, None]:
        return len(self._kept(m)) == len(m.checkpoints), None

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[None]:
        return Change(attrs.evolve(m, checkpoints=self._kept(m)), None)


@attrs.frozen
class AdvanceReplay(Edit[None]):
    """``replay_after_wal_id`` raised to ``wal_id`` while ``epoch`` is the writer's (else
    nothing). Used only by the catalogued bug ``replay-progress-early`` (sim/scenarios/catalogue.py), which
    persists the replay point before the replayed rows reach L0."""

    kind: ClassVar[str] = "advance_replay"
    epoch: int
    wal_id: int

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[None]:
        if m.writer_epoch != self.epoch:
            return Change(None, None)
        return Change(attrs.evolve(m, replay_after_wal_id=max(m.replay_after_wal_id, self.wal_id)), None)


# -- checkpoints -----------------------------------------------------------------------------


@attrs.frozen
class CheckpointAdded:
    """The result of :class:`AddCheckpoint`: the checkpoint, and whether it was there before
    this commit started (a clone's ``final_checkpoint_id`` made by an earlier run)."""

    checkpoint: Checkpoint
    existed: bool = False


@attrs.frozen
class AddCheckpoint(Edit[CheckpointAdded]):
    """RFC 000 "Creating a Checkpoint" (checkpoints-gc.md steps 1-2): a checkpoint
    ``checkpoint_id`` pinning the manifest being written (``base + 1``), or the manifest of the
    unexpired checkpoint ``source``. ``wal_last_seen`` raises ``wal_id_last_seen`` (a writer's
    checkpoint covers the WAL it wrote); ``lists_wal``-style edits (:class:`AddReaderCheckpoint`)
    raise it to the listed WAL. ``refuse`` names the operation in the error for an uninitialized
    or destroyed database. Already applied when ``checkpoint_id`` is in the manifest."""

    kind: ClassVar[str] = "add_checkpoint"
    checkpoint_id: uuid.UUID
    lifetime_s: float | None = None
    name: str | None = None
    source: uuid.UUID | None = None
    wal_last_seen: int | None = None
    fence: WriterFence | None = None
    refuse: str = "create a checkpoint"

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, CheckpointAdded | None]:
        found = find_checkpoint(m, self.checkpoint_id)
        if found is None:
            return NOT_LANDED
        return True, CheckpointAdded(found, existed=not attempt.maybe_landed)

    def _last_seen(self, m: ManifestV2, attempt: Attempt) -> int:
        return m.wal_id_last_seen if self.wal_last_seen is None else max(m.wal_id_last_seen, self.wal_last_seen)

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[CheckpointAdded]:
        if self.source is None:
            check_writable_state(m, self.refuse)
            manifest_id = attempt.base_id + 1
        else:
            if m.destroyed_at_s:
                raise InvalidDbStateError(f"cannot {self.refuse}: the database was destroyed at {m.destroyed_at_s} s")
            source = find_checkpoint(m, self.source)
            if source is None:
                raise CheckpointNotFoundError(self.source, "the latest manifest (source checkpoint)")
            if is_expired(source, attempt.now_ms // 1000):
                raise InvalidDbStateError(f"source checkpoint {self.source} has expired")
            manifest_id = source.manifest_id
        cp = make_checkpoint(self.checkpoint_id, manifest_id, attempt.now_ms, lifetime_s=self.lifetime_s, name=self.name)
        return Change(attrs.evolve(m, checkpoints=m.checkpoints + (cp,), wal_id_last_seen=self._last_seen(m, attempt)),
                      CheckpointAdded(cp))


@attrs.frozen
class AddReaderCheckpoint(AddCheckpoint):
    """:class:`AddCheckpoint` from the current manifest with ``wal_id_last_seen`` raised to the
    highest WAL id listed *after* the manifest read (RFC 000 "Establishing the Checkpoint",
    RFC 001 NOTE): a DbReader's checkpoint, and a clone's ephemeral one on its parent."""

    kind: ClassVar[str] = "add_reader_checkpoint"
    lists_wal: ClassVar[bool] = True

    def _last_seen(self, m: ManifestV2, attempt: Attempt) -> int:
        listed = attempt.wal_ids or ()
        return max(m.wal_id_last_seen, m.replay_after_wal_id, listed[-1] if listed else 0)


@attrs.frozen
class RefreshCheckpoint(Edit[Checkpoint]):
    """Set the checkpoint's expiry to now + ``lifetime_s`` (None: never). Gone (deleted, or
    expired and collected) raises :class:`CheckpointNotFoundError`, and so does a checkpoint
    already expired but not yet collected (checkpoints-gc.md step 3): a GC pass may have read
    the manifest in which it had expired and be deleting what it pinned; reviving it would
    make that a deletion under an active checkpoint (GC-2, gc seed 1246: an admin refresh sent
    before the expiry, stalled, landed 2 s after it). Result: the new entry."""

    kind: ClassVar[str] = "refresh_checkpoint"
    checkpoint_id: uuid.UUID
    lifetime_s: float | None

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[Checkpoint]:
        old = find_checkpoint(m, self.checkpoint_id)
        if old is None:
            raise CheckpointNotFoundError(self.checkpoint_id, "the latest manifest")
        if is_expired(old, attempt.now_ms // 1000):
            raise CheckpointExpiredError(self.checkpoint_id, old.checkpoint_expire_time_s)
        new = attrs.evolve(old, checkpoint_expire_time_s=expire_time_s(attempt.now_ms, self.lifetime_s))
        return Change(attrs.evolve(m, checkpoints=tuple(new if c.id == self.checkpoint_id else c for c in m.checkpoints)),
                      new)


@attrs.frozen
class DeleteCheckpoint(Edit[None]):
    """A manifest without the checkpoint (checkpoints-gc.md step 4). Missing raises
    :class:`CheckpointNotFoundError` unless ``missing_ok``; missing after a retry is our own
    delete that landed."""

    kind: ClassVar[str] = "delete_checkpoint"
    checkpoint_id: uuid.UUID
    missing_ok: bool = False

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, None]:
        return (attempt.retried and find_checkpoint(m, self.checkpoint_id) is None), None

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[None]:
        if find_checkpoint(m, self.checkpoint_id) is None:
            if self.missing_ok:
                return Change(None, None)
            raise CheckpointNotFoundError(self.checkpoint_id, "the latest manifest")
        return Change(attrs.evolve(m, checkpoints=tuple(c for c in m.checkpoints if c.id != self.checkpoint_id)), None)


@attrs.frozen
class ExpireCheckpoints(Edit[tuple[Checkpoint, ...]]):
    """GC: remove every checkpoint expired now (checkpoints-gc.md step 5). Result: the removed.
    Writes nothing to a destroyed manifest (a commit landing after a destroyer's listing would
    outlive the database, DESTROY-4)."""

    kind: ClassVar[str] = "expire_checkpoints"

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, tuple[Checkpoint, ...] | None]:
        prior = attempt.prior
        if attempt.maybe_landed and isinstance(prior, tuple) and prior:
            if all(find_checkpoint(m, c.id) is None for c in prior):
                return True, prior
        return NOT_LANDED

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[tuple[Checkpoint, ...]]:
        now_s = attempt.now_ms // 1000
        active, expired = split_checkpoints(m, now_s)
        if not expired or m.destroyed_at_s:  # nothing is written to a destroyed database (destroy.md S5)
            return Change(None, ())
        return Change(attrs.evolve(m, checkpoints=active), expired)


# -- clones ----------------------------------------------------------------------------------


@attrs.frozen
class DetachExternalDb(Edit[tuple[ExternalDb, ...]]):
    """GC: drop the external database ``(path, source_checkpoint_id)`` once none of its SSTs is
    referenced (checkpoints-gc.md step 9). Result: the entries removed (none: already gone, or
    the manifest is destroyed: nothing is written to it, DESTROY-4)."""

    kind: ClassVar[str] = "detach_external_db"
    path: str
    source_checkpoint_id: uuid.UUID

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, tuple[ExternalDb, ...] | None]:
        prior = attempt.prior
        if attempt.maybe_landed and isinstance(prior, tuple) and prior and not any(e in m.external_dbs for e in prior):
            return True, prior
        return NOT_LANDED

    def _gone(self, e: ExternalDb) -> bool:
        return e.path == self.path and e.source_checkpoint_id == self.source_checkpoint_id and not e.sst_ids

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[tuple[ExternalDb, ...]]:
        gone = tuple(e for e in m.external_dbs if self._gone(e))
        if not gone or m.destroyed_at_s:  # nothing is written to a destroyed database (destroy.md S5)
            return Change(None, ())
        return Change(attrs.evolve(m, external_dbs=tuple(e for e in m.external_dbs if not self._gone(e))), gone)


@attrs.frozen
class MarkInitialized(Edit[None]):
    """A clone's last step (clone.md step 7): ``initialized = true``."""

    kind: ClassVar[str] = "mark_initialized"

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, None]:
        return m.initialized, None

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[None]:
        return Change(attrs.evolve(m, initialized=True), None)


# -- the compactor ---------------------------------------------------------------------------


@attrs.frozen
class ClaimCompactorEpoch(Edit[None]):
    """Compactor start (compaction.md step 1): ``compactor_epoch = epoch`` with a fresh pin
    ``pin_id`` on the replaced manifest (its UUID makes the bytes ours alone: two compactors
    starting from one manifest would otherwise write identical files, and an ambiguous create
    resolved by reading back would let both believe they won, CFENCE-3). An epoch ``>= epoch``
    already there is another compactor's: :class:`FencedError`."""

    kind: ClassVar[str] = "claim_compactor_epoch"
    epoch: int
    pin_id: uuid.UUID
    pin_lifetime_s: float

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, None]:
        return (m.compactor_epoch == self.epoch and find_checkpoint(m, self.pin_id) is not None), None

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[None]:
        if m.compactor_epoch >= self.epoch:
            raise FencedError(f"compactor epoch {self.epoch} lost to {m.compactor_epoch} (manifest)")
        pins = pinned_for_commit(m, attempt.base_id, attempt.now_ms, self.pin_id, self.pin_lifetime_s)
        return Change(attrs.evolve(m, compactor_epoch=self.epoch, checkpoints=pins), None)


@attrs.frozen
class ApplyCompaction(Edit[CompactionCommit]):
    """A finished compaction (compaction.md step 8, COMPACT-2/3/10): ``spec``'s sources replaced by the run
    ``spec.destination`` of ``outputs``, a fresh pin ``pin_id`` on the replaced manifest. Its commit is looked for
    first (:func:`commit_landed`); a retried attempt finding it so (RFC 004's false negative): ours. Catalogued bugs:
    ``revalidate=False`` (``compaction-no-revalidate``), ``committed_first=False`` (``compaction-recommit-fails``),
    ``empty_recognised=False`` (``empty-recommit-fails``)."""

    kind: ClassVar[str] = "apply_compaction"
    fence: CompactorFence | None
    spec: CompactionSpec
    outputs: tuple[CompactedSsTable, ...]
    pin_id: uuid.UUID
    pin_lifetime_s: float
    revalidate: bool = True
    committed_first: bool = True
    empty_recognised: bool = True

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, CompactionCommit | None]:
        found = attempt.maybe_landed and commit_landed(m, self.spec, self.outputs, empty=self.empty_recognised) is not None
        return found, (COMMITTED if found else None)

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[CompactionCommit]:
        if self.revalidate:
            if self.committed_first and commit_landed(m, self.spec, self.outputs, empty=self.empty_recognised):
                return Change(None, CompactionCommit(already=True))  # COMPACT-10
            reason = validate_spec(self.spec, m) or committed_already(m, self.outputs)
            if reason is not None:
                return Change(None, CompactionCommit(invalid=reason))
        pins = pinned_for_commit(m, attempt.base_id, attempt.now_ms, self.pin_id, self.pin_lifetime_s)
        return Change(apply_compaction(m, self.spec, self.outputs, checkpoints=pins), COMMITTED)


# -- destroy ---------------------------------------------------------------------------------


@attrs.frozen
class CommitBulkLoad(Edit[None]):
    """A bulk load's one commit (bulk-load.md step 6), fenced by the epoch the load's own
    :class:`BumpWriterEpoch` got: the load's SSTs (``ssts``, views ``views`` minted when the edit
    was built) in front of L0, with the WAL rows below the load's fence ``fence_id`` as one more
    L0 SST (``tail``; append only), ``last_l0_seq`` = the load's ``load_seq`` and the replay point
    at the fence, and the load's writer checkpoint dropped (it ends as a clean close does).
    ``overwrite`` drops every older L0 view, SST and sorted run. Refused (nothing
    written) when a seq reached ``load_seq`` (LOAD-5: ``wal_seq`` is the highest seq below the
    fence). Already applied when the replay point reached the fence and ``last_l0_seq`` the
    load's seq: under the guard (the epoch is still the load's) only this commit moves them
    there (a compaction may have rewritten the load's SSTs since, so their ids need not be in
    ``ssts`` any more; LOAD-12). A refusal after a create that may have landed is not a refusal
    (``unsure_refusals``: :class:`~slatedb.errors.CommitOutcomeUnknownError`)."""

    kind: ClassVar[str] = "commit_bulk_load"
    unsure_refusals: ClassVar[bool] = True
    fence: WriterFence
    load_seq: int
    fence_id: int
    wal_seq: int
    ssts: tuple[CompactedSsTableV2, ...]
    views: tuple[CompactedSsTableView, ...]
    tail: CompactedSsTableV2 | None = None
    overwrite: bool = False
    landed_by_ssts: bool = False  # catalogued bug load-landed-by-ssts: the landed rule before LOAD-12

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, None]:
        if self.landed_by_ssts and self.ssts:
            have = {s.id for s in m.ssts}
            return all(s.id in have for s in self.ssts), None
        return (m.replay_after_wal_id >= self.fence_id and m.last_l0_seq >= self.load_seq), None

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[None]:
        check_writable_state(m, "bulk load")
        reached = max(m.last_l0_seq, self.wal_seq)
        if reached >= self.load_seq:  # LOAD-5
            raise InvalidDbStateError(f"sequence number {reached} reached the load's {self.load_seq} (another "
                                      "load committed, or a writer wrote more than the headroom): nothing committed")
        common = dict(last_l0_seq=self.load_seq, last_l0_clock_tick=max(m.last_l0_clock_tick, attempt.now_ms),
                      replay_after_wal_id=max(m.replay_after_wal_id, self.fence_id),
                      wal_id_last_seen=max(m.wal_id_last_seen, self.fence_id),
                      # the load, the writer of this epoch, ends here: its writer checkpoint goes (CKPT-3)
                      checkpoints=without_writer_checkpoints(m))
        if self.overwrite:
            return Change(attrs.evolve(m, ssts=self.ssts, l0=self.views, compacted=(), **common), None)
        tail_sst = () if self.tail is None else (self.tail,)
        tail_view = () if self.tail is None else (CompactedSsTableView(self.tail.id, self.tail.id, None),)
        return Change(attrs.evolve(m, ssts=m.ssts + self.ssts + tail_sst, l0=self.views + tail_view + m.l0,
                                   **common), None)


@attrs.frozen
class SoftDestroy(Edit[int]):
    """Soft destroy steps 2-3 in one write (destroy.md, DESTROY-2): drop the writer checkpoint
    and set ``destroyed_at_s``, only while ``fence.epoch`` (the destroyer's) is the latest.
    Result: ``destroyed_at_s``."""

    kind: ClassVar[str] = "soft_destroy"
    fence: WriterFence

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, int | None]:
        # Marked, and no writer checkpoint left: a destroyer that lost the race to another one
        # bumped the epoch of the destroyed manifest (allow_destroyed) and must still drop its
        # writer checkpoint, which never expires and would keep GC from ever removing the database.
        if m.destroyed_at_s and len(without_writer_checkpoints(m)) == len(m.checkpoints):
            return True, m.destroyed_at_s
        return NOT_LANDED

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[int]:
        now_s = m.destroyed_at_s or max(1, attempt.now_ms // 1000)  # the first destroy's time stays
        return Change(attrs.evolve(m, destroyed_at_s=now_s, checkpoints=without_writer_checkpoints(m)), now_s)


class DeletionRefused(InvalidDeletionError):
    """:class:`InvalidDeletionError` of :class:`HardDestroy`, with the number of checkpoints."""

    def __init__(self, message: str, checkpoints: int) -> None:
        super().__init__(message)
        self.checkpoints = checkpoints


@attrs.frozen
class HardDestroy(Edit[int]):
    """Hard destroy steps 1-2 (destroy.md, DESTROY-1): refuse while any unexpired checkpoint
    other than a writer checkpoint exists (:class:`InvalidDeletionError` naming ``label`` and
    the checkpoints, checked on every attempt), then set ``destroyed_at_s`` if unset. Result:
    ``destroyed_at_s``."""

    kind: ClassVar[str] = "hard_destroy"
    label: str = "the database"

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, int | None]:
        return (True, m.destroyed_at_s) if attempt.maybe_landed and m.destroyed_at_s else NOT_LANDED

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[int]:
        now_s = max(1, attempt.now_ms // 1000)
        blocking = [c for c in active_checkpoints(m, now_s) if not is_writer_checkpoint(c)]
        if blocking:
            raise DeletionRefused(
                f"cannot hard-destroy {self.label}: {len(blocking)} active checkpoint(s)"
                f" ({', '.join(str(c.id) for c in blocking[:3])}{', ...' if len(blocking) > 3 else ''});"
                " delete them, wait for them to expire, or destroy softly", len(blocking))
        if m.destroyed_at_s:
            return Change(None, m.destroyed_at_s)
        return Change(attrs.evolve(m, destroyed_at_s=now_s), now_s)
