"""``slatedb.uniffi``: an argument of the wrong type where bytes go (a key, a value, an operand,
a prefix, a ``KeyRange`` bound, the keys of ``mark_read`` / ``unmark_write``) raises a plain
``TypeError`` at the call, as the official binding's generated checks do (probed on the 0.17
wheel) -- in every class, not ``Error.Invalid`` from the calls whose conversion ran inside the
layer's error translation. Nothing is written."""

from __future__ import annotations

import asyncio

import pytest

import slatedb.uniffi as u


def _kr(start=None, end=None):
    return u.KeyRange(start=start, start_inclusive=True, end=end, end_inclusive=False)


def test_wrong_byte_argument_types_raise_type_error(tmp_path):
    async def main():
        store = u.ObjectStoreBuilder.from_url(f"file://{tmp_path}").build()
        db = await u.DbBuilder("db", store).build()
        await db.put(b"a", b"1")
        txn = await db.begin(u.IsolationLevel.SNAPSHOT)
        wb = u.WriteBatch()
        calls = {
            "db.put value": lambda: db.put(b"a", "1"),
            "db.scan str bounds": lambda: db.scan(_kr("a", "b")),
            "db.scan_prefix str": lambda: db.scan_prefix("a", _kr()),
            "snapshot.scan str bound": None,
            "txn.put key": lambda: txn.put("a", b"1"),
            "txn.put value": lambda: txn.put(b"a", "1"),
            "txn.delete": lambda: txn.delete(5),
            "txn.get": lambda: txn.get(None),
            "txn.get_key_value": lambda: txn.get_key_value("a"),
            "txn.scan str bound": lambda: txn.scan(_kr(None, "b")),
            "txn.scan_prefix str": lambda: txn.scan_prefix("a", _kr()),
            "txn.mark_read str": lambda: txn.mark_read("abc"),
            "txn.mark_read None": lambda: txn.mark_read(None),
            "txn.unmark_write strs": lambda: txn.unmark_write(["a"]),
        }
        snap = await db.snapshot()
        calls["snapshot.scan str bound"] = lambda: snap.scan(_kr("a"))
        for what, call in calls.items():
            with pytest.raises(TypeError) as info:
                await call()
            assert type(info.value) is TypeError, (what, info.value)
        for what, call in {
            "batch.put key": lambda: wb.put("x", b"1"),
            "batch.put value": lambda: wb.put(b"x", "1"),
            "batch.put None": lambda: wb.put(None, b"1"),
            "batch.delete": lambda: wb.delete(5),
            "batch.merge": lambda: wb.merge("x", b"1"),
            "batch.put_with_options": lambda: wb.put_with_options("x", b"1", u.PutOptions(ttl=u.Ttl.DEFAULT())),
        }.items():
            with pytest.raises(TypeError) as info:
                call()
            assert type(info.value) is TypeError, (what, info.value)
        await txn.rollback()
        assert await db.get(b"x") is None
        await db.shutdown()

    asyncio.run(main())
