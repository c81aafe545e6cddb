"""GC as aggressive as the settings allow (``min_age`` 0, the shortest interval, WAL fences
collected too), running inside the writer and as a separate collector, while the writer writes
and its compactor compacts: a holder of a checkpoint can always read everything it pinned --
every SST of the checkpointed manifest and every WAL object of its range (CKPT-1, READ-2) --
and the writer never finds an SST of its own missing (GC-4).

The wall clock of every process (and of the store) jumps 1000 s after each holder round: the
compactor's 900 s checkpoints expire and the SSTs they kept become garbage at once, so SST GC
runs against live compactions and not just against the latest manifest.

The writer's own reads are checked only after :meth:`Db.refresh_manifest` has adopted a manifest
written after the last jump. While the writer adopts a compactor's manifest, its checkpoint
already pins the new manifest (the refresh commits first) but its reads still go through the old
view until the new one is built; the SSTs the compaction replaced are then kept only by the
compactor's pin of the manifest it replaced (``checkpoint_lifetime``, 900 s; writer.md CKPT-4,
compaction.md step 8). A jump of 1000 s during that window is a writer whose adoption took 1000 s:
the pin expires, GC rightly deletes those SSTs, and a read in the window fails (the first
fresh-clone CI of session 6 failed so, under load; forced in a minute by holding one adoption open
across the last jump). The refresh waits for any adoption in progress (the writer's manifest lock)
and publishes the latest view; every compaction after it is pinned after the last jump."""

from __future__ import annotations

import trio

from slatedb.aio import Db
from slatedb.checkpoint import CheckpointOptions, create_checkpoint, delete_checkpoint
from slatedb.config import Settings
from slatedb.lsm.view import sst_key
from slatedb.gc import GarbageCollector
from slatedb.gc.retention import manifest_sst_ids, wal_range
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.runtime.production import ProductionRuntime
from slatedb.wal.writer import wal_key

ROUNDS = 12
#: Keys the writer may write per holder round (unbounded, a loaded machine made the WAL range,
#: and so each round, grow without end: the test ran for over half an hour).
KEYS_PER_ROUND = 300
#: Wall-clock jump shared by every runtime and the store (ms).
SHIFT = {"ms": 0}


class ShiftedRuntime(ProductionRuntime):
    def now_ms(self) -> int:
        return super().now_ms() + SHIFT["ms"]


AGGRESSIVE = {"interval": "10ms", "min_age": "0s", "dry_run": False}
SETTINGS = {
    "flush_interval": "10ms",
    "manifest_poll_interval": "50ms",
    "l0_sst_size_bytes": 4096,
    "min_filter_keys": 1,
    "compactor_options": {"poll_interval": "50ms", "scheduler_options": {
        "min_compaction_sources": "2", "max_compaction_sources": "4"}},
    "garbage_collector_options": {
        "manifest_options": AGGRESSIVE, "wal_options": AGGRESSIVE, "wal_fence_options": AGGRESSIVE,
        "compacted_options": AGGRESSIVE, "compactions_options": AGGRESSIVE, "detach_options": {"interval": "10ms"}},
}


def test_checkpoint_holder_reads_everything_it_pinned_while_gc_runs_flat_out() -> None:
    settings = Settings.from_dict(SETTINGS)
    store = MemoryStore(MemoryBucket(), ShiftedRuntime().now_ms, url="memory://gc-live")
    expected: dict[bytes, bytes] = {}
    checked = {"ssts": 0, "wal": 0, "checkpoints": 0}
    quota = {"keys": 0}

    async def writer(db: Db, done: trio.Event) -> None:
        i = 0
        while not done.is_set():
            if i >= quota["keys"]:  # a fixed amount of work per holder round, however slow the machine
                await trio.sleep(0.01)
                continue
            key, value = b"k%04d" % (i % 700), b"v%d" % i + b"." * 40
            await db.put(key, value)
            expected[key] = value
            i += 1
            if i % 20 == 0:
                await trio.sleep(0.005)  # a steady stream, not a CPU-bound flood

    async def holder(done: trio.Event) -> None:
        rt = ShiftedRuntime("holder")
        manifests = ManifestStore(store, rt)
        for _ in range(ROUNDS):
            quota["keys"] += KEYS_PER_ROUND
            await trio.sleep(0.2)
            made = await create_checkpoint(manifests, rt, CheckpointOptions(lifetime_s=10**6))
            pinned = (await manifests.read(made.manifest_id)).manifest
            ssts = sorted(manifest_sst_ids(pinned))
            wal_ids = list(wal_range(pinned))
            for _round in range(4):
                for sst_id in ssts:
                    await store.get(sst_key(sst_id))  # ObjectNotFoundError would fail the test
                for wal_id in wal_ids:
                    await store.get(wal_key(wal_id))
                checked["ssts"] += len(ssts)
                checked["wal"] += len(wal_ids)
                await trio.sleep(0.02)
            await delete_checkpoint(manifests, rt, made.id)
            checked["checkpoints"] += 1
            SHIFT["ms"] += 1_000_000
        done.set()

    async def main() -> None:
        done = trio.Event()
        rt = ShiftedRuntime("writer")
        standalone = GarbageCollector(store, ShiftedRuntime("gc"), settings.garbage_collector_options)
        async with Db.open("memory://gc-live", settings, store=store, runtime=rt) as db:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(standalone.run)
                nursery.start_soon(writer, db, done)
                await holder(done)
                nursery.cancel_scope.cancel()
            await db.refresh_manifest()  # reads only through a view adopted after the last jump (above)
            await db.flush()
            core = db.core
            assert core._error is None, core._error
            assert core.stats.get("gc_errors", 0) == 0 and core.gc.errors == 0 and standalone.errors == 0
            in_process = core.gc.totals
            for key, value in expected.items():
                assert await db.get(key) == value
        total = in_process + standalone.totals
        assert total.ssts_deleted > 0 and total.manifests_deleted > 0 and total.wal_deleted > 0, total
        assert total.checkpoints_expired > 0 and total.compactions_deleted > 0, total
        assert checked["checkpoints"] == ROUNDS and checked["ssts"] > 0 and checked["wal"] > 0, checked
        # and a fresh writer finds the whole database
        async with Db.open("memory://gc-live", {"compactor_options": None, "garbage_collector_options": None},
                           store=store, runtime=ShiftedRuntime("reopen")) as db2:
            for key, value in expected.items():
                assert await db2.get(key) == value

    SHIFT["ms"] = 0
    try:
        trio.run(main)
    finally:
        SHIFT["ms"] = 0
