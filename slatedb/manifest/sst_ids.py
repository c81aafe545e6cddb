"""SST ids that GC's ULID cutoff can rely on (checkpoints-gc.md step 8, wal-fencing.md).

GC keeps an unreferenced SST whose ULID time is at or after the newest L0 of the latest manifest
(:func:`newest_l0_ms`): it may be an L0 uploaded but not yet committed. ULID times come from
the minting process's wall clock, and a writer that takes over from another (a restart, another
host) may run behind the clock of the writer whose L0s it inherits. Its fresh L0 would then
carry a ULID *older* than the newest L0 already in the manifest and lose that protection: GC
deletes it once it is older than ``min_age`` while its commit is still on the way, and the
manifest that commits it names a missing SST (sim gc seed 86: 30 ms of skew between two
incarnations of the writer, an 18 s stall on the upload). So a writer never mints an L0 id
below the newest L0 it knows (:func:`not_before`); only the fenced owner adds L0s, so every L0
the latest manifest can hold before this one commits is one it knows.
"""

from __future__ import annotations

from ulid import ULID

from slatedb.format.types import ManifestV2
from slatedb.runtime import ulid_from_parts

_RANDOM_BITS = (1 << 80) - 1


def newest_l0_ms(m: ManifestV2) -> int:
    """The ULID time of the newest L0 SST of ``m`` (else of the last L0 compacted away; 0 when
    the database never had one). An SST minted after it may be an L0 uploaded but not yet
    committed (the writer uploads, *then* writes the manifest)."""
    views = list(m.l0) + [v for seg in m.segments for v in seg.l0]
    if views:
        return max(v.sst_id.milliseconds for v in views)
    last = [m.last_compacted_l0_sst_view_id] + [seg.last_compacted_l0_sst_view_id for seg in m.segments]
    known = [u.milliseconds for u in last if u is not None]
    return max(known) if known else 0


def not_before(fresh: ULID, floor_ms: int) -> ULID:
    """``fresh`` if its time is at or after ``floor_ms``, else the same random bits at
    ``floor_ms`` (still unique: 80 random bits)."""
    if fresh.milliseconds >= floor_ms:
        return fresh
    return ulid_from_parts(floor_ms, int(fresh) & _RANDOM_BITS)
