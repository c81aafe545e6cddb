"""The structural invariants of ``spec/protocols/`` that a stored database shows, each rule
naming its invariant id. Every rule reads a :class:`~slatedb.check.image.DbImage` (and, for SSTs,
WAL objects and external databases, the stores) and yields :class:`Finding` values; none writes.

| id | rule here |
|---|---|
| DESTROY-4 | objects exist but no manifest does |
| GC-2 | the latest manifest and every manifest an active checkpoint pins exists and decodes |
| GC-4 | every SST the latest manifest references exists and decodes (``--deep``: every block, the stats block included, rows in order) |
| CKPT-2 | the same for every manifest an active checkpoint pins |
| CKPT-3 | no active checkpoint that was made as a writer checkpoint outlives its writer's epoch |
| FENCE-1 | WAL ids contiguous from the replay point to the newest WAL object, each decoding |
| READ-2 | every WAL id in an active checkpoint's pinned range exists |
| BOUNDARY-1 | no manifest / ``.compactions`` id above the boundary and below the latest is missing |
| BOUNDARY-4 | each boundary file parses and lies below the latest id of its namespace |
| TRACK-1, TRACK-2 | each manifest's sequence tracker decodes, is in order with no seq above ``last_l0_seq``, and keeps the pairs of the manifest below it |
| FENCE-4, CFENCE-3, DUR-2, DUR-5 | epochs, replay point, ``wal_id_last_seen`` and ``last_l0_seq`` never move back over the manifests above the boundary; ``.compactions`` epoch not above the manifest's; (deep) no row above ``last_l0_seq`` in L0 or a sorted run, WAL seqs never decrease (DUR-2), no row to replay created before ``last_l0_clock_tick`` (DUR-5) |
| COMPACT-4 | ids unique; sorted runs' views in key order and non-overlapping (but for one key spanning two); (deep) rows in (key asc, seq desc) inside each compacted SST, within its first/last entry |
| GC-3 | outputs recorded by a Submitted/Running compaction exist |
| COMPACT-1 | the latest ``.compactions`` decodes |
| CLONE-1, CLONE-2, PROJ-5, PROJ-6 | every external database resolves, holds the final checkpoint (pinning an existing manifest that lists every SST of the entry) and every SST the entry lists; one entry per (path, source checkpoint); an SST listed under one path only |
"""

from __future__ import annotations

from typing import Iterable, Iterator

import attrs
from ulid import ULID

from slatedb.errors import CorruptionError, ObjectNotFoundError
from slatedb.format.layout import (
    COMPACTIONS_BOUNDARY_KEY,
    COMPACTIONS_DIR,
    COMPACTIONS_SUFFIX,
    MANIFEST_BOUNDARY_KEY,
    MANIFEST_DIR,
    MANIFEST_SUFFIX,
    WAL_DIR,
    WAL_SUFFIX,
    compactions_key,
    is_db_key,
    manifest_key,
    parse_id,
    sst_key,
    wal_key,
)
from slatedb.format import seq_tracker
from slatedb.format.sst import decode_all_blocks, decode_layout, decode_stats
from slatedb.format.sst_reader import read_layout
from slatedb.format.types import (
    BoundType,
    BytesRange,
    Checkpoint,
    CompactionStatus,
    CompactedSsTableView,
    ManifestV2,
    SsTableInfo,
    WriterCheckpoint,
)
from slatedb.format.wal_sst import decode_wal_sst
from slatedb.gc.retention import IN_FLIGHT, manifest_sst_ids
from slatedb.manifest.checkpoints import is_expired
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.url import db_url_candidates

from .image import DbImage, open_existing, read_manifest
from .report import Finding
from slatedb.redact import shown_url


def active(m: ManifestV2, now_s: int) -> list[Checkpoint]:
    return [c for c in m.checkpoints if not is_expired(c, now_s)]


# ---------------------------------------------------------------------------------------------
# Manifests, boundaries, history
# ---------------------------------------------------------------------------------------------


def manifest_present(img: DbImage) -> Iterator[Finding]:
    if not img.manifest_ids:
        own = [k for k in img.listing if is_db_key(k)]  # not: a database nested below, a user's file
        yield Finding("DESTROY-4", MANIFEST_DIR, f"{len(own)} object(s) of the database under the root but no "
                                                 f"manifest (e.g. {min(own)})")
    elif img.latest_error is not None:
        yield Finding("GC-2", manifest_key(img.latest_id), f"the latest manifest does not decode: {img.latest_error}")


def boundaries(img: DbImage) -> Iterator[Finding]:
    for key, ids, directory, name in ((MANIFEST_BOUNDARY_KEY, img.manifest_ids, MANIFEST_DIR, "manifest"),
                                      (COMPACTIONS_BOUNDARY_KEY, img.compactions_ids, COMPACTIONS_DIR, "compactions")):
        if key in img.boundary_errors:
            yield Finding("BOUNDARY-4", key, img.boundary_errors[key])
            continue
        b = img.boundaries.get(key)
        if b is None:
            continue
        latest = ids[-1] if ids else 0
        if b >= latest and (b > 0 or latest > 0):
            yield Finding("BOUNDARY-4", key, f"boundary {b} is at or above the latest {name} id {latest} "
                                             f"(GC never moves it past the latest file)")
        present = set(ids)
        suffix = MANIFEST_SUFFIX if name == "manifest" else COMPACTIONS_SUFFIX
        missing = [i for i in range(b + 1, latest) if i not in present]
        if missing:
            first = f"{directory}{missing[0]:020d}{suffix}"
            yield Finding("BOUNDARY-1", first, f"{len(missing)} {name} id(s) above the boundary {b} and below the "
                                               f"latest {latest} are missing (first {missing[0]})")


def history(img: DbImage) -> Iterator[Finding]:
    """FENCE-4, CFENCE-3, DUR-2 over the decodable manifests above the manifest boundary."""
    floor = img.boundary(MANIFEST_BOUNDARY_KEY)
    ids = sorted(i for i in img.manifests if i > floor)
    # No rule ties replay_after_wal_id to wal_id_last_seen within one manifest: the official 0.17
    # writer commits an L0 flush with replay_after_wal_id 2 over wal_id_last_seen 1 (its manifest 4
    # in tests/interop's txn.py program, seen in CI on 2026-11-26); each only never moves back.
    for a, b in zip(ids, ids[1:]):
        p, m = img.manifests[a], img.manifests[b]
        key = manifest_key(b)
        if m.writer_epoch < p.writer_epoch:
            yield Finding("FENCE-4", key, f"writer_epoch {m.writer_epoch} below manifest {a}'s {p.writer_epoch}")
        if m.compactor_epoch < p.compactor_epoch:
            yield Finding("CFENCE-3", key, f"compactor_epoch {m.compactor_epoch} below manifest {a}'s "
                                           f"{p.compactor_epoch}")
        for field in ("replay_after_wal_id", "wal_id_last_seen", "last_l0_seq"):
            if getattr(m, field) < getattr(p, field):
                yield Finding("DUR-2", key, f"{field} {getattr(m, field)} below manifest {a}'s {getattr(p, field)}")
    yield from _trackers(img, ids)
    if img.compactions is not None and img.latest is not None:
        if img.compactions.compactor_epoch > img.latest.compactor_epoch:
            yield Finding("CFENCE-3", compactions_key(img.compactions_ids[-1]),
                          f"compactor_epoch {img.compactions.compactor_epoch} above the latest manifest's "
                          f"{img.latest.compactor_epoch}")


def _trackers(img: DbImage, ids: list[int]) -> Iterator[Finding]:
    """TRACK-1 (each manifest's sequence tracker decodes, in order, no seq above its
    ``last_l0_seq``) and TRACK-2 (each keeps the pairs of the one below it)."""
    prev: seq_tracker.SequenceTracker | None = None
    prev_id = 0
    for mid in ids:
        key = manifest_key(mid)
        try:
            t = seq_tracker.decode(img.manifests[mid].sequence_tracker, key)
        except CorruptionError as e:
            yield Finding("TRACK-1", key, f"sequence tracker does not decode: {e}")
            prev = None
            continue
        problem = seq_tracker.order_problem(t, img.manifests[mid].last_l0_seq)
        if problem:
            yield Finding("TRACK-1", key, f"sequence tracker: {problem}")
        if prev is not None:
            problem = seq_tracker.successor_problem(prev, t)
            if problem:
                yield Finding("TRACK-2", key, f"sequence tracker against manifest {prev_id}'s: {problem}")
        prev, prev_id = t, mid


def checkpoints(img: DbImage, now_s: int) -> Iterator[Finding]:
    """GC-2 for pinned manifests; CKPT-3 for orphan writer checkpoints.

    A checkpoint was made as a writer checkpoint when the manifest it pins records it with
    ``WriterCheckpoint`` metadata (a writer adds its checkpoint in the very manifest the
    checkpoint pins). It belongs to the writer of that epoch; once the manifest's
    ``writer_epoch`` is past it (a newer writer opened) nothing will delete it, and if it never
    expires it pins its manifest, SSTs and WAL range forever and blocks a hard destroy. A
    rewrite by an engine that drops the metadata does not change what it was: the rule reads its
    provenance, so a user's checkpoint (added without writer metadata) is never taken for one."""
    m = img.latest
    if m is None:
        return
    for c in active(m, now_s):
        key = manifest_key(c.manifest_id)
        if c.manifest_id in img.manifest_errors:
            yield Finding("GC-2", key, f"pinned by checkpoint {c.id}, does not decode: "
                                       f"{img.manifest_errors[c.manifest_id]}")
            continue
        pinned = img.manifests.get(c.manifest_id)
        if pinned is None:
            yield Finding("GC-2", key, f"pinned by checkpoint {c.id} of manifest {img.latest_id}, does not exist")
            continue
        epoch = _writer_epoch_of(c, pinned)
        if epoch is not None and epoch < m.writer_epoch:
            never = c.checkpoint_expire_time_s == 0
            yield Finding("CKPT-3", f"{manifest_key(img.latest_id)}#checkpoint/{c.id}",
                          f"writer checkpoint of epoch {epoch} outlives its writer (writer_epoch is {m.writer_epoch})"
                          f"{'; it never expires' if never else ''}"
                          f"{'' if isinstance(c.metadata, WriterCheckpoint) else ' (its writer metadata was dropped)'}"
                          f", pins manifest {c.manifest_id}")


def _writer_epoch_of(c: Checkpoint, pinned: ManifestV2) -> int | None:
    if isinstance(c.metadata, WriterCheckpoint):
        return c.metadata.epoch
    for pc in pinned.checkpoints:
        if pc.id == c.id and isinstance(pc.metadata, WriterCheckpoint):
            return pc.metadata.epoch
    return None


# ---------------------------------------------------------------------------------------------
# Sorted runs and ids
# ---------------------------------------------------------------------------------------------


def _bound_key(bound, default):
    if bound is None or bound.bound_type in (BoundType.UNBOUNDED, BoundType.UNKNOWN) or bound.key is None:
        return default
    return (bound.key, bound.bound_type == BoundType.INCLUDED)


def view_range(view: CompactedSsTableView, info: SsTableInfo | None) -> tuple | None:
    """``((lo, lo_incl) | None, (hi, hi_incl) | None)`` of the keys a view can show; None when
    unknown (no info)."""
    lo = hi = None
    if info is not None and info.first_entry is not None:
        lo = (info.first_entry, True)
    if info is not None and info.last_entry is not None:
        hi = (info.last_entry, True)
    vr: BytesRange | None = view.visible_range
    if vr is not None:
        vlo = _bound_key(vr.start_bound, None)
        vhi = _bound_key(vr.end_bound, None)
        if vlo is not None and (lo is None or vlo[0] > lo[0] or (vlo[0] == lo[0] and not vlo[1])):
            lo = vlo
        if vhi is not None and (hi is None or vhi[0] < hi[0] or (vhi[0] == hi[0] and not vhi[1])):
            hi = vhi
    return lo, hi


def _before(hi, lo) -> bool:
    """Every key up to ``hi`` sorts before every key from ``lo``."""
    if hi is None or lo is None:
        return False
    return hi[0] < lo[0] or (hi[0] == lo[0] and not (hi[1] and lo[1]))


def _not_after(hi, lo) -> bool:
    """Every key up to ``hi`` sorts before every key from ``lo``, but for one key that may end
    the first and start the second: the official compactor cuts an output SST after any row, so
    a key's versions may span adjacent SSTs of a sorted run (READ-7)."""
    return _before(hi, lo) or (hi is not None and lo is not None and hi[0] == lo[0])


def runs(img: DbImage) -> Iterator[Finding]:
    m = img.latest
    if m is None:
        return
    key = manifest_key(img.latest_id)
    infos = {s.id: s.info for s in m.ssts}
    if len(infos) != len(m.ssts):
        yield Finding("COMPACT-4", key, "an SST is listed twice in ssts")
    # A view id names one view. A repeated id is either a change applied twice (same range) or
    # what the official 0.17 union writes for two projections sharing an SST (different ranges),
    # which its own compactor then compacts as one view, losing the other's rows
    # (docs/official-defects/union_compaction_loses_rows.py).
    seen: dict = {}
    for v in m.l0:
        if v.id in seen:
            same = seen[v.id] == v.visible_range
            yield Finding("COMPACT-4", key, f"L0 view id {v.id} is listed twice"
                          + (" (the same view: a change applied twice)" if same else
                             " with different ranges (an official union of projections sharing an SST; the official "
                             "compactor keeps only one view's rows)"))
        seen.setdefault(v.id, v.visible_range)
    run_ids = [r.id for r in m.compacted]
    if len(run_ids) != len(set(run_ids)):
        yield Finding("COMPACT-4", key, f"sorted run ids repeat: {run_ids}")
    for v in list(m.l0) + [v for r in m.compacted for v in r.ssts]:
        if v.sst_id not in infos and not any(v.sst_id in e.sst_ids for e in m.external_dbs):
            yield Finding("COMPACT-4", key, f"view {v.id} names SST {v.sst_id}, which ssts does not list")
    for r in m.compacted:
        prev = None
        for v in r.ssts:
            rng = view_range(v, infos.get(v.sst_id))
            if prev is not None and rng is not None and prev[1] is not None:
                if not _not_after(prev[1][1], rng[0]):
                    yield Finding("COMPACT-4", sst_key(v.sst_id),
                                  f"sorted run {r.id} of manifest {img.latest_id}: view {v.id} overlaps or precedes "
                                  f"view {prev[0]} (keys from {rng[0] and rng[0][0]!r}, previous up to "
                                  f"{prev[1][1] and prev[1][1][0]!r})")
            prev = (v.id, rng) if rng is not None else None


# ---------------------------------------------------------------------------------------------
# Objects: SSTs, WAL, external databases, compactions
# ---------------------------------------------------------------------------------------------


@attrs.define
class ObjectChecker:
    """Checks referenced objects once each (several manifests share most SSTs)."""

    img: DbImage
    deep: bool
    externals: dict[str, ObjectStore | None] = attrs.field(factory=dict)
    external_listings: dict[str, set[str]] = attrs.field(factory=dict)
    done: dict[tuple[str, str], str | None] = attrs.field(factory=dict)  # (store url, key) -> problem
    counts: dict[str, int] = attrs.field(factory=dict)
    reported: set[tuple[str, str]] = attrs.field(factory=set)  # one finding per object

    def first_report(self, store: ObjectStore, key: str) -> bool:
        memo = (store.url, key)
        if memo in self.reported:
            return False
        self.reported.add(memo)
        return True

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    async def external(self, path: str, ssts: Iterable[ULID] = ()) -> ObjectStore | None:
        """The database ``path`` (an ``ExternalDb.path``) names: the nearest candidate holding a
        manifest and, given ``ssts`` (the ids listed under it), one of them; None when none does
        (a deleted parent, not damage to an unrelated database at an ancestor)."""
        if path in self.externals:
            return self.externals[path]
        chosen = None
        wanted = {sst_key(i) for i in ssts}
        for url in db_url_candidates(self.img.url, path):
            store = open_existing(self.img.store, url)
            if store is None:
                continue
            listing = {m.key for m in await store.list("")}
            if any(k.startswith(MANIFEST_DIR) for k in listing) and (not wanted or wanted & listing):
                chosen = store
                self.external_listings[path] = listing
                break
            await store.aclose()
        self.externals[path] = chosen
        return chosen

    async def aclose(self) -> None:
        for s in self.externals.values():
            if s is not None:
                await s.aclose()

    async def sst_problem(self, store: ObjectStore, listing, sst: ULID, last_l0_seq: int | None) -> str | None:
        key = sst_key(sst)
        memo = (store.url, key)
        if memo in self.done:
            return self.done[memo]
        problem = None
        if key not in listing:
            problem = "does not exist"
        else:
            try:
                problem = await self._decode_sst(store, key, last_l0_seq)
            except CorruptionError as e:
                problem = f"does not decode: {e}"
            except ObjectNotFoundError:
                problem = "does not exist (deleted during the check)"
        self.done[memo] = problem
        self.count("ssts_checked")
        return problem

    async def _decode_sst(self, store: ObjectStore, key: str, last_l0_seq: int | None) -> str | None:
        if not self.deep:
            await read_layout(store, key)
            return None
        data = bytes((await store.get(key)).data)
        layout = decode_layout(data, key)
        rows = [r for b in decode_all_blocks(data, layout) for r in b.rows]
        if layout.info.stats_len:  # no row lives there, but it is a block: its CRC is checked too
            stats = layout.info.stats_offset
            decode_stats(data[stats : stats + layout.info.stats_len], layout.info, key)
        self.count("rows_checked", len(rows))
        for a, b in zip(rows, rows[1:]):
            if (b.key, -b.seq) <= (a.key, -a.seq):
                return (f"COMPACT-4:rows out of (key asc, seq desc) order: {a.key!r}@{a.seq} then "
                        f"{b.key!r}@{b.seq}")
        info = layout.info
        if rows and info.first_entry is not None and rows[0].key != info.first_entry:
            return f"COMPACT-4:first_entry {info.first_entry!r} is not the first key {rows[0].key!r}"
        if rows and info.last_entry is not None and rows[-1].key != info.last_entry:
            return f"COMPACT-4:last_entry {info.last_entry!r} is not the last key {rows[-1].key!r}"
        if last_l0_seq is not None and rows:
            top = max(r.seq for r in rows)
            if top > last_l0_seq:
                return f"DUR-2:holds seq {top}, above the manifest's last_l0_seq {last_l0_seq}"
        return None

    async def manifest_ssts(self, m: ManifestV2, mid: int, invariant: str) -> list[Finding]:
        out = []
        where = {i: e.path for e in m.external_dbs for i in e.sst_ids}
        for sst in sorted(manifest_sst_ids(m)):
            path = where.get(sst)
            if path is None:
                store, listing, inv, name = self.img.store, self.img.listing, invariant, sst_key(sst)
            else:
                store = await self.external(path, [i for i, p in where.items() if p == path])
                if store is None:
                    continue  # reported once by external_dbs()
                listing, inv, name = self.external_listings[path], "CLONE-2", f"{shown_url(store.url)}/{sst_key(sst)}"
            problem = await self.sst_problem(store, listing, sst, m.last_l0_seq if path is None else None)
            if problem is None or not self.first_report(store, sst_key(sst)):
                continue
            if ":" in problem.split(" ", 1)[0]:
                inv, problem = problem.split(":", 1)
            out.append(Finding(inv, name, f"referenced by manifest {mid}, {problem}"))
        return out

    async def wal_range(self, lo_exclusive: int, hi: int, invariant: str, why: str,
                        tick_after: tuple[int, int] | None = None) -> list[Finding]:
        """The WAL objects ``(lo_exclusive, hi]``; with ``tick_after = (last_l0_seq, tick)``
        (the latest manifest's replay range), deep: a row a replay would take (seq above
        ``last_l0_seq``) created before ``tick`` is DUR-5 (an official writer replaying it
        refuses the tick of its L0 flush, ``InvalidClockTick``)."""
        out = []
        last_seq = -1
        for wal_id in range(lo_exclusive + 1, hi + 1):
            key = wal_key(wal_id)
            memo = (self.img.url, key)
            if memo in self.done:
                problem = self.done[memo]
            elif key not in self.img.listing:
                problem = "does not exist"
            else:
                problem = None
                try:
                    if self.deep:
                        wal = decode_wal_sst(bytes((await self.img.store.get(key)).data), key)
                        self.count("rows_checked", len(wal.rows))
                        if wal.rows and wal.rows[0].seq < last_seq:
                            problem = (f"DUR-2:first seq {wal.rows[0].seq} below the previous WAL object's last "
                                       f"seq {last_seq}")
                        if wal.rows:
                            last_seq = wal.rows[-1].seq
                        if problem is None and tick_after is not None:
                            problem = _before_tick(wal.rows, *tick_after)
                    elif self.img.listing[key].size_bytes:
                        await read_layout(self.img.store, key, size_bytes=self.img.listing[key].size_bytes)
                except CorruptionError as e:
                    problem = f"does not decode: {e}"
                except ObjectNotFoundError:
                    problem = "does not exist (deleted during the check)"
                self.count("wal_checked")
            self.done[memo] = problem
            if problem is not None and self.first_report(self.img.store, key):
                inv = invariant
                if ":" in problem.split(" ", 1)[0]:
                    inv, problem = problem.split(":", 1)
                out.append(Finding(inv, key, f"{why}, {problem}"))
        return out


async def ssts(chk: ObjectChecker, now_s: int) -> list[Finding]:
    img = chk.img
    if img.latest is None:
        return []
    out = await chk.manifest_ssts(img.latest, img.latest_id, "GC-4")
    for c in active(img.latest, now_s):
        pinned = img.manifests.get(c.manifest_id)
        if pinned is not None and c.manifest_id != img.latest_id:
            out += await chk.manifest_ssts(pinned, c.manifest_id, "CKPT-2")
    return out


def _before_tick(rows, last_l0_seq: int, tick: int) -> str | None:
    for row in rows:
        if row.seq > last_l0_seq and row.create_ts_ms is not None and row.create_ts_ms < tick:
            return (f"DUR-5:row seq {row.seq} created at {row.create_ts_ms}, before the manifest's "
                    f"last_l0_clock_tick {tick}: a writer replaying it refuses the tick (InvalidClockTick)")
    return None


async def wal(chk: ObjectChecker, now_s: int) -> list[Finding]:
    img = chk.img
    m = img.latest
    if m is None:
        return []
    listed = [i for i in (parse_id(k, WAL_DIR, WAL_SUFFIX) for k in img.listing) if i is not None]
    top = max([m.wal_id_last_seen, *listed]) if m.initialized else max(listed, default=0)
    out = await chk.wal_range(m.replay_after_wal_id, top, "FENCE-1",
                              f"in the replay range ({m.replay_after_wal_id}, {top}] of manifest {img.latest_id}",
                              tick_after=(m.last_l0_seq, m.last_l0_clock_tick))
    for c in active(m, now_s):
        pinned = img.manifests.get(c.manifest_id)
        if pinned is None:
            continue
        out += await chk.wal_range(pinned.replay_after_wal_id, pinned.wal_id_last_seen, "READ-2",
                                   f"pinned by checkpoint {c.id} (manifest {c.manifest_id}, range "
                                   f"({pinned.replay_after_wal_id}, {pinned.wal_id_last_seen}])")
    return out


async def external_dbs(chk: ObjectChecker, now_s: int) -> list[Finding]:
    img = chk.img
    m = img.latest
    if m is None:
        return []
    out = []
    pairs = [(e.path, e.source_checkpoint_id) for e in m.external_dbs]
    if len(pairs) != len(set(pairs)):
        out.append(Finding("PROJ-5", manifest_key(img.latest_id), "two external_dbs entries share "
                                                                  "(path, source_checkpoint_id)"))
    where: dict[ULID, str] = {}
    for e in m.external_dbs:
        for i in e.sst_ids:
            other = where.setdefault(i, e.path)
            if other != e.path:
                out.append(Finding("PROJ-6", manifest_key(img.latest_id), f"SST {i} listed in external_dbs under "
                                                                          f"{other!r} and under {e.path!r}: an SST "
                                                                          f"is stored under one database only"))
    for e in m.external_dbs:
        store = await chk.external(e.path, e.sst_ids)
        if store is None:
            if e.sst_ids or e.final_checkpoint_id is not None:
                out.append(Finding("CLONE-2", e.path, f"external database of manifest {img.latest_id} does not "
                                                      f"resolve (no database holding its SSTs at "
                                                      f"{db_url_candidates(img.url, e.path)})"))
            continue
        if not m.initialized or e.final_checkpoint_id is None or not e.sst_ids:
            # No SST left there: GC's detach (checkpoints-gc.md step 9) releases the final
            # checkpoint first, then drops the entry; between the two the entry needs nothing.
            continue
        ids = sorted(i for i in (parse_id(k, MANIFEST_DIR, MANIFEST_SUFFIX) for k in chk.external_listings[e.path])
                     if i is not None)
        try:
            ext = await read_manifest(store, ids[-1])
        except (CorruptionError, ObjectNotFoundError) as err:
            out.append(Finding("CLONE-1", f"{shown_url(store.url)}/{manifest_key(ids[-1])}", f"latest manifest of external "
                                                                                   f"database {e.path!r}: {err}"))
            continue
        final = next((c for c in ext.checkpoints if c.id == e.final_checkpoint_id), None)
        if final is None or is_expired(final, now_s):
            out.append(Finding("CLONE-1", f"{shown_url(store.url)}/{manifest_key(ids[-1])}#checkpoint/{e.final_checkpoint_id}",
                               f"final checkpoint of this database's external entry {e.path!r} is "
                               f"{'missing' if final is None else 'expired'}"))
        elif final.manifest_id not in ids:
            out.append(Finding("CLONE-1", f"{shown_url(store.url)}/{manifest_key(final.manifest_id)}",
                               f"pinned by the final checkpoint {final.id} of external database {e.path!r}, "
                               f"does not exist"))
        else:
            # The pinned manifest is the one the entry's source checkpoint pinned: it lists every
            # SST the entry still reads (a checkpoint shared with another entry of the same
            # database pins that entry's manifest instead, clone.md step 4).
            try:
                pinned = await read_manifest(store, final.manifest_id)
            except (CorruptionError, ObjectNotFoundError):
                continue  # deleted since the listing: the next check sees it
            unpinned = sorted(set(e.sst_ids) - manifest_sst_ids(pinned))
            if unpinned:
                out.append(Finding("CLONE-1", f"{shown_url(store.url)}/{manifest_key(final.manifest_id)}",
                                   f"pinned by the final checkpoint {final.id} of this database's external entry "
                                   f"{e.path!r} (source checkpoint {e.source_checkpoint_id}), does not list "
                                   f"{len(unpinned)} of the entry's {len(e.sst_ids)} SSTs (first {unpinned[0]})"))
    return out


async def compactions(chk: ObjectChecker) -> list[Finding]:
    img = chk.img
    if img.compactions_error is not None:
        return [Finding("COMPACT-1", compactions_key(img.compactions_ids[-1]),
                        f"the latest .compactions does not decode: {img.compactions_error}")]
    out = []
    c = img.compactions
    for comp in c.recent_compactions if c is not None else ():
        if comp.status not in IN_FLIGHT:
            continue
        outputs = {o.id for o in comp.output_ssts}
        if comp.ctx is not None:
            for sub in comp.ctx.subcompactions:
                outputs |= {o.id for o in sub.output_ssts}
        for sst in sorted(outputs):
            if sst_key(sst) not in img.listing:
                out.append(Finding("GC-3", sst_key(sst), f"output of {comp.status.name} compaction {comp.id}, "
                                                         f"does not exist"))
    return out


__all__ = ["CompactionStatus", "ObjectChecker", "active", "boundaries", "checkpoints", "compactions",
           "external_dbs", "history", "manifest_present", "runs", "ssts", "view_range", "wal"]
