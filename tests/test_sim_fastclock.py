"""sim.world.fastclock and sim.world.fastloop: the cheaper sleep, clock, I/O polling and run loop
keep trio's schedule exactly.

Each scenario below runs on a seeded virtual clock with ``trio.sleep`` under ``trio.run``, with
``fastclock.sleep`` (and the fast clock and quiet I/O) under ``trio.run``, and with both under
:func:`sim.world.fastloop.run`, recording what every task saw and when; the logs must be equal. The cases are the ones where a sleep's end can differ: deadlines
that tie, a sleep cancelled while asleep, a scope cancelled between a wake-up and the task's
next step (trio lets that ``Cancelled`` through), a deadline already past, zero and tiny
sleeps, an async generator's finalizer (the entry queue) and a fail_after around a sleep.
"""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing

from sim.world import fastclock, fastloop
from sim.world.runtime import deterministic_scheduling, no_cyclic_gc


def _run(body, seed: int, fast: bool, loop: bool = False) -> list:  # noqa: ANN001
    """``body`` on a seeded virtual clock: ``fast`` with fastclock's sleep, clock and I/O, ``loop``
    (with ``fast``) under fastloop's run loop instead of ``trio.run``."""
    log: list = []
    sleep = fastclock.sleep if fast else trio.sleep
    clock = trio.testing.MockClock(autojump_threshold=0)
    if fast:
        fastclock.speed_up(clock)

    async def main() -> None:
        if fast:
            fastclock.quiet_io()
        await body(sleep, log)

    with deterministic_scheduling(seed), no_cyclic_gc():
        if loop:
            fastloop.run(main, clock=clock)
        else:
            trio.run(main, clock=clock, strict_exception_groups=True)
    return log


async def _ties_and_cancels(sleep, log: list) -> None:  # noqa: ANN001
    now = trio.current_time

    async def sleeper(name: str, s: float, scope_box: list) -> None:
        with trio.CancelScope() as scope:
            scope_box.append(scope)
            for i in range(6):
                try:
                    await sleep(s)
                    log.append((name, i, "woke", now()))
                except trio.Cancelled:
                    log.append((name, i, "cancelled", now()))
                    raise
        log.append((name, "scope", scope.cancelled_caught, now()))

    async def canceller(boxes: list, s: float) -> None:
        for box in boxes:
            await sleep(s)  # ties with the sleepers' deadlines: same batch as their wake-ups
            box[0].cancel()
            log.append(("cancel", now()))

    boxes = [[] for _ in range(4)]
    async with trio.open_nursery() as n:
        for k, box in enumerate(boxes):
            n.start_soon(sleeper, f"s{k}", 0.25, box)
        n.start_soon(canceller, boxes, 0.5)
        n.start_soon(sleeper, "tiny", 1e-300, [])
        n.start_soon(sleeper, "zero", 0.0, [])

    # A deadline already past, a NaN and a negative sleep behave as trio's.
    for bad in (math.nan, -1.0):
        try:
            await sleep(bad)
            log.append(("bad", bad, "ok"))
        except ValueError as e:
            log.append(("bad", str(bad), type(e).__name__))
    await fastclock.sleep_until(now() - 1) if sleep is fastclock.sleep else await trio.sleep_until(now() - 1)
    log.append(("past", now()))

    # fail_after around sleeps, with the timeout tying a sleep's deadline.
    for s in (0.5, 1.0, 1.5):
        try:
            with trio.fail_after(1.0):
                await sleep(s)
                log.append(("fail_after", s, "slept"))
                await sleep(s)
                log.append(("fail_after", s, "slept twice"))
        except trio.TooSlowError:
            log.append(("fail_after", s, "too slow", now()))


async def _finalizers(sleep, log: list) -> None:  # noqa: ANN001
    async def agen(name: str):  # noqa: ANN202
        try:
            for i in range(100):
                await sleep(0.01)
                yield i
        finally:
            log.append(("finalized", name, trio.current_time()))

    async def worker(name: str) -> None:
        for round_ in range(5):
            async for i in agen(f"{name}-{round_}"):
                if i == 2:
                    break  # the generator is finalized through the entry queue
            log.append((name, round_, trio.current_time()))
            await sleep(0.003)

    async with trio.open_nursery() as n:
        for k in range(4):
            n.start_soon(worker, f"w{k}")


async def _cancelled_at_entry(sleep, log: list) -> None:  # noqa: ANN001
    # A sleep entered in a scope already cancelled: the Cancelled comes at that step (under
    # fastloop the loop delivers it when the sleeper yields its wake-up), the clock unmoved.
    now = trio.current_time

    async def worker(i: int) -> None:
        for step in range(4):
            with trio.CancelScope() as scope:
                if (i + step) % 2:
                    scope.cancel()
                try:
                    await sleep(0.1 * (i + 1))
                    log.append((i, step, "slept", now()))
                except trio.Cancelled:
                    log.append((i, step, "cancelled", now()))
                    raise
            log.append((i, step, scope.cancelled_caught, now()))

    async with trio.open_nursery() as n:
        for i in range(3):
            n.start_soon(worker, i)


async def _event_waits(sleep, log: list) -> None:  # noqa: ANN001
    # Runtime.wait_event's wait (fastclock.wait_event, trio's move_on_after around Event.wait
    # in the slow runs): set before, at (a tie) and after the deadline, several waiters on one
    # event, an enclosing scope cancelled while waiting, at the deadline and between a wake-up
    # and the task's next step, an event already set, zero and tiny timeouts.
    wait = fastclock.wait_event if sleep is fastclock.sleep else fastclock._trio_wait_event
    now = trio.current_time

    async def waiter(name: str, event: trio.Event, timeouts: list, box: list) -> None:
        with trio.CancelScope() as scope:
            box.append(scope)
            for i, t in enumerate(timeouts):
                try:
                    got = await wait(event, t)
                    log.append((name, i, "returned", got, now()))
                except trio.Cancelled:
                    log.append((name, i, "cancelled", now()))
                    raise
            await sleep(1.5)  # asleep past the deadlines of its waits: none may fire now
            log.append((name, "slept", now()))
        log.append((name, "scope", scope.cancelled_caught, now()))

    async def setter(event: trio.Event, at: float, boxes: list, cancel: bool) -> None:
        await sleep(at)
        event.set()
        log.append(("set", at, now()))
        if cancel:  # the waiters woken by the event are cancelled before their next step
            for box in boxes:
                box[0].cancel()

    async def canceller(boxes: list, at: float) -> None:
        await sleep(at)  # ties with a waiter's deadline
        for box in boxes:
            box[0].cancel()
        log.append(("cancel", at, now()))

    for k, (at, cancel) in enumerate([(0.5, False), (1.0, False), (0.75, True), (2.0, False)]):
        event = trio.Event()
        boxes = [[] for _ in range(4)]
        async with trio.open_nursery() as n:
            n.start_soon(waiter, f"a{k}", event, [0.25, 0.25, 1.0, 0.5], boxes[0])
            n.start_soon(waiter, f"b{k}", event, [0.5, 0.5, 0.0, 1e-300], boxes[1])
            n.start_soon(waiter, f"c{k}", event, [3.0, 0.1], boxes[2])
            n.start_soon(waiter, f"d{k}", trio.Event(), [0.25, 0.5, 0.25, 5.0], boxes[3])
            n.start_soon(setter, event, at, boxes[:3], cancel)
            n.start_soon(canceller, boxes[3:], 1.0)
    done = trio.Event()
    done.set()
    log.append(("already set", await wait(done, 1.0), await wait(done, 0.0), now()))
    log.append(("zero", await wait(trio.Event(), 0.0), now()))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("body", [_ties_and_cancels, _finalizers, _cancelled_at_entry, _event_waits])
def test_fast_sleep_keeps_trios_schedule(body, seed: int) -> None:  # noqa: ANN001
    assert fastclock.AVAILABLE
    slow = _run(body, seed, fast=False)
    fast = _run(body, seed, fast=True)
    assert fast == slow
    assert _run(body, seed, fast=True, loop=True) == slow
    assert len(slow) > 10


async def _mixed_batches(sleep, log: list) -> None:  # noqa: ANN001
    # batches of one task (a lone wake-up) and of several (ties, checkpoints), interleaved
    async def worker(i: int) -> None:
        for step in range(6):
            await sleep(0.5 if (i + step) % 3 else 0.25)
            log.append((i, step, trio.current_time()))
            await trio.lowlevel.checkpoint()
            log.append((i, "cp", step))

    async with trio.open_nursery() as n:
        for i in range(5):
            n.start_soon(worker, i)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_the_batch_shuffler_orders_batches_as_random_does(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import random

    from sim.world import runtime

    fast = _run(_mixed_batches, seed, True)
    monkeypatch.setattr(runtime, "_BatchShuffler", random.Random)
    assert _run(_mixed_batches, seed, True) == fast


def test_an_instrument_added_mid_run_is_called() -> None:
    seen: list = []

    class Steps(trio.abc.Instrument):
        def before_task_step(self, task) -> None:  # noqa: ANN001
            seen.append(task.name)

    async def body(sleep, log: list) -> None:  # noqa: ANN001
        from trio._core._run import GLOBAL_RUN_CONTEXT

        assert isinstance(GLOBAL_RUN_CONTEXT.runner.instruments, fastclock._NoInstruments)  # none installed yet
        await sleep(0.1)
        trio.lowlevel.add_instrument(Steps())
        await sleep(0.1)
        log.append(len(seen))

    log = _run(body, 3, True)
    assert log[0] >= 1 and seen


async def _idle_waits_and_errors(sleep, log: list) -> None:  # noqa: ANN001
    # wait_all_tasks_blocked (trio's waiting_for_idle, not the autojump), a cushion among
    # sleepers, a cancel scope's own deadline, and a child's error through a nursery
    now = trio.current_time

    async def sleeper(i: int) -> None:
        for step in range(4):
            await sleep(0.1 * (i + 1))
            log.append(("sleeper", i, step, now()))

    async def idler(cushion: float) -> None:
        for step in range(3):
            await trio.testing.wait_all_tasks_blocked(cushion)
            log.append(("idle", cushion, step, now()))
            await sleep(0.05)

    async def deadline_scope() -> None:
        with trio.move_on_after(0.35) as scope:
            await trio.sleep_forever()
        log.append(("moved on", scope.cancelled_caught, now()))

    async with trio.open_nursery() as n:
        for i in range(3):
            n.start_soon(sleeper, i)
        n.start_soon(idler, 0.0)
        n.start_soon(deadline_scope)

    async def fails() -> None:
        await sleep(0.2)
        raise KeyError("boom")

    try:
        async with trio.open_nursery() as n:
            n.start_soon(fails)
            n.start_soon(sleeper, 9)
    except BaseExceptionGroup as group:
        log.append(("group", [type(e).__name__ for e in group.exceptions], now()))


@pytest.mark.parametrize("seed", range(4))
def test_the_fast_loop_keeps_trios_schedule(seed: int) -> None:
    assert fastloop.AVAILABLE
    slow = _run(_idle_waits_and_errors, seed, fast=True)
    assert _run(_idle_waits_and_errors, seed, fast=True, loop=True) == slow
    assert any(entry[0] == "idle" for entry in slow) and any(entry[0] == "group" for entry in slow)


def test_the_fast_loop_returns_and_raises_as_trio_run() -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def answer(x: int) -> int:
        await trio.sleep(1)
        return x + 1

    assert fastloop.run(answer, 41, clock=clock) == 42

    async def fails() -> None:
        await trio.sleep(1)
        raise KeyError("boom")

    with pytest.raises(KeyError):
        fastloop.run(fails, clock=trio.testing.MockClock(autojump_threshold=0))
