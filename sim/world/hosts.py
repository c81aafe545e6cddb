"""Hosts: a machine's clock (offset, drift, maybe one jump), drawn per host, which survives a
restart of its process (the new runtime carries on from the dead one's wall time)."""

from __future__ import annotations

import attrs
import trio

from sim.world.choices import Choices, boolean
from sim.world.runtime import SIM_EPOCH_MS, SimRuntime
from sim.world.trace import Trace


@attrs.frozen
class ClockPlan:
    """One host's clock: a wall-clock offset, a rate drift, maybe one jump (after ``jump_at_s``
    virtual seconds of its first process)."""

    offset_ms: int = 0
    drift_ppm: float = 0.0
    jump_at_s: float | None = None
    jump_ms: int = 0

    @staticmethod
    def draw(choices: Choices, host: str, skew: bool, jumps: bool) -> "ClockPlan":
        rng = choices.stream("clock", host)
        offset, drift = 0, 0.0
        if skew:
            offset = rng.choice([rng.randint(-50, 50), rng.randint(-5_000, 5_000), rng.randint(-600_000, 600_000)])
            drift = rng.choice([rng.uniform(-100.0, 100.0), rng.uniform(-20_000.0, 20_000.0)])
        jump_at, jump = None, 0
        if jumps and boolean(rng, 0.5):
            jump_at = rng.uniform(0.05, 4.0)
            jump = rng.choice([-1, 1]) * rng.choice([1_000, 60_000, 3_600_000])
        return ClockPlan(offset, drift, jump_at, jump)


class Host:
    """A machine: its clock survives a process restart (the new runtime carries on from the
    dead one's wall time; its monotonic clock starts again)."""

    def __init__(self, name: str, plan: ClockPlan, choices: Choices, trace: Trace) -> None:
        self.name = name
        self.plan = plan
        self.choices = choices
        self.trace = trace
        self.rt: SimRuntime | None = None

    def runtime(self, process: str, bugs: frozenset[str] = frozenset()) -> SimRuntime:
        if self.rt is None:
            # World-aligned wall clock (a process's own clock starts at the epoch) plus the skew.
            offset = round(trio.current_time() * 1000) + self.plan.offset_ms
            if self.plan.offset_ms or self.plan.drift_ppm:
                self.trace.record(process, "clock.skew", offset_ms=self.plan.offset_ms,
                                  drift_ppm=round(self.plan.drift_ppm, 3))
        else:
            offset = self.rt.now_ms() - SIM_EPOCH_MS
        self.rt = SimRuntime(process, self.choices, self.trace, offset_ms=offset, drift_ppm=self.plan.drift_ppm,
                             bugs=bugs)
        return self.rt
