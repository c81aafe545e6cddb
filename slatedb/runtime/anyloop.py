"""Trio coroutine functions a caller may also await under asyncio.

The admin procedures (``slatedb.admin``, ``slatedb.clone.create_clone_url``,
``slatedb.destroy.destroy_url``) are trio code. Awaited from an asyncio task (a FastAPI or
aiohttp service) they raised trio's bare ``RuntimeError: must be called from async context``;
:func:`on_any_loop` runs them there on a trio loop of a worker thread instead, as the
``slatedb.uniffi`` admin does. Under trio (the engine's own loops, the simulator) they are awaited
directly: no thread, no extra checkpoint, the same schedule.

Cancelling the awaiting asyncio task cancels the trio call (``trio.Cancelled`` inside, at its
next checkpoint) and waits for it to end before the ``CancelledError`` reaches the caller, so
that nothing it started outlives the cancellation (a ``run_gc`` or ``run_compactor`` without
``once`` runs until then). A call that ended with a result the cancelled caller never receives
runs its ``undo`` (given to :func:`on_any_loop`), if any, before the ``CancelledError`` is raised:
``admin.create_checkpoint`` deletes the checkpoint nobody learned the id of.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import Any, Awaitable, Callable, TypeVar

import sniffio
import trio

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def on_any_loop(fn: F | None = None, *, undo: Callable[..., Awaitable[Any]] | None = None) -> Any:
    """Wrap a trio coroutine function so that an asyncio task may await it too. ``undo`` (a trio
    coroutine function called with the call's arguments and ``made=`` its result) undoes a
    result the cancelled asyncio caller will never receive."""
    if fn is None:
        return functools.partial(on_any_loop, undo=undo)

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            library = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            library = None
        if library != "asyncio":
            return await fn(*args, **kwargs)
        return await _on_a_trio_thread(functools.partial(fn, *args, **kwargs),
                                       None if undo is None else functools.partial(undo, *args, **kwargs))

    return call


async def _on_a_trio_thread(job: Callable[[], Awaitable[Any]], undo: Callable[..., Awaitable[Any]] | None = None) -> Any:
    lock = threading.Lock()
    box: dict[str, Any] = {}

    async def main() -> Any:
        with trio.CancelScope() as scope:
            with lock:
                if box.get("cancel"):
                    scope.cancel()
                box["scope"], box["token"] = scope, trio.lowlevel.current_trio_token()
            return await job()
        raise asyncio.CancelledError  # the awaiting task was cancelled: reported there

    running = asyncio.ensure_future(asyncio.to_thread(trio.run, main))
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        with lock:
            box["cancel"] = True
            scope, token = box.get("scope"), box.get("token")
        if scope is not None:
            try:
                trio.from_thread.run_sync(scope.cancel, trio_token=token)
            except trio.RunFinishedError:
                pass
        try:
            made = await running  # the call ends (cancelled, or finished meanwhile) before we report
        except BaseException:
            pass
        else:
            if undo is not None:  # finished, its result unseen: undone before we report
                await asyncio.to_thread(trio.run, functools.partial(undo, made=made))
        raise
