"""Typed manifest edits and the one place that applies them (LevelDB's ``VersionEdit`` +
``LogAndApply``; spec/protocols/sequenced-metadata.md, "Edits").

Every manifest change is a small frozen value (:mod:`slatedb.manifest.edits`), never a closure.
:func:`apply_edit` applies one to a freshly read manifest, in this order:

1. **guards**: the edit's fence (:class:`WriterFence`: ``writer_epoch`` must still be the
   writer's, or it halts: FENCE-3; :class:`CompactorFence`: no newer ``compactor_epoch``, CFENCE-1) raises
   :class:`~slatedb.errors.FencedError`;
2. **already applied**: :meth:`Edit.landed` recognises the edit's own effect in the manifest
   (RFC 004's false negative: a create that landed but whose boundary read came back after GC
   passed it is reported *not committed*, and the retry finds its own change; applying it again
   would add a second checkpoint, a second L0, ...). Then nothing is written and the result of
   the landed attempt is returned;
3. **the change**: :meth:`Edit.apply` checks the edit's own preconditions (a database not
   destroyed, a checkpoint that exists, a compaction still valid) and returns the new manifest,
   or none ("nothing to do"), with the edit's typed result.

:meth:`slatedb.manifest.store.ManifestStore.commit` is the entry point: it reads the latest
manifest, calls :func:`apply_edit`, creates the next id, checks the boundary, and on a conflict
re-applies **the same edit value** to a fresh read. Ids an edit adds (checkpoint UUIDs) are drawn
once, when the edit is built, so a retry recognises them.
"""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

import attrs

from slatedb.errors import FencedError
from slatedb.format.types import ManifestV2

R = TypeVar("R")


@attrs.frozen
class Attempt:
    """What one application of an edit may depend on besides the manifest."""

    #: The id of the manifest the edit is applied to (it is written as ``base_id + 1``).
    base_id: int
    #: The applying process's wall clock (checkpoint times, ``last_l0_clock_tick``).
    now_ms: int
    #: An earlier attempt of this commit tried to write (and lost a race or a boundary check).
    retried: bool = False
    #: An earlier attempt's create *landed* but its boundary check reported it not committed
    #: (RFC 004's false negative): its change may be in this manifest.
    maybe_landed: bool = False
    #: With ``maybe_landed``: the result that attempt computed (what it removed, say), for an
    #: edit whose effect alone does not tell what it did.
    prior: object = None
    #: The WAL ids listed after this manifest was read (edits with ``lists_wal``; RFC 001 NOTE:
    #: the listing must follow the read, so that GC cannot have deleted what it returns).
    wal_ids: tuple[int, ...] | None = None


@attrs.frozen
class Change(Generic[R]):
    """An edit applied: the manifest to write (None: nothing to write) and the edit's result."""

    manifest: ManifestV2 | None
    result: R
    #: True when :meth:`Edit.landed` found the edit already applied (nothing is written).
    landed: bool = False


@attrs.frozen
class WriterFence:
    """Guard: the manifest's ``writer_epoch`` is still ``epoch`` (a newer writer fences us; the
    writer then halts, FENCE-3)."""

    epoch: int

    def check(self, m: ManifestV2) -> None:
        if m.writer_epoch != self.epoch:
            raise FencedError(f"writer epoch {self.epoch} was fenced by epoch {m.writer_epoch}")


@attrs.frozen
class CompactorFence:
    """Guard: no compactor newer than ``epoch`` started (CFENCE-1, checked at every commit)."""

    epoch: int

    def check(self, m: ManifestV2) -> None:
        if m.compactor_epoch > self.epoch:
            raise FencedError(f"compactor epoch {self.epoch} fenced by {m.compactor_epoch} (at commit)")


Fence = WriterFence | CompactorFence


class Edit(Generic[R]):
    """Base of the edit values (frozen attrs subclasses). ``kind`` names the edit in the
    ``create``/``commit`` trace events; ``fence`` (an attrs field or None) is the guard."""

    kind: ClassVar[str] = "edit"
    #: The WAL is listed after each manifest read and passed as :attr:`Attempt.wal_ids`.
    lists_wal: ClassVar[bool] = False
    #: A guard or precondition that refuses a retry after a create that may have landed
    #: (:attr:`Attempt.maybe_landed`) raises :class:`~slatedb.errors.CommitOutcomeUnknownError`
    #: instead of the refusal: the caller deletes what the edit names on a refusal (a bulk load).
    unsure_refusals: ClassVar[bool] = False
    fence: Fence | None = None

    def landed(self, m: ManifestV2, attempt: Attempt) -> tuple[bool, R | None]:
        """``(True, result)`` when ``m`` already holds this edit's effect; ``(False, None)`` else."""
        return False, None

    def apply(self, m: ManifestV2, attempt: Attempt) -> Change[R]:
        raise NotImplementedError


def apply_edit(m: ManifestV2, edit: Edit[R], attempt: Attempt) -> Change[R]:
    """Guards, then already-applied detection, then the edit (see the module docstring)."""
    if edit.fence is not None:
        edit.fence.check(m)
    if edit.lists_wal:
        assert attempt.wal_ids is not None, f"{edit.kind} needs the WAL listed after the manifest read"
    found, result = edit.landed(m, attempt)
    if found:
        return Change(None, result, landed=True)  # type: ignore[arg-type]
    change = edit.apply(m, attempt)
    if change.manifest is not None:
        _check_monotonic(m, change.manifest, edit)
    return change


def _check_monotonic(old: ManifestV2, new: ManifestV2, edit: Edit) -> None:
    """What no edit may do (LevelDB's asserts at ``LogAndApply``): move an epoch, a replay
    point or the last L0 sequence number backwards, or un-destroy a database."""
    assert new.writer_epoch >= old.writer_epoch, (edit.kind, "writer_epoch", old.writer_epoch, new.writer_epoch)
    assert new.compactor_epoch >= old.compactor_epoch, (edit.kind, "compactor_epoch")
    assert new.replay_after_wal_id >= old.replay_after_wal_id, (edit.kind, "replay_after_wal_id")
    assert new.wal_id_last_seen >= old.wal_id_last_seen, (edit.kind, "wal_id_last_seen")
    assert new.last_l0_seq >= old.last_l0_seq, (edit.kind, "last_l0_seq")
    assert not old.destroyed_at_s or new.destroyed_at_s == old.destroyed_at_s, (edit.kind, "destroyed_at_s")
