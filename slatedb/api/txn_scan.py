"""The async transaction's scan iterator: the shape of ``slatedb.aio.Db.scan``'s.

``AsyncTransaction.scan`` / ``scan_prefix`` return a :class:`TxnIterator`, as
``aio.Db.scan`` returns its :class:`~slatedb.api.async_reads.DbIterator`: ``async for``,
``next_batch(n)``, ``seek(key)``, ``close()`` and ``async with`` / ``with``. It is also awaitable:
``await txn.scan(...)`` gives the rows not yet taken as a list (what it returned before it was
an iterator). The arguments are checked at the call, and the transaction's own writes in the
range are taken at the call (a write after it is not in the rows, as a ``Db`` scan does not see
a later put); the snapshot's rows are read at the first step, the whole range at once (as the
sync ``Transaction.scan``, which returns a list), so a step after the transaction committed or
rolled back raises :class:`~slatedb.errors.TransactionClosedError` unless it had been read.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import itemgetter
from typing import Any, Callable, Iterator

from slatedb.api.args import check_batch_size
from slatedb.api.async_reads import RELEASED, Released
from slatedb.api.read_kit import seek_bounds
from slatedb.errors import ClosedError
from slatedb.lsm.view import KeyBounds


class TxnIterator:
    """Async iterator of a transaction's ``(key, value)`` rows of one range (module docstring)."""

    def __init__(self, load: Callable[[], Any], bounds: KeyBounds, reverse: bool) -> None:
        self._load = load  # an async function: the rows, sorted in the scan's direction
        self._bounds = bounds
        self._reverse = reverse
        self._rows: list[tuple[bytes, bytes]] | None = None
        self._pos = 0
        self._closed = False

    async def _ensure(self) -> list[tuple[bytes, bytes]]:
        if self._closed:
            return []
        if self._rows is None:
            self._rows = await self._load()
            self._load = None  # type: ignore[assignment]
        return self._rows

    def __aiter__(self) -> "TxnIterator":
        return self

    async def __anext__(self) -> tuple[bytes, bytes]:
        rows = await self._ensure()
        if self._pos >= len(rows):
            raise StopAsyncIteration
        self._pos += 1
        return rows[self._pos - 1]

    async def next_batch(self, n: int = 1000) -> list[tuple[bytes, bytes]]:
        """Up to ``n`` rows; an empty list at the end of the scan."""
        n = check_batch_size(n)
        rows = await self._ensure()
        out = rows[self._pos : self._pos + n]
        self._pos += len(out)
        return out

    async def seek(self, key: bytes) -> None:
        """Continue from ``key`` in the scan's direction (ascending: the first row ``>= key``;
        descending: ``<= key``), backwards too, as ``aio.Db.scan``'s iterator. A key outside the
        scan range: :class:`~slatedb.errors.SeekKeyOutOfRangeError`, iterator unchanged."""
        if self._closed:
            raise ClosedError("the scan iterator was closed")
        rest = seek_bounds(self._bounds, key, self._reverse)
        rows = await self._ensure()
        if self._reverse:  # rows descending: the first at or below the key
            self._pos = next((i for i, (k, _v) in enumerate(rows) if k <= rest.hi), len(rows))
        else:
            self._pos = bisect_left(rows, rest.lo, key=itemgetter(0))

    def close(self) -> Released:
        """Stop early: no more rows (``async for`` ends, :meth:`next_batch` returns ``[]``,
        :meth:`seek` raises ``ClosedError``). No I/O; ``await it.close()`` works too. Idempotent."""
        self._closed = True
        self._rows, self._load, self._pos = None, None, 0  # type: ignore[assignment]
        return RELEASED

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> "TxnIterator":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def __enter__(self) -> "TxnIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __await__(self) -> Iterator[Any]:
        return self._rest().__await__()

    async def _rest(self) -> list[tuple[bytes, bytes]]:
        rows = await self._ensure()
        out = rows[self._pos :]
        self._pos = len(rows)
        return out
