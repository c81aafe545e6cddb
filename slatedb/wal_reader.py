"""``slatedb.WalReader``: change data capture from a database's WAL (see
:mod:`slatedb.wal.reader`)::

    with slatedb.WalReader.open("file:///var/lib/mydb") as w:
        for row in w.changes(follow=True):      # every write, in seq order, then the live tail
            print(row.kind, row.key, row.value, row.seq, row.wal_id)
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from slatedb.api.portal import RuntimeArg, RuntimeThread
from slatedb.objstore.base import ObjectStore
from slatedb.runtime import Runtime
from slatedb.wal.reader import ChangeRow, WalGapError, WalReaderCore, iterate

__all__ = ["ChangeRow", "WalGapError", "WalReader"]


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
        return self._portal(self._core.read, wal_id)

    def changes(self, start_id: int | None = None, *, follow: bool = False,
                poll_interval_s: float = 1.0) -> Iterator[ChangeRow]:
        """The rows of every WAL object from ``start_id`` (default: the oldest left) in order;
        at the end, stop (``follow=False``) or wait for the next object, polling every
        ``poll_interval_s``."""
        return iterate(self._portal, self._core, start_id, follow, poll_interval_s)

    def close(self) -> None:
        self._portal.close()

    def __enter__(self) -> "WalReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
