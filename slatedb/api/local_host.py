"""The host of an engine that runs on a trio loop of the program (``slatedb.aio`` opened under
trio: the nursery of an ``async with`` block, or a system task of an awaited open).

A call from that loop is a plain ``await``. A call from any other loop -- asyncio, or another
trio run, on another thread (a worker thread of the program running asyncio code) -- hops to
the engine's loop: it waits on a worker thread of the caller's loop for
``trio.from_thread.run`` with the engine loop's token, as the calls of a database opened under
asyncio wait for its runtime thread. Running the engine's I/O on the caller's loop instead broke
under asyncio ("must be called from async context") and ran it on a foreign trio loop.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Awaitable, Callable

import sniffio
import trio

from slatedb.errors import ClosedError

#: Why a database opened under trio by an awaited open stopped when that run ended, and what to
#: do: the engine ran in a system task of that run, which trio cancels as the run returns.
RUN_ENDED = ("the database was aborted: the trio run that opened it (`await slatedb.aio.Db.open(...)` in "
             "`trio.run`) ended without closing it, so its engine stopped with that run and its writes not yet "
             "durable were lost. Close it before that run returns (`await db.close()`, or `async with`), or open "
             "it where the engine outlives a run: under asyncio or with the sync `slatedb.Db` (a runtime "
             "thread of its own)")


class LocalHost:
    """The engine runs on the caller's own trio loop: a call is a plain ``await`` (from another
    loop it hops to this one, see the module docstring)."""

    __slots__ = ("core", "_token")

    def __init__(self, core: Any) -> None:
        self.core = core
        self._token = trio.lowlevel.current_trio_token()  # made on the engine's loop

    def _foreign(self) -> bool:
        try:
            return trio.lowlevel.current_trio_token() is not self._token
        except RuntimeError:  # not in a trio run: an asyncio task
            return True

    def _there(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``await fn(*args)`` on the engine's loop, from a thread that runs none (blocking)."""
        try:
            return trio.from_thread.run(fn, *args, trio_token=self._token)
        except (trio.RunFinishedError, trio.Cancelled):  # the engine's loop ended, or is ending
            error = getattr(self.core, "_error", None)  # what stopped it, if it said (RUN_ENDED)
            if isinstance(error, ClosedError):
                raise ClosedError(str(error)) from None
            raise ClosedError("the database is closed: the trio run that opened it has ended (close it before "
                              "that run returns, or open it under asyncio or with the sync slatedb.Db)") from None

    async def _on_engine_loop(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        if not self._foreign():
            return await fn(*args)
        call = functools.partial(self._there, fn, *args)
        if sniffio.current_async_library() == "trio":
            return await trio.to_thread.run_sync(call)
        return await asyncio.to_thread(call)

    async def acall(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        return await self._on_engine_loop(fn, *args)

    async def aclose(self) -> None:
        await self._on_engine_loop(self._aclose_here)

    async def aabort(self) -> None:
        await self._on_engine_loop(self._aabort_here)

    async def _aclose_here(self) -> None:
        await self.core.aclose()

    async def _aabort_here(self) -> None:
        self.core.abort()
