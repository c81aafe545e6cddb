"""The in-process compactor after a store outage past the retry bound (found trying it).

A burst of S3 errors on the compactor's own calls (``503 SlowDown`` on ``compactions/``, longer
than ``object_store_max_retries`` allows) stopped the in-process compactor for the rest of the
database's life, reported only as a ``compactor_error`` event. The writer went on; once L0 was
full (``l0_max_ssts``) and ``max_unflushed_bytes`` was reached, every ``put`` waited forever for
a compaction that would never come. The compactor now starts again one ``poll_interval`` after
such an error (an error that retrying cannot fix still stops it, as before).
"""

from __future__ import annotations

import threading

import trio

import slatedb
from slatedb.errors import TransientObjectStoreError
from slatedb.objstore.memory import MemoryBucket
from slatedb.runtime.production import ProductionRuntime

from ..reader.helpers import Clock
from .helpers import OutageStore


class _SlowDown(OutageStore):
    """Every call under ``compactions/`` fails as S3 throttling while ``down``."""

    def _check(self, key: str) -> None:
        if self.down and key.startswith("compactions"):
            raise TransientObjectStoreError(key, "S3 503 SlowDown (test)")


SETTINGS = {"object_store_max_retries": 1, "manifest_poll_interval": "50ms", "flush_interval": "10ms",
            "l0_sst_size_bytes": 4096, "l0_max_ssts": 4, "max_unflushed_bytes": 65536,
            "compactor_options": {"poll_interval": "50ms"}, "garbage_collector_options": None}


def test_the_in_process_compactor_starts_again_after_an_outage_and_puts_do_not_hang() -> None:
    store = _SlowDown(MemoryBucket(), ProductionRuntime().now_ms, url="memory://outage")
    clock = Clock("outage")
    db = slatedb.Db.open("memory://outage", store=store, settings=SETTINGS, runtime=lambda: clock)
    try:
        db.put(b"a", b"1", durable=True)
        store.down = True
        try:
            for _ in range(1000):
                if clock.kinds("compactor_error"):
                    break
                trio.run(trio.sleep, 0.01)
        finally:
            store.down = False
        assert clock.kinds("compactor_error"), "the compactor never met the outage"
        assert "ObjectStoreRetriesExhaustedError" in clock.kinds("compactor_error")[0]["error"]

        done: list[int] = []

        def write() -> None:
            for i in range(3000):  # ~600 KB: many times max_unflushed_bytes, so L0 must be compacted
                db.put(b"k%06d" % i, b"x" * 200)
            done.append(i)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(120)  # a liveness bound, not a timing: before the fix it never ended
        assert done == [2999], "puts hang: L0 is full and the compactor never runs again"
        assert db.get(b"k002999") == b"x" * 200
    finally:
        db.close()
