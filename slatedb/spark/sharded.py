"""The union route of a bulk load: a DataFrame written to one new database per key range (the
WAL off: each shard is SSTs and one manifest), then united into one new database through
projection/union (docs/spark.md "Sharded loads"; spec/protocols/bulk-load.md SHARD steps).

1. **Begin** (driver, :func:`begin_sharded`): the destination must hold no initialized
   database (a sharded load creates one). An uninitialized one whose every ``external_dbs``
   entry lies under its own ``shards/`` directory is what a driver that died during its union
   left (nobody can open it): it is removed first, with the shards it names, so re-running
   the job is safe. The shards of loads that ended are removed (LOAD-10). A load id and its
   open marker (as in the plain load); the rows' sequence number is 1 (a new database: nothing older, and the union's
   ``last_l0_seq`` = 1 makes every later write newer, PROJ-3).
2. **Stage a shard** (each task attempt, :func:`stage_shard`): the attempt's sorted rows become
   SSTs (as in the plain load: LOAD-2 within the task) of a new database at
   ``<url>/shards/<load id>/<partition>-<attempt>-<ulid>`` -- attempt-unique, so retried and
   speculative attempts never share a shard -- whose manifest 1 holds them as **one sorted run**
   (id 0), ``last_l0_seq`` = 1, no WAL. The manifest is written last: a shard without it is
   not a database, and a failing attempt deletes everything under its shard. The load's open
   marker is checked after every SST and after the manifest: gone, the attempt deletes its
   shard (LOAD-10).
3. **Commit** (driver, once, :func:`commit_sharded`): every task has a result, one per
   partition; the shards' key ranges must not overlap (range-partitioned input:
   :func:`slatedb.spark.load_sharded`); :func:`slatedb.projection.create.create_database`
   unites them at the destination (resumable; C1-C7 of projection-union.md). The runs with id
   0 of the disjoint shards form one sorted run of the result. The result must name exactly
   this load's shards (another load that created the destination first makes this one
   refused). No rows and no shard: an empty initialized database.
4. **Collect** (:func:`collect_shards`, after the commit and on demand): a shard database the
   destination's latest manifest does not name in ``external_dbs``, with no active checkpoint
   and a latest manifest older than ``min_age_s``, is deleted. After a commit that covers the
   losing attempts and leftovers of dead drivers (never referenced: the destination was just
   made). Later it removes the shards the destination's GC detached once its compactor had
   rewritten their rows (detaching deletes the final checkpoint, which writes the shard's
   latest manifest: ``min_age_s`` then keeps readers that were still at an older manifest
   safe). ``abort()`` deletes the open marker, then this load's shards.
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs
import trio
from ulid import ULID

from slatedb.clone.ops import CloneMismatchError
from slatedb.lsm.paths import SstLocator
from slatedb.errors import InvalidUnionError, ObjectNotFoundError, SlateDBError
from slatedb.format.layout import SHARDS_DIR
from slatedb.format.sst import SstOptions
from slatedb.format.types import CompactedSsTableV2, CompactedSsTableView, ManifestV2, SortedRunV2
from slatedb.gc.destroyed import delete_shard, destroy_database, shard_pinned, shard_root
from slatedb.manifest.checkpoints import active_checkpoints
from slatedb.manifest.store import MANIFEST_DIR, ManifestStore
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.objstore.url import relative_db_path
from slatedb.projection.create import SourceSpec, create_database
from slatedb.runtime import Runtime, probes, switches

from .load import (
    DEFAULT_ABANDONED_AFTER_S,
    LOAD_DIR,
    LoadEndedError,
    LoadPlan,
    LoadRefusedError,
    collect_loads,
    end_load,
    load_is_open,
    claim_for_commit,
    marker_key,
    open_load,
    stage_sorted,
)
from slatedb.redact import shown_url

#: The sequence number of every row of a sharded load (the destination is new).
SHARD_SEQ = 1
#: The sorted run id each shard uses: equal ids of disjoint shards unite into one run.
SHARD_RUN_ID = 0
#: Default age a detached shard's latest manifest must reach before :func:`collect_shards` deletes it.
DEFAULT_SHARD_MIN_AGE_S = 300.0


@attrs.frozen
class ShardedPlan:
    load_id: str
    seq: int = SHARD_SEQ


@attrs.frozen
class ShardResult:
    partition: int
    attempt: int
    url: str | None  # None: the partition had no rows (no shard)
    rows: int = 0
    first_key: bytes = b""
    last_key: bytes = b""


@attrs.frozen
class ShardedCommit:
    manifest_id: int
    shards: int
    rows: int


def _norm(url: str) -> str:
    return url.rstrip("/")


def shards_prefix(load_id: str | None = None) -> str:
    return SHARDS_DIR if load_id is None else f"{SHARDS_DIR}{load_id}/"


def shard_url(dest_url: str, load_id: str, partition: int, attempt: int, ulid: ULID) -> str:
    return f"{_norm(dest_url)}/{shards_prefix(load_id)}{partition:06d}-{attempt}-{ulid}"


def _is_own_shard_path(dest_url: str, path: str) -> bool:
    """Does the ``external_dbs`` path ``path`` of the database at ``dest_url`` name a shard
    under its own ``shards/`` directory?"""
    own = relative_db_path(dest_url, f"{_norm(dest_url)}/{SHARDS_DIR}x")
    return path.startswith(own[:-1]) or path.startswith(f"{_norm(dest_url)}/{SHARDS_DIR}")


def _shard_load_id(path: str) -> str | None:
    """The load id of an ``external_dbs`` path ``.../shards/<load id>/<shard>`` (None: another path)."""
    parts = path.rstrip("/").split("/")
    for i in range(len(parts) - 2, 0, -1):
        if f"{parts[i - 1]}/" == SHARDS_DIR:
            return parts[i]
    return None


async def _marker_fresh(store: ObjectStore, rt: Runtime, load_id: str, abandoned_after_s: float) -> bool:
    """Is the load's open marker there and younger than ``abandoned_after_s`` (its driver may live)?"""
    key = marker_key(load_id)
    try:
        meta = await retry_transient(rt, lambda: store.head(key), what=f"head {key}")
    except ObjectNotFoundError:
        return False
    return rt.now_ms() - meta.last_modified_ms <= abandoned_after_s * 1000


async def _still_latest(manifests: ManifestStore, seen: Any) -> bool:
    """Is ``seen`` still the latest manifest?"""
    now = await manifests.read_latest()
    return now is not None and now.id == seen.id


# ---------------------------------------------------------------------------------------------
# 1. Begin
# ---------------------------------------------------------------------------------------------


async def begin_sharded(store: ObjectStore, rt: Runtime, *,
                        abandoned_after_s: float = DEFAULT_ABANDONED_AFTER_S) -> ShardedPlan:
    manifests = ManifestStore(store, rt)
    latest = await manifests.read_latest()
    if latest is not None:
        m = latest.manifest
        leftover = (not m.initialized and m.external_dbs
                    and all(_is_own_shard_path(store.url, e.path) for e in m.external_dbs))
        if not leftover:
            raise LoadRefusedError(
                f"a database exists at {shown_url(store.url)}: a sharded load creates a new database (load into an existing"
                " one with bulk_load / the plain append or overwrite)")
        # LOAD-13: the union is a leftover only once its load ended or is abandoned_after_s old;
        # before, its driver may be uniting it right now (destroying it failed that load).
        for load_id in sorted({_shard_load_id(e.path) for e in m.external_dbs} - {None}):
            if switches.SHARDED_BEGIN_TAKES_LIVE_UNION in rt.bugs:  # catalogued bug (sim/scenarios/catalogue.py)
                break
            if await _marker_fresh(store, rt, load_id, abandoned_after_s):
                rt.probe(probes.LOAD_UNION_LIVE_REFUSED)
                raise LoadRefusedError(
                    f"sharded load {load_id} is uniting its shards at {shown_url(store.url)}: nothing begun (if its driver "
                    "died, slatedb.spark.collect_loads(url, abandoned_after_s=0) ends it, then run again)")
        # LOAD-13: its load may have finished the union (and deleted its marker) since our read:
        # destroy only the union judged above (a load deletes its marker after its last manifest).
        if not await _still_latest(manifests, latest):
            rt.probe(probes.LOAD_UNION_FINISHED_REFUSED)
            raise LoadRefusedError(f"the union at {shown_url(store.url)} changed while this begin judged it (its load finished "
                                   "it?): nothing begun")
        locator = SstLocator(store, rt)
        try:  # a union that a dead driver left uninitialized: nobody can have opened it
            await destroy_database(store, rt, latest, locator, store.delete)
            for e in m.external_dbs:  # its shards (and the union's checkpoints on them) go too
                await _delete_under(await locator.root_of(e.path), rt)
        finally:
            await locator.aclose()
        rt.event("shard_leftover_removed", manifest_id=latest.id)
    await collect_loads(store, rt, abandoned_after_s=abandoned_after_s)  # LOAD-10: dead drivers' markers
    await collect_ended_shards(store, rt)
    plan = ShardedPlan(str(rt.new_ulid()))
    await open_load(store, rt, plan.load_id)
    rt.event("shard_begin", load_id=plan.load_id)
    return plan


# ---------------------------------------------------------------------------------------------
# 2. Stage a shard
# ---------------------------------------------------------------------------------------------


async def _delete_under(store: ObjectStore, rt: Runtime, prefix: str = "") -> int:
    metas = await retry_transient(rt, lambda: store.list(prefix), what=f"list {prefix or '/'}")
    # the manifests last: a half-deleted shard without a manifest is no database
    metas.sort(key=lambda meta: meta.key.startswith(MANIFEST_DIR))
    for meta in metas:
        try:
            await retry_transient(rt, lambda: store.delete(meta.key), what=f"delete {meta.key}")
        except SlateDBError:
            pass
    return len(metas)


async def stage_shard(store: ObjectStore, rt: Runtime, plan: ShardedPlan, partition: int, attempt: int,
                      keys: Sequence[bytes], values: Sequence[bytes | None], *, sst_options: SstOptions,
                      sst_size_bytes: int) -> ShardResult:
    """Write the attempt's rows (sorted, unique) as a new shard database (step 2)."""
    if not keys:
        return ShardResult(partition, attempt, None)
    url = shard_url(store.url, plan.load_id, partition, attempt, rt.new_ulid())
    shard = store.open_url(url)
    try:
        staged = await stage_sorted(shard, rt, LoadPlan(plan.load_id, plan.seq, False, 0), partition, attempt,
                                    keys, values, sst_options=sst_options, sst_size_bytes=sst_size_bytes,
                                    marker_store=store)
        run = SortedRunV2(SHARD_RUN_ID, tuple(CompactedSsTableView(rt.new_ulid(), ULID.from_str(s.sst_id), None)
                                              for s in staged.ssts))
        manifest = ManifestV2(
            initialized=True, last_l0_seq=plan.seq, compacted=(run,),
            ssts=tuple(CompactedSsTableV2(ULID.from_str(s.sst_id), s.info, s.format_version) for s in staged.ssts))
        await _delete_under(shard, rt, LOAD_DIR)  # the intents: the manifest records the SSTs now
        if await ManifestStore(shard, rt).create_initial(manifest) is None:
            raise LoadRefusedError(f"shard {shown_url(url)} exists already (a ULID collision?)")
        if switches.STAGE_IGNORES_LOAD_END not in rt.bugs and not await load_is_open(store, rt, plan.load_id):
            rt.probe(probes.LOAD_STAGE_ENDED)  # LOAD-10, after the shard's last write
            raise LoadEndedError(f"load {plan.load_id} ended (committed or aborted) while partition {partition} "
                                 f"attempt {attempt} wrote its shard: the shard is deleted")
    except BaseException:
        with trio.CancelScope(shield=True):
            await _delete_under(shard, rt)
        raise
    finally:
        await shard.aclose()
    rt.event("shard_staged", load_id=plan.load_id, partition=partition, attempt=attempt, url=url, rows=len(keys),
             ssts=len(staged.ssts))
    return ShardResult(partition, attempt, url, len(keys), keys[0], keys[-1])


# ---------------------------------------------------------------------------------------------
# 3. Commit
# ---------------------------------------------------------------------------------------------


async def commit_sharded(store: ObjectStore, rt: Runtime, plan: ShardedPlan,
                         results: Sequence[ShardResult | None]) -> ShardedCommit:
    if any(r is None for r in results):
        raise LoadRefusedError("a task of the load has no result (it failed): nothing committed")
    done = [r for r in results if r is not None]
    parts = [r.partition for r in done]
    if len(parts) != len(set(parts)):
        raise LoadRefusedError(f"two results for one partition ({sorted(parts)}): nothing committed")
    await claim_for_commit(store, rt, plan.load_id)  # LOAD-10
    shards = sorted((r for r in done if r.url is not None), key=lambda r: r.first_key)
    rows = sum(r.rows for r in shards)
    for a, b in zip(shards, shards[1:]):
        if b.first_key <= a.last_key:
            raise LoadRefusedError(
                f"shards of partitions {a.partition} and {b.partition} overlap ({b.first_key!r} <= {a.last_key!r}):"
                " a sharded load needs range-partitioned input (slatedb.spark.load_sharded does that)")
    manifests = ManifestStore(store, rt)
    existing = await manifests.read_latest()
    if existing is not None and existing.manifest.initialized:  # LOAD-8: another load won
        raise LoadRefusedError(f"another load created the database at {shown_url(store.url)} first: nothing committed")
    if not shards:
        made = await manifests.create_initial(ManifestV2(initialized=True))
        if made is None:
            raise LoadRefusedError(f"another process created the database at {shown_url(store.url)} first: nothing committed")
        await end_load(store, rt, plan.load_id)
        return ShardedCommit(made.id, 0, 0)
    sources = [store.open_url(r.url) for r in shards if r.url is not None]
    try:
        try:
            stored = await create_database(store, [SourceSpec(s) for s in sources], rt)
        except InvalidUnionError as e:
            raise LoadRefusedError(f"the shards cannot be united ({e}): nothing committed") from None
        except CloneMismatchError as e:  # LOAD-8: a writer created the database after the check above
            raise LoadRefusedError(f"another process created the database at {shown_url(store.url)} first ({e}): "
                                   "nothing committed") from None
    finally:
        for s in sources:
            await s.aclose()
    want = {relative_db_path(store.url, r.url) for r in shards if r.url is not None}  # LOAD-8
    got = {e.path for e in stored.manifest.external_dbs}
    if got != want:
        raise LoadRefusedError(f"another load created the database at {shown_url(store.url)} first: nothing committed")
    await end_load(store, rt, plan.load_id)  # LOAD-10: late attempts delete their own shards from now on
    rt.event("shard_commit", load_id=plan.load_id, manifest_id=stored.id, shards=len(shards), rows=rows)
    return ShardedCommit(stored.id, len(shards), rows)


# ---------------------------------------------------------------------------------------------
# 4. Collect / abort
# ---------------------------------------------------------------------------------------------


async def abort_sharded(store: ObjectStore, rt: Runtime, plan: ShardedPlan) -> int:
    """Delete every shard of this load (nothing references them: the union was not made). When
    the union was made after all (a commit reported failed, or the driver died in the middle of
    it), the shards its manifest names are left (collect_shards', or the next begin's, S1) and
    only the load's other shards -- losing attempts that nobody names -- are deleted (LOAD-10;
    load seeds 2045 and 2275: the driver died right after the union's first manifest landed, and
    a speculative attempt's shard was left for ever)."""
    await end_load(store, rt, plan.load_id)  # LOAD-10: an attempt still running deletes its shard itself
    latest = await ManifestStore(store, rt).read_latest()
    if latest is not None and any(plan.load_id in e.path for e in latest.manifest.external_dbs):
        named = {e.path for e in latest.manifest.external_dbs}
        metas = await retry_transient(rt, lambda: store.list(shards_prefix(plan.load_id)),
                                      what=f"list {shards_prefix(plan.load_id)}")
        deleted = 0
        for root in sorted({"/".join(meta.key.split("/")[:3]) for meta in metas if meta.key.count("/") >= 3}):
            if relative_db_path(store.url, f"{_norm(store.url)}/{root}") not in named:
                deleted += await _delete_under(store, rt, f"{root}/")
        rt.event("shard_abort", load_id=plan.load_id, objects=deleted, union_made=True)
        return deleted
    deleted = await _delete_under(store, rt, shards_prefix(plan.load_id))
    rt.event("shard_abort", load_id=plan.load_id, objects=deleted)
    return deleted


async def collect_shards(store: ObjectStore, rt: Runtime, *, min_age_s: float = DEFAULT_SHARD_MIN_AGE_S) -> list[str]:
    """Step 4: delete the shard databases under ``<url>/shards/`` that the destination's
    latest manifest does not reference, that hold no active checkpoint and whose latest
    manifest is older than ``min_age_s``. Returns their URLs. Refuses to run while the
    destination is not an initialized database (a load may be uniting its shards)."""
    latest = await ManifestStore(store, rt).read_latest()
    if latest is None or not latest.manifest.initialized:
        raise LoadRefusedError(f"no initialized database at {shown_url(store.url)}: its shards may still be in use")
    referenced = {e.path for e in latest.manifest.external_dbs}
    metas = await retry_transient(rt, lambda: store.list(SHARDS_DIR), what=f"list {SHARDS_DIR}")
    roots = sorted({"/".join(meta.key.split("/")[:3]) for meta in metas if meta.key.count("/") >= 3})
    now_ms = rt.now_ms()
    collected: list[str] = []
    for root in roots:
        url = f"{_norm(store.url)}/{root}"
        if relative_db_path(store.url, url) in referenced:  # LOAD-9 (the final checkpoint also pins it)
            continue
        shard = store.open_url(url)
        try:
            shard_latest = await ManifestStore(shard, rt).read_latest()
            if shard_latest is not None:
                if active_checkpoints(shard_latest.manifest, now_ms // 1000):
                    continue
                listed = await retry_transient(rt, lambda: shard.list(MANIFEST_DIR), what=f"list {url}/{MANIFEST_DIR}")
                # none left: its attempt is deleting it right now (LOAD-10), so may we
                newest = max((m.last_modified_ms for m in listed), default=0)
                if now_ms - newest < min_age_s * 1000:
                    continue
            await _delete_under(shard, rt)
        finally:
            await shard.aclose()
        collected.append(url)
        rt.event("shard_collected", url=url)
    return collected


async def collect_ended_shards(store: ObjectStore, rt: Runtime) -> list[str]:
    """LOAD-10 for the union route: the shards of loads that ended (no open marker: aborted,
    refused, or collected as abandoned by :func:`slatedb.spark.load.collect_loads`) while no
    initialized database is at the destination -- written by attempts killed mid-shard or by a
    driver that died before its union. An uninitialized union naming shards is left to
    :func:`begin_sharded`; with an initialized database, :func:`collect_shards` decides.
    Returns the load ids whose shards were deleted."""
    latest = await ManifestStore(store, rt).read_latest()
    if latest is not None and (latest.manifest.initialized or latest.manifest.external_dbs):
        return []
    metas = await retry_transient(rt, lambda: store.list(SHARDS_DIR), what=f"list {SHARDS_DIR}")
    load_ids = sorted({meta.key.split("/")[1] for meta in metas if meta.key.count("/") >= 2})
    cleaned: list[str] = []
    for load_id in load_ids:
        if await load_is_open(store, rt, load_id):
            continue
        # LOAD-9: a shard database a clone pins stays (a destroy of the union kept it; the load
        # ended long ago): deleting it took the clone's rows.
        prefix = shards_prefix(load_id)
        roots = sorted({r for r in map(shard_root, (m.key for m in metas if m.key.startswith(prefix))) if r is not None})
        kept = [r for r in roots if await shard_pinned(store, rt, r)]
        if kept and switches.ENDED_SHARDS_IGNORE_PINS in rt.bugs:  # catalogued bug (sim/scenarios/catalogue.py)
            kept = []
        if kept:
            rt.probe(probes.LOAD_ENDED_SHARD_KEPT)
        if kept:
            for root in roots:
                if root not in kept:
                    await delete_shard(store, rt, root)
            rt.event("shard_leftover_kept", load_id=load_id, kept=len(kept))
            continue
        await _delete_under(store, rt, prefix)
        cleaned.append(load_id)
        rt.event("shard_leftover_collected", load_id=load_id)
    return cleaned
