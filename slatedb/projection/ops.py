"""RFC 000 "Manifest Projection and Union" as pure functions over ``ManifestV2`` (no I/O);
spec/protocols/projection-union.md, ids at the lines.

:func:`project` (steps P1-P5 of the spec page):

P1. Copy the manifest.
P2. Each L0 view on its own: new visible range = its effective range ∩ the projection range.
P3. Each sorted-run view: its range is ``[its effective start, the next view's effective
    start]`` (the next start included: a key's versions may span two SSTs of a run, READ-7),
    the last one its effective range; ∩ the view's own effective range (so that a view never
    widens past what it showed, PROJ-2, even across a gap left by an earlier union); ∩ the
    projection range.
P4. Keep the views whose intersection holds a physical key, with ``visible_range`` = the
    intersection; drop the others; drop runs left empty, keeping the other runs' ids; drop
    SSTs no view references.
P5. Remove dropped SST ids from ``external_dbs``; remove entries left empty.

:func:`union` (steps U1-U4):

U1. Each source's key range = the hull of its views' effective ranges, ∩ its given range
    (the source is projected onto it first). Sort by start; overlapping ranges:
    :class:`InvalidUnionError`; given ranges must also be adjacent (no gap).
U2. ``external_dbs``: every source's own entries plus one for the source itself (its owned
    SSTs, when it owns any), merged by ``(path, source_checkpoint_id)`` with their ``sst_ids``
    unioned; a new ``final_checkpoint_id`` for every entry.
U3. SSTs: one physical SST (same id and same location) appears once; two different SSTs with
    one id: :class:`SstIdCollisionError` (decision in docs/rescaling.md). L0 views in an order
    that keeps every source's order (views of one SST from several sources placed together,
    adjacent ones merged); sorted runs grouped by id across sources (sources are disjoint, so a
    group is a valid run), adjacent views of one SST at source boundaries merged; view ids kept
    unless two sources used one id for different views.
U4. ``last_l0_seq`` = the maximum (PROJ-3); epochs 0; no WAL; no checkpoints; ``initialized``
    false (the creator sets it once every final checkpoint exists).
"""

from __future__ import annotations

import uuid
from typing import Callable, Iterable, Sequence

import attrs
from ulid import ULID

from slatedb.lsm.view import UNBOUNDED, KeyBounds, bounds_of
from slatedb.errors import InvalidProjectionError, InvalidUnionError, SstIdCollisionError, UnionSetEmptyError
from slatedb.format.types import (
    CompactedSsTableV2,
    CompactedSsTableView,
    ExternalDb,
    ManifestV2,
    SortedRunV2,
)
from slatedb.runtime import switches

from .ranges import KeyRange, as_bounds, bytes_range, effective_bounds, hull, overlaps, physical_bounds, start_cmp_key

#: Catalogued bugs (sim/scenarios/catalogue.py) these functions can re-introduce when the caller passes them.
BUG_PROJECT_WIDENS = switches.PROJECTION_WIDENS_VIEW
BUG_UNION_SEQ_FIRST = switches.UNION_SEQ_NOT_MAX
BUG_UNION_EXTERNAL_DUP = switches.UNION_EXTERNAL_DBS_NOT_MERGED


# ---------------------------------------------------------------------------------------------
# Projection


def _sst_map(m: ManifestV2) -> dict[ULID, CompactedSsTableV2]:
    return {s.id: s for s in m.ssts}


def _narrow(view: CompactedSsTableView, sst: CompactedSsTableV2, within: KeyBounds,
            bugs: frozenset[str]) -> CompactedSsTableView | None:
    """The view restricted to ``within`` (None when no physical key of the SST is left: the
    effective range is inside the physical one, so that is when the restriction is empty)."""
    if switches.PROJECTION_WIDENS_VIEW in bugs:  # catalogued bug (sim/scenarios/catalogue.py)
        return _bug_widened(view, sst, within)
    new = effective_bounds(view, sst).intersect(within)
    if new.is_empty():
        return None
    return attrs.evolve(view, visible_range=bytes_range(new))


def _bug_widened(view: CompactedSsTableView, sst: CompactedSsTableV2, within: KeyBounds) -> CompactedSsTableView | None:
    """Catalogued bug ``projection-widens-view``: the view's visible range becomes all of
    ``within``, past the view's own range (dropped only when no physical key is in it)."""
    if within.is_empty() or physical_bounds(sst).intersect(within).is_empty():
        return None
    return attrs.evolve(view, visible_range=bytes_range(within))


def project(manifest: ManifestV2, key_range: KeyRange | KeyBounds | None,
            bugs: frozenset[str] = frozenset()) -> ManifestV2:
    """The projection of ``manifest`` onto ``key_range`` (RFC 000 "Projection"; P1-P5)."""
    r = as_bounds(key_range)
    if manifest.segments:
        raise InvalidProjectionError("projection of a manifest with segments is not supported")
    ssts = _sst_map(manifest)
    # P2.
    l0 = tuple(v2 for v in manifest.l0 if (v2 := _narrow(v, ssts[v.sst_id], r, bugs)) is not None)
    # P3.
    runs = []
    for run in manifest.compacted:
        kept = []
        for i, v in enumerate(run.ssts):
            span = r
            if i + 1 < len(run.ssts):
                nxt = run.ssts[i + 1]
                nb = effective_bounds(nxt, ssts[nxt.sst_id])
                # Up to the next view's start *included*: a key's versions may span adjacent SSTs
                # of a run, the newer ones ending this one (READ-7), and a read of the key that
                # starts the next view reads this view first (SortedRunView.holding).
                span = span.intersect(KeyBounds(None, True, nb.lo, True))
            v2 = _narrow(v, ssts[v.sst_id], span, bugs)
            if v2 is not None:
                kept.append(v2)
        # P4: a run left empty goes; the others keep their ids.
        if kept:
            runs.append(SortedRunV2(run.id, tuple(kept)))
    return _with_views(manifest, l0, tuple(runs))


def referenced_sst_ids(m: ManifestV2) -> list[ULID]:
    """Every SST id the views of ``m`` reference, each once, L0 first."""
    seen: dict[ULID, None] = {}
    for v in m.l0:
        seen.setdefault(v.sst_id, None)
    for run in m.compacted:
        for v in run.ssts:
            seen.setdefault(v.sst_id, None)
    return list(seen)


def _with_views(m: ManifestV2, l0: tuple, runs: tuple) -> ManifestV2:
    """``m`` with these views; SSTs and ``external_dbs`` pruned to what they reference (P4, P5)."""
    out = attrs.evolve(m, l0=l0, compacted=runs)
    used = set(referenced_sst_ids(out))
    external = tuple(e2 for e in m.external_dbs
                     if (e2 := attrs.evolve(e, sst_ids=tuple(i for i in e.sst_ids if i in used))).sst_ids)
    return attrs.evolve(out, ssts=tuple(s for s in m.ssts if s.id in used), external_dbs=external)


def manifest_bounds(m: ManifestV2) -> KeyBounds | None:
    """The hull of the effective ranges of every view of ``m`` (None: no views)."""
    ssts = _sst_map(m)
    out: KeyBounds | None = None
    for v in list(m.l0) + [v for run in m.compacted for v in run.ssts]:
        b = effective_bounds(v, ssts[v.sst_id])
        out = b if out is None else hull(out, b)
    return out


def owned_sst_ids(m: ManifestV2) -> tuple[ULID, ...]:
    """SSTs stored under the database's own path: referenced and not in its ``external_dbs``."""
    external = {i for e in m.external_dbs for i in e.sst_ids}
    return tuple(i for i in referenced_sst_ids(m) if i not in external)


# ---------------------------------------------------------------------------------------------
# Union


@attrs.frozen
class UnionSource:
    """One input of :func:`union`: a source manifest (at its checkpoint), where the source lives
    (``path``, as the result's ``external_dbs`` will name it; the paths in ``manifest``'s own
    ``external_dbs`` must already be expressed the same way) and the checkpoint that pins it."""

    manifest: ManifestV2
    path: str
    checkpoint_id: uuid.UUID
    key_range: KeyRange | None = None


def _source_ranges(sources: Sequence[UnionSource], ranges_given: bool) -> list[tuple[UnionSource, KeyBounds | None]]:
    out = []
    for s in sources:
        b = manifest_bounds(s.manifest)
        if ranges_given:
            given = as_bounds(s.key_range)
            b = given if b is None else b.intersect(given)
            out.append((s, given))
        else:
            out.append((s, b))
    return out


def _check_disjoint(ordered: list[tuple[UnionSource, KeyBounds | None]], ranges_given: bool) -> None:
    """U1: sorted, pairwise disjoint; adjacent when the caller gave the ranges."""
    with_range = [(s, b) for s, b in ordered if b is not None]
    for (s1, b1), (s2, b2) in zip(with_range, with_range[1:]):
        if overlaps(b1, b2):
            raise InvalidUnionError(f"clone sources have overlapping key ranges: {s1.path} {b1} and {s2.path} {b2}")
        if ranges_given and not (b1.hi is not None and b2.lo is not None and b1.hi == b2.lo
                                 and b1.hi_inclusive != b2.lo_inclusive):
            raise InvalidUnionError(f"the given ranges of {s1.path} ({b1}) and {s2.path} ({b2}) are not adjacent")


def union(sources: Sequence[UnionSource], ranges: Sequence[KeyRange] | None = None, *,
          new_uuid: Callable[[], uuid.UUID], new_ulid: Callable[[], ULID],
          bugs: frozenset[str] = frozenset()) -> ManifestV2:
    """The union of ``sources`` (RFC 000 "Union"; U1-U4). ``ranges`` (one per source, or set on
    each :class:`UnionSource`) project each source first and must be adjacent. ``new_uuid`` and
    ``new_ulid`` supply the fresh final checkpoint ids and (rarely) view ids."""
    if not sources:
        raise UnionSetEmptyError()
    if ranges is not None:
        if len(ranges) != len(sources):
            raise InvalidUnionError(f"{len(ranges)} ranges for {len(sources)} sources")
        sources = [attrs.evolve(s, key_range=r) for s, r in zip(sources, ranges)]
    ranges_given = any(s.key_range is not None for s in sources)
    if ranges_given and not all(s.key_range is not None for s in sources):
        raise InvalidUnionError("give a range for every source or for none")
    paths = [s.path for s in sources]
    if len(set(paths)) != len(paths):
        raise InvalidUnionError(f"a source is named twice: {paths}")
    for s in sources:
        if s.manifest.segments:
            raise InvalidUnionError(f"source {s.path} has segments, which this implementation does not union")
    if ranges_given:
        sources = [attrs.evolve(s, manifest=project(s.manifest, s.key_range, bugs)) for s in sources]
    # U1 (a source with no views sorts as one starting at the empty key, included; stable).
    ordered = sorted(_source_ranges(sources, ranges_given),
                     key=lambda sb: start_cmp_key(KeyBounds(b"") if sb[1] is None else sb[1]))
    _check_disjoint(ordered, ranges_given)
    srcs = [s for s, _ in ordered]
    # U3: SSTs, once each; a second physical SST under one id is a collision.
    where: dict[ULID, str] = {}
    ssts: dict[ULID, CompactedSsTableV2] = {}
    for s in srcs:
        ext = {i: e.path for e in s.manifest.external_dbs for i in e.sst_ids}
        for sst in s.manifest.ssts:
            loc = ext.get(sst.id, s.path)
            if sst.id in where and (where[sst.id] != loc or ssts[sst.id].info != sst.info):
                raise SstIdCollisionError(
                    f"SST {sst.id} of {s.path} (stored in {loc}) and of another source (stored in {where[sst.id]})"
                    " are different objects with one id; the 0.17 format cannot tell them apart")
            where.setdefault(sst.id, loc)
            ssts.setdefault(sst.id, sst)
    l0 = _union_l0(srcs, ssts)
    runs = _union_runs(srcs, ssts)
    l0, runs = _unique_view_ids(l0, runs, new_ulid)
    # U2.
    external = _merge_external(srcs, new_uuid, bugs)
    # U4.
    seq = srcs[0].manifest.last_l0_seq if switches.UNION_SEQ_NOT_MAX in bugs else max(s.manifest.last_l0_seq for s in srcs)
    merged = ManifestV2(
        external_dbs=external,
        initialized=False,
        writer_epoch=0,
        compactor_epoch=0,
        ssts=tuple(ssts.values()),
        last_l0_clock_tick=max(s.manifest.last_l0_clock_tick for s in srcs),
        last_l0_seq=seq,
    )
    return _with_views(merged, l0, runs)


def _merge_adjacent(views: list[CompactedSsTableView], ssts: dict[ULID, CompactedSsTableV2]) -> list[CompactedSsTableView]:
    """Views sorted by start (of one SST for L0, of one run id across the sources for the
    runs): chains of adjacent views of one SST become one view."""
    out: list[CompactedSsTableView] = []
    for v in views:
        if out:
            prev = out[-1]
            pb, vb = bounds_of(prev.visible_range), bounds_of(v.visible_range)
            if prev.sst_id == v.sst_id and pb.hi is not None and vb.lo is not None and pb.hi == vb.lo \
                    and pb.hi_inclusive != vb.lo_inclusive:
                out[-1] = attrs.evolve(prev, visible_range=bytes_range(hull(pb, vb)))
                continue
        out.append(v)
    return out


def _union_l0(srcs: list[UnionSource], ssts: dict[ULID, CompactedSsTableV2]) -> tuple[CompactedSsTableView, ...]:
    """L0 of the union. Views of different sources cover disjoint keys, so only each source's
    own order matters for reads. When every source lists each SST at most once and the
    sources' orders agree (no cycle), the SSTs are laid out in one order that extends every
    source's (topological, ties by first appearance) and the views of one SST sit together,
    adjacent ones merged; otherwise the sources' lists are concatenated."""
    lists = [list(s.manifest.l0) for s in srcs]
    if any(len({v.sst_id for v in lst}) != len(lst) for lst in lists):
        return tuple(v for lst in lists for v in lst)
    first_seen: dict[ULID, int] = {}
    succ: dict[ULID, set[ULID]] = {}
    indeg: dict[ULID, int] = {}
    for lst in lists:
        for v in lst:
            first_seen.setdefault(v.sst_id, len(first_seen))
            succ.setdefault(v.sst_id, set())
            indeg.setdefault(v.sst_id, 0)
        for a, b in zip(lst, lst[1:]):
            if b.sst_id not in succ[a.sst_id]:
                succ[a.sst_id].add(b.sst_id)
                indeg[b.sst_id] += 1
    order: list[ULID] = []
    ready = sorted((i for i, d in indeg.items() if d == 0), key=first_seen.__getitem__)
    while ready:
        n = ready.pop(0)
        order.append(n)
        for m in succ[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
        ready.sort(key=first_seen.__getitem__)
    if len(order) != len(indeg):  # the sources disagree on the order of two SSTs
        return tuple(v for lst in lists for v in lst)
    by_sst: dict[ULID, list[CompactedSsTableView]] = {}
    for lst in lists:  # sources are in key order, so each SST's views come sorted by start
        for v in lst:
            by_sst.setdefault(v.sst_id, []).append(v)
    return tuple(v for sid in order for v in _merge_adjacent(by_sst[sid], ssts))


def _union_runs(srcs: list[UnionSource], ssts: dict[ULID, CompactedSsTableV2]) -> tuple[SortedRunV2, ...]:
    """Sorted runs of the union: runs with one id from different (disjoint, key-ordered)
    sources form one run, which keeps every source's run order when each source lists its runs
    by strictly descending id (the compactor's convention); otherwise all runs are copied and
    renumbered in source order."""
    descending = all(all(a.id > b.id for a, b in zip(s.manifest.compacted, s.manifest.compacted[1:])) for s in srcs)
    if descending:
        groups: dict[int, list[CompactedSsTableView]] = {}
        for s in srcs:
            for run in s.manifest.compacted:
                groups.setdefault(run.id, []).extend(run.ssts)
        return tuple(SortedRunV2(rid, tuple(_merge_adjacent(groups[rid], ssts)))
                     for rid in sorted(groups, reverse=True))
    all_runs = [run for s in srcs for run in s.manifest.compacted]
    n = len(all_runs)
    return tuple(SortedRunV2(n - 1 - i, run.ssts) for i, run in enumerate(all_runs))


def _unique_view_ids(l0: tuple, runs: tuple, new_ulid: Callable[[], ULID]) -> tuple[tuple, tuple]:
    """A view id used by two views (one view projected into two sources and not merged) gets
    a fresh id for every use after the first."""
    seen: set[ULID] = set()

    def fix(v: CompactedSsTableView) -> CompactedSsTableView:
        if v.id in seen:
            v = attrs.evolve(v, id=new_ulid())
        seen.add(v.id)
        return v

    l0 = tuple(fix(v) for v in l0)
    runs = tuple(SortedRunV2(r.id, tuple(fix(v) for v in r.ssts)) for r in runs)
    return l0, runs


def _merge_external(srcs: list[UnionSource], new_uuid: Callable[[], uuid.UUID],
                    bugs: frozenset[str]) -> tuple[ExternalDb, ...]:
    """U2: merge by ``(path, source_checkpoint_id)``; new final checkpoint ids."""
    entries: list[ExternalDb] = []
    for s in srcs:
        entries.extend(s.manifest.external_dbs)
        owned = owned_sst_ids(s.manifest)
        if owned:
            entries.append(ExternalDb(path=s.path, source_checkpoint_id=s.checkpoint_id, sst_ids=owned))
    merged: dict[tuple, list] = {}
    for i, e in enumerate(entries):
        key = (i,) if switches.UNION_EXTERNAL_DBS_NOT_MERGED in bugs else (e.path, e.source_checkpoint_id)
        if key not in merged:
            merged[key] = [e, dict.fromkeys(e.sst_ids)]
        else:
            merged[key][1].update(dict.fromkeys(e.sst_ids))
    return tuple(ExternalDb(path=e.path, source_checkpoint_id=e.source_checkpoint_id,
                            final_checkpoint_id=new_uuid(), sst_ids=tuple(ids))
                 for e, ids in merged.values())


def union_key_ranges(ms: Iterable[ManifestV2]) -> list[KeyBounds | None]:
    """Each manifest's key range as :func:`union` computes it (for tools and tests)."""
    return [manifest_bounds(m) for m in ms]


__all__ = [
    "UnionSource", "project", "union", "manifest_bounds", "owned_sst_ids", "referenced_sst_ids",
    "union_key_ranges", "UNBOUNDED",
]


def referencing(m: ManifestV2, path: str, checkpoint_id: uuid.UUID, final_checkpoint_id: uuid.UUID | None = None) -> ManifestV2:
    """``m`` as a database elsewhere sees it: its own ``external_dbs`` plus one entry for the
    database itself (``path``, pinned by ``checkpoint_id``) listing the SSTs it owns. The
    pure part of a clone's first manifest (spec/protocols/clone.md step 4)."""
    owned = owned_sst_ids(m)
    extra = (ExternalDb(path=path, source_checkpoint_id=checkpoint_id, final_checkpoint_id=final_checkpoint_id,
                        sst_ids=owned),) if owned else ()
    return attrs.evolve(m, external_dbs=m.external_dbs + extra)
