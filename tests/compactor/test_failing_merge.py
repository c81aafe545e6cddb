"""A merge operator that raises inside compaction (MERGE-7, spec/protocols/merge.md): the job is
released and its outputs never committed, the typed error is reported once at ERROR
(``compaction_worker_failed``) and its repeats at DEBUG, and this worker claims the job again only
after a backoff that doubles per failure -- not at every poll, re-reading every input each time.
Once the operator is fixed (a compactor started afresh with it) the job completes. Virtual time
(trio's mock clock): minutes of polling cost nothing."""

from __future__ import annotations

import slatedb
import trio

from slatedb.compactor import Compactor
from slatedb.compactor.worker import MAX_FAILED_BACKOFF_S, Worker
from slatedb.errors import MergeOperatorError
from slatedb.format.types import CompactionStatus
from slatedb.runtime.production import ProductionRuntime

from ..db.helpers import latest_manifest, memory_store
from ..gc.helpers import EPOCH_MS, VirtualRuntime, run_virtual
from .helpers import latest_compactions

WRITER = {"compactor_options": None, "l0_sst_size_bytes": 4096, "min_filter_keys": 1, "l0_max_ssts": 1000}
SETTINGS = slatedb.Settings.from_dict({"min_filter_keys": 1, "compactor_options": {
    "poll_interval": "20ms", "commit_compacted_interval": "20ms",
    "scheduler_options": {"min_compaction_sources": "2"},
    "worker": {"compactions_poll_interval": "20ms"}}})


def concat(key: bytes, existing: bytes | None, operand: bytes) -> bytes:
    return (existing or b"") + operand


def boom(key: bytes, existing: bytes | None, operand: bytes) -> bytes:
    raise RuntimeError("operator down")


def _runtime() -> VirtualRuntime:
    rt = VirtualRuntime("compactor")
    rt.offset_ms = ProductionRuntime("test").now_ms() - EPOCH_MS + 1000  # after the writer's objects
    return rt


def test_a_failing_operator_is_retried_after_a_doubling_backoff_then_completes_once_fixed() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store, merge_operator=concat) as db:
        for i in range(3):
            db.merge(b"a", b"%d" % i)
            db.flush(wal=False)
    rt = _runtime()
    made: dict[str, Compactor] = {}

    async def main() -> None:
        made["failing"] = Compactor(store, rt, SETTINGS, merge_operator=boom)
        with trio.move_on_after(10.0):
            await made["failing"].run()
        made["before"] = latest_manifest(store)[1]
        made["fixed"] = Compactor(store, rt, SETTINGS, merge_operator=concat)  # the operator fixed
        with trio.move_on_after(5.0):
            await made["fixed"].run()

    run_virtual(main)
    failing, fixed = made["failing"], made["fixed"]
    first = rt.kinds("compaction_worker_failed")
    again = rt.kinds("compaction_worker_failed_again")
    # 10 s of 20 ms polls: one failure per poll would be ~500 runs; the backoff (40 ms, 80 ms,
    # ... doubling) allows about log2(10 / 0.02) of them.
    assert len(first) == 1 and 4 <= len(again) <= 8, (len(first), len(again))
    assert failing.stats["failed_runs"] == 1 + len(again) and failing.stats["completed"] == 0
    assert "operator down" in first[0]["error"] and "b'a'" in first[0]["error"]
    waits = [f["retry_in_s"] for f in first + again]
    assert waits == [min(MAX_FAILED_BACKOFF_S, 0.02 * 2 ** n) for n in range(1, len(waits) + 1)]
    (job,) = failing.worker.failing.values()
    assert isinstance(job.error.error, MergeOperatorError) and job.failures == len(waits)
    # Released, never marked failed; nothing half-written committed; then the fixed compactor
    # claimed it at once and completed it.
    released = [e for e in rt.kinds("compaction_released") if e["why"] != "shutdown"]
    assert len(released) == failing.stats["failed_runs"]
    assert len(made["before"].l0) == 3 and not made["before"].compacted
    assert fixed.stats["completed"] == 1, fixed.stats
    _, c = latest_compactions(store)
    assert [x.status for x in c.recent_compactions] == [CompactionStatus.COMPLETED]
    _, m = latest_manifest(store)
    assert not m.l0 and m.compacted
    with slatedb.Db.open("memory://test", settings=WRITER, store=store, merge_operator=concat) as db:
        assert db.get(b"a") == b"012"


def test_the_wait_after_a_failed_run_doubles_from_twice_the_poll_interval_up_to_five_minutes() -> None:
    """docs/compaction.md: the backoff runs from twice ``compactions_poll_interval`` up to 5
    minutes, and stays there however often the job fails."""
    w = Worker(memory_store(), ProductionRuntime("test"), slatedb.Settings.from_dict(
        {"compactor_options": {"worker": {"compactions_poll_interval": "1s"}}}))
    assert [w.retry_in_s(n) for n in (1, 2, 7, 8, 9, 40, 10_000)] == [2.0, 4.0, 128.0, 256.0, 300.0, 300.0, 300.0]
