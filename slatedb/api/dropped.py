"""Front-ends dropped without ``close()``: their engine is closed for them.

A host (:class:`~slatedb.api.portal.RuntimeThread`, :class:`~slatedb.api.portal.SpawnedHost`) is
held by every user object that calls its engine: the front-end (``Db``, ``DbReader``,
``WalReader``, ``aio.Db``, ``aio.DbReader``) and its snapshots, iterators and transactions. When the
last of them is garbage, :func:`watch_drop`'s finalizer asks the engine's loop to close it
(:func:`close_dropped`) and returns at once; :data:`DROPPED` keeps such closes by URL until they
end, and an open of that URL in this process waits for them first, as an exiting interpreter
does (a bounded wait, :data:`EXIT_WAIT_S`). Nothing here holds a user object, nothing blocks the
thread that dropped one, nothing raises.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import warnings
import weakref
from typing import Any, Awaitable, Callable

import trio

from slatedb.redact import shown_url


def spawn_or_refuse(runner: Callable[[], Awaitable[None]], refuse: Callable[[], None]) -> None:
    """(On the runtime loop, from ``run_sync_soon``.) Start a call as a system task; when the
    loop is closing, its system nursery takes no new task: ``refuse()`` answers the caller
    instead. Raising here would end the whole run as a ``TrioInternalError`` and leave the caller
    waiting for good (found by closing a database while another asyncio task scanned it)."""
    try:
        trio.lowlevel.spawn_system_task(runner)
    except RuntimeError:
        refuse()


LOG = logging.getLogger("slatedb")


class DroppedCloses:
    """The closes of engines whose last user object went away without ``close()``, still
    running, by the URL they were opened at. A later open of that URL in this process waits
    for them first (:meth:`pending`): else it would fence the dropped writer while its close
    flushes, and the rows the close was flushing would be lost, not reopened."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_url: dict[str, list[tuple[threading.Event, int]]] = {}

    def add(self, url: str, loop_thread: int) -> threading.Event:
        """A close starts on the loop run by thread ``loop_thread``; set the event it gives when done."""
        done = threading.Event()
        with self._lock:
            self._by_url.setdefault(url, []).append((done, loop_thread))
        return done

    def finished(self, url: str, done: threading.Event) -> None:
        done.set()
        with self._lock:
            left = [e for e in self._by_url.get(url, ()) if e[0] is not done]
            if left:
                self._by_url[url] = left
            else:
                self._by_url.pop(url, None)

    def after_fork_in_child(self) -> None:
        """The closes pending in the parent run on its threads, which do not exist here."""
        self._lock = threading.Lock()
        self._by_url = {}

    def every_pending(self) -> list[threading.Event]:
        with self._lock:
            return [done for closes in self._by_url.values() for done, _ in closes]

    def pending(self, url: str, *, skip_thread: int | None = None) -> list[threading.Event]:
        """The closes at ``url`` still running, but those on the loop of thread ``skip_thread``
        (the caller's own loop: it cannot run them while the caller blocks)."""
        with self._lock:
            return [done for done, t in self._by_url.get(url, ()) if t != skip_thread]


DROPPED = DroppedCloses()


def _closer(core: Any, stop: trio.Event | None, url: str, done: threading.Event) -> Callable[[], Awaitable[None]]:
    """The task that closes an engine nobody holds any more: ``aclose`` (it flushes), then the
    loop's ``stop``. Nothing is raised: nobody is there to see it (a failure is logged on the
    ``slatedb`` logger and the engine stopped without flushing, as a crash)."""

    async def close() -> None:
        try:
            if not core.closed:
                await core.aclose()
        except Exception as e:
            LOG.warning("closing a %s dropped without close() failed (it stops without flushing): %s: %s",
                        type(core).__name__, type(e).__name__, e)
            core.abort()
        finally:
            if stop is not None:
                stop.set()
            DROPPED.finished(url, done)

    return close


def close_dropped(core: Any, token: trio.lowlevel.TrioToken, stop: trio.Event | None, url: str, pid: int,
                  loop_thread: int) -> None:
    """(``weakref.finalize`` of a host: its last user object is gone.) Ask its loop to close the
    engine, and return at once: this runs wherever the last reference went (any thread, the
    loop's own included, a garbage collection in the middle of anything), so it must neither
    block nor raise. In a child made by ``os.fork`` it does nothing (the parent owns the
    engine). Not run at interpreter exit (``atexit`` is off): a front-end still held then is
    left as before (its daemon thread dies with the process; only unflushed writes are lost);
    a close asked for before the exit is waited for (:func:`_finish_dropped_closes_at_exit`)."""
    if os.getpid() != pid:
        return
    unclosed = not core.closed
    done = DROPPED.add(url, loop_thread)
    try:
        token.run_sync_soon(spawn_or_refuse, _closer(core, stop, url, done), lambda: DROPPED.finished(url, done))
    except trio.RunFinishedError:  # the loop is gone: nothing runs the engine any more
        DROPPED.finished(url, done)
    if unclosed:
        _warn_unclosed(core, url)


#: What a user opened, by the engine's class (the message of :func:`_warn_unclosed`).
_OPENED = {"DbCore": "database", "ReaderCore": "reader", "WalReaderCore": "WAL reader"}


def _warn_unclosed(core: Any, url: str) -> None:
    """A ``ResourceWarning``, as Python's files, sockets and sqlite3 connections give when dropped
    open (shown under ``python -X dev`` or ``-W default``, hidden by default); after the close was
    asked for, and never raised out of here (a filter turning it into an error must not skip
    the close or raise into whatever collected the object)."""
    what = _OPENED.get(type(core).__name__, type(core).__name__)
    try:
        warnings.warn(f"unclosed slatedb {what} at {shown_url(url)} (dropped without close(); closed for you: use close() "
                      f"or 'with')", ResourceWarning, stacklevel=2)
    except Exception:  # noqa: BLE001 - see the docstring
        pass


def watch_drop(owner: object, core: Any, token: trio.lowlevel.TrioToken, stop: trio.Event | None, url: str,
               loop_thread: int) -> weakref.finalize:
    """Close ``core`` once ``owner`` (a host) is garbage: :func:`close_dropped`. The callback holds
    the engine's parts, never ``owner``."""
    fin = weakref.finalize(owner, close_dropped, core, token, stop, url, os.getpid(), loop_thread)
    fin.atexit = False
    return fin


async def wait_for_dropped(url: str) -> None:
    """(On a trio loop, which may be the one running them.) Wait out the closes of engines
    dropped at ``url``."""
    for done in DROPPED.pending(url):
        await trio.to_thread.run_sync(done.wait, abandon_on_cancel=True)


#: How long an exiting interpreter waits for a dropped front-end's close still running (asked
#: for just before the exit, as by ``del db`` at the end of a script): a store that does not
#: answer must not hold the exit up for good.
EXIT_WAIT_S = 10.0


def _finish_dropped_closes_at_exit() -> None:
    """(``atexit``.) Let the closes already asked for finish: the runtime threads are daemons and
    die with the interpreter, which would cut such a close short (as a crash). Nothing new is
    closed here: a front-end still held at exit is left as before (docs/db.md)."""
    for done in DROPPED.every_pending():
        if not done.wait(EXIT_WAIT_S):
            return


atexit.register(_finish_dropped_closes_at_exit)
