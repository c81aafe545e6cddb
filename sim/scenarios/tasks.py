"""Fifty tasks with random virtual sleeps, equal deadlines and cancellations.

The smallest workload that exercises trio's scheduler where it is nondeterministic by default:
many tasks becoming runnable at the same virtual instant, and cancellations racing wake-ups.
Used by the determinism tests: the trace digest must follow from the seed alone.
"""

from __future__ import annotations

import trio

from sim.world import fastclock
from sim.world.choices import boolean
from sim.world.runtime import SimRuntime, run_deterministic
from sim.world.trace import Trace


async def _tasks(seed: int, n_tasks: int) -> str:
    trace = Trace(fastclock.current_time)
    rt = SimRuntime("p0", seed, trace)
    scopes: list[trio.CancelScope] = []

    async def worker(i: int, scope: trio.CancelScope) -> None:
        with scope:
            for step in range(5):
                # Few distinct durations, so many deadlines are exactly equal.
                await rt.sleep(rt.rng.choice([0.1, 0.2, 0.3]))
                trace.record("p0", "wake", task=i, step=step, draw=rt.rng.randrange(1000))
                if boolean(rt.rng, 0.1):
                    victim = rt.rng.randrange(len(scopes))
                    scopes[victim].cancel()
                    trace.record("p0", "cancel", task=i, victim=victim)
        if scope.cancelled_caught:
            trace.record("p0", "cancelled", task=i)

    async with rt.task_group() as tg:
        for i in range(n_tasks):
            scope = trio.CancelScope()
            scopes.append(scope)
            tg.spawn(worker, i, scope, name=f"task{i}")
    return trace.digest()


def run_tasks_workload(seed: int, n_tasks: int = 50) -> str:
    """The trace digest of the fifty-task workload under ``seed``."""
    return run_deterministic(_tasks, seed, n_tasks, seed=seed)
