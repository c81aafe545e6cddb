"""A ``flush()`` whose WAL write gives up (the store down past the retry bound) stops the
database, as the WAL flusher's own failure does: the rows it had taken from the WAL buffer were
never written, so nothing after them may be acknowledged durable.

Found by flushing during an outage (trio, ``move_on_after`` around ``db.flush()``; the write is
shielded, so it ran its retries out): the flush raised ``ObjectStoreRetriesExhaustedError`` and
had dropped its rows from the WAL buffer; the next ``flush()`` returned at once with nothing
written, and a later durable write's acknowledgement covered the lost rows: a writer stopped
then (or fenced by the next open) lost all of them.
"""

from __future__ import annotations

import pytest

import slatedb
from slatedb.errors import ObjectStoreRetriesExhaustedError, SlateDBError
from slatedb.objstore.memory import MemoryRegistry
from slatedb.runtime.production import ProductionRuntime
from tests.db.helpers import OutageStore

SETTINGS = {"flush_interval": "1h", "compactor_options": None, "object_store_max_retries": 0}


def test_a_flush_that_gave_up_stops_the_database_and_acknowledges_nothing_after(tmp_path) -> None:
    registry = MemoryRegistry()

    def store() -> OutageStore:
        return OutageStore(registry.bucket("b"), ProductionRuntime().now_ms, root="db/", url="memory://b/db",
                           registry=registry)

    outage = store()
    db = slatedb.Db.open("memory://b/db", SETTINGS, store=outage)
    try:
        for i in range(100):
            db.put(b"k%03d" % i, b"v")
        outage.down = True
        with pytest.raises(ObjectStoreRetriesExhaustedError):
            db.flush()
        outage.down = False
        with pytest.raises(SlateDBError) as info:  # stopped: no write is taken, none acknowledged
            db.put(b"late", b"v", durable=True)
        assert isinstance(info.value, ObjectStoreRetriesExhaustedError), repr(info.value)
        with pytest.raises(ObjectStoreRetriesExhaustedError):
            db.flush()  # not a quiet "done" with the rows never written
    finally:
        with pytest.raises(ObjectStoreRetriesExhaustedError):
            db.close()  # the 100 rows the flush took are lost: the close says so (test_close_after_background_failure.py)
    with slatedb.Db.open("memory://b/db", SETTINGS, store=store()) as db2:
        assert db2.get(b"late") is None
