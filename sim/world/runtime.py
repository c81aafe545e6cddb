"""The simulation runtime: virtual clocks, seeded randomness, deterministic scheduling.

A simulated world runs inside one ``trio.run`` driven by a ``MockClock`` with
``autojump_threshold=0``: whenever every task is blocked, virtual time jumps to the next
deadline, so minutes of simulated time pass in milliseconds. Trio shuffles runnable tasks with a
private RNG; :func:`run_deterministic` seeds it and switches on its deterministic mode so the
interleaving, too, follows from the seed.

Each simulated process gets its own :class:`SimRuntime` with its own clock (offset, drift,
jumps) and its own random stream, derived from the world seed and the process name, so adding a
process does not perturb the random choices of the others. Given the world's
:class:`sim.world.choices.Choices` instead of a bare seed, those streams are recorded choices (the
process's ``rng`` editable by the shrinker, its id stream fixed), with the same values.
"""

from __future__ import annotations

import contextlib
import gc
import random
import uuid
from typing import Any, Awaitable, Callable, Iterator, TypeVar

import trio
import trio.testing
from ulid import ULID

from slatedb.runtime import Runtime, ulid_from_parts, uuid4_from_int

from sim.world.choices import Choices
from sim.world import fastclock, fastloop
from sim.world import probes as probes_mod
from sim.world.trace import _FORMATS, Trace, _format_of

T = TypeVar("T")

#: Virtual wall-clock time at which every simulation starts (2026-01-01T00:00:00Z), in ms.
SIM_EPOCH_MS = 1_767_225_600_000


def derive_rng(seed: int, *names: str) -> random.Random:
    """A random stream for ``names`` under ``seed``; independent of PYTHONHASHSEED."""
    return random.Random(":".join([str(seed), *names]))


class SimRuntime(Runtime):
    """The runtime of one simulated process.

    Monotonic time runs at ``1 + drift_ppm / 1e6`` times the world's virtual time; wall time is
    the epoch plus monotonic time plus ``offset_ms`` (skew), and can be made to jump with
    :meth:`jump_wall_clock`. Sleeping converts this process's seconds to world seconds.
    """

    def __init__(
        self,
        name: str,
        seed: "int | Choices",
        trace: Trace,
        *,
        offset_ms: int = 0,
        drift_ppm: float = 0.0,
        bugs: frozenset[str] = frozenset(),
    ) -> None:
        assert -100_000 < drift_ppm < 100_000, drift_ppm
        self.name = name
        self.trace = trace
        self.bugs = frozenset(bugs)
        if isinstance(seed, Choices):
            seed.trace = trace  # the world's trace, for reports on a replayed sequence
            self._rng: random.Random = seed.stream("process", name)
            # Ids are unique whatever the runtime's name: a second runtime of a name already used
            # in this world (a rescaler making shard after shard as "rs") draws ids of its own (the
            # same stream would mint the same checkpoint ids: issue 26, rescale seeds 4 and 6).
            again = sum(1 for label in seed.streams
                        if label.split("#")[0] == f"ids:{name}" or label.startswith(f"ids:{name}:"))
            self._ids: random.Random = seed.stream("ids", name) if not again else seed.stream("ids", name, str(again + 1))
        else:
            self._rng = derive_rng(seed, "process", name)
            self._ids = derive_rng(seed, "ids", name)
        self.offset_ms = offset_ms
        self.rate = 1.0 + drift_ppm / 1e6
        self._origin_s = trio.current_time()

    def _world_s(self) -> float:
        return fastclock.current_time() - self._origin_s

    # monotonic_s and now_ms are _world_s() * rate (and that in ms on the wall clock) with the
    # calls inline: the same arithmetic, asked some 2,500 times a gc seed (GC, the compactor's ticks).

    def monotonic_s(self) -> float:
        return (fastclock.current_time() - self._origin_s) * self.rate

    def now_ms(self) -> int:
        return SIM_EPOCH_MS + int((fastclock.current_time() - self._origin_s) * self.rate * 1000.0) + self.offset_ms

    def jump_wall_clock(self, delta_ms: int) -> None:
        """Move this process's wall clock (not its monotonic clock) by ``delta_ms``."""
        self.offset_ms += delta_ms
        self.trace.record(self.name, "clock.jump", delta_ms=delta_ms, offset_ms=self.offset_ms)

    def sleep(self, seconds: float) -> Awaitable[None]:
        # fastclock's sleep itself, for the caller to await (no frame of its own: see fastclock)
        return fastclock.sleep(max(0.0, seconds) / self.rate)

    def _world_seconds(self, seconds: float) -> float:
        return seconds / self.rate

    def wait_event(self, event: trio.Event, timeout_s: float) -> Awaitable[bool]:
        # Runtime.wait_event's move_on_after around event.wait(), without the cancel scope
        # (fastclock.wait_event: the same moments of the loop), for the caller to await
        return fastclock.wait_event(event, max(0.0, timeout_s / self.rate))

    @property
    def rng(self) -> random.Random:
        return self._rng

    def new_ulid(self) -> ULID:
        return ulid_from_parts(max(0, self.now_ms()), self._ids.getrandbits(80))

    def new_uuid(self) -> uuid.UUID:
        return uuid4_from_int(self._ids.getrandbits(128))

    def _on_spawn(self, task_name: str) -> None:
        self.trace.record(self.name, "spawn", task=task_name)

    def event(self, kind: str, **fields: Any) -> None:
        # trace.record(self.name, kind, **fields), the fields (a dict of this call's) given away
        names = tuple(fields)
        self.trace.emit(self.name, kind, fields, _FORMATS.get(names) or _format_of(names))

    def probe(self, name: str) -> None:
        probes_mod.hit(name)


@contextlib.contextmanager
def deterministic_scheduling(seed: int) -> Iterator[None]:
    """Make trio's scheduler pick runnable tasks in an order that follows from ``seed``.

    Trio keeps two private knobs for this (used by its Hypothesis plugin): the scheduler's RNG
    ``_r`` and the flag ``_ALLOW_DETERMINISTIC_SCHEDULING``, which sorts each batch of runnable
    tasks by creation order before shuffling it. Seeding alone is not enough. We restore both on
    exit so that a simulation leaves the process as it found it.
    """
    from trio._core import _run

    old_flag, old_r = _run._ALLOW_DETERMINISTIC_SCHEDULING, _run._r
    _run._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]
    _run._r = _BatchShuffler(seed)  # type: ignore[misc]
    try:
        yield
    finally:
        _run._r = old_r  # type: ignore[misc]
        _run._ALLOW_DETERMINISTIC_SCHEDULING = old_flag  # type: ignore[misc]


class _BatchShuffler(random.Random):
    """The scheduler's RNG for a simulated run: ``random.Random(seed)``, whose ``shuffle`` returns
    at once for a batch of fewer than two tasks (most of a simulated run's batches: one task woken
    at its deadline). ``random.shuffle`` draws nothing for those either, so every batch's order
    and the generator's state stay the same; only the call is saved."""

    def shuffle(self, x: list) -> None:  # type: ignore[override]
        if len(x) > 1:
            super().shuffle(x)


def run_deterministic(async_fn: Callable[..., Awaitable[T]], *args: Any, seed: "int | Choices") -> T:
    """Run ``async_fn(*args)`` on a fresh virtual clock with seeded scheduling (the seed, or
    the scheduler's choice of a :class:`sim.world.choices.Choices`).

    Virtual time starts at 0 and auto-jumps as soon as every task is blocked.
    """
    if isinstance(seed, Choices):
        seed = seed.scheduler_seed()
    clock = trio.testing.MockClock(autojump_threshold=0)
    fastclock.speed_up(clock)
    with deterministic_scheduling(seed), no_cyclic_gc():
        return fastloop.run(_quiet, async_fn, *args, clock=clock)


async def _quiet(async_fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    fastclock.quiet_io()
    return await async_fn(*args)


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[bool]:
    """No cyclic garbage collection during a simulated run.

    When Python's cyclic collector runs depends on every allocation since the process started,
    and a collection finalizes unreachable objects -- async generators among them, whose
    ``aclose`` trio then schedules as a task. Left on, it made a seed's trace depend on what
    ran before it in the same process (compactor seed 7: three runs, three digests; gc seed
    22 under ``sim sweep``). Objects freed by reference counting are unaffected; cyclic
    garbage waits for the end of the run (a collection before the run is not needed: with none
    during it, nothing is finalized mid-run, and a full one per seed cost several per cent of
    ``sim bench``).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield was_enabled
    finally:
        if was_enabled:
            gc.enable()
