"""Cheaper virtual time for a simulated run: the same schedule as trio's, with less work per step.

A simulated world spends most of its scheduler time on two things trio does for generality:

* **every sleep ends by a cancellation.** ``trio.sleep`` is ``with move_on_at(deadline):
  await sleep_forever()``: a cancel scope entered and left, and at the deadline a ``Cancelled``
  exception built, raised into the task and caught again. :func:`sleep_until` registers the
  deadline itself (a :class:`_Wake` in the run's deadline heap, the heap trio's scopes use) and
  is woken by a plain ``reschedule`` when ``Deadlines.expire`` reaches it -- at the same moment
  of the loop, so the task joins the same batch it would have joined.
* **every step of the loop polls the operating system** (an ``epoll`` call with a zero
  timeout), though nothing in a simulated world does I/O but trio's own wake-up socket, written
  when a job enters the run's entry queue (an async generator's finalizer, in the simulator).
  :func:`quiet_io` polls for real when the loop would block or a job is queued -- the step
  that saw the socket readable before sees it now -- and every :data:`_POLL_EVERY` steps
  otherwise (a signal is still seen, a little later in wall time).
* **every step asks trio's instruments** whether a hook is installed (a ``UserDict``: a Python
  call per question, four to six per step); with none installed (always, in the simulator),
  :func:`quiet_io` answers from a plain dict until one is added.
* **the mock clock reads the wall clock.** ``MockClock.current_time`` at rate 0 is
  ``virtual_base + 0 * (perf_counter() - real_base)``, i.e. ``virtual_base``; and its autojump
  builds the whole ``RunStatistics`` (the I/O manager's included) to learn the next deadline.
  :func:`speed_up` gives the run's clock both answers directly.

Both follow trio's semantics exactly (the trace of a seed is the same bit for bit; the
determinism and digest tests hold it): a deadline in the past, a cancelled enclosing scope at
entry, a cancellation while asleep, and an enclosing scope cancelled between the wake-up and
the task's next step (trio's inner scope then lets the ``Cancelled`` through) all behave as in
``trio.sleep``. They rely on trio's private run loop (as :func:`sim.world.runtime.deterministic_scheduling`
does); :data:`AVAILABLE` is False on a trio without it, and then ``trio.sleep`` is used.
"""

from __future__ import annotations

import math
import types
from heapq import heappush
from typing import Any, Generator

import trio

try:  # trio's private run loop; checked against the pinned trio (pyproject.toml)
    from trio._core._run import GLOBAL_RUN_CONTEXT, Deadlines, Runner
    from trio._core._exceptions import Cancelled
    from trio._core._traps import WaitTaskRescheduled as _WaitTaskRescheduled

    AVAILABLE = all(hasattr(Deadlines, a) for a in ("add", "remove", "next_deadline", "expire")) and hasattr(
        Runner, "reschedule") and hasattr(Cancelled, "_create")
except ImportError:  # pragma: no cover - another trio
    AVAILABLE = False

_Abort = trio.lowlevel.Abort
_inf = math.inf
_new = object.__new__


class _Wake:
    """A sleeping task's entry in the run's deadline heap, shaped like a cancel scope for it
    (``_registered_deadline``, ``_cancel``): expiring wakes the task instead of cancelling it."""

    __slots__ = ("_registered_deadline", "task", "runner")

    def __init__(self, deadline: float, task: Any, runner: Any) -> None:
        self._registered_deadline = deadline
        self.task = task
        self.runner = runner

    def _cancel(self, _reason: Any) -> None:
        # Deadlines.expire calls this for a live entry; a scope's _cancel removes its deadline.
        self.runner.deadlines.remove(self._registered_deadline, self)
        self._registered_deadline = _inf
        self.runner.reschedule(self.task)

    def abort(self, _raise_cancel: Any) -> Any:
        # Cancelled by an enclosing scope while asleep: drop the deadline, let the Cancelled in.
        self.runner.deadlines.remove(self._registered_deadline, self)
        self._registered_deadline = _inf
        return _Abort.SUCCEEDED


def _woken(task: Any) -> None:
    """After a sleeper's wake-up: trio's inner scope would now let a Cancelled through if an
    enclosing scope was cancelled since (it caught its own only while no parent's was visible)."""
    status = task._cancel_status
    if status.effectively_cancelled:
        reason = status._scope._cancel_reason
        if reason is None:
            raise Cancelled._create(source="unknown", reason="misnesting")
        raise Cancelled._create(source=reason.source, reason=reason.reason, source_task=reason.source_task)


# ``sleep_until`` and ``sleep`` are generator-based coroutines (``types.coroutine``): awaiting
# one yields trio's wait message straight to the run loop, where ``trio.lowlevel.wait_task_rescheduled``
# would add two frames (and ``async def`` a third) that every wake-up passes down and every
# sleep passes up again -- a store call sleeps twice. Await them; they are not coroutine
# functions for ``start_soon``.
#
# Under :func:`sim.world.fastloop.run` (its runner is :data:`_FAST_RUNNER`) a sleep yields its
# :class:`_Wake` itself as the wait message, and the loop wakes it by sending :data:`WOKEN`:
# the loop does what ``wait_task_rescheduled``'s message and ``Runner.reschedule``'s
# ``Value(None)`` did (two frozen objects built per sleep) with neither. A cancellation still
# arrives as trio's ``Error`` outcome (the abort path is trio's), unwrapped here.

#: The runner whose loop is :func:`sim.world.fastloop.run`'s (set while it runs), else None.
_FAST_RUNNER: Any = None

#: The sped-up clock (:func:`speed_up`) of the run :func:`sim.world.fastloop.run` runs, else None:
#: its time is its ``_virtual_base``, read without the call.
_FAST_CLOCK: Any = None

#: What :func:`sim.world.fastloop.run` sends a sleeper woken at its deadline (trio: ``Value(None)``).
WOKEN = object()


@types.coroutine
def sleep_until(deadline: float) -> Generator[Any, Any, None]:
    """``trio.sleep_until(deadline)``, woken without a cancellation (see the module)."""
    runner = GLOBAL_RUN_CONTEXT.runner
    if not deadline > runner.clock.current_time():
        # Already due (or NaN): trio's own path (a checkpoint through an already-cancelled scope).
        yield from trio.sleep_until(deadline).__await__()
        return
    task = GLOBAL_RUN_CONTEXT.task
    wake = _new(_Wake)  # _Wake(deadline, task, runner), without the call
    wake._registered_deadline = deadline
    wake.task = task
    wake.runner = runner
    deadlines = runner.deadlines
    heappush(deadlines._heap, (deadline, id(wake), wake))  # Deadlines.add
    deadlines._active += 1
    got = yield (wake if runner is _FAST_RUNNER else _WaitTaskRescheduled(wake.abort))
    if got is not WOKEN:
        got.unwrap()  # what wait_task_rescheduled unwraps
    if task._cancel_status.effectively_cancelled:
        _woken(task)


@types.coroutine
def sleep(seconds: float) -> Generator[Any, Any, None]:
    """``trio.sleep(seconds)`` (see :func:`sleep_until`)."""
    if seconds <= 0 or not AVAILABLE:
        yield from trio.sleep(seconds).__await__()
        return
    runner = GLOBAL_RUN_CONTEXT.runner
    clock = runner.clock
    now = clock._virtual_base if clock is _FAST_CLOCK else clock.current_time()  # speed_up's current_time
    deadline = now + seconds
    if not deadline > now:  # a sleep too short to move the clock
        yield from trio.sleep_until(deadline).__await__()
        return
    task = GLOBAL_RUN_CONTEXT.task
    wake = _new(_Wake)  # _Wake(deadline, task, runner), without the call
    wake._registered_deadline = deadline
    wake.task = task
    wake.runner = runner
    deadlines = runner.deadlines
    heappush(deadlines._heap, (deadline, id(wake), wake))  # Deadlines.add
    deadlines._active += 1
    got = yield (wake if runner is _FAST_RUNNER else _WaitTaskRescheduled(wake.abort))
    if got is not WOKEN:
        got.unwrap()
    if task._cancel_status.effectively_cancelled:
        _woken(task)


def current_time() -> float:
    """``trio.current_time()``: the run's clock, asked directly (trio's goes through the runner,
    a call more; the trace asks at every event)."""
    try:
        clock = GLOBAL_RUN_CONTEXT.runner.clock
    except AttributeError:
        raise RuntimeError("must be called from async context") from None
    if clock is _FAST_CLOCK:  # the sped-up clock of sim.world.fastloop's run: its current_time, read
        return clock._virtual_base  # type: ignore[no-any-return]
    return clock.current_time()  # type: ignore[no-any-return]


def speed_up(clock: trio.testing.MockClock) -> None:
    """Give a rate-0 ``MockClock`` (autojumping) direct answers: its time is its virtual base,
    and its autojump goes to the run's next deadline, as trio's does, without building the run
    statistics. Call before ``trio.run``."""
    if not AVAILABLE or clock.rate != 0:
        return

    def current_time() -> float:
        return clock._virtual_base

    def autojump() -> None:
        runner = GLOBAL_RUN_CONTEXT.runner
        jump = runner.deadlines.next_deadline() - clock._virtual_base
        if 0 < jump < _inf:
            clock.jump(jump)

    current_time._sim_clock = clock  # type: ignore[attr-defined]  # sim.world.trace reads its _virtual_base itself
    clock.current_time = current_time  # type: ignore[method-assign]
    clock._autojump = autojump  # type: ignore[method-assign]
    clock._sim_fast = True  # sim.world.fastloop answers both inline while the rate is 0


#: Steps of the run loop between two real polls of the I/O manager while tasks are runnable.
_POLL_EVERY = 64


class _QuietIO:
    """The run's I/O manager, polled for real only every :data:`_POLL_EVERY` zero-timeout steps."""

    def __init__(self, inner: Any, entry_queue: Any) -> None:
        self._inner = inner
        self._entry = entry_queue
        self._steps = 0

    def get_events(self, timeout: float) -> Any:
        if timeout <= 0 and not (self._entry.queue or self._entry.idempotent_queue):
            self._steps += 1
            if self._steps % _POLL_EVERY:
                return ()
        return self._inner.get_events(timeout)

    def process_events(self, events: Any) -> None:
        if events:
            self._inner.process_events(events)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def quiet_io() -> None:
    """From inside a run: poll the operating system only when it matters (see the module)."""
    if not AVAILABLE:
        return
    runner = GLOBAL_RUN_CONTEXT.runner
    if not isinstance(runner.io_manager, _QuietIO):
        runner.io_manager = _QuietIO(runner.io_manager, runner.entry_queue)
    if not isinstance(runner.instruments, _NoInstruments) and set(runner.instruments.keys()) == {"_all"} \
            and not runner.instruments["_all"]:
        runner.instruments = _NoInstruments(runner, runner.instruments)


class _NoInstruments(dict):
    """The run's instruments while there are none: trio asks ``"hook" in runner.instruments``
    four to six times per step of its loop, and its ``Instruments`` is a ``UserDict`` (a Python
    call per question); here a plain dict answers (always no). The first ``add_instrument`` puts
    trio's own collection back and adds to it."""

    def __init__(self, runner: Any, inner: Any) -> None:
        super().__init__()
        self._runner = runner
        self._inner = inner

    def add_instrument(self, instrument: Any) -> None:
        self._runner.instruments = self._inner
        self._inner.add_instrument(instrument)

    def remove_instrument(self, instrument: Any) -> None:
        self._inner.remove_instrument(instrument)  # none is active: raises KeyError as trio's does

    def call(self, hookname: str, *args: Any) -> None:  # never asked: no hook is in the dict
        self._inner.call(hookname, *args)


# -- waiting for an event with a timeout ----------------------------------------------------------
#
# ``Runtime.wait_event`` is ``with trio.move_on_after(s): await event.wait()``: a cancel scope
# entered and left, and at the deadline a ``Cancelled`` built, raised into the task and caught
# again (the engine's flush, poll and compactor loops wait so, about 4 % of a simulated run).
# :func:`wait_event` does what that does, at the same moments of the loop: the scope's deadline
# is an :class:`_EventWait` in the run's deadline heap (registered at entry, removed when the
# task leaves, or when it fires), the task waits in the event's set of waiters as
# ``Event.wait`` puts it there, and the deadline firing takes it out and reschedules it as
# delivering the scope's ``Cancelled`` would.


class _EventWait:
    """A task's wait for an event until a deadline, shaped like the cancel scope of
    ``move_on_after`` for the deadline heap (``_registered_deadline``, ``_cancel``)."""

    __slots__ = ("_registered_deadline", "task", "runner", "event", "timed_out")

    def __init__(self, deadline: float, task: Any, runner: Any, event: Any) -> None:
        self._registered_deadline = deadline
        self.task = task
        self.runner = runner
        self.event = event
        self.timed_out = False

    def _cancel(self, _reason: Any) -> None:
        # The deadline fired (Deadlines.expire): the scope's _cancel removes its deadline and
        # delivers the Cancelled to the task if it still waits (its abort function is set; a
        # task the event already rescheduled has none, and trio leaves it alone).
        self.runner.deadlines.remove(self._registered_deadline, self)
        self._registered_deadline = _inf
        task = self.task
        if task._abort_func is not None:
            self.event._tasks.remove(task)  # Event.wait's abort_fn
            self.timed_out = True
            self.runner.reschedule(task)

    def abort(self, _raise_cancel: Any) -> Any:
        # Cancelled by an enclosing scope while waiting: Event.wait's abort_fn (the deadline
        # stays registered until the task leaves, as the scope's would).
        self.event._tasks.remove(self.task)
        return _Abort.SUCCEEDED


async def _trio_wait_event(event: trio.Event, seconds: float) -> bool:
    with trio.move_on_after(seconds):
        await event.wait()
    return event.is_set()


@types.coroutine
def wait_event(event: trio.Event, seconds: float) -> Generator[Any, Any, bool]:
    """``with trio.move_on_after(seconds): await event.wait()``, then ``event.is_set()`` (see above)."""
    runner = GLOBAL_RUN_CONTEXT.runner
    task = GLOBAL_RUN_CONTEXT.task
    deadline = runner.clock.current_time() + seconds
    if AVAILABLE and event._flag and deadline > runner.clock.current_time() \
            and not task._cancel_status.effectively_cancelled:
        # Set already: Event.wait is a checkpoint, during which the scope's deadline (ahead: the
        # checkpoint's step moves no clock) cannot fire; its own Cancelled is never raised, an
        # enclosing scope's passes through it. The checkpoint alone, without the scope.
        yield from trio.lowlevel.checkpoint().__await__()
        return event._flag  # type: ignore[no-any-return]
    if not AVAILABLE or event._flag or not deadline > runner.clock.current_time() \
            or task._cancel_status.effectively_cancelled:
        # Set already (Event.wait checkpoints), a deadline due at entry (the scope is cancelled
        # at once), a NaN, or a cancelled task: trio's own path.
        return (yield from _trio_wait_event(event, seconds).__await__())
    wait = _EventWait(deadline, task, runner, event)
    deadlines = runner.deadlines
    heappush(deadlines._heap, (deadline, id(wait), wait))  # Deadlines.add
    deadlines._active += 1
    event._tasks.add(task)
    try:
        got = yield _WaitTaskRescheduled(wait.abort)
    finally:
        if wait._registered_deadline != _inf:  # leaving the scope before its deadline: removed
            deadlines.remove(wait._registered_deadline, wait)
            wait._registered_deadline = _inf
    got.unwrap()  # an enclosing scope's Cancelled
    if wait.timed_out and task._cancel_status.effectively_cancelled:
        _woken(task)  # the scope's Cancelled would not be caught: an enclosing scope's is visible
    return event._flag  # type: ignore[no-any-return]
