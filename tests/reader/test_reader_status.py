"""``DbReader.status()``, sync and async: what a reader knows of its view. ``Db.status()`` existed
and the official reader has ``status()`` (``DbStatus(durable_seq, close_reason, segments)``), but
the native ``DbReader`` had none (AttributeError). The status is a superset of ``DbStatus``'s
fields: the newest seq held, why it closed, the manifest and checkpoint the view is pinned to,
the newest WAL object in it."""

from __future__ import annotations

import attrs
import pytest

import slatedb
import slatedb.aio
from slatedb import CloseReason, DbReaderStatus

from .helpers import WRITER, checkpoints, memory_store, open_reader, write_next_manifest


def test_status_follows_the_view_and_says_why_it_closed() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1", durable=True)
        cp = db.create_checkpoint()
        with open_reader(store) as r:
            st = r.status()
            assert isinstance(st, DbReaderStatus)
            assert (st.durable_seq, st.close_reason) == (1, None)
            assert st.manifest_id == r.manifest_id and st.checkpoint_id == r.checkpoint_id is not None
            assert st.last_wal_id >= 1
            db.put(b"b", b"2", durable=True)
            r.refresh()
            later = r.status()
            assert later.durable_seq == 2 and later.last_wal_id > st.last_wal_id
        closed = r.status()  # after close: no I/O, the reason says CLEAN
        assert closed.close_reason is CloseReason.CLEAN and closed.durable_seq == 2
        with open_reader(store, cp.id) as fixed:
            assert fixed.status().checkpoint_id == cp.id
            assert fixed.status().manifest_id == cp.manifest_id and fixed.status().durable_seq == 1


def test_a_reader_stopped_by_a_fatal_error_says_panic() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1")
    with open_reader(store) as r:
        write_next_manifest(store, lambda m: attrs.evolve(m, destroyed_at_s=1_700_000_000))
        r.refresh()
        assert r.status().close_reason is CloseReason.PANIC
    assert not [c for c in checkpoints(store) if c.metadata is None]


@pytest.mark.anyloop
async def test_the_async_reader_has_it_too() -> None:
    store = memory_store()
    with slatedb.Db.open("memory://test", settings=WRITER, store=store) as db:
        db.put(b"a", b"1", durable=True)
    async with slatedb.aio.DbReader.open("memory://test", store=store) as r:
        st = r.status()  # synchronous, as aio.Db.status()
        assert (st.durable_seq, st.close_reason, st.manifest_id) == (1, None, r.manifest_id)
    assert r.status().close_reason is CloseReason.CLEAN
