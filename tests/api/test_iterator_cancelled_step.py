"""A scan step given up on (``trio.move_on_after``, ``asyncio.wait_for``, a cancelled task)
loses no row: the next step returns the rows the cancelled one would have.

Found by cancelling ``next_batch`` under timeouts: an iterator that had pulled rows ahead (an
``async for`` step pulls a buffer of them) and was then asked for more rows than it held took
the buffered rows, awaited a block read for the rest, and, cancelled there, dropped the rows
it had taken -- the scan went on 255 rows later. ``slatedb.uniffi``'s ``next_batch`` dropped
its rows the same way when cancelled while it looked up their metadata.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import pytest
import sniffio
import trio

import slatedb
import slatedb.aio as aio

#: One L0 SST well over a read's ~256 KiB and no block cache: every step past the rows already
#: read needs a block read, where a cancellation lands: a memory store's through the engine's
#: loop, a local directory's on the caller's thread, followed by a yield to the loop.
SETTINGS = {"compactor_options": None, "block_cache_size_bytes": 0, "l0_sst_size_bytes": 64 << 20,
            "flush_interval": "1h"}
KEYS = [b"k%05d" % i for i in range(900)]


STORES = pytest.mark.parametrize("store", ["file", "memory"])


def _url(store: str, tmp_path) -> str:
    return f"file://{tmp_path}/db" if store == "file" else f"memory://cancelled-step-{tmp_path.name}/db"


def _fill(url: str) -> None:
    with slatedb.Db.open(url, SETTINGS) as db:
        for k in KEYS:
            db.put(k, b"v" * 2000)
        db.flush(wal=False)


async def _cancelled(step: Callable[[], Awaitable[Any]]) -> tuple[bool, Any]:
    """Run ``step`` and cancel it at its first suspension: (True, None) when it was cancelled
    there, else (False, what it returned)."""
    if sniffio.current_async_library() == "trio":
        got = None
        with trio.move_on_after(0) as scope:
            got = await step()
        return scope.cancelled_caught, got
    task = asyncio.ensure_future(step())
    await asyncio.sleep(0)  # the step runs up to its first await: a block read
    task.cancel()
    try:
        return False, await task
    except asyncio.CancelledError:
        return True, None


@STORES
@pytest.mark.anyloop
async def test_a_cancelled_next_batch_loses_no_buffered_row(tmp_path, store) -> None:
    url = _url(store, tmp_path)
    _fill(url)
    async with aio.Db.open(url, SETTINGS) as db:
        it = db.scan()
        got = [(await it.__anext__())[0]]  # pulls a buffer of rows ahead
        assert (await _cancelled(lambda: it.next_batch(600)))[0]  # the buffer, then a block read
        got += [k for k, _ in await it.next_batch(10_000)]
    assert got == KEYS


@STORES
@pytest.mark.anyloop
async def test_cancelled_steps_of_every_kind_lose_no_row(tmp_path, store) -> None:
    url = _url(store, tmp_path)
    _fill(url)
    cancels = 0
    async with aio.Db.open(url, SETTINGS) as db:
        for reverse in (False, True):
            it = db.scan(reverse=reverse)
            got: list[bytes] = []
            for i in range(10_000):
                if i % 3 == 2:
                    cancelled, rows = await _cancelled(lambda: it.next_batch(97))
                    cancels += cancelled
                    got += [k for k, _ in rows or []]
                    continue
                if i % 2:
                    rows = await it.next_batch(50)
                    if not rows:
                        break
                    got += [k for k, _ in rows]
                else:
                    try:
                        got.append((await it.__anext__())[0])
                    except StopAsyncIteration:
                        break
            assert got == (KEYS[::-1] if reverse else KEYS)
    assert cancels > 0


def test_a_cancelled_uniffi_next_batch_loses_no_row(tmp_path) -> None:
    import slatedb.uniffi as u

    url = f"file://{tmp_path}/db"
    _fill(url)

    async def main() -> list[bytes]:
        store = u.ObjectStoreBuilder.from_url(f"file://{tmp_path}").build()
        builder = u.DbBuilder("db", store)
        settings = u.Settings.default()
        for key, value in (("block_cache_size_bytes", "0"), ("compactor_options", "null")):
            settings.set(key, value)
        builder.with_settings(settings)
        db = await builder.build()
        it = await db.scan(u.KeyRange(start=None, start_inclusive=False, end=None, end_inclusive=False))
        got = [(await it.next()).key]  # reads the first blocks: the next rows need no block read
        # ... but their metadata does (a point lookup each, no block cache): cancelled there.
        assert (await _cancelled(lambda: it.next_batch(50)))[0]
        got += [kv.key for kv in await it.next_batch(10_000)]
        await db.shutdown()
        return got

    assert asyncio.run(main()) == KEYS
