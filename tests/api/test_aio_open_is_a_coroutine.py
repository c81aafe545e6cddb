"""``slatedb.aio.Db.open(url)`` (and ``aio.DbReader.open``, ``aio.WalReader.open``) is a
coroutine, so what takes one takes it: ``asyncio.run(aio.Db.open(url))``,
``asyncio.create_task(aio.Db.open(url))``, ``trio.run(aio.Db.open, url)``. Before:
"ValueError: a coroutine was expected, got <slatedb.api.portal.Opening object ...>" (and
trio's "Trio expected an async function, but ... appears to be synchronous"): the open returned an
awaitable that was no coroutine. Like a coroutine it opens once: awaiting it again used to open a
second writer (fencing the first), now raises ``InvalidArgumentError`` at the await."""

from __future__ import annotations

import asyncio

import pytest
import trio

import slatedb
import slatedb.aio as aio
from slatedb.errors import InvalidArgumentError


def test_asyncio_run_of_open(tmp_path) -> None:
    url = f"file://{tmp_path}"
    db = asyncio.run(aio.Db.open(url))
    assert isinstance(db, aio.Db)
    asyncio.run(db.put(b"k", b"v", durable=True))  # the engine runs on its own thread: any loop
    asyncio.run(db.close())
    reader = asyncio.run(aio.DbReader.open(url))
    assert asyncio.run(reader.get(b"k")) == b"v"
    asyncio.run(reader.close())
    walr = asyncio.run(aio.WalReader.open(url))
    asyncio.run(walr.close())


def test_create_task_and_the_documented_forms(tmp_path) -> None:
    url = f"file://{tmp_path}"

    async def main() -> list:
        out = []
        db = await asyncio.create_task(aio.Db.open(url))
        async with db:
            await db.put(b"k", b"1")
        async with await aio.Db.open(url) as db:
            out.append(await db.get(b"k"))
        async with aio.Db.open(url) as db:
            out.append(await db.get(b"k"))
        db = await asyncio.wait_for(aio.Db.open(url), 60)
        out.append(await db.get(b"k"))
        await db.close()
        return out

    assert asyncio.run(main()) == [b"1", b"1", b"1"]


def test_trio_run_of_open(tmp_path) -> None:
    url = f"file://{tmp_path}"

    async def main() -> bytes | None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(aio.Db.open, url)  # a coroutine function for trio too
        async with aio.Db.open(url) as db:
            await db.put(b"k", b"v")
            return await db.get(b"k")

    assert isinstance(trio.run(aio.Db.open, url), aio.Db)
    assert trio.run(main) == b"v"


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_one_open_opens_once(tmp_path, loop: str) -> None:
    url = f"file://{tmp_path}"

    async def main() -> None:
        opening = aio.Db.open(url)
        db = await opening
        with pytest.raises(InvalidArgumentError, match="already awaited"):
            await opening
        with pytest.raises(InvalidArgumentError, match="already awaited"):
            async with opening:
                pass
        await db.put(b"k", b"v", durable=True)  # not fenced by a second open
        await db.close()

    asyncio.run(main()) if loop == "asyncio" else trio.run(main)
    with slatedb.Db.open(url) as db:
        assert db.get(b"k") == b"v"


def test_a_forgotten_await_is_named(tmp_path) -> None:
    """``db = aio.Db.open(url)`` then ``db.put(...)``: the AttributeError says the open was not
    awaited (before: "'Opening' object has no attribute 'put'", naming an internal class)."""
    url = f"file://{tmp_path}"
    for opening, what in ((aio.Db.open(url), "slatedb.aio.Db"), (aio.WalReader.open(url), "slatedb.aio.WalReader")):
        with pytest.raises(AttributeError, match=rf"'put'.*pending open.*await {what}\.open"):
            opening.put(b"k", b"v")
        assert getattr(opening, "_asyncio_future_blocking", None) is None  # what asyncio and trio probe
        assert not hasattr(opening, "_no_such_private_name")


def test_a_plain_with_says_async_with(tmp_path) -> None:
    """``with aio.Db.open(url) as db:`` in async code: the TypeError says to write ``async with``
    (before: "'Opening' object does not support the context manager protocol"). Nothing opens."""
    with pytest.raises(TypeError, match=r"async with slatedb\.aio\.Db\.open.*slatedb\.Db\.open"):
        with aio.Db.open(f"file://{tmp_path}"):
            pass
    assert not any(tmp_path.iterdir())
