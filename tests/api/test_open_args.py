"""``store=``, ``runtime=`` and ``store_options`` of an ``open``, checked at the call. Found by
trying them: ``store=object()`` raised ``AttributeError: 'object' object has no attribute
'list'`` and ``runtime=3`` ``TypeError: 'int' object is not callable`` from inside the runtime
thread; ``store_options`` for a ``memory://`` URL (and a query string on one) were ignored."""

from __future__ import annotations

import asyncio

import pytest

import slatedb
import slatedb.aio as aio
from slatedb.errors import InvalidArgumentError, InvalidUrlError


@pytest.mark.parametrize("kwargs, error, words", [
    ({"store": object()}, InvalidArgumentError, "store must be an ObjectStore"),
    ({"store": "memory://x"}, InvalidArgumentError, "store must be an ObjectStore"),
    ({"runtime": 3}, InvalidArgumentError, "runtime must be a Runtime"),
    ({"runtime": lambda: 3}, InvalidArgumentError, "returned int, not a Runtime"),
    ({"store_options": {"region": "eu"}}, InvalidUrlError, "unknown memory store option"),
])
def test_bad_open_arguments_are_refused_at_the_call(kwargs, error, words) -> None:
    for open_it in (lambda: slatedb.Db.open("memory://open-args", **kwargs),
                    lambda: slatedb.DbReader.open("memory://open-args", **kwargs)):
        with pytest.raises(error, match=words):
            open_it()

    async def main() -> None:
        async with aio.Db.open("memory://open-args", **kwargs):
            pass

    with pytest.raises(error, match=words):
        asyncio.run(main())


def test_a_memory_url_with_a_query_is_refused() -> None:
    with pytest.raises(InvalidUrlError, match="a memory:// store takes none"):
        slatedb.Db.open("memory://open-args-q?fsync=false")


@pytest.mark.parametrize("url", [{"flush_interval": "50ms"}, [], None, b"memory://x"])
def test_a_url_that_is_not_a_string_is_refused_at_the_call(url) -> None:
    """``Db.open(settings_dict)`` (the URL forgotten) names the URL. Before: a dict or a list
    raised ``TypeError: unhashable type`` from the bookkeeping of dropped databases."""
    import trio

    for open_it in (lambda: slatedb.Db.open(url), lambda: slatedb.DbReader.open(url),
                    lambda: slatedb.WalReader.open(url)):
        with pytest.raises(InvalidUrlError, match="store URL must be a non-empty string"):
            open_it()

    async def main() -> None:
        async with aio.Db.open(url):
            pass

    async def awaited() -> None:
        await aio.DbReader.open(url)

    for run in (lambda fn: asyncio.run(fn()), trio.run):
        for fn in (main, awaited):
            with pytest.raises(InvalidUrlError, match="store URL must be a non-empty string"):
                run(fn)


@pytest.mark.parametrize("options", [["fsync"], "fsync=false", 5])
def test_store_options_that_are_not_a_dict_are_refused_at_the_call(tmp_path, options) -> None:
    """``store_options`` is a dict of option names to values. Before: a list or a string raised
    a raw ``ValueError`` ("dictionary update sequence element #0 ...") from inside the open."""
    url = f"file://{tmp_path}"
    for open_it in (lambda: slatedb.Db.open(url, store_options=options),
                    lambda: slatedb.DbReader.open(url, store_options=options)):
        with pytest.raises(InvalidUrlError, match="store_options must be a dict"):
            open_it()
