"""Which of a load's staged SSTs an older stored manifest still names (bulk-load.md step 7, LOAD-6).

A committed SST that a compaction rewrote since is in no latest manifest, but an older manifest a
checkpoint pins (a reader's, a clone's) may still name it: the load's clean-up keeps such an SST
for GC (which deletes it once nothing pins it)."""

from __future__ import annotations

from ulid import ULID

from slatedb.errors import ObjectNotFoundError
from slatedb.gc.retention import manifest_sst_ids
from slatedb.manifest.store import MANIFEST_DIR, MANIFEST_SUFFIX, ManifestStore, parse_id
from slatedb.objstore.retry import retry_transient
from slatedb.runtime import probes


#: How much older than a load's first intent a manifest may look and still name the load's SSTs:
#: such a manifest is written after the SST, and the SST after its intent, all stamped by the one
#: store (S3's ``last_modified`` has one-second steps; the margin is generous).
MANIFEST_CLOCK_MARGIN_MS = 60_000


async def named_by_older_manifests(manifests: ManifestStore, candidates: set[ULID], since_ms: int,
                                    latest_id: int) -> set[ULID]:
    """Those of ``candidates`` that a manifest still stored, other than the latest and written
    from ``since_ms`` on (older ones cannot name them), names; newest first, stopping once every
    candidate is found. A manifest deleted meanwhile (GC) pinned nothing."""
    store, rt = manifests.store, manifests.runtime
    metas = await retry_transient(rt, lambda: store.list(MANIFEST_DIR), what=f"list {MANIFEST_DIR}")
    ids = sorted((mid for mid, meta in ((parse_id(m.key, MANIFEST_DIR, MANIFEST_SUFFIX), m) for m in metas)
                  if mid is not None and mid != latest_id and meta.last_modified_ms >= since_ms), reverse=True)
    found: set[ULID] = set()
    for mid in ids:
        try:
            stored = await manifests.read(mid)
        except ObjectNotFoundError:
            continue
        found |= candidates & manifest_sst_ids(stored.manifest)
        if found == candidates:
            break
    if found:
        rt.probe(probes.LOAD_CLEANUP_KEPT_PINNED)
        rt.event("load_cleanup_kept", ssts=len(found))
    return found
