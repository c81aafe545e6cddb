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
  stop, abort. Each sync front-end holds one; under asyncio, so does each async front-end
  (:meth:`RuntimeThread.acall` awaits the call from the asyncio loop without blocking it).
* :class:`~slatedb.api.opening.Opening` (its own module): what an async ``open`` returns, to ``await`` or to use as ``async with``,
  under trio or asyncio (:func:`async_library`). Under trio the engine runs on the caller's own
  loop (in the block's nursery, or a system task when awaited); under asyncio on a runtime
  thread. Either way the front-end reaches it through a *host* with ``acall`` / ``aclose`` /
  ``abort``; hot paths (a write, a memtable or cached read) never touch the host.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import weakref
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping

import sniffio
import trio

from slatedb.api.args import check_open_args, check_runtime_arg
from slatedb.api.dropped import DROPPED, spawn_or_refuse as _spawn_or_refuse, wait_for_dropped, watch_drop
from slatedb.api.local_host import RUN_ENDED, LocalHost
from slatedb.errors import ClosedError, InvalidArgumentError, ReentrantCallError, sole_exception
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
    check_runtime_arg(runtime)
    made = runtime()
    if not isinstance(made, Runtime):
        raise InvalidArgumentError(f"runtime factory {runtime!r} returned {type(made).__name__}, not a Runtime")
    return made


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


#: How long the runtime thread, having opened the engine, waits for the caller to take the
#: GIL before running the background tasks (``RuntimeThread.start``): the caller normally
#: resumes within microseconds.
HANDOFF_WAIT_S = 0.5


#: Every :class:`RuntimeThread` of this process, weakly: a child made by ``os.fork`` marks each
#: unusable (:meth:`RuntimeThread.forked`).
_STARTED: "weakref.WeakSet[RuntimeThread]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    DROPPED.after_fork_in_child()
    for portal in list(_STARTED):
        portal.forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


async def _to_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` on a worker thread of the running loop, asyncio's or trio's."""
    if async_library() == "trio":
        return await trio.to_thread.run_sync(fn)
    return await asyncio.to_thread(fn)


class StartingThread:
    """A runtime thread whose engine is opening (:meth:`RuntimeThread.start`, and the asyncio
    front-end's ``open``). :meth:`wait` gives the :class:`RuntimeThread` (or raises the open's
    error); :meth:`stop` is for a caller that gives up (a cancelled ``await aio.Db.open(...)``,
    an interrupt): the open is cancelled where it is, and an engine that got open meanwhile is
    stopped without flushing, before ``stop`` returns. So an open nobody waits for any more never
    goes on to become a writer nobody holds -- one that would fence the writer the caller opens
    next (found by cancelling opens with ``asyncio.wait_for``: each left a live writer thread
    behind, and one fenced the database opened after it)."""

    def __init__(self, name: str, open_core: Callable[[ObjectStore, Runtime], Awaitable[Any]], url: str, *,
                 store: ObjectStore | None, store_options: Mapping[str, str] | None, runtime: RuntimeArg,
                 closed_message: str) -> None:
        check_open_args(store, runtime, url)
        self._closed_message = closed_message
        self._url = url
        self._started = threading.Event()
        self._resumed = threading.Event()
        self._box: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._stopping = False
        self._scope: trio.CancelScope | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        box = self._box

        async def main() -> None:
            stop = trio.Event()
            scope = trio.CancelScope()
            with self._lock:
                self._scope, self._token = scope, trio.lowlevel.current_trio_token()
                if self._stopping:
                    scope.cancel()
            try:
                with scope:
                    async with serve(open_core, url, store=store, store_options=store_options,
                                     runtime=runtime) as core:
                        box["core"], box["token"], box["stop"] = core, trio.lowlevel.current_trio_token(), stop
                        self._started.set()
                        # Hand the GIL to the caller before the background tasks (spawned, not
                        # yet run) start: else the caller, woken by ``started``, waits out the
                        # interpreter's switch interval (5 ms) behind them. Bounded: a caller
                        # that never resumes only delays the tasks.
                        self._resumed.wait(HANDOFF_WAIT_S)
                        await stop.wait()
            except BaseException as e:
                if "core" in box:
                    raise
                box["error"] = e
            finally:
                self._started.set()

        # An engine dropped at this URL may still be closing (DroppedCloses): open after it.
        pending = DROPPED.pending(url, skip_thread=threading.get_ident())

        def run() -> None:
            for done in pending:
                done.wait()
            trio.run(main)

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def opened(self) -> None:
        """Block until the open has ended (then :meth:`wait` returns at once)."""
        self._started.wait()

    def wait(self) -> "RuntimeThread":
        try:
            self._started.wait()
        except BaseException:  # interrupted while the engine opens: stop it, then go on unwinding
            self.stop()
            raise
        self._resumed.set()
        box = self._box
        if "error" in box or "core" not in box:
            self._thread.join()
            raise box.get("error") or ClosedError(self._closed_message)
        return RuntimeThread(box["core"], box["token"], self._thread, box["stop"], self._closed_message, self._url)

    def stop(self) -> None:
        """Cancel the open; if the engine opened meanwhile, stop it without flushing (nothing
        was written through it). Returns once the thread has ended."""
        with self._lock:
            self._stopping = True
            scope, token = self._scope, self._token
        if scope is not None and token is not None:
            try:
                token.run_sync_soon(scope.cancel)
            except trio.RunFinishedError:
                pass
        self._started.wait()
        self._resumed.set()
        self._thread.join()


class RuntimeThread:
    """A daemon thread running one engine under :func:`serve` on its own trio loop.

    Build it with :meth:`start`; the engine is :attr:`core`. Every user object that calls the
    engine holds this object (the front-end, and its snapshots, iterators, transactions): once
    the last of them is garbage without :meth:`close`, the engine is closed on its loop as
    :meth:`close` would, without blocking whoever dropped it (:func:`slatedb.api.dropped.close_dropped`). Exiting the
    process without :meth:`close` loses only what was never acknowledged durable (the thread is
    a daemon).
    In a child made by ``os.fork`` (``multiprocessing``'s default start method on Linux, a
    pre-forking server) the thread does not exist: every call raises :class:`ClosedError`
    saying so, and closing does nothing (the parent still owns the engine)."""

    def __init__(self, core: Any, token: trio.lowlevel.TrioToken, thread: threading.Thread, stop: trio.Event,
                 closed_message: str, url: str) -> None:
        self.core = core
        self.token = token
        self._thread = thread
        self._stop = stop
        self._closed_message = closed_message
        self._pid = os.getpid()
        self._forked = False
        self._dropped = watch_drop(self, core, token, stop, url, thread.ident or 0)
        _STARTED.add(self)

    def forked(self) -> None:
        """(In the child, right after ``os.fork``.) Without its runtime thread nothing the child
        writes would ever be flushed and no read would see a newer state: the engine is told to
        refuse every call (its ``after_fork_in_child``), and so is this front-end."""
        if self._forked:
            return
        self._forked = True
        what = self._closed_message.removeprefix("the ").removesuffix(" is closed")
        self._closed_message = (
            f"this {what} was opened by process {self._pid} and cannot be used in the forked process "
            f"{os.getpid()} (its runtime thread does not exist here: nothing written would ever be flushed); open it "
            "again in the child, or start children with multiprocessing's 'spawn' or 'forkserver'")
        hook = getattr(self.core, "after_fork_in_child", None)
        if hook is not None:
            hook(ClosedError(self._closed_message))

    @classmethod
    def start(cls, name: str, open_core: Callable[[ObjectStore, Runtime], Awaitable[Any]], url: str, *,
              store: ObjectStore | None, store_options: Mapping[str, str] | None, runtime: RuntimeArg,
              closed_message: str) -> "RuntimeThread":
        """Start the thread and open the engine on it; an open error is raised here. Interrupted
        while it opens (``KeyboardInterrupt``), the open is stopped before this returns."""
        return StartingThread(name, open_core, url, store=store, store_options=store_options, runtime=runtime,
                              closed_message=closed_message).wait()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def __call__(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``await fn(*args)`` on the runtime loop, from the caller's thread."""
        if self._forked:
            raise ClosedError(self._closed_message)
        self._refuse_own_thread()
        if trio.lowlevel.in_trio_run():
            return self._call_from_a_trio_thread(fn, *args)
        try:
            return trio.from_thread.run(fn, *args, trio_token=self.token)
        except (trio.RunFinishedError, trio.Cancelled):  # the loop ended, or is closing, under the call
            raise ClosedError(self._closed_message) from None

    def _refuse_own_thread(self) -> None:  # a call from the runtime thread would block its own loop for good
        if threading.current_thread() is self._thread:  # not its ident: an ended thread's is reused
            raise ReentrantCallError(self._closed_message.removeprefix("the ").removesuffix(" is closed"))

    def _call_from_a_trio_thread(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """:meth:`__call__` from a thread that runs a trio loop of its own (the synchronous
        API used inside a trio program): ``trio.from_thread.run`` refuses any trio thread, so
        the call is handed over as a system task and this thread blocks until it ends (as it
        does under asyncio, and as any blocking call in async code does)."""
        done = threading.Event()
        outcome: dict[str, Any] = {}

        async def runner() -> None:
            try:
                outcome["value"] = await fn(*args)
            except BaseException as e:  # handed to the caller, raised there
                outcome["error"] = e
            finally:
                done.set()

        def refuse() -> None:
            outcome["error"] = ClosedError(self._closed_message)
            done.set()

        try:
            self.token.run_sync_soon(_spawn_or_refuse, runner, refuse)
        except trio.RunFinishedError:
            raise ClosedError(self._closed_message) from None
        while not done.wait(0.1):
            if not self._thread.is_alive():  # the loop ended before the call ran
                raise ClosedError(self._closed_message)
        if "error" in outcome:
            error = outcome["error"]
            raise ClosedError(self._closed_message) if isinstance(error, trio.Cancelled) else error
        return outcome["value"]

    async def acall(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """``await fn(*args)`` on the runtime loop, from an asyncio task on another thread: the
        call runs as a trio system task whose outcome resolves an asyncio future, so the caller's
        loop keeps running meanwhile. Cancelling the awaiting task cancels the call. (From a trio
        task -- a front-end opened under asyncio, used later under trio -- the call waits on a
        worker thread of that trio loop.)"""
        if self._forked:
            raise ClosedError(self._closed_message)
        if async_library() == "trio":
            return await trio.to_thread.run_sync(functools.partial(self, fn, *args))
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        scope = trio.CancelScope()
        closed_message = self._closed_message

        def deliver(ok: bool, value: Any) -> None:
            if fut.done():
                return
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)

        async def runner() -> None:
            ok, value = False, None
            with scope:
                try:
                    value, ok = await fn(*args), True
                except trio.Cancelled:
                    value = ClosedError(closed_message)
                except BaseException as e:  # handed to the awaiting task, raised there
                    value = e
            if not ok and value is None:  # cancelled at the scope (the caller gave up)
                value = ClosedError(closed_message)
            try:
                loop.call_soon_threadsafe(deliver, ok, value)
            except RuntimeError:
                pass  # the caller's loop is closed: nobody is waiting

        def refuse() -> None:
            try:
                loop.call_soon_threadsafe(deliver, False, ClosedError(closed_message))
            except RuntimeError:
                pass  # the caller's loop is closed: nobody is waiting

        try:
            self.token.run_sync_soon(_spawn_or_refuse, runner, refuse)
        except trio.RunFinishedError:
            raise ClosedError(self._closed_message) from None
        try:
            return await fut
        except asyncio.CancelledError:
            try:
                self.token.run_sync_soon(scope.cancel)
            except trio.RunFinishedError:
                pass
            raise

    async def aclose(self) -> None:
        """:meth:`close` from an asyncio (or trio) task (the blocking part on a worker thread)."""
        await _to_thread(self.close)

    async def aabort(self) -> None:
        await _to_thread(self.abort)

    def _signal_stop(self) -> None:
        try:
            self.token.run_sync_soon(self._stop.set)
        except trio.RunFinishedError:
            pass

    def close(self) -> None:
        """Close the engine (``aclose`` on the loop: it flushes), stop the thread. Idempotent."""
        self._refuse_own_thread()
        self._dropped.detach()
        if self._forked or not self._thread.is_alive():
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
        self._refuse_own_thread()
        self._dropped.detach()
        if self._forked or not self._thread.is_alive():
            return
        core = self.core

        async def abort() -> None:
            core.abort()

        try:
            self(abort)
        except ClosedError:
            pass
        self._signal_stop()
        self._thread.join()


# ----------------------------------------------------------------------------------------------
# Async front-ends under trio or asyncio
# ----------------------------------------------------------------------------------------------

ASYNC_LIBRARIES = ("trio", "asyncio")


def async_library() -> str:
    """``"trio"`` or ``"asyncio"``: the library running the calling task (sniffio), else
    :class:`InvalidArgumentError` naming what was found."""
    try:
        lib = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        raise InvalidArgumentError("slatedb.aio needs a running trio or asyncio event loop "
                                   "(use slatedb.Db for synchronous code)") from None
    if lib not in ASYNC_LIBRARIES:
        raise InvalidArgumentError(f"slatedb.aio runs under trio or asyncio, not {lib}")
    return lib


class SpawnedHost(LocalHost):
    """The engine runs on the caller's trio loop in a system task (an awaited ``open``, with no
    block to own a nursery): :meth:`aclose` closes the engine and ends the task. Dropped
    without it (no user object holds this host any more), the engine is closed by a system task
    of that loop (:func:`slatedb.api.dropped.close_dropped`)."""

    __slots__ = ("_stop", "_done", "_dropped", "__weakref__")

    def __init__(self, core: Any, stop: trio.Event, done: trio.Event, url: str) -> None:
        super().__init__(core)
        self._stop = stop
        self._done = done
        self._dropped = watch_drop(self, core, trio.lowlevel.current_trio_token(), stop, url, threading.get_ident())

    @classmethod
    async def start(cls, open_core: Callable[[ObjectStore, Runtime], Awaitable[Any]], url: str, *,
                    store: ObjectStore | None, store_options: Mapping[str, str] | None,
                    runtime: RuntimeArg) -> "SpawnedHost":
        await wait_for_dropped(url)
        started, stop, done = trio.Event(), trio.Event(), trio.Event()
        box: dict[str, Any] = {}
        scope = trio.CancelScope()

        async def main() -> None:
            try:
                with scope:
                    async with serve(open_core, url, store=store, store_options=store_options,
                                     runtime=runtime) as core:
                        box["core"] = core
                        started.set()
                        try:
                            await stop.wait()
                        except trio.Cancelled:
                            # Only the run's end cancels this task once the open is done (trio
                            # cancels its system tasks as ``trio.run`` returns): say so to every
                            # later call, not a bare "aborted".
                            if not stop.is_set() and getattr(core, "abort_reason", None) is not None:
                                core.abort_reason(RUN_ENDED)
                            raise
            except BaseException as e:  # a system task must not raise: an open error goes to start()
                if "core" not in box:
                    box["error"] = e
            finally:
                started.set()
                done.set()

        trio.lowlevel.spawn_system_task(main)
        try:
            await started.wait()
        except BaseException:  # the caller gave up (cancelled): no writer may outlive its open
            scope.cancel()
            with trio.CancelScope(shield=True):
                await done.wait()
            raise
        if "error" in box or "core" not in box:
            raise box.get("error") or ClosedError("the open was cancelled")
        return cls(box["core"], stop, done, url)

    async def _aclose_here(self) -> None:
        self._dropped.detach()
        try:
            await self.core.aclose()
        finally:
            self._stop.set()
            await self._done.wait()

    async def _aabort_here(self) -> None:
        self._dropped.detach()
        self.core.abort()
        self._stop.set()
        await self._done.wait()


class AsyncClosing:
    """``async with x:`` on a front-end already awaited open (``x = await aio.Db.open(url)``,
    ``aio.DbReader``): leaving the block closes it, as leaving ``async with aio.Db.open(url)``
    does; on an exception it stops without flushing."""

    _host: Any

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, et: Any, e: Any, tb: Any) -> None:
        if et is None:
            await self._host.aclose()
        else:
            await self._host.aabort()
