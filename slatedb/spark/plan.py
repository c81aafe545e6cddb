"""Read splits planned from one pinned manifest (pure: no I/O).

Cut points are the first keys of the SSTs the manifest references (L0 views and every sorted
run's SSTs, narrowed by each view's visible range): between two consecutive cut points no SST
starts, so a split boundary never falls inside the key range of a sorted run's SST. Each SST's
estimated size is spread evenly over the elementary intervals its key range covers; consecutive
intervals are then bin-packed into splits of about ``split_size_bytes`` (Iceberg's planner does
the same with files). A database without SSTs (empty, or all its rows still in the WAL) is one
split. Splits are half-open key ranges ``[lo, hi)`` (None: unbounded) that tile the requested
bounds, so every key is read by exactly one task.
"""

from __future__ import annotations

from bisect import bisect_right

import attrs

from slatedb.lsm.view import KeyBounds, bounds_of
from slatedb.errors import InvalidArgumentError
from slatedb.format.types import ManifestV2, SsTableInfo

DEFAULT_SPLIT_SIZE_BYTES = 64 * 1024 * 1024


@attrs.frozen
class Split:
    """One read task's key range ``[lo, hi)``; ``size_bytes`` is the estimate it was packed by."""

    index: int
    lo: bytes | None
    hi: bytes | None
    size_bytes: int


@attrs.frozen
class SstSpan:
    """An SST view's keys as the planner sees them: ``[first, last]`` and an estimated size."""

    first: bytes
    last: bytes
    size_bytes: int


def estimated_size_bytes(info: SsTableInfo) -> int:
    """The object size implied by the info's offsets (the data blocks, filter, index, stats)."""
    return max(info.index_offset + info.index_len, info.stats_offset + info.stats_len,
               info.filter_offset + info.filter_len, 1)


def sst_spans(m: ManifestV2) -> list[SstSpan]:
    """Every SST view of ``m`` (L0 and sorted runs) clipped to its visible range; views whose
    range is empty are left out."""
    infos = {s.id: s.info for s in m.ssts}
    views = list(m.l0) + [v for run in m.compacted for v in run.ssts]
    spans: list[SstSpan] = []
    for v in views:
        info = infos.get(v.sst_id)
        if info is None or info.first_entry is None:
            continue
        first, last = info.first_entry, info.last_entry if info.last_entry is not None else info.first_entry
        b = bounds_of(v.visible_range)
        if b.lo is not None and b.lo > first:
            first = b.lo
        if b.hi is not None and b.hi < last:
            last = b.hi
        if first > last:
            continue
        spans.append(SstSpan(first, last, estimated_size_bytes(info)))
    return spans


def plan_splits(m: ManifestV2, bounds: KeyBounds, split_size_bytes: int = DEFAULT_SPLIT_SIZE_BYTES) -> list[Split]:
    """Splits of ``bounds`` (``lo`` inclusive, ``hi`` exclusive) for manifest ``m``."""
    if isinstance(split_size_bytes, bool) or not isinstance(split_size_bytes, int) or split_size_bytes <= 0:
        raise InvalidArgumentError(f"split_size_bytes must be a positive int, got {split_size_bytes!r}")
    lo, hi = bounds.lo, bounds.hi
    spans = [s for s in sst_spans(m)
             if (hi is None or s.first < hi) and (lo is None or s.last >= lo)]
    # Cut points strictly inside the bounds: interval i is [cuts[i-1], cuts[i]).
    cuts = sorted({s.first for s in spans if (lo is None or s.first > lo) and (hi is None or s.first < hi)})
    if not cuts:
        return [Split(0, lo, hi, sum(s.size_bytes for s in spans))]
    weights = [0.0] * (len(cuts) + 1)
    for s in spans:
        first_iv = bisect_right(cuts, s.first)  # the interval holding s.first
        last_iv = bisect_right(cuts, s.last)
        share = s.size_bytes / (last_iv - first_iv + 1)
        for i in range(first_iv, last_iv + 1):
            weights[i] += share
    splits: list[Split] = []
    start: bytes | None = lo
    acc = 0.0
    for i, w in enumerate(weights):
        acc += w
        if i < len(cuts) and acc >= split_size_bytes:
            splits.append(Split(len(splits), start, cuts[i], int(acc)))
            start, acc = cuts[i], 0.0
    splits.append(Split(len(splits), start, hi, int(acc)))
    return splits


def split_of(splits: list[Split], key: bytes) -> int:
    """The index of the split holding ``key`` (for tests and tools)."""
    return bisect_right([s.hi for s in splits[:-1]], key)
