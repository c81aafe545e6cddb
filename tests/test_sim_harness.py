"""The one harness (issue 27 item 3): every registered scenario is a declared world run by
``sim.world.harness.run_world``, which returns one result record for all of them."""

from __future__ import annotations

import importlib
from pathlib import Path

import attrs
import trio

from sim.scenarios import registry
from sim.world.harness import Checker, Scenario, Setup, WorldResult, run_world
from sim.world.invariants import InvariantViolation

ROOT = Path(__file__).resolve().parents[1]


def test_every_registered_scenario_is_a_declared_world() -> None:
    for spec in registry.SCENARIOS:
        module = importlib.import_module(spec.runner.partition(":")[0])
        declared = module.SCENARIO
        assert isinstance(declared, Scenario) and declared.name == spec.name
        assert declared.fault_kinds, f"{spec.name} declares no fault kinds"


def test_no_scenario_file_over_about_400_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in (ROOT / "sim" / "scenarios").glob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 425} == {}


def test_run_world_gives_one_result_record() -> None:
    r = registry.BY_NAME["store"].run(3, ops=200)
    assert isinstance(r, WorldResult) and r.scenario == "store" and r.ok and r.ops == 200
    d = registry.BY_NAME["db"].run(3)
    assert isinstance(d, WorldResult) and d.ok and d.acked > 0 and d.lin_ops > 0 and d.flip == ""


@attrs.define
class _Tiny:
    setup: Setup
    healed: bool = False
    done: list = attrs.Factory(list)

    def heal(self) -> None:
        self.healed = True
        self.setup.trace.record("world", "heal")


class _Watch:
    """A checker that fails at the second ``tick`` event."""

    def __init__(self) -> None:
        self.ticks = 0

    def attach(self, trace):
        trace.listeners.append(self.on_event)
        return self

    def on_event(self, e) -> None:
        if e.kind == "tick":
            self.ticks += 1
            if self.ticks == 2:
                raise InvariantViolation("FENCE-1", e, "a second tick")


def _tiny(processes, **kw) -> Scenario:
    return Scenario("tiny", _Tiny, processes, fault_kinds=("none",), **kw)


def test_phases_heal_and_background_processes_end_with_the_world() -> None:
    async def forever(w: _Tiny) -> None:
        await trio.sleep_forever()

    async def processes(w: _Tiny, nursery) -> None:
        nursery.start_soon(forever, w)
        await trio.sleep(5)
        w.done.append("safety")

    async def liveness(w: _Tiny, nursery) -> None:
        assert w.healed
        await trio.sleep(1)
        w.done.append("liveness")

    r = run_world(_tiny(processes, liveness=liveness, heals=True, figures=lambda w: {"done": tuple(w.done)}), 1)
    assert r.ok and r.done == ("safety", "liveness") and r.virtual_s == 6.0 and r.events == 1


def test_a_checker_an_escaping_exception_an_oracle_and_a_stuck_world_are_violations() -> None:
    async def ticks(w: _Tiny, nursery) -> None:
        w.setup.trace.record("p", "tick")
        w.setup.trace.record("p", "tick")

    r = run_world(_tiny(ticks, checkers=(Checker("watch", lambda s: _Watch()),)), 1)
    assert not r.ok and [v.invariant for v in r.violations] == ["FENCE-1"] and r.last_events

    async def boom(w: _Tiny, nursery) -> None:
        raise KeyError("lost")

    r = run_world(_tiny(boom), 1)
    assert [v.invariant for v in r.violations] == ["ESCAPE-1"]

    async def nothing(w: _Tiny, nursery) -> None:
        pass

    r = run_world(_tiny(nothing, oracles=lambda w, failed: ["READ-3: a state that is no prefix"]), 1)
    assert [v.invariant for v in r.violations] == ["READ-3"]

    async def stuck(w: _Tiny, nursery) -> None:
        await trio.sleep_forever()

    r = run_world(_tiny(stuck, virtual_limit_s=60.0), 1)
    assert [v.invariant for v in r.violations] == ["liveness"] and "60.0 virtual s" in r.violations[0]


def test_a_verdict_the_code_under_test_swallows_or_wraps_is_still_a_violation() -> None:
    # A checker raises into the code that recorded the event: often an engine background task
    # whose error handling turns any exception into a database failure (slatedb/db/services.py
    # Background._guard), which a writer already halted drops (it keeps its first error). That
    # hid every FENCE-3 of zombie-ack (db) for a whole session.
    async def swallowed(w: _Tiny, nursery) -> None:
        for _ in range(3):
            try:
                w.setup.trace.record("p", "tick")
            except Exception:
                pass
            await trio.sleep(1)

    r = run_world(_tiny(swallowed, checkers=(Checker("watch", lambda s: _Watch()),)), 1)
    assert not r.ok and [v.invariant for v in r.violations] == ["FENCE-1"]
    assert r.violations[0].event.time_s == 1.0 and r.events == 3
    assert r.last_events.splitlines()[-1] == r.violations[0].event.render()  # the run went on after it

    async def wrapped(w: _Tiny, nursery) -> None:
        for _ in range(2):
            try:
                w.setup.trace.record("p", "tick")
            except Exception as e:
                error = RuntimeError(f"background task failed: {type(e).__name__}: {e}")
        raise error from None  # the cause dropped, the verdict named in the message

    r = run_world(_tiny(wrapped, checkers=(Checker("watch", lambda s: _Watch()),)), 1)
    assert [v.invariant for v in r.violations] == ["FENCE-1"] and r.violations[0].startswith("InvariantViolation")


class _Later:
    """A checker after :class:`_Watch` that fails at the second ``tick`` it sees: the third, since
    ``_Watch``'s verdict stopped the second one's delivery before it."""

    def __init__(self) -> None:
        self.ticks = 0

    def attach(self, trace):
        trace.listeners.append(self.on_event)
        return self

    def on_event(self, e) -> None:
        if e.kind == "tick":
            self.ticks += 1
            if self.ticks == 2:
                raise InvariantViolation("SEQMETA-2", e, "a tick after one never seen")


def test_the_first_verdict_raised_is_reported_first_even_when_a_later_one_was_swallowed() -> None:
    """A verdict the code wrapped and let escape (raised first), and a later one it swallowed:
    the first raised is the run's first violation (compactor seed 81 with
    compactor-no-commit-fence: the CFENCE-1 of a landing stopped its delivery to the compactor
    checker, which then reported the next landing "before" it, SEQMETA-2, and was listed first)."""
    async def first_wrapped_then_swallowed(w: _Tiny, nursery) -> None:
        error = None
        for _ in range(3):
            try:
                w.setup.trace.record("p", "tick")
            except Exception as e:
                if error is None:
                    error = RuntimeError(f"task failed: {e}")
                    error.__cause__ = e
        assert error is not None
        raise error

    r = run_world(_tiny(first_wrapped_then_swallowed, checkers=(Checker("watch", lambda s: _Watch()),
                                                                 Checker("later", lambda s: _Later()))), 1)
    assert [v.invariant for v in r.violations] == ["FENCE-1", "SEQMETA-2"], r.violations
