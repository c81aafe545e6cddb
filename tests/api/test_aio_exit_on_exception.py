"""docs/db.md "Leaving an async with block by an exception": the async block stops the engine
without flushing (the durable writes stay, the rest is lost), the sync ``with`` closes and
flushes either way, and ``await db.close()`` in a ``finally`` keeps every write. Written down
after trying it: the two APIs differ here and the docs did not say so."""

from __future__ import annotations

import asyncio

import pytest
import trio

import slatedb
import slatedb.aio as aio

S = {"flush_interval": "1h", "compactor_options": None}


def _keys(url: str) -> list[bytes]:
    with slatedb.Db.open(url) as db:
        return [k for k, _ in db.scan()]


def test_the_sync_block_flushes_when_it_raises(tmp_path) -> None:
    url = f"file://{tmp_path}"
    with pytest.raises(KeyError):
        with slatedb.Db.open(url, S) as db:
            db.put(b"a", b"1", durable=True)
            db.put(b"b", b"2")
            raise KeyError("the block failed")
    assert _keys(url) == [b"a", b"b"]


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_the_async_block_stops_without_flushing_unless_closed_in_finally(tmp_path, loop) -> None:
    async def raising(url: str, close_in_finally: bool) -> None:
        with pytest.raises(KeyError):
            async with aio.Db.open(url, S) as db:
                try:
                    await db.put(b"a", b"1", durable=True)
                    await db.put(b"b", b"2")
                    raise KeyError("the block failed")
                finally:
                    if close_in_finally:
                        await db.close()

    run = (lambda fn, *a: asyncio.run(fn(*a))) if loop == "asyncio" else trio.run
    run(raising, f"file://{tmp_path}/lost", False)
    assert _keys(f"file://{tmp_path}/lost") == [b"a"]
    run(raising, f"file://{tmp_path}/kept", True)
    assert _keys(f"file://{tmp_path}/kept") == [b"a", b"b"]
