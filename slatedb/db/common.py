"""What the synchronous and asynchronous ``Db`` share beyond the read API: the snapshot's
lifecycle (argument handling shared by every front-end is :mod:`slatedb.api.args`)."""

from __future__ import annotations

import weakref
from typing import Any

from slatedb.errors import ClosedError
from slatedb.runtime import switches


def _capped(seq: int) -> int | None:
    """READ-6: a snapshot reads at its own sequence number (its pinned read state includes the live
    memtable, which keeps taking writes after the snapshot)."""
    return seq


def _bug_uncapped(seq: int) -> int | None:
    """Catalogued bug ``snapshot-uncapped`` (sim/scenarios/catalogue.py): no cap, so writes made after the snapshot
    show through the memtable it pinned."""
    return None


class SnapshotLifecycle:
    """What the sync and async snapshots share: the pinned read state and sequence bound, and
    release (``close``, or leaving a ``with`` block). Reads come from each API's read mixin."""

    def __init__(self, core: Any, token: int, seq: int, rs: Any) -> None:
        self._core = core
        self._token = token
        self.seq = seq
        self._rs = rs
        self._released = False
        # Dropped without release (no ``with``; a transaction neither committed nor rolled back):
        # its seq stops holding back the compactor's retention floor once it is garbage.
        self._dropped = weakref.finalize(self, core.forget_snapshot, token)
        self._dropped.atexit = False

    def _state(self) -> tuple[Any, int | None]:
        if self._released:
            raise ClosedError("the snapshot was released")
        self._core.check_open()
        cap = _bug_uncapped if switches.SNAPSHOT_UNCAPPED in self._core.runtime.bugs else _capped
        return self._rs, cap(self.seq)

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._dropped.detach()
            self._core.release_snapshot(self._token)

    close = release

    def __enter__(self) -> "SnapshotLifecycle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
