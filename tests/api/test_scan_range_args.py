"""A scan range with no key in it is refused at the call, as the official binding refuses it.

Found by using it: ``db.scan(b"z", b"a")`` (the bounds swapped) returned nothing, without a word,
where the official 0.17 wheel raises ``Error.Invalid("range start must not be greater than range
end")``; ``scan(b"a", b"a")`` (an exclusive end equal to the start) likewise, where the official
raises ``Error.Invalid("range must be non-empty")`` (probed on the wheel: ``KeyRange(b"z", True,
b"a", False)`` and ``KeyRange(b"a", True, b"a", False)``). Every read surface shares the check
(``slatedb.api.args.scan_bounds``): ``Db``, its snapshots and transactions, ``DbReader``, and the
async forms."""

from __future__ import annotations

import pytest

import slatedb
import slatedb.aio as aio
from slatedb.errors import InvalidArgumentError

from ..db.helpers import memory_store

BAD = [
    ((b"z", b"a"), "scan start b'z' is greater than end b'a'"),
    ((b"b", b"a\xff"), "is greater than end"),
    ((b"a", b"a"), r"scan range is empty: start == end == b'a'"),
    ((b"", b""), "scan range is empty"),
]


@pytest.fixture
def db():
    with slatedb.Db.open("memory://test", store=memory_store()) as db:
        for k in (b"a", b"b", b"z"):
            db.put(k, b"v")
        yield db


@pytest.mark.parametrize("bounds, message", BAD)
def test_a_range_with_no_key_in_it_is_refused_on_every_sync_surface(db, bounds, message) -> None:
    snap = db.snapshot()
    txn = db.begin()
    with slatedb.DbReader.open("memory://test", store=db._core.store) as reader:
        for what in (db, snap, txn, reader):
            with pytest.raises(InvalidArgumentError, match=message):
                what.scan(*bounds)
            with pytest.raises(InvalidArgumentError, match=message):
                what.scan(*bounds, reverse=True)
    snap.close()
    txn.rollback()


def test_ranges_with_keys_in_them_still_scan(db) -> None:
    assert [k for k, _ in db.scan(b"a", b"a\x00")] == [b"a"]
    assert [k for k, _ in db.scan(b"", b"b")] == [b"a"]
    assert [k for k, _ in db.scan(None, b"a")] == []  # open start: never refused
    assert [k for k, _ in db.scan(b"zz", None)] == []  # open end: never refused
    assert [k for k, _ in db.scan(b"b", b"c", reverse=True)] == [b"b"]


@pytest.mark.anyloop
async def test_the_async_api_refuses_it_too() -> None:
    async with aio.Db.open("memory://test", store=memory_store()) as db:
        await db.put(b"a", b"v")
        for bounds, message in BAD:
            with pytest.raises(InvalidArgumentError, match=message):
                db.scan(*bounds)
            with pytest.raises(InvalidArgumentError, match=message):
                await (await db.begin()).scan(*bounds)
        assert [k async for k, _ in db.scan(b"a", b"b")] == [b"a"]
