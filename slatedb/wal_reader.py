"""``slatedb.WalReader``: change data capture from a database's WAL (see
:mod:`slatedb.wal.reader`)::

    with slatedb.WalReader.open("file:///var/lib/mydb") as w:
        for row in w.changes(follow=True):      # every write, in seq order, then the live tail
            print(row.kind, row.key, row.value, row.seq, row.wal_id)

and ``slatedb.aio.WalReader`` under asyncio or trio::

    async with slatedb.aio.WalReader.open("file:///var/lib/mydb") as w:
        async for row in w.changes(follow=True):
            ...
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any, AsyncIterator, Iterator, Mapping

from slatedb.api.opening import Opening
from slatedb.api.portal import AsyncClosing, RuntimeArg, RuntimeThread
from slatedb.errors import ClosedError, InvalidArgumentError
from slatedb.objstore.base import ObjectStore
from slatedb.runtime import Runtime
from slatedb.wal.reader import ChangeRow, WalGapError, WalReaderCore, iterate, whole_from

__all__ = ["AsyncWalReader", "ChangeRow", "WalGapError", "WalReader"]

_CLOSED = "the WAL reader is closed"


def _wal_id(value: object, name: str) -> int:
    """A WAL id argument: an int from 1 (the first WAL object a database writes) below 2**64."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{name} must be a WAL id (an int), got {value!r}")
    if not 1 <= value < 2**64:
        raise InvalidArgumentError(f"{name} must be a WAL id from 1 to 2**64 - 1 (WAL ids start at 1), got {value}")
    return value


def _changes_args(start_id: int | None, follow: bool, poll_interval_s: float) -> float:
    """Check the arguments of ``changes`` at the call; returns the poll interval as a float."""
    if start_id is not None:
        _wal_id(start_id, "start_id")
    if not isinstance(follow, bool):
        raise InvalidArgumentError(f"follow must be True or False, got {follow!r}")
    if (isinstance(poll_interval_s, bool) or not isinstance(poll_interval_s, (int, float))
            or not math.isfinite(poll_interval_s) or poll_interval_s <= 0):
        raise InvalidArgumentError(f"poll_interval_s must be a positive number of seconds, got {poll_interval_s!r}")
    return float(poll_interval_s)


async def _open_core(st: ObjectStore, rt: Runtime) -> WalReaderCore:
    return WalReaderCore(st, rt)


class AsyncChanges:
    """The iterator of :meth:`AsyncWalReader.changes`. Not an async generator: a cancelled
    ``__anext__`` (a consumer's timeout) would close one, and every later step would end the
    iteration as if the WAL were done. Here the position (the next WAL id, the rows of the one
    read and not yet returned) changes only once a read has returned, so a cancelled step
    loses and repeats nothing."""

    def __init__(self, reader: "AsyncWalReader", start_id: int | None, follow: bool, poll_interval_s: float) -> None:
        self._reader = reader
        self._next_id = start_id
        self._follow = follow
        self._poll_interval_s = poll_interval_s
        self._rows: deque[ChangeRow] = deque()
        self._done = False

    def __aiter__(self) -> "AsyncChanges":
        return self

    async def __anext__(self) -> ChangeRow:
        reader = self._reader
        while not self._rows:
            if self._done:
                raise StopAsyncIteration
            if self._next_id is None:
                ids = await reader.wal_ids()
                if not ids and not self._follow:
                    self._done = True
                    raise StopAsyncIteration
                self._next_id = whole_from(ids) if ids else 1
            rows = await reader._call(reader._core.next_rows, self._next_id, self._follow, self._poll_interval_s)
            if rows is None:
                self._done = True
                raise StopAsyncIteration
            self._rows.extend(rows)
            self._next_id += 1
        return self._rows.popleft()

    async def aclose(self) -> None:
        """End the iteration (as an async generator's ``aclose``: ``contextlib.aclosing`` works)."""
        self._done = True
        self._rows.clear()


class WalReader:
    """Reads the WAL objects of the database at a URL; never writes."""

    def __init__(self, portal: RuntimeThread) -> None:
        self._portal = portal
        self._core: WalReaderCore = portal.core

    @classmethod
    def open(cls, url: str, *, store_options: Mapping[str, str] | None = None, store: ObjectStore | None = None,
             runtime: RuntimeArg = None) -> "WalReader":
        return cls(RuntimeThread.start("slatedb-wal-reader", _open_core, url, store=store, store_options=store_options,
                                       runtime=runtime, closed_message=_CLOSED))

    def wal_ids(self) -> list[int]:
        """The ids of the WAL objects in the store, ascending."""
        return self._portal(self._core.wal_ids)

    def last_wal_id(self) -> int | None:
        ids = self.wal_ids()
        return ids[-1] if ids else None

    def read(self, wal_id: int) -> list[ChangeRow] | None:
        """The rows of one WAL object (None if it does not exist)."""
        return self._portal(self._core.read, _wal_id(wal_id, "wal_id"))

    def changes(self, start_id: int | None = None, *, follow: bool = False,
                poll_interval_s: float = 1.0) -> Iterator[ChangeRow]:
        """The rows of every WAL object from ``start_id`` (default: the oldest from which the
        WAL is whole up to the newest, past a gap GC left below a kept fence) in order;
        at the end, stop (``follow=False``) or wait for the next object, polling every
        ``poll_interval_s``. Arguments are checked here, not at the first row
        (:class:`~slatedb.InvalidArgumentError`)."""
        return iterate(self._portal, self._core, start_id, follow, _changes_args(start_id, follow, poll_interval_s))

    def close(self) -> None:
        self._portal.close()

    def __enter__(self) -> "WalReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncWalReader(AsyncClosing):
    """``slatedb.aio.WalReader``: :class:`WalReader` under the caller's asyncio or trio loop.
    ``async with aio.WalReader.open(url) as w:`` or ``w = await aio.WalReader.open(url)`` (then
    ``await w.close()`` or ``async with w:``); ``async for row in w.changes(follow=True)``."""

    def __init__(self, core: WalReaderCore, host: Any) -> None:
        self._core = core
        self._host = host

    @classmethod
    def open(cls, url: str, *, store_options: Mapping[str, str] | None = None, store: ObjectStore | None = None,
             runtime: RuntimeArg = None) -> Opening:
        """Open a WAL reader: ``await`` the result, or use it as ``async with``. Bad arguments
        raise here, before anything is awaited."""
        return Opening(cls, _open_core, url, store=store, store_options=store_options, runtime=runtime,
                       thread_name="slatedb-wal-reader", closed_message=_CLOSED)

    async def _call(self, fn: Any, *args: Any) -> Any:
        if self._core.closed:
            raise ClosedError(_CLOSED)
        return await self._host.acall(fn, *args)

    async def wal_ids(self) -> list[int]:
        """The ids of the WAL objects in the store, ascending."""
        return await self._call(self._core.wal_ids)  # type: ignore[no-any-return]

    async def last_wal_id(self) -> int | None:
        ids = await self.wal_ids()
        return ids[-1] if ids else None

    async def read(self, wal_id: int) -> list[ChangeRow] | None:
        """The rows of one WAL object (None if it does not exist)."""
        return await self._call(self._core.read, _wal_id(wal_id, "wal_id"))  # type: ignore[no-any-return]

    def changes(self, start_id: int | None = None, *, follow: bool = False,
                poll_interval_s: float = 1.0) -> AsyncIterator[ChangeRow]:
        """As :meth:`WalReader.changes`, an async iterator (``async for``); arguments checked
        here. With ``follow=True`` the wait for the next WAL object is a task of the reader's
        loop: cancelling the iterating task (a trio cancel scope, ``task.cancel()``) ends the
        wait. A step cancelled on its own (``asyncio.wait_for(anext(it), timeout)``) moves
        nothing: the next step goes on from the same row."""
        return AsyncChanges(self, start_id, follow, _changes_args(start_id, follow, poll_interval_s))

    async def close(self) -> None:
        await self._host.aclose()
