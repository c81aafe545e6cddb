"""What the writer checkpoint (CKPT-4, writer.md) protects, end to end: a writer that has not yet
adopted a compactor's manifest still reads the L0 SSTs the compactor replaced, and its writer
checkpoint (pinning the manifest it last wrote) is what keeps GC from collecting them once the
compactor's own pin has expired. With the catalogue switch ``writer-checkpoint-released-at-flush``
the same history loses the SST under the writer's read. (The simulator's worlds never reach it:
their compactor pins last 30 s or more and their writers poll sooner; hence the history check,
``sim/checks/writer_checkpoint.py``.) Simulator runtimes on the virtual clock, no faults."""

from __future__ import annotations

import trio

from slatedb import aio
from slatedb.compactor import Compactor
from slatedb.config import Settings
from slatedb.errors import ObjectNotFoundError
from slatedb.gc.collector import run_gc
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.runtime import switches

from ..gc.helpers import gc_options

#: A writer that never polls the manifest during the test, without a block cache (its reads go to
#: the store) and without an in-process compactor (the compactor is another process).
WRITER = {"compactor_options": None, "manifest_poll_interval": "1h", "flush_interval": "1h",
          "block_cache_size_bytes": 0, "min_filter_keys": 1}
COMPACTOR = Settings.from_dict({"min_filter_keys": 1, "compactor_options": {
    "poll_interval": "20ms", "commit_compacted_interval": "20ms", "checkpoint_lifetime": "1s",
    "scheduler_options": {"min_compaction_sources": "2"}, "worker": {"compactions_poll_interval": "20ms"}}})


def _read_after_compaction_and_gc(bugs: frozenset[str]) -> tuple[int, object]:
    from sim.world.runtime import SimRuntime, run_deterministic
    from sim.world.trace import Trace

    async def main():
        trace = Trace(trio.current_time)
        rt = SimRuntime("w", 1, trace, bugs=bugs)
        crt, grt = SimRuntime("c", 2, trace), SimRuntime("g", 3, trace)  # one wall clock: made together
        store = MemoryStore(MemoryBucket(), rt.now_ms, url="memory://wc")
        async with aio.Db.open("memory://wc", WRITER, store=store, runtime=rt) as db:
            for batch in (b"a", b"b"):  # two L0 SSTs: "a" rows in the older one
                for i in range(20):
                    await db.put(batch + b"%02d" % i, b"v")
                await db.flush(wal=False)
                await trio.sleep(0.1)  # the older SST's ULID time lies below GC's ULID cutoff (the newer one's)
            compactor = Compactor(store, crt, COMPACTOR)
            with trio.move_on_after(5.0):
                await compactor.run()
            assert compactor.stats["completed"] == 1, compactor.stats
            await trio.sleep(2.0)  # the compactor's 1 s pin of the manifest it replaced expires
            stats = await run_gc(store, grt, gc_options(min_age_s=0.5), once=True)
            try:
                got: object = await db.get(b"a05")  # the writer still reads its own (pre-compaction) view
            except ObjectNotFoundError as e:
                got = e
            return stats.ssts_deleted, got

    return run_deterministic(main, seed=1)


def test_the_writer_checkpoint_keeps_what_the_writer_still_reads() -> None:
    assert _read_after_compaction_and_gc(frozenset()) == (0, b"v")


def test_without_it_gc_collects_an_sst_under_the_writers_read() -> None:
    deleted, got = _read_after_compaction_and_gc(frozenset({switches.WRITER_CHECKPOINT_RELEASED_AT_FLUSH}))
    assert deleted >= 1 and isinstance(got, ObjectNotFoundError), (deleted, got)
