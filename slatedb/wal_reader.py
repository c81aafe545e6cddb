"""``slatedb.WalReader``: change data capture from a database's WAL (see
:mod:`slatedb.wal.reader`)::

    with slatedb.WalReader.open("file:///var/lib/mydb") as w:
        for row in w.changes(follow=True):      # every write, in seq order, then the live tail
            print(row.kind, row.key, row.value, row.seq, row.wal_id)
"""

from __future__ import annotations

import math
from typing import Any, Iterator, Mapping

from slatedb.api.portal import RuntimeArg, RuntimeThread
from slatedb.errors import InvalidArgumentError
from slatedb.objstore.base import ObjectStore
from slatedb.runtime import Runtime
from slatedb.wal.reader import ChangeRow, WalGapError, WalReaderCore, iterate

__all__ = ["ChangeRow", "WalGapError", "WalReader"]


def _wal_id(value: object, name: str) -> int:
    """A WAL id argument: an int from 1 (the first WAL object a database writes) below 2**64."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{name} must be a WAL id (an int), got {value!r}")
    if not 1 <= value < 2**64:
        raise InvalidArgumentError(f"{name} must be a WAL id from 1 to 2**64 - 1 (WAL ids start at 1), got {value}")
    return value


class WalReader:
    """Reads the WAL objects of the database at a URL; never writes."""

    def __init__(self, portal: RuntimeThread) -> None:
        self._portal = portal
        self._core: WalReaderCore = portal.core

    @classmethod
    def open(cls, url: str, *, store_options: Mapping[str, str] | None = None, store: ObjectStore | None = None,
             runtime: RuntimeArg = None) -> "WalReader":
        async def open_core(st: ObjectStore, rt: Runtime) -> WalReaderCore:
            return WalReaderCore(st, rt)

        return cls(RuntimeThread.start("slatedb-wal-reader", open_core, url, store=store, store_options=store_options,
                                       runtime=runtime, closed_message="the WAL reader is closed"))

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
        """The rows of every WAL object from ``start_id`` (default: the oldest left) in order;
        at the end, stop (``follow=False``) or wait for the next object, polling every
        ``poll_interval_s``. Arguments are checked here, not at the first row
        (:class:`~slatedb.InvalidArgumentError`)."""
        if start_id is not None:
            _wal_id(start_id, "start_id")
        if not isinstance(follow, bool):
            raise InvalidArgumentError(f"follow must be True or False, got {follow!r}")
        if (isinstance(poll_interval_s, bool) or not isinstance(poll_interval_s, (int, float))
                or not math.isfinite(poll_interval_s) or poll_interval_s <= 0):
            raise InvalidArgumentError(f"poll_interval_s must be a positive number of seconds, got {poll_interval_s!r}")
        return iterate(self._portal, self._core, start_id, follow, float(poll_interval_s))

    def close(self) -> None:
        self._portal.close()

    def __enter__(self) -> "WalReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
