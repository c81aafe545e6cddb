"""The synchronous reader: ``with slatedb.DbReader.open(url) as r: r.get(b"k")``.

As with :class:`slatedb.Db`, the reader's background work (checkpoint maintenance, WAL
following) and every object-store call run on a trio loop in a runtime thread owned by the
reader; a ``get`` served by an in-memory table or the block cache, and an iterator step over
loaded rows, run on the caller's thread. Reads are the writer's own (``slatedb.db.sync``'s read
mixin and iterator over :class:`~slatedb.reader.core.ReaderCore`).
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping

import trio

from slatedb.config import Settings
from slatedb.db.common import coerce_settings
from slatedb.db.core import ReadState
from slatedb.db.sync import _Portal, _ReadMixin
from slatedb.errors import ClosedError, ReadOnlyError
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.url import resolve_store
from slatedb.runtime import Runtime

from .core import ReaderCore
from .options import DbReaderOptions


class DbReader(_ReadMixin):
    """A read-only view of a database (RFC 000 ``DbReader``). Build it with :meth:`open`."""

    _core: ReaderCore  # type: ignore[assignment]

    def __init__(self, core: ReaderCore, portal: _Portal, thread: threading.Thread, stop: Callable[[], None]) -> None:
        self._core = core
        self._portal = portal
        self._thread = thread
        self._stop = stop

    @classmethod
    def open(
        cls,
        url: str,
        checkpoint_id: uuid.UUID | str | None = None,
        *,
        options: DbReaderOptions = DbReaderOptions(),
        settings: Settings | Mapping[str, Any] | str | Path | None = None,
        store_options: Mapping[str, str] | None = None,
        store: ObjectStore | None = None,
        runtime: Callable[[], Runtime] | None = None,
    ) -> "DbReader":
        """Open a reader of the database at ``url``.

        ``checkpoint_id``: read exactly what that checkpoint pins, never refreshing it (raises
        :class:`~slatedb.errors.CheckpointNotFoundError` if absent,
        :class:`~slatedb.errors.InvalidDbStateError` if expired). None: establish and maintain
        a checkpoint of the reader's own (deleted by :meth:`close`). ``settings`` matter only
        for the block cache (``block_cache_size_bytes``). ``store`` overrides the store ``url``
        names; ``runtime`` is a factory for the runtime, called on the runtime thread.
        """
        settings = coerce_settings(settings)
        started = threading.Event()
        box: dict[str, Any] = {}

        async def main() -> None:
            if runtime is None:
                from slatedb.runtime.production import ProductionRuntime

                rt: Runtime = ProductionRuntime()
            else:
                rt = runtime()
            own_store = store is None
            st = None
            try:
                st = store if store is not None else resolve_store(url, options=store_options, clock_ms=rt.now_ms)
                core = await ReaderCore.open(st, rt, options, settings, checkpoint_id)
            except BaseException as e:
                box["error"] = e
                started.set()
                if st is not None and own_store:
                    await st.aclose()
                return
            stop = trio.Event()
            try:
                async with core.background():
                    box["core"] = core
                    box["token"] = trio.lowlevel.current_trio_token()
                    box["stop"] = stop
                    started.set()
                    await stop.wait()
            finally:
                if own_store:
                    with trio.CancelScope(shield=True):
                        await st.aclose()

        thread = threading.Thread(target=trio.run, args=(main,), name="slatedb-reader", daemon=True)
        thread.start()
        started.wait()
        if "error" in box:
            thread.join()
            raise box["error"]
        token, stop_event = box["token"], box["stop"]

        def stop() -> None:
            try:
                token.run_sync_soon(stop_event.set)
            except trio.RunFinishedError:
                pass

        return cls(box["core"], _Portal(token), thread, stop)

    def close(self) -> None:
        """Stop maintenance, delete the reader's own checkpoint, stop the runtime thread. Idempotent."""
        if not self._thread.is_alive():
            return
        try:
            if not self._core.closed:
                self._portal(self._core.aclose)
        except ClosedError:
            pass
        finally:
            self._stop()
            self._thread.join()

    def __enter__(self) -> "DbReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _state(self) -> tuple[ReadState, int | None]:
        return self._core.read_state, None

    def put(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError("a DbReader is read-only: write through the Db")

    delete = write = put

    def refresh(self) -> None:
        """Run one maintenance round now (what the background task does every
        ``manifest_poll_interval_s``): re-establish, refresh the expiry, follow the WAL.
        Nothing happens for a reader opened on a given checkpoint."""
        self._core.check_open()
        self._portal(self._core.maintain)

    @property
    def checkpoint_id(self) -> uuid.UUID | None:
        """The checkpoint the current view is pinned by."""
        return self._core.checkpoint_id

    @property
    def manifest_id(self) -> int:
        return self._core.manifest_id

    @property
    def options(self) -> DbReaderOptions:
        return self._core.options

    @property
    def stats(self) -> dict[str, int]:
        return dict(self._core.stats)

    @property
    def core(self) -> ReaderCore:
        """The engine (for the simulator and tests)."""
        return self._core

    def __repr__(self) -> str:
        return f"DbReader({self._core.store.url!r}, checkpoint={self._core.checkpoint_id})"
