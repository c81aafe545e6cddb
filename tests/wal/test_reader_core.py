"""``WalReaderCore`` (the engine behind ``slatedb.WalReader``) under the host protocol of
slatedb/api/portal.py: the hosts stop an engine with ``aclose()`` or ``abort()`` and read
``closed`` afterwards (``RuntimeThread.close`` skips ``aclose`` on a closed engine)."""

from __future__ import annotations

import trio

from slatedb.runtime.production import ProductionRuntime
from slatedb.wal.reader import WalReaderCore
from tests.db.helpers import memory_store


def test_a_wal_reader_core_is_closed_after_aclose_and_after_abort() -> None:
    fresh = WalReaderCore(memory_store(), ProductionRuntime())
    assert fresh.closed is False
    closed = WalReaderCore(memory_store(), ProductionRuntime())
    trio.run(closed.aclose)
    assert closed.closed is True
    aborted = WalReaderCore(memory_store(), ProductionRuntime())
    aborted.abort()  # a crash, as the store sees it: nothing to flush, but the engine is closed
    assert aborted.closed is True
