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


def test_changes_from_no_start_id_begin_at_the_oldest_wal_object_left() -> None:
    """``iterate`` with no ``start_id`` starts at the oldest WAL object listed (here 5: GC removed
    the ones before it), and its rows come first."""
    from slatedb.format.sst import SstOptions
    from slatedb.format.wal_sst import encode_wal_sst
    from slatedb.row import Row, RowKind
    from slatedb.wal.reader import iterate
    from slatedb.wal.writer import wal_key

    store = memory_store()
    for wal_id in (5, 6):
        store.put_now(wal_key(wal_id), encode_wal_sst([Row(b"k%d" % wal_id, wal_id, RowKind.VALUE, b"v")], SstOptions()).data)
    core = WalReaderCore(store, ProductionRuntime())
    rows = list(iterate(lambda fn, *args: trio.run(fn, *args), core, None, False, 0.1))
    assert [(r.wal_id, r.key, r.seq) for r in rows] == [(5, b"k5", 5), (6, b"k6", 6)]
