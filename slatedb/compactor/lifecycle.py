"""The official compaction lifecycle as pure transitions of a ``.compactions`` value.

States (wire values): Submitted=0, Running=1, Completed=2, Failed=3, Compacted=4, Scheduled=5.
Who writes which transition (spec/protocols/compaction.md, the official 0.17 protocol):

=====================================================  ==============
transition                                             written by
=====================================================  ==============
new Submitted                                          scheduler, admin
Submitted -> Scheduled / Failed (validation)           coordinator
Scheduled -> Submitted (coordinator start; stale spec) coordinator
Scheduled -> Running (claim, worker id, heartbeat)     worker
Running -> Running (heartbeat, progress in ``ctx``)    worker (owner)
Running -> Compacted (outputs in range order)          worker (owner)
Running -> Scheduled (release)                         worker (owner)
Running -> Scheduled (stale heartbeat reclaim)         coordinator
Compacted -> Completed / Failed                        coordinator
=====================================================  ==============

Each function takes the latest :class:`CompactionsV1` and returns the next one (or raises); the
caller writes it by CAS and, on a conflict, calls the function again on the newer file. A
worker's functions take its worker id and raise :class:`NotOwnerError` when the job is gone or
owned by another worker id: so a zombie worker's heartbeat, progress and result are dropped
(COMPACT-5). :func:`check_compactions` refuses bad input (a worker id that is not a ULID,
subcompaction ranges that do not tile the key space, an output outside its range) with a
:class:`CorruptionError` naming the object.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable

import attrs
from ulid import ULID

from slatedb.errors import CorruptionError, SlateDBError
from slatedb.runtime import Runtime
from slatedb.format.types import (
    BoundType,
    BytesBound,
    BytesRange,
    CompactedSsTable,
    Compaction,
    CompactionsV1,
    CompactionStatus,
    Subcompaction,
    TieredCompactionContext,
    WorkerSpec,
)

S = CompactionStatus
#: A job in one of these states is in flight: its inputs and recorded outputs must stay.
ACTIVE = frozenset({S.SUBMITTED, S.SCHEDULED, S.RUNNING, S.COMPACTED})
TERMINAL = frozenset({S.COMPLETED, S.FAILED})

#: Every legal (before, after) status pair of one compaction id along the ``.compactions``
#: chain (None: absent). COMPACT-1.
LEGAL = frozenset({
    (None, S.SUBMITTED), (None, S.COMPACTED), (None, S.COMPLETED), (None, S.FAILED),
    (S.SUBMITTED, S.SUBMITTED), (S.SUBMITTED, S.SCHEDULED), (S.SUBMITTED, S.FAILED),
    (S.SCHEDULED, S.SCHEDULED), (S.SCHEDULED, S.RUNNING), (S.SCHEDULED, S.SUBMITTED),
    (S.RUNNING, S.RUNNING), (S.RUNNING, S.SCHEDULED), (S.RUNNING, S.COMPACTED),
    (S.COMPACTED, S.COMPACTED), (S.COMPACTED, S.COMPLETED), (S.COMPACTED, S.FAILED),
    (S.COMPLETED, S.COMPLETED), (S.FAILED, S.FAILED),
})

FULL_RANGE = BytesRange(BytesBound(None, BoundType.UNBOUNDED), BytesBound(None, BoundType.UNBOUNDED))


class LifecycleError(SlateDBError):
    """A transition that the current state of the job does not allow (names the job)."""


class NotOwnerError(LifecycleError):
    """A worker's write found its job gone, or owned by another worker id: the write is dropped."""


class FencedCoordinatorError(LifecycleError):
    """The file carries a newer compactor epoch than the coordinator writing it."""


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


def parse_worker_id(text: str, where: str, compaction: ULID | None = None) -> ULID:
    """A worker id must be a ULID string (26 Crockford characters). ``compaction``: the job whose
    worker it is, named after ``where`` in the error."""
    try:
        return _ulid_of(text)
    except (ValueError, TypeError):
        raise CorruptionError(where if compaction is None else f"{where} (compaction {compaction})", None,
                              f"worker id {text!r} is not a ULID") from None


@functools.lru_cache(maxsize=1024)  # a pure function of a string: every tick and heartbeat checks every job
def _ulid_of(text: str) -> ULID:
    return ULID.from_str(text)


def range_lo_hi(r: BytesRange) -> tuple[bytes | None, bytes | None]:
    """``[lo, hi)`` of a subcompaction range (None: unbounded). Subcompaction ranges are
    ``(-inf, b1)``, ``[b1, b2)``, ..., ``[bk, +inf)``: included start, excluded end."""
    s, e = r.start_bound, r.end_bound
    lo = None if s.bound_type in (BoundType.UNBOUNDED, BoundType.UNKNOWN) else s.key
    hi = None if e.bound_type in (BoundType.UNBOUNDED, BoundType.UNKNOWN) else e.key
    return lo, hi


def make_range(lo: bytes | None, hi: bytes | None) -> BytesRange:
    return BytesRange(BytesBound(None, BoundType.UNBOUNDED) if lo is None else BytesBound(lo, BoundType.INCLUDED),
                      BytesBound(None, BoundType.UNBOUNDED) if hi is None else BytesBound(hi, BoundType.EXCLUDED))


def check_subcompactions(c: Compaction, where: str) -> None:
    """The ranges of ``c.ctx`` tile the key space in order (no gap, no overlap) and each range's
    outputs lie inside it, in order. Raises :class:`CorruptionError` naming ``where`` and ``c``."""
    if c.ctx is None or not c.ctx.subcompactions:
        return
    subs = c.ctx.subcompactions
    prev_hi: bytes | None = None
    for i, sub in enumerate(subs):
        s, e = sub.range.start_bound, sub.range.end_bound
        lo, hi = range_lo_hi(sub.range)
        if (i == 0) != (lo is None) or (i == len(subs) - 1) != (hi is None):
            raise CorruptionError(where, None, f"compaction {c.id} subcompaction {i}: ranges do not cover the key "
                                               f"space")
        if lo is not None and (s.bound_type is not BoundType.INCLUDED or lo != prev_hi):
            raise CorruptionError(where, None, f"compaction {c.id} subcompaction {i}: range starts at {lo!r}, not "
                                               f"where range {i - 1} ends")
        if hi is not None and (e.bound_type is not BoundType.EXCLUDED or (lo is not None and hi <= lo)):
            raise CorruptionError(where, None, f"compaction {c.id} subcompaction {i}: range end {hi!r} is not an "
                                               f"excluded bound above its start")
        last: bytes | None = None
        for o in sub.output_ssts:
            first, end = o.info.first_entry, o.info.last_entry
            if first is None or end is None:
                continue
            if (lo is not None and first < lo) or (hi is not None and end >= hi) or (last is not None and first < last):
                raise CorruptionError(where, None, f"compaction {c.id} subcompaction {i}: output {o.id} [{first!r}, "
                                                   f"{end!r}] lies outside its range [{lo!r}, {hi!r}) or out of order")
            last = end
        prev_hi = hi


def check_compactions(value: CompactionsV1, where: str) -> None:
    """Refuse a ``.compactions`` value we must not act on (see the module docstring)."""
    for c in value.recent_compactions:
        if c.worker is not None and c.worker.worker_id is not None:
            parse_worker_id(c.worker.worker_id, where, c.id)
        check_subcompactions(c, where)


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def find(value: CompactionsV1, cid: ULID) -> Compaction | None:
    for c in value.recent_compactions:
        if c.id == cid:
            return c
    return None


def replace(value: CompactionsV1, new: Compaction) -> CompactionsV1:
    """``value`` with the entry of ``new.id`` replaced (a finished one moves last: the trim keeps
    the most recently finished)."""
    rest = tuple(c for c in value.recent_compactions if c.id != new.id)
    if new.status in TERMINAL:
        return attrs.evolve(value, recent_compactions=rest + (new,))
    out = tuple(new if c.id == new.id else c for c in value.recent_compactions)
    return attrs.evolve(value, recent_compactions=out)


def trim(value: CompactionsV1) -> CompactionsV1:
    """Keep every active compaction and the most recently finished one (RFC 002, for GC)."""
    finished = [c for c in value.recent_compactions if c.status in TERMINAL]
    drop = {c.id for c in finished[:-1]}
    return attrs.evolve(value, recent_compactions=tuple(c for c in value.recent_compactions if c.id not in drop))


def _transition(c: Compaction, to: S, **changes) -> Compaction:
    if (c.status, to) not in LEGAL:
        raise LifecycleError(f"compaction {c.id}: {c.status.name} -> {to.name} is not a lifecycle transition")
    return attrs.evolve(c, status=to, **changes)


def outputs_in_order(c: Compaction) -> tuple[CompactedSsTable, ...]:
    """All outputs of a job's ranges, concatenated in range order."""
    if c.ctx is None or not c.ctx.subcompactions:
        return c.output_ssts
    return tuple(o for sub in c.ctx.subcompactions for o in sub.output_ssts)


# ---------------------------------------------------------------------------------------------
# Coordinator transitions
# ---------------------------------------------------------------------------------------------


def coordinator_start(value: CompactionsV1, epoch: int) -> CompactionsV1:
    """A starting coordinator: its epoch; Scheduled back to Submitted with no worker (it
    revalidates them); Running left alone (their workers may be alive); trimmed."""
    out = []
    for c in value.recent_compactions:
        if c.status is S.SCHEDULED:
            c = _transition(c, S.SUBMITTED, worker=None)
        out.append(c)
    return trim(CompactionsV1(epoch, tuple(out)))


def _stale(c: Compaction, now_ms: int, timeout_ms: int) -> bool:
    return c.status is S.RUNNING and (c.worker is None or c.worker.worker_id is None
                                      or now_ms - c.worker.last_heartbeat_ms > timeout_ms)


def reclaim(value: CompactionsV1, now_ms: int, timeout_ms: int) -> tuple[CompactionsV1, list[ULID]]:
    """Running jobs whose heartbeat is older than ``timeout_ms`` (or with no worker) back to
    Scheduled with no worker, keeping ``ctx`` and outputs (the next worker resumes them).
    Nothing stale (nearly every tick of the coordinator): ``value`` itself, no copy made."""
    jobs = value.recent_compactions
    if not any(_stale(c, now_ms, timeout_ms) for c in jobs):
        return value, []
    reclaimed = []
    out = []
    for c in jobs:
        if _stale(c, now_ms, timeout_ms):
            c = _transition(c, S.SCHEDULED, worker=None)
            reclaimed.append(c.id)
        out.append(c)
    return attrs.evolve(value, recent_compactions=tuple(out)), reclaimed


def set_status(value: CompactionsV1, cid: ULID, to: S, **changes) -> CompactionsV1:
    """A coordinator transition of one job (validation, commit, unschedule)."""
    c = find(value, cid)
    if c is None:
        raise LifecycleError(f"compaction {cid} is not in .compactions")
    return trim(replace(value, _transition(c, to, **changes)))


# ---------------------------------------------------------------------------------------------
# Worker transitions (each re-checks ownership)
# ---------------------------------------------------------------------------------------------


def _owned(value: CompactionsV1, cid: ULID, worker_id: str) -> Compaction:
    c = find(value, cid)
    if c is None:
        raise NotOwnerError(f"compaction {cid} is gone from .compactions")
    if c.status is not S.RUNNING or c.worker is None or c.worker.worker_id != worker_id:
        owner = c.worker.worker_id if c.worker is not None else None
        raise NotOwnerError(f"compaction {cid} is {c.status.name} owned by {owner}, not by worker {worker_id}")
    return c


def claim(value: CompactionsV1, cid: ULID, worker_id: str, now_ms: int) -> CompactionsV1:
    """Scheduled with no worker -> Running(worker_id, heartbeat now)."""
    c = find(value, cid)
    if c is None or c.status is not S.SCHEDULED or (c.worker is not None and c.worker.worker_id is not None):
        raise NotOwnerError(f"compaction {cid} is no longer Scheduled and free")
    return replace(value, _transition(c, S.RUNNING, worker=WorkerSpec(worker_id, now_ms)))


def heartbeat(value: CompactionsV1, cid: ULID, worker_id: str, now_ms: int,
              ctx: TieredCompactionContext | None = None) -> CompactionsV1:
    """The owner's heartbeat, with its progress (``ctx``) when given: the only writer of progress."""
    c = _owned(value, cid, worker_id)
    changes: dict = {"worker": WorkerSpec(worker_id, now_ms)}
    if ctx is not None:
        changes["ctx"] = ctx
        changes["output_ssts"] = outputs_in_order(attrs.evolve(c, ctx=ctx))
    return replace(value, attrs.evolve(c, **changes))


def finish(value: CompactionsV1, cid: ULID, worker_id: str, now_ms: int,
           ctx: TieredCompactionContext) -> CompactionsV1:
    """Running (ours) -> Compacted with every range's outputs concatenated in range order and
    ``ctx`` cleared (as the official worker writes it)."""
    c = _owned(value, cid, worker_id)
    return replace(value, _transition(c, S.COMPACTED, output_ssts=outputs_in_order(attrs.evolve(c, ctx=ctx)),
                                      ctx=None, worker=WorkerSpec(worker_id, now_ms)))


def release(value: CompactionsV1, cid: ULID, worker_id: str) -> CompactionsV1:
    """Running (ours) -> Scheduled with no worker (shutdown, or the sources changed after the claim)."""
    c = _owned(value, cid, worker_id)
    return replace(value, _transition(c, S.SCHEDULED, worker=None))


def with_ranges(ctx: TieredCompactionContext | None, ranges: Iterable[BytesRange],
                retention_min_seq: int) -> TieredCompactionContext:
    """A job's ``ctx`` for its planned ranges (keeping recorded progress when it has some)."""
    if ctx is not None and ctx.subcompactions:
        return ctx
    return TieredCompactionContext(tuple(Subcompaction(r, ()) for r in ranges), retention_min_seq)


def ulid_not_before(runtime: "Runtime", floor_ms: int) -> ULID:
    """A fresh ULID whose timestamp is not below ``floor_ms`` (the ULID rules: a job id is not
    older than the newest existing one; an output is not older than its job). A clock behind
    the floor (skew) borrows the floor's millisecond, keeping the fresh random part."""
    u = runtime.new_ulid()
    if u.milliseconds >= floor_ms:
        return u
    return ULID.from_bytes(floor_ms.to_bytes(6, "big") + u.bytes[6:])


Transition = Callable[[CompactionsV1], "CompactionsV1 | None"]
