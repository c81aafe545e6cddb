"""trio's run loop for a simulated run: the same steps as ``trio.run``, in one plain function.

``trio.run`` drives its loop (``unrolled_run``) as a generator, so that the same loop can also
run as a guest of another event loop: every step yields its I/O timeout to a driver, which polls
the I/O manager and sends the events back in. A simulated world takes a step per store leg, per
sleep and per wake-up (some 20,000 a gc seed), and a step's fixed cost was a tenth of the
simulator's CPU. :func:`run` is the same loop with the driver folded in and the work of a step
done once:

* the I/O manager is polled directly (no generator round trip);
* a sleeper's deadline (:class:`sim.world.fastclock._Wake`) is woken where ``Deadlines.expire``
  would call its ``_cancel``, without building the ``CancelReason`` it would ignore;
* a task is offered a pending cancellation only when its cancel status is cancelled (what
  ``Task._attempt_delivery_of_any_pending_cancel`` checks first);
* a batch is sorted by the task's creation counter with ``attrgetter`` (trio: a lambda);
* the idle step of a simulated run (no task runnable, the sped-up clock autojumping, no
  instrument, nobody waiting for idle, :mod:`sim.world.fastclock`'s quiet I/O) is taken with
  what the general step decides there known (a zero timeout; the autojump primed when the next
  deadline lies ahead): the same polls, expiries, prunes and jump, in the same order, without
  re-deciding them (most steps of a simulated run are a sleeper woken at its deadline).

Everything that decides the schedule is trio's, in trio's order: which tasks make a batch, the
batch sorted by creation and shuffled by the run's seeded RNG (:func:`sim.world.runtime.deterministic_scheduling`),
the clock's autojump when every task is blocked, instruments, ``wait_all_tasks_blocked``,
KeyboardInterrupt delivery (the loop is KI-protected as trio's is). A seed's trace is the same
bit for bit (``tests/test_sim_fastclock.py`` runs its scenarios under both loops; the digest
tests hold the scenarios). Like :mod:`sim.world.fastclock`, it relies on trio's private run loop
(pinned in ``pyproject.toml``); :data:`AVAILABLE` is False on a trio without the parts it uses,
and then :func:`run` is ``trio.run``.
"""

from __future__ import annotations

import warnings
from heapq import heappop
from math import inf
from operator import attrgetter
from typing import Any, Awaitable, Callable, TypeVar

import trio

from sim.world import fastclock

T = TypeVar("T")

try:  # trio's private run loop; checked against the pinned trio (pyproject.toml)
    from outcome import Error, Value
    from sniffio import thread_local as _sniffio_library
    from trio._core import _run
    from trio._core._ki import enable_ki_protection
    from trio._core._run import (
        _MAX_TIMEOUT,
        CONTEXT_RUN_TB_FRAMES,
        DEADLINE_HEAP_MIN_PRUNE_THRESHOLD,
        GLOBAL_RUN_CONTEXT,
        CancelReason,
        IdlePrimedTypes,
        setup_runner,
    )
    from trio._core._exceptions import TrioInternalError
    from trio._core._traps import CancelShieldedCheckpoint, PermanentlyDetachCoroutineObject, WaitTaskRescheduled

    AVAILABLE = fastclock.AVAILABLE and hasattr(_run, "unrolled_run") and hasattr(_run, "_ALLOW_DETERMINISTIC_SCHEDULING")
except ImportError:  # pragma: no cover - another trio
    AVAILABLE = False

_by_counter = attrgetter("_counter")


def run(async_fn: Callable[..., Awaitable[T]], *args: Any, clock: Any) -> T:
    """``trio.run(async_fn, *args, clock=clock, strict_exception_groups=True)``, run by :func:`_loop`."""
    if not AVAILABLE:
        return trio.run(async_fn, *args, clock=clock, strict_exception_groups=True)
    __tracebackhide__ = True
    runner = setup_runner(clock, (), False, True)
    prev_library, _sniffio_library.name = _sniffio_library.name, "trio"
    prev_fast, fastclock._FAST_RUNNER = fastclock._FAST_RUNNER, runner  # its sleepers yield their _Wake
    prev_clock, fastclock._FAST_CLOCK = fastclock._FAST_CLOCK, (clock if getattr(clock, "_sim_fast", False) else None)
    try:
        _loop(runner, async_fn, args)
    finally:
        fastclock._FAST_CLOCK = prev_clock
        fastclock._FAST_RUNNER = prev_fast
        _sniffio_library.name = prev_library
    result = runner.main_task_outcome
    if isinstance(result, Value):
        return result.value  # type: ignore[no-any-return]
    if isinstance(result, Error):
        raise result.error
    raise AssertionError(result)  # pragma: no cover - as trio.run


def _loop(runner: Any, async_fn: Any, args: tuple) -> None:
    """``trio._core._run.unrolled_run`` with its driver (``trio.run``'s loop) folded in."""
    __tracebackhide__ = True
    try:
        runner.entry_queue.wakeup.wakeup_on_signals()
        if "before_run" in runner.instruments:
            runner.instruments.call("before_run")
        runner.clock.start_clock()
        runner.init_task = runner.spawn_impl(runner.init, (async_fn, args), None, "<init>", system_task=True)

        runq = runner.runq
        deadlines = runner.deadlines
        clock = runner.clock
        reschedule = runner.reschedule
        ctx = GLOBAL_RUN_CONTEXT
        tasks = runner.tasks
        wake_type = fastclock._Wake
        woken = fastclock.WOKEN
        quiet_type = fastclock._QuietIO
        poll_every = fastclock._POLL_EVERY
        entry = runner.entry_queue
        deterministic = _run._ALLOW_DETERMINISTIC_SCHEDULING
        rng = _run._r
        autojump = IdlePrimedTypes.AUTOJUMP_CLOCK
        waiting = IdlePrimedTypes.WAITING_FOR_IDLE
        tb_frames = 1 + CONTEXT_RUN_TB_FRAMES
        # The sped-up MockClock (fastclock.speed_up, rate 0): its deadline_to_sleep_time and
        # autojump answered here, with the same arithmetic, while its rate stays 0.
        fast_clock = getattr(clock, "_sim_fast", False)

        while tasks:
            heap = deadlines._heap
            if (not runq and fast_clock and deterministic and clock._rate == 0 and not runner.instruments
                    and not runner.waiting_for_idle and runner.clock_autojump_threshold == 0
                    and type(runner.io_manager) is quiet_type):
                # The idle step -- no task runnable, the sped-up clock autojumping at threshold 0,
                # no instrument, no task waiting for idle, the quiet I/O manager: the general
                # code's step below with what it decides there known (a zero timeout throughout;
                # the autojump primed when the next deadline lies ahead), in its order: the next
                # deadline, a poll, the expiry of due deadlines and the heap's pruning, and when
                # primed and nothing became runnable, the jump, then again a poll and the expiry.
                while heap:  # Deadlines.next_deadline
                    deadline, _, scope = heap[0]
                    if deadline == scope._registered_deadline:
                        break
                    heappop(heap)
                else:
                    deadline = inf
                primed = not deadline - clock._virtual_base <= 0
                io = runner.io_manager
                while True:
                    if not (entry.queue or entry.idempotent_queue):  # _QuietIO, a zero timeout
                        io._steps += 1
                        events = () if io._steps % poll_every else io._inner.get_events(0)
                    else:
                        events = io._inner.get_events(0)
                    if primed and not events:
                        # Primed and the poll brought nothing (the usual step: a sleeper's
                        # deadline ahead): the heap is as the scan above left it, its top that
                        # valid deadline, so nothing is due and the next deadline is the one
                        # found (a prune keeps every valid entry); the prune check, then the jump.
                        # (No task became runnable: none ran, and no event was processed.)
                        if len(heap) > deadlines._active * 2 + DEADLINE_HEAP_MIN_PRUNE_THRESHOLD:
                            deadlines._prune()
                        jump = deadline - clock._virtual_base
                        if 0 < jump < inf:
                            clock._virtual_base += jump
                        if deadline - clock._virtual_base <= 0:
                            primed = False
                            continue
                        break
                    # Not primed, or the poll brought events (then no jump): the events
                    # processed, the due deadlines expired, the heap pruned; the step ends.
                    if events:
                        io._inner.process_events(events)
                    now = clock._virtual_base
                    heap = deadlines._heap
                    if heap and heap[0][0] <= now:
                        while heap and heap[0][0] <= now:
                            deadline, _, scope = heappop(heap)
                            if deadline == scope._registered_deadline:
                                if type(scope) is wake_type:
                                    deadlines._active -= 1
                                    scope._registered_deadline = inf
                                    task = scope.task
                                    task._next_send_fn = task.coro.send
                                    task._next_send = woken
                                    task._abort_func = None
                                    task.custom_sleep_data = None
                                    runq.append(task)
                                else:
                                    scope._cancel(CancelReason(source="deadline"))
                            heap = deadlines._heap
                        if len(deadlines._heap) > deadlines._active * 2 + DEADLINE_HEAP_MIN_PRUNE_THRESHOLD:
                            deadlines._prune()
                    elif len(heap) > deadlines._active * 2 + DEADLINE_HEAP_MIN_PRUNE_THRESHOLD:
                        deadlines._prune()
                    break
            else:
                if runq:
                    timeout: float = 0
                elif fast_clock and clock._rate == 0:
                    # Deadlines.next_deadline, then MockClock.deadline_to_sleep_time at rate 0
                    while heap:
                        deadline, _, scope = heap[0]
                        if deadline == scope._registered_deadline:
                            break
                        heappop(heap)
                    else:
                        deadline = inf
                    timeout = 0 if deadline - clock._virtual_base <= 0 else _MAX_TIMEOUT
                else:
                    timeout = clock.deadline_to_sleep_time(deadlines.next_deadline())
                    timeout = min(max(0, timeout), _MAX_TIMEOUT)

                idle_primed = None
                if runner.waiting_for_idle:
                    cushion, _ = runner.waiting_for_idle.keys()[0]
                    if cushion < timeout:
                        timeout = cushion
                        idle_primed = waiting
                elif runner.clock_autojump_threshold < timeout:
                    timeout = runner.clock_autojump_threshold
                    idle_primed = autojump

                while True:  # a clock jump to a due deadline goes on to poll and expire at once
                    instruments = runner.instruments
                    if "before_io_wait" in instruments:
                        instruments.call("before_io_wait", timeout)
                    io = runner.io_manager
                    if type(io) is quiet_type:
                        # _QuietIO.get_events and process_events, inline
                        if timeout <= 0 and not (entry.queue or entry.idempotent_queue):
                            io._steps += 1
                            events = () if io._steps % poll_every else io._inner.get_events(timeout)
                        else:
                            events = io._inner.get_events(timeout)
                        if events:
                            io._inner.process_events(events)
                    else:
                        events = io.get_events(timeout)
                        io.process_events(events)
                    if "after_io_wait" in runner.instruments:
                        runner.instruments.call("after_io_wait", timeout)

                    # Deadlines.expire, a sleeper's wake-up inline (what _Wake._cancel and
                    # Runner.reschedule do; a sleeper under this loop is sent WOKEN, not Value(None))
                    now = clock._virtual_base if fast_clock else clock.current_time()
                    heap = deadlines._heap
                    if heap and heap[0][0] <= now:
                        did_something = False
                        while heap and heap[0][0] <= now:
                            deadline, _, scope = heappop(heap)
                            if deadline == scope._registered_deadline:
                                did_something = True
                                if type(scope) is wake_type:
                                    deadlines._active -= 1
                                    scope._registered_deadline = inf
                                    task = scope.task
                                    task._next_send_fn = task.coro.send
                                    task._next_send = woken
                                    task._abort_func = None
                                    task.custom_sleep_data = None
                                    runq.append(task)
                                    if "task_scheduled" in runner.instruments:
                                        runner.instruments.call("task_scheduled", task)
                                else:
                                    scope._cancel(CancelReason(source="deadline"))
                            heap = deadlines._heap
                        if len(deadlines._heap) > deadlines._active * 2 + DEADLINE_HEAP_MIN_PRUNE_THRESHOLD:
                            deadlines._prune()
                        if did_something:
                            idle_primed = None
                    elif len(heap) > deadlines._active * 2 + DEADLINE_HEAP_MIN_PRUNE_THRESHOLD:
                        deadlines._prune()

                    if idle_primed is not None and not runq and not events:
                        if idle_primed is waiting:
                            while runner.waiting_for_idle:
                                key, task = runner.waiting_for_idle.peekitem(0)
                                if key[0] == cushion:
                                    del runner.waiting_for_idle[key]
                                    reschedule(task)
                                else:
                                    break
                        elif fast_clock and clock._rate == 0:
                            # fastclock's autojump: to the next deadline (MockClock.jump's arithmetic)
                            heap = deadlines._heap
                            while heap:
                                deadline, _, scope = heap[0]
                                if deadline == scope._registered_deadline:
                                    break
                                heappop(heap)
                            else:
                                deadline = inf
                            jump = deadline - clock._virtual_base
                            if 0 < jump < inf:
                                clock._virtual_base += jump
                            if deterministic and deadline - clock._virtual_base <= 0:
                                # What the next step of the loop would do (the empty batch between
                                # draws nothing): no task runnable and a deadline due, so a zero
                                # timeout, nothing primed; poll and expire now.
                                timeout = 0
                                idle_primed = None
                                continue
                        else:
                            clock._autojump()
                    break

            if deterministic:
                if not runq:
                    continue
                batch = list(runq)
                runq.clear()
                if len(batch) > 1:  # a shuffle of fewer than two draws nothing
                    batch.sort(key=_by_counter)
                    rng.shuffle(batch)
            else:
                batch = list(runq)
                runq.clear()
                if rng.random() < 0.5:
                    batch.reverse()
            while batch:
                task = batch.pop()
                ctx.task = task
                if "before_task_step" in runner.instruments:
                    runner.instruments.call("before_task_step", task)
                next_send_fn = task._next_send_fn
                next_send = task._next_send
                task._next_send_fn = task._next_send = None
                final_outcome = None
                assert next_send_fn is not None
                try:
                    msg = task.context.run(next_send_fn, next_send)
                except StopIteration as stop_iteration:
                    final_outcome = Value(stop_iteration.value)
                except BaseException as task_exc:
                    tb = task_exc.__traceback__
                    for _ in range(tb_frames):
                        if tb is not None:  # pragma: no branch
                            tb = tb.tb_next
                    final_outcome = Error(task_exc.with_traceback(tb))
                    del tb

                if final_outcome is not None:
                    runner.task_exited(task, final_outcome)
                    final_outcome = None
                else:
                    task._schedule_points += 1
                    if type(msg) is wake_type:  # a fastclock sleep (trio: its WaitTaskRescheduled)
                        task._cancel_points += 1
                        task._abort_func = msg.abort
                        if runner.ki_pending and task is runner.main_task:
                            task._attempt_delivery_of_pending_ki()
                        if task._cancel_status.effectively_cancelled:
                            task._attempt_delivery_of_any_pending_cancel()
                    elif msg is CancelShieldedCheckpoint:
                        reschedule(task)
                    elif type(msg) is WaitTaskRescheduled:
                        task._cancel_points += 1
                        task._abort_func = msg.abort_func
                        if runner.ki_pending and task is runner.main_task:
                            task._attempt_delivery_of_pending_ki()
                        if task._cancel_status.effectively_cancelled:
                            task._attempt_delivery_of_any_pending_cancel()
                    elif type(msg) is PermanentlyDetachCoroutineObject:
                        runner.task_exited(task, msg.final_outcome)
                    else:
                        exc = TypeError(
                            f"trio.run received unrecognized yield message {msg!r}. "
                            "Are you trying to use a library written for some "
                            "other framework like asyncio? That won't work "
                            "without some kind of compatibility shim.",
                        )
                        reschedule(task, exc)
                        task._next_send_fn = task.coro.throw
                    del msg

                if "after_task_step" in runner.instruments:
                    runner.instruments.call("after_task_step", task)
                del ctx.task
                del task, next_send, next_send_fn

    except TrioInternalError:
        raise
    except BaseException as exc:
        raise TrioInternalError("internal error in Trio - please file a bug!") from exc
    finally:
        runner.close()
        GLOBAL_RUN_CONTEXT.__dict__.clear()
        if runner.ki_pending:
            ki = KeyboardInterrupt()
            if isinstance(runner.main_task_outcome, Error):
                ki.__context__ = runner.main_task_outcome.error
            runner.main_task_outcome = Error(ki)


if AVAILABLE:
    _loop = enable_ki_protection(_loop)
