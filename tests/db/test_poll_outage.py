"""An idle writer outlives a store outage past the retry bound (found trying it on SeaweedFS).

A writer with nothing to write, whose manifest poll met an S3 endpoint down for longer than
``object_store_max_retries`` allows (SeaweedFS killed for 12 s; the default bound gives up after
~7 s), stopped for good: every later ``put`` raised ``ObjectStoreRetriesExhaustedError`` although
the server was back and nothing had been lost. The official 0.17 wheel's idle writer, killed
and restarted the same way (70 s), wrote on afterwards. The poll now tries again next round.
"""

from __future__ import annotations

import trio

import slatedb

from slatedb.objstore.memory import MemoryBucket
from slatedb.runtime.production import ProductionRuntime

from ..reader.helpers import Clock
from .helpers import OutageStore

SETTINGS = {"object_store_max_retries": 1, "manifest_poll_interval": "20ms", "flush_interval": "10ms",
            "compactor_options": None, "garbage_collector_options": None}


def test_an_idle_writer_whose_poll_gave_up_writes_on_once_the_store_answers() -> None:
    store = OutageStore(MemoryBucket(), ProductionRuntime().now_ms, url="memory://idle")
    clock = Clock("idle")
    with slatedb.Db.open("memory://idle", store=store, settings=SETTINGS, runtime=lambda: clock) as db:
        db.put(b"a", b"1", durable=True)
        store.down = True
        try:
            for _ in range(1000):
                if [e for e in clock.kinds("retry_exhausted") if e["what"] == "list manifest/"]:
                    break
                trio.run(trio.sleep, 0.01)
        finally:
            store.down = False
        assert [e for e in clock.kinds("retry_exhausted") if e["what"] == "list manifest/"], "no poll met the outage"
        db.put(b"b", b"2", durable=True)
        assert db.get(b"a") == b"1" and db.get(b"b") == b"2"
    with slatedb.Db.open("memory://idle", store=store, settings=SETTINGS) as db:
        assert db.get(b"b") == b"2"
