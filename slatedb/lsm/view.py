"""The SST part of the read state: L0 views newest first, then sorted runs newest first.

Built from a manifest (:func:`build_view`); immutable once built, so a reader that took a
reference keeps a consistent picture while the writer and the manifest poller swap in new ones.
Each view of an SST may narrow it to a ``visible_range`` (clones, projections); lookups and
scans apply the range.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Awaitable, Callable, Iterable, Iterator

import attrs
from ulid import ULID

from slatedb.errors import CorruptionError
from slatedb.format.sst_reader import SstReader
from slatedb.format.layout import COMPACTED_DIR, manifest_key, sst_key  # noqa: F401 (re-exported)
from slatedb.format.types import BoundType, BytesRange, ManifestV2, SstType
from slatedb.runtime import Runtime, probes, switches


@attrs.frozen
class KeyBounds:
    """``lo``/``hi`` (None: unbounded) with inclusiveness; what a visible range allows."""

    lo: bytes | None = None
    lo_inclusive: bool = True
    hi: bytes | None = None
    hi_inclusive: bool = False

    def contains(self, key: bytes) -> bool:
        lo, hi = self.lo, self.hi
        if lo is not None and (key < lo or (key == lo and not self.lo_inclusive)):
            return False
        if hi is not None and (key > hi or (key == hi and not self.hi_inclusive)):
            return False
        return True

    def intersect(self, other: "KeyBounds") -> "KeyBounds":
        lo, lo_inc = self.lo, self.lo_inclusive
        if other.lo is not None and (lo is None or other.lo > lo or (other.lo == lo and not other.lo_inclusive)):
            lo, lo_inc = other.lo, other.lo_inclusive
        hi, hi_inc = self.hi, self.hi_inclusive
        if other.hi is not None and (hi is None or other.hi < hi or (other.hi == hi and not other.hi_inclusive)):
            hi, hi_inc = other.hi, other.hi_inclusive
        return KeyBounds(lo, lo_inc, hi, hi_inc)

    def is_empty(self) -> bool:
        if self.lo is None or self.hi is None:
            return False
        return self.lo > self.hi or (self.lo == self.hi and not (self.lo_inclusive and self.hi_inclusive))


UNBOUNDED = KeyBounds()


def bounds_of(visible_range: BytesRange | None) -> KeyBounds:
    if visible_range is None:
        return UNBOUNDED
    s, e = visible_range.start_bound, visible_range.end_bound
    lo = None if s.bound_type in (BoundType.UNBOUNDED, BoundType.UNKNOWN) else s.key
    hi = None if e.bound_type in (BoundType.UNBOUNDED, BoundType.UNKNOWN) else e.key
    return KeyBounds(lo, s.bound_type != BoundType.EXCLUDED, hi, e.bound_type == BoundType.INCLUDED)


@attrs.frozen(eq=False)
class SstHandle:
    """One view of a physical SST: its reader and the keys the view exposes."""

    view_id: ULID
    sst_id: ULID
    reader: SstReader
    bounds: KeyBounds

    @property
    def first_key(self) -> bytes:
        first = self.reader.info.first_entry or b""
        lo = self.bounds.lo
        return first if lo is None or lo < first else lo


@attrs.frozen(eq=False)
class SortedRunView:
    id: int
    ssts: tuple[SstHandle, ...]
    first_keys: tuple[bytes, ...]
    #: The reading process's runtime (None: a view built without one): counts the straddle probe
    #: and selects the catalogued bug of :meth:`holding`.
    runtime: Runtime | None = None

    def holding(self, key: bytes) -> tuple[SstHandle, ...]:
        """The SSTs of the run whose key range may hold ``key``, in read order (an earlier SST
        holds the newer versions): one, unless ``key`` starts an SST, whose predecessors may then
        end with it. The official compactor cuts an output SST after any row, so a key's versions
        may span adjacent SSTs of a run (READ-7); ours does with ``cut_after_any_row``."""
        first_keys = self.first_keys
        i = bisect_right(first_keys, key) - 1
        if i < 0:
            return ()
        if i == 0 or first_keys[i] != key:
            return (self.ssts[i],)
        j = i
        while j > 0 and first_keys[j] == key:
            j -= 1
        rt = self.runtime
        if rt is None:
            return self.ssts[j:i + 1]
        if self.ssts[j].reader.info.last_entry == key:
            rt.probe(probes.READ_RUN_STRADDLE)
        spanning = _bug_later_sst_only if switches.STRADDLE_LATER_SST_ONLY in rt.bugs else _spanning
        return spanning(self.ssts, j, i)


def _spanning(ssts: tuple[SstHandle, ...], j: int, i: int) -> tuple[SstHandle, ...]:
    """SSTs ``j`` (the last starting before the key, which may end with it) to ``i``."""
    return ssts[j:i + 1]


def _bug_later_sst_only(ssts: tuple[SstHandle, ...], j: int, i: int) -> tuple[SstHandle, ...]:
    """Catalogued bug ``straddle-later-sst-only`` (sim/scenarios/catalogue.py): only the SST the key
    starts, as if a key's versions never spanned two SSTs: the newer versions at the end of the
    SST before it are not read."""
    return ssts[i:i + 1]


@attrs.frozen(eq=False)
class LsmView:
    manifest_id: int
    l0: tuple[SstHandle, ...] = ()
    runs: tuple[SortedRunView, ...] = ()
    #: No SST of the view holds a row above this seq: the manifest's ``last_l0_seq`` (DUR-2;
    #: ``slatedb check`` holds every manifest to it). A scan at or above it needs no block's
    #: highest seq to take the block's rows as columns. None: not known.
    seq_ceiling: int | None = None

    #: Every view covers its whole SST (no clone or projection narrows one): candidates need
    #: no bounds check.
    whole: bool = attrs.field(init=False, default=False)
    #: ``(first key, last key, handle)`` of each L0 view when there are several and every one
    #: records both keys (None otherwise): a point get passes over the L0 SSTs whose key range
    #: leaves the key out with two comparisons each, not a cache lookup and a filter probe
    #: (L0 SSTs of a sequential load are disjoint: a get then consults one of them).
    l0_ranges: tuple[tuple[bytes, bytes, SstHandle], ...] | None = attrs.field(init=False, default=None)
    #: When those ranges are pairwise disjoint (the L0 SSTs of a sequential load): their first
    #: keys in key order, and each one's ``(last key, handle)`` in that order. A get then finds
    #: its one L0 candidate by bisection instead of testing every range (None otherwise).
    l0_disjoint: tuple[list[bytes], list[tuple[bytes, SstHandle]]] | None = attrs.field(init=False, default=None)
    #: The one SST's ``lookup_cached`` when the view is a single whole L0 SST and no sorted run
    #: (a reopened database after a load): a get's only candidate, without a candidates call.
    sole_lookup: Callable[..., object] | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        whole = all(h.bounds is UNBOUNDED for h in self.l0) and all(
            h.bounds is UNBOUNDED for run in self.runs for h in run.ssts)
        object.__setattr__(self, "whole", whole)
        if whole and len(self.l0) == 1 and not self.runs:
            object.__setattr__(self, "sole_lookup", getattr(self.l0[0].reader, "lookup_cached", None))
        infos = [getattr(h.reader, "info", None) for h in self.l0]
        if whole and len(infos) > 1 and all(
                i is not None and i.sst_type == SstType.COMPACTED and i.first_entry is not None
                and i.last_entry is not None for i in infos):
            ranges = tuple((i.first_entry, i.last_entry, h) for i, h in zip(infos, self.l0))  # type: ignore[union-attr]
            object.__setattr__(self, "l0_ranges", ranges)
            by_first = sorted(ranges, key=lambda r: r[0])
            if all(a[1] < b[0] for a, b in zip(by_first, by_first[1:])):
                object.__setattr__(self, "l0_disjoint", ([r[0] for r in by_first], [(r[1], r[2]) for r in by_first]))

    def point_candidates(self, key: bytes) -> Iterable[SstHandle]:
        """SSTs that may hold ``key``, in read order (L0 newest first, then runs newest first)."""
        if self.whole:
            disjoint = self.l0_disjoint
            if disjoint is not None:
                i = bisect_right(disjoint[0], key) - 1
                l0 = [disjoint[1][i][1]] if i >= 0 and key <= disjoint[1][i][0] else []
            else:
                ranges = self.l0_ranges
                l0 = self.l0 if ranges is None else [h for lo, hi, h in ranges if lo <= key <= hi]
            if not self.runs:
                return l0  # the common shape of a point get: no generator to build
            out = list(l0)
            for run in self.runs:  # run.holding(key), its usual one-SST answer inlined
                first_keys = run.first_keys
                i = bisect_right(first_keys, key) - 1
                if i < 0:
                    continue
                if i == 0 or first_keys[i] != key:
                    out.append(run.ssts[i])
                else:
                    out.extend(run.holding(key))
            return out
        return self._bounded_candidates(key)

    def _bounded_candidates(self, key: bytes) -> Iterator[SstHandle]:
        for h in self.l0:
            b = h.bounds
            if b is UNBOUNDED or b.contains(key):
                yield h
        for run in self.runs:
            for h in run.holding(key):
                if h.bounds is UNBOUNDED or h.bounds.contains(key):
                    yield h

    @property
    def sst_ids(self) -> set[ULID]:
        ids = {h.sst_id for h in self.l0}
        for run in self.runs:
            ids.update(h.sst_id for h in run.ssts)
        return ids


EMPTY_VIEW = LsmView(manifest_id=0)

OpenReader = Callable[[ULID], Awaitable[SstReader]]


async def build_view(
    manifest_id: int, manifest: ManifestV2, readers: dict[ULID, SstReader], open_reader: OpenReader,
    runtime: Runtime | None = None,
) -> LsmView:
    """The view of ``manifest``, reusing ``readers`` and opening (and adding) missing ones
    (``runtime``: the reading process's, given to each sorted run's view)."""
    known = {s.id for s in manifest.ssts}

    def opened(view) -> SstHandle | None:
        """The handle of ``view`` when its SST's reader is open already (no coroutine made: most
        views of a new manifest are the last one's), else None."""
        if view.sst_id not in known:
            raise CorruptionError(manifest_key(manifest_id), None, f"view {view.id} names unknown SST {view.sst_id}")
        reader = readers.get(view.sst_id)
        if reader is None:
            return None
        return SstHandle(view.id, view.sst_id, reader, bounds_of(view.visible_range))

    async def handle(view) -> SstHandle:
        got = opened(view)
        if got is not None:
            return got
        reader = await open_reader(view.sst_id)
        readers[view.sst_id] = reader
        return SstHandle(view.id, view.sst_id, reader, bounds_of(view.visible_range))

    l0 = tuple([h if (h := opened(v)) is not None else await handle(v) for v in manifest.l0])
    runs = []
    for sr in manifest.compacted:
        handles = tuple([h if (h := opened(v)) is not None else await handle(v) for v in sr.ssts])
        runs.append(SortedRunView(sr.id, handles, tuple(h.first_key for h in handles), runtime))
    return LsmView(manifest_id, l0, tuple(runs), manifest.last_l0_seq)
