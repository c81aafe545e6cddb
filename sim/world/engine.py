"""What every scenario's processes share: crashes, freezes and delayed requests, in one place.

A scenario (``sim/scenarios/registry.py``) declares its processes (a writer, compactors, GC, readers,
an admin, a clone...) as coroutines and runs each under :func:`crashable`, on a store view made
here; the fault injectors (store faults in :mod:`sim.world.store`, the crash and pause plans drawn
from the world's :class:`sim.world.choices.Choices`) and the checkers attached to its trace do the
rest. Worlds with a liveness phase call ``heal()``: no new fault, no new crash, and requests in
flight finish.

* :class:`Crash` and :func:`crashable`: a process dies at a virtual moment or right after its
  n-th event of a kind (its store fails every later call; a request already at the server
  still lands) unless the world has healed;
* :class:`PausableStore`: a process that freezes (a GC pause, a descheduled VM): its requests
  wait until it thaws;
* :class:`LatePauseStore`: a process whose next request leaves late (the takeover scenario's
  pause right after an epoch bump).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Protocol, TypeVar

import attrs
import trio

from slatedb.objstore.base import OVERWRITE, GetResult, ObjectMeta, ObjectStore, PutMode

from sim.world import events, fastclock
from sim.world.store import ProcessCrashed, SimObjectStore
from sim.world.trace import Trace, listens

T = TypeVar("T")


class World(Protocol):
    """What :func:`crashable` needs of a world."""

    healed: bool
    trace: Trace


@attrs.frozen
class Crash:
    """When a process dies: ``after_s`` virtual seconds after it starts, or right after its
    ``nth`` event of ``kind`` (with field ``ns`` when given)."""

    after_s: float | None
    kind: str = ""
    ns: str | None = None
    nth: int = 1


async def crashable(world: World, name: str, store: SimObjectStore, crash: Crash | None,
                    body: Callable[[], Awaitable[str]]) -> str:
    """Run ``body()`` as process ``name`` that may crash (unless healed by then): its store
    fails every later call and the process is cancelled. Returns ``body``'s outcome, or
    ``"crashed"``."""
    seen = 0

    def now() -> None:
        if not world.healed and not store.crashed:
            store.crash()
            life.cancel()

    @listens(crash.kind if crash is not None else "")
    def on_event(e: Any) -> None:
        nonlocal seen
        assert crash is not None
        if e.process == name and e.kind == crash.kind and (crash.ns is None or e.f.get("ns") == crash.ns):
            seen += 1
            if seen == crash.nth:
                now()

    with trio.CancelScope() as life:
        async with trio.open_nursery() as nursery:
            if crash is not None and crash.after_s is not None:
                after_s = crash.after_s

                async def crasher() -> None:
                    await fastclock.sleep(after_s)
                    now()

                nursery.start_soon(crasher)
            elif crash is not None:
                world.trace.listeners.append(on_event)
            try:
                outcome = await body()
            except* ProcessCrashed:
                outcome = "crashed"
            finally:
                if on_event in world.trace.listeners:
                    world.trace.listeners.remove(on_event)
            nursery.cancel_scope.cancel()
        return outcome
    assert store.crashed, "a process was cancelled without a crash"
    return "crashed"


class PausableStore(ObjectStore):
    """A process's view of the store that can freeze (a long GC pause, a descheduled VM): while
    paused, the process's requests wait before they leave. Everything else is the simulated
    store's (faults, crashes)."""

    def __init__(self, sim: SimObjectStore) -> None:
        self.sim = sim
        self.url = sim.url
        self.paused_until = 0.0

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, trio.current_time() + seconds)
        self.sim.trace.record(self.sim.process, events.PAUSE, seconds=round(seconds, 6))

    async def _wait(self) -> None:
        while (left := self.paused_until - fastclock.current_time()) > 0:
            await fastclock.sleep(left)

    async def _after_pause(self, call: Callable[[], Awaitable[T]]) -> T:
        await self._wait()
        return await call()

    # Each call returns the simulated store's coroutine for the caller to await, behind a wait
    # while the process is paused (``_after_pause``). Unpaused, the wait would return at once:
    # no frame of its own (see fastclock on frames per wake-up). A store never paused (0.0: the
    # virtual clock starts at 0) is not asked the time.

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> Awaitable[GetResult]:
        if self.paused_until and self.paused_until > fastclock.current_time():
            return self._after_pause(lambda: self.sim.get(key, byte_range))
        return self.sim.get(key, byte_range)

    def head(self, key: str) -> Awaitable[ObjectMeta]:
        if self.paused_until and self.paused_until > fastclock.current_time():
            return self._after_pause(lambda: self.sim.head(key))
        return self.sim.head(key)

    def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> Awaitable[ObjectMeta]:
        if self.paused_until and self.paused_until > fastclock.current_time():
            return self._after_pause(lambda: self.sim.put(key, data, mode))
        return self.sim.put(key, data, mode)

    def list(self, prefix: str = "") -> Awaitable[list[ObjectMeta]]:
        if self.paused_until and self.paused_until > fastclock.current_time():
            return self._after_pause(lambda: self.sim.list(prefix))
        return self.sim.list(prefix)

    def delete(self, key: str) -> Awaitable[None]:
        if self.paused_until and self.paused_until > fastclock.current_time():
            return self._after_pause(lambda: self.sim.delete(key))
        return self.sim.delete(key)

    def open_url(self, url: str) -> Any:
        """Another database in the same world (a clone reaching its parent), when the simulated
        store can open one."""
        return self.sim.open_url(url)  # type: ignore[attr-defined]


class LatePauseStore(SimObjectStore):
    """A simulated store whose process can be paused: its next request leaves ``pause_s`` late
    (traced as ``fault.pause``)."""

    pause_s = 0.0

    def _leg_s(self) -> float:
        delay = super()._leg_s()
        if self.pause_s:
            self.trace.record(self.process, events.FAULT_PAUSE, seconds=round(self.pause_s, 6))
            delay += self.pause_s
            self.pause_s = 0.0
        return delay
