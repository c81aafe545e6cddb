"""What every front-end shares to run an engine (``DbCore``, ``ReaderCore``): the default
runtime, the one service runner, and the one runtime thread of the synchronous API.

* :func:`make_runtime`: ``runtime`` means the same in every ``open`` (sync and async, Db and
  DbReader): a :class:`~slatedb.runtime.Runtime`, or a factory of one called on the loop that
  runs the engine (a simulated runtime must be built inside its trio run), or None for
  :func:`slatedb.runtime.production.default_runtime` (real clock, OS entropy).
* :func:`serve`: resolve the store, open the engine, run its background tasks for the block,
  close the store it opened. ``slatedb.aio`` runs it on the caller's loop; :class:`RuntimeThread`
  runs it on a thread of its own.
* :class:`RuntimeThread`: start (REQUIRES: called on a thread that is not running trio), call a
  coroutine function on the runtime loop (``RunFinishedError`` becomes :class:`ClosedError`),
  stop, abort. Each sync front-end holds one.
"""

from __future__ import annotations

import threading
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping

import trio

from slatedb.errors import ClosedError, sole_exception
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.url import resolve_store
from slatedb.runtime import Runtime
from slatedb.runtime.production import default_runtime

RuntimeArg = Runtime | Callable[[], Runtime] | None


def make_runtime(runtime: RuntimeArg) -> Runtime:
    """``runtime`` as given to an ``open`` (REQUIRES: called on the loop that will run the engine)."""
    if runtime is None:
        return default_runtime()
    if isinstance(runtime, Runtime):
        return runtime
    return runtime()


@asynccontextmanager
async def serve(
    open_core: Callable[[ObjectStore, Runtime], Awaitable[Any]],
    url: str,
    *,
    store: ObjectStore | None,
    store_options: Mapping[str, str] | None,
    runtime: RuntimeArg,
) -> AsyncIterator[Any]:
    """Open an engine with ``open_core(store, runtime)`` and run its ``background()`` for the
    block (leaving it closes the engine, or stops it without flushing on an exception). The
    store is ``store`` or the one ``url`` names, which is then closed here."""
    rt = make_runtime(runtime)
    own_store = store is None
    st = store if store is not None else resolve_store(url, options=store_options, clock_ms=rt.now_ms)
    try:
        core = await open_core(st, rt)
        try:
            async with core.background():
                yield core
        except BaseExceptionGroup as group:
            # The background tasks never raise (a failure stops the engine instead), so a group
            # here wraps the block's own exception: give it back as it was raised.
            error = sole_exception(group)
            if error is group:
                raise
            raise error from None
    finally:
        if own_store:
            with trio.CancelScope(shield=True):
                await st.aclose()


class RuntimeThread:
    """A daemon thread running one engine under :func:`serve` on its own trio loop.

    Build it with :meth:`start`; the engine is :attr:`core`. Exiting the process without
    :meth:`close` loses only what was never acknowledged durable (the thread is a daemon)."""

    def __init__(self, core: Any, token: trio.lowlevel.TrioToken, thread: threading.Thread, stop: trio.Event,
                 closed_message: str) -> None:
        self.core = core
        self.token = token
        self._thread = thread
        self._stop = stop
        self._closed_message = closed_message

    @classmethod
    def start(cls, name: str, open_core: Callable[[ObjectStore, Runtime], Awaitable[Any]], url: str, *,
              store: ObjectStore | None, store_options: Mapping[str, str] | None, runtime: RuntimeArg,
              closed_message: str) -> "RuntimeThread":
        """Start the thread and open the engine on it; an open error is raised here."""
        started = threading.Event()
        box: dict[str, Any] = {}

        async def main() -> None:
            stop = trio.Event()
            try:
                async with serve(open_core, url, store=store, store_options=store_options, runtime=runtime) as core:
                    box["core"], box["token"], box["stop"] = core, trio.lowlevel.current_trio_token(), stop
                    started.set()
                    await stop.wait()
            except BaseException as e:
                if "core" in box:
                    raise
                box["error"] = e
            finally:
                started.set()

        thread = threading.Thread(target=trio.run, args=(main,), name=name, daemon=True)
        thread.start()
        started.wait()
        if "error" in box:
            thread.join()
            raise box["error"]
        return cls(box["core"], box["token"], thread, box["stop"], closed_message)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def __call__(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``await fn(*args)`` on the runtime loop, from the caller's thread."""
        try:
            return trio.from_thread.run(fn, *args, trio_token=self.token)
        except trio.RunFinishedError:
            raise ClosedError(self._closed_message) from None

    def _signal_stop(self) -> None:
        try:
            self.token.run_sync_soon(self._stop.set)
        except trio.RunFinishedError:
            pass

    def close(self) -> None:
        """Close the engine (``aclose`` on the loop: it flushes), stop the thread. Idempotent."""
        if not self._thread.is_alive():
            return
        try:
            if not self.core.closed:
                self(self.core.aclose)
        except ClosedError:
            pass
        finally:
            self._signal_stop()
            self._thread.join()

    def abort(self) -> None:
        """Stop at once without flushing (a crash, as the store sees it)."""
        if not self._thread.is_alive():
            return
        try:
            trio.from_thread.run_sync(self.core.abort, trio_token=self.token)
        except trio.RunFinishedError:
            pass
        self._signal_stop()
        self._thread.join()
