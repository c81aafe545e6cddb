"""What GC must keep: pure functions of manifests, the compactions file and listings.

Every rule here is one line of RFC 000 § "Garbage Collector", RFC 002 § "Garbage Collection
Integration" or RFC 004 § "Advancing Boundaries", kept apart from the I/O of
:mod:`slatedb.gc.collector` so that each can be read (and tested) against its source.
"""

from __future__ import annotations

from typing import Iterable

from ulid import ULID

from slatedb.format.types import (
    CompactionsV1,
    CompactionStatus,
    ManifestV2,
    SortedRunV2,
)
from slatedb.manifest.sst_ids import newest_l0_ms  # noqa: F401 - re-exported: GC's L0 cutoff
from slatedb.objstore.base import ObjectMeta

#: Compactions whose outputs may still be landing (RFC 002 lifecycle: Submitted ⇄ Running).
#: Submitted, Scheduled, Running or Compacted: the job may still commit (its recorded outputs,
#: including every subcompaction's, and its inputs stay).
IN_FLIGHT = frozenset({CompactionStatus.SUBMITTED, CompactionStatus.SCHEDULED, CompactionStatus.RUNNING,
                       CompactionStatus.COMPACTED})


def older_than(meta: ObjectMeta, now_ms: int, min_age_s: float) -> bool:
    """RFC 000/004 "older than ``min_age``": the object's ``last_modified`` is more than
    ``min_age_s`` before ``now_ms`` (strictly: an object written this very millisecond is never
    old enough, even with ``min_age_s = 0``)."""
    return now_ms - meta.last_modified_ms > min_age_s * 1000


def desired_boundary(listing: Iterable[tuple[int, ObjectMeta]], now_ms: int, min_age_s: float) -> int | None:
    """RFC 004 "Advancing Boundaries": drop the most recent file (it is always kept), keep the
    files older than ``min_age``, take their maximum id. None: nothing old enough (skip)."""
    files = sorted(listing, key=lambda f: f[0])
    old = [i for i, meta in files[:-1] if older_than(meta, now_ms, min_age_s)]
    return max(old) if old else None


def _runs_sst_ids(runs: Iterable[SortedRunV2]) -> set[ULID]:
    return {v.sst_id for r in runs for v in r.ssts}


#: manifest_sst_ids of the last manifests asked about, by id (the manifest kept in the entry, so
#: its id stays its own): GC asks at every pass about every pinned manifest, the same immutable
#: values (and a simulated world's checkers at every landing: 94% of the calls in gc seeds were
#: repeats). Cleared when full.
_SST_IDS: dict[int, tuple[ManifestV2, frozenset[ULID]]] = {}
_MAX_SST_IDS = 512


def manifest_sst_ids(m: ManifestV2) -> set[ULID]:
    """Every physical SST a manifest references: its ``ssts`` table and every view of L0, the
    sorted runs and the segments (they should agree; the union costs nothing and errs on keeping).
    A new set each call (callers may change it)."""
    known = _SST_IDS.get(id(m))
    if known is not None and known[0] is m:
        return set(known[1])
    ids = _manifest_sst_ids(m)
    if len(_SST_IDS) >= _MAX_SST_IDS:
        _SST_IDS.clear()
    _SST_IDS[id(m)] = (m, frozenset(ids))
    return ids


def _manifest_sst_ids(m: ManifestV2) -> set[ULID]:
    ids = {s.id for s in m.ssts}
    ids |= {v.sst_id for v in m.l0}
    ids |= _runs_sst_ids(m.compacted)
    for seg in m.segments:
        ids |= {v.sst_id for v in seg.l0}
        ids |= _runs_sst_ids(seg.compacted)
    return ids


def wal_range(m: ManifestV2) -> range:
    """RFC 000 ``referenced_wal(n)``: the WAL ids a reader of manifest ``m`` replays,
    ``(replay_after_wal_id, wal_id_last_seen]``."""
    return range(m.replay_after_wal_id + 1, m.wal_id_last_seen + 1)


def wal_kept(wal_id: int, latest: ManifestV2, pinned: Iterable[ManifestV2]) -> bool:
    """RFC 000 "Clean up WAL SSTs": W = every ``referenced_wal(n)`` for n in M, and every id above
    the latest manifest's ``replay_after_wal_id`` (not yet in L0: the writer replays them)."""
    if wal_id > latest.replay_after_wal_id:
        return True
    return any(wal_id in wal_range(m) for m in pinned)


def in_flight_sst_ids(compactions: CompactionsV1 | None, manifests: Iterable[ManifestV2]) -> set[ULID]:
    """RFC 002 § "Garbage Collection Integration" (issue #604): the SSTs of every in-flight
    compaction (Submitted, Scheduled, Running, Compacted), its outputs written so far (``output_ssts`` and the subcompactions'
    outputs) and its inputs (L0 views and sorted runs, resolved through ``manifests``)."""
    if compactions is None:
        return set()
    manifests = tuple(manifests)
    ids: set[ULID] = set()
    for c in compactions.recent_compactions:
        if c.status not in IN_FLIGHT:
            continue
        ids |= {o.id for o in c.output_ssts}
        if c.ctx is not None:
            for sub in c.ctx.subcompactions:
                ids |= {o.id for o in sub.output_ssts}
        spec = c.spec
        view_ids = set(spec.l0_view_ids)
        run_ids = set(spec.sorted_runs)
        for m in manifests:
            views = list(m.l0) + [v for seg in m.segments for v in seg.l0]
            ids |= {v.sst_id for v in views if v.id in view_ids}
            runs = list(m.compacted) + [r for seg in m.segments for r in seg.compacted]
            ids |= _runs_sst_ids(r for r in runs if r.id in run_ids)
    return ids


def compaction_low_watermark_ms(compactions: CompactionsV1 | None) -> int:
    """The ULID time of the oldest compaction in the compactions file (in flight, or the most
    recently finished one the compactor keeps for GC). Outputs of any compaction still landing,
    or scheduled after the file was read, are minted after it. 0 (nothing may go) when there
    is no compactions file or it lists none: no compactor state to reason from."""
    if compactions is None or not compactions.recent_compactions:
        return 0
    return min(c.id.milliseconds for c in compactions.recent_compactions)


def sst_ulid_cutoff_ms(latest: ManifestV2, compactions: CompactionsV1 | None) -> int:
    """SSTs whose ULID time is at or after this may be uploads not yet committed (a fresh L0, a
    compaction output not yet recorded): they are kept whatever their age. This adds to
    ``min_age`` (the official engine does the same), it never replaces it: ULID times come from
    the writers' clocks."""
    return min(newest_l0_ms(latest), compaction_low_watermark_ms(compactions))
