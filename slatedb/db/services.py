"""The writer's services: the background tasks of an open writer (the WAL flusher, the L0
flusher, the manifest poller) and, when its settings ask for them, the in-process compactor and
garbage collector. ``async with core.background():`` runs them for the block's duration; a
failure of a flusher or the poller stops the database (typed), one of a service is reported as
an event and counted.

REQUIRES: the engine's loop. :class:`Services` is part of :class:`~slatedb.db.core.DbCore`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable

import trio

from slatedb.compactor import Compactor
from slatedb.errors import ObjectStoreRetriesExhaustedError, SlateDBError, TransientObjectStoreError
from slatedb.gc import GarbageCollector
from slatedb.runtime import TaskScopes, switches

if TYPE_CHECKING:
    from .core import DbCore


#: Errors after which the in-process compactor starts again: the store did not answer, retried.
_STORE_UNAVAILABLE = (ObjectStoreRetriesExhaustedError, TransientObjectStoreError)


class Services:
    """The in-process compactor and garbage collector loops."""

    def background(self):
        """Async context manager running the WAL flusher, the L0 flusher and the manifest poller."""
        return Background(self)

    async def _compactor_loop(self) -> None:
        """The in-process compactor (RFC 003: "the compactor will run alongside the main
        writer"). Its commits wake the manifest poller, so back-pressure eases at once. A
        compactor fenced by another one just stops; a compactor failure is reported as an
        event and does not stop the writer (it only stops compacting), except that after a store
        that did not answer within the retry bound it starts again one ``poll_interval`` later."""
        def adopted(_stored: Any) -> None:
            self._poll_wakeup.set()

        while True:
            self.compactor = Compactor(self.store, self.runtime, self.settings, on_commit=adopted,
                                       merge_operator=self.merge_operator)
            again = False
            why = "fenced by a compactor elsewhere (a newer compactor epoch in the manifest)"
            try:
                await self.compactor.run()
            except* SlateDBError as group:  # from the compactor's nursery: a group
                for e in group.exceptions:
                    self.runtime.event("compactor_error", error=f"{type(e).__name__}: {e}")
                self.stats["compactor_errors"] = self.stats.get("compactor_errors", 0) + 1
                # The store stopped answering past the retry bound (an S3 outage, throttling):
                # start again after a poll interval. Stopping for good would leave the writer
                # waiting forever once L0 is full (l0_max_ssts, max_unflushed_bytes).
                again = all(isinstance(e, _STORE_UNAVAILABLE) for e in group.exceptions)
                why = f"stopped on {type(group.exceptions[0]).__name__}: {group.exceptions[0]}"
            if not again:
                self.compactor_stopped = why  # the full-L0 warning says so (Flushers._warn_l0_full)
                return
            assert self.settings.compactor_options is not None
            await self.runtime.sleep(self.settings.compactor_options.poll_interval)

    def _close_pins(self) -> tuple:
        """The checkpoints a clean close drops besides the writer checkpoint (writer.md step 12,
        CKPT-5): the in-process compactor's startup pin, once its claim landed. It protects
        nothing the live manifest does not (the claim changes only the compactor epoch), yet it
        would keep a hard destroy refused for ``checkpoint_lifetime`` after the close."""
        c = self.compactor
        if c is None or c.startup_pin_id is None or switches.COMPACTOR_PIN_KEPT_AT_CLOSE in self.runtime.bugs:
            return ()
        return (c.startup_pin_id,)

    async def _gc_loop(self) -> None:
        """The in-process garbage collector (``garbage_collector_options``, slatedb/gc/): each
        directory on its own interval, the first pass one interval after open (a short-lived
        database is never collected under itself). A GC failure is reported as an event and
        counted; it never stops the writer."""
        options = self.settings.garbage_collector_options
        self.gc = GarbageCollector(self.store, self.runtime, options)
        try:
            await self.gc.run()
        except* SlateDBError as group:
            for e in group.exceptions:
                self.runtime.event("gc_error", error=f"{type(e).__name__}: {e}")
            self.stats["gc_errors"] = self.stats.get("gc_errors", 0) + 1
        finally:
            await self.gc.locator.aclose()


class Background:
    """``async with core.background():`` runs the background tasks for the block's duration."""

    def __init__(self, core: DbCore) -> None:
        self.core = core
        self._cm: Any = None

    async def __aenter__(self) -> DbCore:
        core = self.core
        core._trio_token = trio.lowlevel.current_trio_token()
        core._trio_thread = threading.get_ident()
        self._cm = core.runtime.task_group()
        tg = await self._cm.__aenter__()
        core._tasks_scope = scopes = TaskScopes()  # close cancels these, not the block around them
        tg.spawn_in(scopes, self._guard, core._flush_loop, name="wal-flush")
        tg.spawn_in(scopes, self._guard, core._l0_loop, name="l0-flush")
        tg.spawn_in(scopes, self._guard, core._poll_loop, name="manifest-poll")
        if core.settings.compactor_options is not None:
            tg.spawn_in(scopes, core._compactor_loop, name="compactor")
        if core.settings.garbage_collector_options is not None:
            tg.spawn_in(scopes, core._gc_loop, name="gc")
        return core

    async def _guard(self, fn: Callable[[], Any]) -> None:
        """Run a loop; a failure stops the database (typed) instead of tearing down the caller."""
        try:
            await fn()
        except SlateDBError as e:
            self.core._fail(e)
        except Exception as e:  # an engine bug: stop the database naming the original error
            # (re-raising would tear down the caller's nursery: every later call would only say
            # "aborted", and the writes pending in that task's flush would be lost unnamed).
            error = SlateDBError(f"background task {getattr(fn, '__name__', fn)} failed: {type(e).__name__}: {e}")
            error.__cause__ = e
            self.core._fail(error)

    async def __aexit__(self, *exc: Any) -> bool | None:
        core = self.core
        close_error: BaseException | None = None
        try:
            if not core._closed:
                if exc[0] is None:
                    await core.aclose()
                else:
                    core.abort()
        except BaseException as e:  # the nursery below must be exited whatever happens
            close_error = e
            core.abort()
        result = await self._cm.__aexit__(*exc)
        if close_error is not None:
            raise close_error
        return result
