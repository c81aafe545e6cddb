"""``slatedb.aio``'s opens check the store URL, and ``aio.DbReader.open`` its ``checkpoint_id``
and ``options``, at the call, before anything is awaited, with the sync API's typed error.
Before: ``aio.Db.open("nosuch://x")`` returned an ``Opening`` and the ``InvalidUrlError`` came
only from the ``await`` (or never, for an open that was never awaited); the same for
``aio.DbReader.open(url, checkpoint_id="not-a-uuid")`` (``InvalidArgumentError``)."""

from __future__ import annotations

import asyncio

import pytest
import trio

import slatedb
import slatedb.aio as aio
from slatedb.errors import InvalidArgumentError, InvalidUrlError

BAD_URLS = [
    ("nosuch://x", "unsupported store URL scheme 'nosuch'"),
    ("not a url", "store URL has no scheme"),
    ("s3://", "s3 URL needs a bucket"),
    ("file:relative", "file URL must hold an absolute path"),
    ("file:///tmp/x?y=1", r"unknown file URL parameter\(s\) \['y'\]"),
    ("memory://", "memory URL needs a store name"),
    ("memory://x#frag", "store URL has a fragment"),
]


@pytest.mark.parametrize("url, words", BAD_URLS)
def test_a_bad_url_is_refused_by_the_call_itself_as_by_the_sync_api(url, words) -> None:
    for sync_open in (slatedb.Db.open, slatedb.DbReader.open, slatedb.WalReader.open):
        with pytest.raises(InvalidUrlError, match=words):
            sync_open(url)
    for aio_open in (aio.Db.open, aio.DbReader.open, aio.WalReader.open):
        with pytest.raises(InvalidUrlError, match=words):
            aio_open(url)  # no loop, nothing awaited


def test_store_options_a_url_refuses_are_refused_at_the_call() -> None:
    with pytest.raises(InvalidUrlError, match="unknown file store option"):
        aio.Db.open("file:///tmp/x", store_options={"region": "eu"})


def test_a_url_is_not_checked_when_a_store_is_given() -> None:
    """``store=`` overrides what the URL names (it only labels the open): as in the sync API."""
    store = slatedb.objstore.resolve_store("memory://aio-args-store")
    opening = aio.Db.open("nosuch://label", store=store)
    opening.close()


@pytest.mark.parametrize("kwargs, words", [
    ({"checkpoint_id": "not-a-uuid"}, "checkpoint_id must be a UUID"),
    ({"checkpoint_id": 42}, "checkpoint_id must be a UUID"),
    ({"options": 42}, "options must be a DbReaderOptions or a dict"),
    ({"options": {"no_such_option": 1}}, "unknown DbReaderOptions option: no_such_option"),
])
def test_a_readers_bad_arguments_are_refused_by_the_call_itself(kwargs, words) -> None:
    with slatedb.Db.open("memory://aio-args-reader") as db:
        db.put(b"k", b"v")
    with pytest.raises(InvalidArgumentError, match=words):
        slatedb.DbReader.open("memory://aio-args-reader", **kwargs)
    with pytest.raises(InvalidArgumentError, match=words):
        aio.DbReader.open("memory://aio-args-reader", **kwargs)


def test_good_opens_still_open_awaited_entered_and_run_under_asyncio_and_trio() -> None:
    url = "memory://aio-args-good"
    with slatedb.Db.open(url) as db:
        db.put(b"k", b"v")

    async def entered() -> None:
        async with aio.Db.open(url) as db:
            assert await db.get(b"k") == b"v"
        async with aio.DbReader.open(url, options={"follow_latest": True}) as reader:
            assert await reader.get(b"k") == b"v"

    async def awaited() -> None:
        db = await aio.Db.open(url)
        assert await db.get(b"k") == b"v"
        await db.close()

    for run in (lambda fn: asyncio.run(fn()), trio.run):
        run(entered)
        run(awaited)
    db = asyncio.run(aio.Db.open(url))  # the open as a coroutine
    asyncio.run(db.close())


def test_a_malformed_s3_option_is_refused_at_the_call_as_by_the_sync_api() -> None:
    for open_it in (slatedb.Db.open, aio.Db.open, aio.DbReader.open):
        with pytest.raises(InvalidUrlError, match="s3 option 'endpoint_url': 'localhost:9000' has no scheme"):
            open_it("s3://bucket/db", store_options={"endpoint_url": "localhost:9000"})
