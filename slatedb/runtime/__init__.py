"""The runtime seam: everything nondeterministic reaches protocol code through a :class:`Runtime`.

Protocol code (WAL, manifest, compactor, GC, ...) never reads the wall clock, sleeps, draws
random numbers, mints ULIDs/UUIDs or spawns tasks on its own. It asks the runtime it was given.
Production passes :class:`slatedb.runtime.production.ProductionRuntime` (real clock, OS entropy);
the simulator passes ``sim.world.runtime.SimRuntime`` (virtual clock with per-process offset and drift,
seeded RNG). That single seam is what makes a simulated run repeatable bit for bit from its seed.
"""

from __future__ import annotations

import abc
import random
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable

import attrs
import trio
from ulid import ULID


class TaskGroup:
    """A trio nursery seen through the runtime, so that spawning is observable and uniform."""

    def __init__(self, runtime: "Runtime", nursery: trio.Nursery) -> None:
        self._runtime = runtime
        self.nursery = nursery

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None) -> None:
        """Start ``fn(*args)`` as a background task of this group."""
        self._runtime._on_spawn(name or getattr(fn, "__name__", "task"))
        self.nursery.start_soon(fn, *args, name=name)

    def cancel(self) -> None:
        """Cancel every task of the group (used by the simulator for crashes)."""
        self.nursery.cancel_scope.cancel()

    def spawn_in(self, scopes: "TaskScopes", fn: Callable[..., Awaitable[Any]], *args: Any,
                 name: str | None = None) -> None:
        """:meth:`spawn` inside a cancel scope of its own, kept in ``scopes``: an engine's close
        cancels its tasks through ``scopes``, never the nursery's own scope, which (in an
        ``async with`` under trio) also encloses the caller's block."""
        scope = scopes.add()
        self._runtime._on_spawn(name or getattr(fn, "__name__", "task"))
        self.nursery.start_soon(_in_scope, scope, fn, args, name=name)


async def _in_scope(scope: trio.CancelScope, fn: Callable[..., Awaitable[Any]], args: tuple) -> None:
    with scope:
        await fn(*args)


class TaskScopes:
    """The cancel scopes of an engine's background tasks (:meth:`TaskGroup.spawn_in`). Cancelling
    them ends those tasks and nothing else: under trio, ``async with aio.Db.open(...)`` runs the
    caller's block inside the tasks' nursery, whose own scope, cancelled at close, used to
    cancel the rest of the block silently (code after ``await db.close()`` in the block never
    ran, and the caller's own tasks there were cancelled)."""

    def __init__(self) -> None:
        self._scopes: list[trio.CancelScope] = []

    def add(self) -> trio.CancelScope:
        scope = trio.CancelScope()
        self._scopes.append(scope)
        return scope

    def cancel(self) -> None:
        for scope in self._scopes:
            scope.cancel()


#: The first and the largest pause between retries of a transient error (seconds), unless a
#: policy says otherwise: the pause doubles in between.
BACKOFF_MIN_S = 0.01
BACKOFF_MAX_S = 2.0


@attrs.frozen
class RetryPolicy:
    """How long object-store calls keep retrying transient errors (slatedb/objstore/retry.py).

    ``max_retries``: retries after the first attempt (None: no bound); ``deadline_s``: stop
    retrying once this much of the process's monotonic time has passed since the first attempt
    (None: no bound); ``log``: log each wait (logger ``slatedb.objstore``, WARNING).

    ``backoff_min_s`` / ``backoff_max_s``: the first and the largest pause between retries (the
    pause doubles in between, each drawn with jitter). ``open_backoff_s``: the ``(first,
    largest)`` pauses once a database has opened (:func:`opened`; None: the same as before).
    """

    max_retries: int | None = None
    deadline_s: float | None = None
    log: bool = False
    backoff_min_s: float = BACKOFF_MIN_S
    backoff_max_s: float = BACKOFF_MAX_S
    open_backoff_s: tuple[float, float] | None = None


def with_max_retries(runtime: "Runtime", max_retries: int | None) -> "Runtime":
    """Apply the ``object_store_max_retries`` setting to ``runtime`` (None: keep its policy)."""
    if max_retries is not None:
        runtime.retry_policy = attrs.evolve(runtime.retry_policy, max_retries=max_retries)
    return runtime


def opened(runtime: "Runtime") -> None:
    """A database (writer or reader) has opened on ``runtime`` (or a service: a standalone
    compactor fenced in, GC run until stopped, ``slatedb.admin``): its calls pause from now on as
    its policy's ``open_backoff_s`` says (production: as long as the official engine's
    ``object_store`` client; the open itself, and tools that only look, keep the short pauses:
    a wrong endpoint fails within seconds)."""
    policy = runtime.retry_policy
    if policy.open_backoff_s is not None:
        lo, hi = policy.open_backoff_s
        runtime.retry_policy = attrs.evolve(policy, backoff_min_s=lo, backoff_max_s=hi)


#: The simulator's (and the base class's) policy: retry until success; faults end when it says.
UNBOUNDED_RETRIES = RetryPolicy()


class Runtime(abc.ABC):
    """Clock, randomness, identifiers and task spawning for one process."""

    #: How transient object-store errors are retried in this process (production bounds it).
    retry_policy: RetryPolicy = UNBOUNDED_RETRIES

    #: A name for logs and traces ("prod", or the simulated process name).
    name: str

    #: Names of catalogued bugs re-introduced on purpose (``sim bugs`` lists them). Always empty
    #: in production; the simulator sets it per run. Protocol code tests ``"name" in rt.bugs``,
    #: which costs one lookup in an empty frozenset when no bug is switched on.
    bugs: frozenset[str] = frozenset()

    @abc.abstractmethod
    def now_ms(self) -> int:
        """Wall-clock Unix time in milliseconds. May jump (NTP, skew); never use it for timeouts."""

    @abc.abstractmethod
    def monotonic_s(self) -> float:
        """Monotonic seconds since an arbitrary origin; for intervals and deadlines."""

    @abc.abstractmethod
    async def sleep(self, seconds: float) -> None:
        """Sleep for ``seconds`` of this process's monotonic time."""

    @property
    @abc.abstractmethod
    def rng(self) -> random.Random:
        """This process's random source (seeded in simulation)."""

    @abc.abstractmethod
    def new_ulid(self) -> ULID:
        """A fresh ULID whose timestamp is :meth:`now_ms`."""

    @abc.abstractmethod
    def new_uuid(self) -> uuid.UUID:
        """A fresh random (version 4) UUID."""

    async def sleep_until(self, monotonic_deadline_s: float) -> None:
        """Sleep until :meth:`monotonic_s` reaches ``monotonic_deadline_s``."""
        remaining = monotonic_deadline_s - self.monotonic_s()
        if remaining > 0:
            await self.sleep(remaining)
        else:
            await trio.lowlevel.checkpoint()

    async def wait_event(self, event: trio.Event, timeout_s: float) -> bool:
        """Wait until ``event`` is set or ``timeout_s`` of this process's time passed; True if set."""
        with trio.move_on_after(max(0.0, self._world_seconds(timeout_s))):
            await event.wait()
        return event.is_set()

    def _world_seconds(self, seconds: float) -> float:
        """``seconds`` of this process's clock in the event loop's seconds (drift in simulation)."""
        return seconds

    @asynccontextmanager
    async def task_group(self) -> AsyncIterator[TaskGroup]:
        """Open a nursery for background tasks; leaving the block waits for them."""
        async with trio.open_nursery() as nursery:
            yield TaskGroup(self, nursery)

    def _on_spawn(self, task_name: str) -> None:
        """Hook for runtimes that trace task creation (the simulator does)."""

    #: The engine's metrics registry (:class:`slatedb.runtime.metrics.Metrics`), or None where
    #: nothing is measured (the simulator). Instrumented sites check it before timing anything.
    metrics: Any = None

    def probe(self, name: str) -> None:
        """A rare protocol branch was taken (a coverage probe: a constant of
        :mod:`slatedb.runtime.probes`). Production ignores it; the simulator counts the hits of
        each run and every campaign reports them. One line at the branch, nothing to build."""

    def event(self, kind: str, **fields: Any) -> None:
        """Record a protocol event (``fence_written``, ``ack``, ``halt``, ``commit``, ...).

        Production ignores it; the simulator appends it to the trace, where the invariant
        checkers of ``spec/protocols/`` read it. Keep ``fields`` small and cheap to build.
        """


def ulid_from_parts(timestamp_ms: int, randomness: int) -> ULID:
    """Build a ULID from a millisecond timestamp and 80 random bits, without touching globals."""
    assert 0 <= timestamp_ms < (1 << 48), timestamp_ms
    assert 0 <= randomness < (1 << 80), randomness
    return ULID.from_int((timestamp_ms << 80) | randomness)


def uuid4_from_int(bits128: int) -> uuid.UUID:
    """A version-4 UUID from 128 random bits (version and variant bits are forced)."""
    return uuid.UUID(int=bits128 & ((1 << 128) - 1), version=4)


__all__ = ["BACKOFF_MAX_S", "BACKOFF_MIN_S", "opened", "with_max_retries", "UNBOUNDED_RETRIES", "RetryPolicy", "Runtime", "TaskGroup", "ulid_from_parts", "uuid4_from_int"]
