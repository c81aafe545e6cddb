"""The gc world's liveness oracles, judged on the healed world: GC leaves no garbage (what
neither the latest manifest nor a checkpoint still pins, older than the heal), and READ-5 (a
managed reader catches up with the writer within a few polls and holds no checkpoint it
replaced but its last one)."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import trio

from slatedb.gc.retention import manifest_sst_ids
from slatedb.reader import DbReaderOptions

from sim.world import fastclock
from sim.world.runtime import SIM_EPOCH_MS


#: READ-5's bound: polls a managed reader may take to reach the writer's durable state.
READER_CATCH_UP_POLLS = 4


async def reader_catches_up(reader: Any, opts: DbReaderOptions, durable: dict,
                            scan: Callable[[Any], Awaitable[dict]]) -> None:
    """READ-5 (reader.md): after the heal, with every write durable and flushed to L0, the
    managed reader serves exactly the writer's durable state within READER_CATCH_UP_POLLS polls."""
    deadline = trio.current_time() + READER_CATCH_UP_POLLS * opts.manifest_poll_interval_s + 1.0
    while True:
        state = await scan(reader)
        if state == durable:
            return
        if trio.current_time() > deadline:
            missing = sorted(k for k in durable if state.get(k) != durable[k])
            raise AssertionError(f"READ-5: managed reader still behind the writer's durable state "
                                 f"{READER_CATCH_UP_POLLS} polls ({opts.manifest_poll_interval_s} s each) after the "
                                 f"heal: {len(missing)} keys differ, e.g. {missing[:3]} (manifest "
                                 f"{getattr(reader, 'manifest_id', '?')}, stats {reader.stats})")
        await fastclock.sleep(opts.manifest_poll_interval_s / 4)


def reader_holds_only_what_it_needs(parent: Any, reader: Any, made: set[str]) -> None:
    """READ-5, second half: the latest manifest holds the reader's current checkpoint and at most
    the one it replaced in its last round (deleted one round later), no older one."""
    latest = parent.manifests[parent.latest]
    ours = {str(c.id) for c in latest.checkpoints} & made
    ours.discard(str(reader.checkpoint_id))
    if len(ours) > 1:
        raise AssertionError(f"READ-5: the managed reader still holds {len(ours)} checkpoints it replaced "
                             f"(latest manifest {parent.latest}): {sorted(ours)[:3]}")


def no_garbage(bucket: Any, checks: Any, healed_at: float, since: int | None = None) -> None:
    """Liveness of GC: nothing older than the heal that the latest manifest and the manifests
    pinned by the checkpoints of the manifests from ``since`` to the latest (the last GC rounds'
    view; default: the latest alone) do not need is left in the parent."""
    parent = checks.dbs["parent/"]
    latest_id = parent.latest
    latest = parent.manifests[latest_id]
    pinned = {c.manifest_id for mid, m in parent.manifests.items()
              if (since if since is not None else latest_id) <= mid <= latest_id for c in m.checkpoints}
    needed = set(manifest_sst_ids(latest))
    ranges = [(latest.replay_after_wal_id, 2**62)]
    for mid in pinned:
        m = parent.manifests.get(mid)
        if m is not None:
            needed |= manifest_sst_ids(m)
            ranges.append((m.replay_after_wal_id, m.wal_id_last_seen))
    heal_ms = SIM_EPOCH_MS + int(healed_at * 1000) - 2000
    garbage: list[str] = []
    needed_text = {str(s) for s in needed}
    wal_ids = []
    for key, (_data, meta) in bucket.objects.items():
        if not key.startswith("parent/") or meta.last_modified_ms >= heal_ms:
            continue
        rel = key[len("parent/"):]
        if rel.startswith("compacted/"):
            sst = rel[len("compacted/"):-len(".sst")]
            if sst not in needed_text:
                garbage.append(rel)
        elif rel.startswith("manifest/") and rel.endswith(".manifest"):
            mid = int(rel[len("manifest/"):-len(".manifest")])
            if mid != latest_id and mid not in pinned:
                garbage.append(rel)
        elif rel.startswith("wal/") and _data:
            wal_ids.append((int(rel[len("wal/"):-len(".sst")]), rel))
    newest_wal = max((i for i, _ in wal_ids), default=0)
    for wal_id, rel in wal_ids:
        if wal_id != newest_wal and not any(a < wal_id <= b for a, b in ranges):
            garbage.append(rel)
    if garbage:
        raise AssertionError(f"liveness: GC left {len(garbage)} objects written before the heal that nothing needs, "
                             f"e.g. {sorted(garbage)[:4]} (latest manifest {latest_id}, pinned {sorted(pinned)})")
