"""What ``slatedb.aio.Db.open`` (``aio.DbReader.open``, ``aio.WalReader.open``) returns: an
:class:`Opening`, awaited or entered with ``async with``, under trio or asyncio."""

from __future__ import annotations

import asyncio
import collections.abc
from typing import Any, Awaitable, Callable, Mapping

from slatedb.api.args import check_open_args
from slatedb.api.dropped import wait_for_dropped
from slatedb.api.local_host import LocalHost
from slatedb.api.portal import RuntimeArg, SpawnedHost, StartingThread, async_library, serve
from slatedb.errors import InvalidArgumentError
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.url import check_store_url
from slatedb.runtime import Runtime


class Opening(collections.abc.Coroutine):
    """What ``slatedb.aio.Db.open`` (and ``aio.DbReader.open``) return: ``await`` it for an open
    front-end (close it with ``await x.close()``), or ``async with`` it (leaving the block closes
    it; on an exception it stops without flushing). Works under trio and under asyncio. A
    coroutine, so ``asyncio.run(aio.Db.open(url))``, ``create_task``, ``trio.run(aio.Db.open, url)``
    take it; it opens once (awaited or entered again: ``InvalidArgumentError``)."""

    def __init__(self, front: Callable[[Any, Any], Any], open_core: Callable[[ObjectStore, Runtime], Awaitable[Any]],
                 url: str, *, store: ObjectStore | None, store_options: Mapping[str, str] | None,
                 runtime: RuntimeArg, thread_name: str, closed_message: str) -> None:
        check_open_args(store, runtime, url)
        if store is None:  # the URL, as the sync API's open refuses it: here, before anything is awaited
            check_store_url(url, store_options)
        self._front = front
        self._open_core = open_core
        self._url = url
        self._kw = {"store": store, "store_options": store_options, "runtime": runtime}
        self._thread_name = thread_name
        self._closed_message = closed_message
        self._cm: Any = None
        self._opened: Any = None
        self._running: Any = None  # the coroutine of the open once awaited (or driven by send)
        self._what = f"slatedb.aio.{getattr(front, '__name__', 'Db').removeprefix('Async')}"

    def _started(self) -> Any:
        if self._running is None:
            if self._opened is not None:
                raise InvalidArgumentError("this open() was already entered: call open() again")
            self._running = self._open()
        return self._running

    def __await__(self) -> Any:
        if self._running is not None:
            raise InvalidArgumentError("this open() was already awaited: call open() again")
        return self._started().__await__()

    def send(self, value: Any) -> Any:  # the Coroutine protocol, on the one open
        return self._started().send(value)

    def throw(self, *exc: Any) -> Any:
        return self._started().throw(*exc)

    def close(self) -> None:
        self._running is not None and self._running.close()

    async def _open(self) -> Any:
        if async_library() == "trio":
            host: Any = await SpawnedHost.start(self._open_core, self._url, **self._kw)
        else:
            starting = StartingThread(self._thread_name, self._open_core, self._url,
                                      closed_message=self._closed_message, **self._kw)
            try:
                # Wait on a worker thread for the open to end, taking nothing back: the future that
                # wakes this task lives as long as the task's step, and a host it held would outlive
                # a front-end dropped in that step (its close then racing the next open).
                await asyncio.to_thread(starting.opened)
            except asyncio.CancelledError:  # the caller gave up: no writer may outlive its open
                await asyncio.shield(asyncio.to_thread(starting.stop))
                raise
            host = starting.wait()
        return self._front(host.core, host)

    async def __aenter__(self) -> Any:
        if self._opened is not None:
            raise InvalidArgumentError("this open() was already entered: call open() again")
        if self._running is not None:
            raise InvalidArgumentError("this open() was already awaited: call open() again")
        if async_library() == "trio":
            await wait_for_dropped(self._url)
            self._cm = serve(self._open_core, self._url, **self._kw)
            core = await self._cm.__aenter__()
            self._opened = self._front(core, LocalHost(core))
        else:
            self._opened = await self._open()
        return self._opened

    async def __aexit__(self, et: Any, e: Any, tb: Any) -> Any:
        if self._cm is not None:
            return await self._cm.__aexit__(et, e, tb)
        host = self._opened._host
        if et is None:
            await host.aclose()
        else:
            await host.aabort()
        return None

    def __enter__(self) -> Any:
        """A plain ``with`` on the async open: say what to write instead."""
        raise TypeError(f"use 'async with {self._what}.open(...) as db:' (a plain 'with' is the "
                        f"synchronous API's: slatedb.{self._what.rsplit('.', 1)[1]}.open)")

    def __exit__(self, *exc: Any) -> None:  # never reached: __enter__ refuses
        return None

    def __getattr__(self, name: str) -> Any:
        """A public name looked up on the open itself (``db = aio.Db.open(url)`` then
        ``await db.put(...)``): the ``await`` was forgotten; say so."""
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(f"{name!r}: this is the pending open, not the database: write "
                             f"'db = await {self._what}.open(...)' or 'async with {self._what}.open(...) as db:'")
