"""A close after the database stopped with writes no WAL object holds raises the error that
stopped it; a quiet close would tell the caller those writes were kept.

Found on SeaweedFS (docs/objstore.md): ``durable=False`` puts, the server killed with SIGKILL,
the background WAL flusher gave up after its retries (stopping the database), and ``close()``
then returned without an error: after a restart none of the 1,000 rows was there, and nothing
had told the caller. A close whose rows are all durable stays quiet after a failure
(tests/db/test_close_writes.py), and so does a fenced writer's (docs/db.md ``FencedError``).
"""

from __future__ import annotations

import pytest
import trio

import slatedb
import slatedb.aio as aio
from slatedb.errors import ObjectStoreRetriesExhaustedError
from slatedb.objstore.memory import MemoryRegistry
from slatedb.runtime.production import ProductionRuntime
from tests.db.helpers import OutageStore

#: The WAL flusher writes on its own every 10 ms and gives up at the first refused call.
SETTINGS = {"flush_interval": "10ms", "compactor_options": None, "manifest_poll_interval": "1h",
            "object_store_max_retries": 0}


def _stores():
    registry = MemoryRegistry()

    def store() -> OutageStore:
        return OutageStore(registry.bucket("b"), ProductionRuntime().now_ms, root="db/", url="memory://b/db",
                           registry=registry)

    return store


def test_close_raises_when_the_background_wal_flusher_gave_up_on_unwritten_writes() -> None:
    store = _stores()
    outage = store()
    db = slatedb.Db.open("memory://b/db", SETTINGS, store=outage)
    db.put(b"first", b"v", durable=True)
    outage.down = True
    handles = [db.put(b"k%03d" % i, b"v") for i in range(100)]  # not durable: no call waits
    with pytest.raises(ObjectStoreRetriesExhaustedError):
        handles[-1].wait_durable(timeout_s=60)  # the background flush gave up: the database stopped
    outage.down = False
    with pytest.raises(ObjectStoreRetriesExhaustedError) as info:
        db.close()  # before the fix: returned quietly
    assert any("100 newest writes" in note for note in info.value.__notes__), info.value.__notes__
    db.close()  # closed: idempotent and quiet
    with slatedb.Db.open("memory://b/db", SETTINGS, store=store()) as db2:
        assert db2.get(b"first") == b"v"
        assert db2.get(b"k000") is None  # what the close reported lost


def test_close_stays_quiet_when_every_write_was_durable_before_the_failure() -> None:
    store = _stores()
    outage = store()
    db = slatedb.Db.open("memory://b/db", {**SETTINGS, "flush_interval": "1h"}, store=outage)
    db.put(b"first", b"v", durable=True)
    outage.down = True
    with pytest.raises(ObjectStoreRetriesExhaustedError):
        db.flush(wal=False)  # the memtable's L0 flush gives up: the database stops, every row durable
    outage.down = False
    db.close()
    with slatedb.Db.open("memory://b/db", SETTINGS, store=store()) as db2:
        assert db2.get(b"first") == b"v"


def test_aio_close_raises_when_the_background_wal_flusher_gave_up_on_unwritten_writes() -> None:
    store = _stores()
    outage = store()

    async def main() -> None:
        db = await aio.Db.open("memory://b/db", SETTINGS, store=outage)
        await db.put(b"first", b"v", durable=True)
        outage.down = True
        handle = await db.put(b"k", b"v")
        with pytest.raises(ObjectStoreRetriesExhaustedError):
            await handle.wait_durable()
        outage.down = False
        with pytest.raises(ObjectStoreRetriesExhaustedError):
            await db.close()

    trio.run(main)
