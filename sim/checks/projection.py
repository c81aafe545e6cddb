"""The rescale scenario's oracles on the bucket (spec/protocols/projection-union.md): PROJ-2 on a
shard's first manifest, and whether GC's detach explains a re-run's refusal (CLONE-1). Read from the
bucket without faults; :class:`Violation` carries the invariant id."""

from __future__ import annotations

import uuid

from slatedb.checkpoint import find_checkpoint
from slatedb.format.manifest import decode_manifest_v2
from slatedb.lsm.view import bounds_of
from slatedb.manifest.store import manifest_key
from slatedb.projection.ranges import effective_bounds


class Violation(AssertionError):
    """An oracle of this scenario failed: ``invariant`` is its id (read by
    :meth:`sim.world.invariants.Violation.of_exception`)."""

    def __init__(self, inv: str, message: str) -> None:
        super().__init__(f"{inv}: {message}")
        self.invariant = inv


def manifest_in(bucket, root: str, manifest_id: int | None = None):
    """A database's latest (or a given) manifest, read from the bucket without faults."""
    # The bucket's sorted key index; decoded under the engine's (root-relative) name: a shared cache.
    keys = [k for k in bucket.objects.keys_under(f"{root}/manifest/") if k.endswith(".manifest")]
    if manifest_id is None:
        if not keys:
            return None
        key = keys[-1]
    else:
        key = f"{root}/{manifest_key(manifest_id)}"
    data, _ = bucket.objects[key]
    return decode_manifest_v2(bytes(data), key[len(root) + 1:])


def detached_by_gc(bucket, root: str, sources: list[str]) -> bool:
    """Has GC detached (or begun to detach, checkpoints-gc.md step 9) the entries of the finished
    database at ``root`` that a re-run recognises it by? True when its latest manifest is
    initialized and either no ``external_dbs`` entry names a source any more, or an entry with no
    SSTs has lost its final checkpoint (released, the entry not yet dropped)."""
    m = manifest_in(bucket, root)
    if m is None or not m.initialized:
        return False
    if not any(e.path in sources for e in m.external_dbs):
        return True
    for e in m.external_dbs:
        if e.sst_ids or e.final_checkpoint_id is None:
            continue
        there = manifest_in(bucket, e.path)
        if there is None or find_checkpoint(there, e.final_checkpoint_id) is None:
            return True
    return False


def check_proj2(bucket, i: int, checkpoint: uuid.UUID) -> None:
    """PROJ-2: every view of shard ``i``'s first manifest shows at most what it showed in the
    source manifest the checkpoint pins."""
    src_latest = manifest_in(bucket, "src")
    cp = find_checkpoint(src_latest, checkpoint) if src_latest is not None else None
    if cp is None:
        return  # the checkpoint went away (cannot happen: 4 h lifetime) -- nothing to compare
    base = manifest_in(bucket, "src", cp.manifest_id)
    present = sorted(k for k in bucket.objects if k.startswith(f"shard{i}/manifest/") and k.endswith(".manifest"))
    first = manifest_in(bucket, f"shard{i}", int(present[0].rsplit("/", 1)[1].split(".")[0]))  # GC may have taken 1
    ssts = {s.id: s for s in base.ssts}
    views = {v.id: v for v in list(base.l0) + [v for r in base.compacted for v in r.ssts]}
    for v in list(first.l0) + [v for r in first.compacted for v in r.ssts]:
        old = views.get(v.id)
        if old is None:
            raise Violation("PROJ-2", f"shard{i} view {v.id} is not a view of the source")
        was, now = effective_bounds(old, ssts[old.sst_id]), bounds_of(v.visible_range)
        if was.intersect(now) != now:
            raise Violation("PROJ-2", f"shard{i} view {v.id} shows {now}, wider than the source's {was}")
