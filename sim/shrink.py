"""Shrinking a failing run (``sim shrink``): the smallest schedule of the same world that still
fails with the same invariant.

A world's randomness all comes from seeded streams, so a seed fixes every decision. To make
those decisions removable without disturbing the others, a scenario that supports shrinking
(its run function takes ``plan=``) asks a :class:`Plan` before each removable **step** of its
schedule, always *after* drawing what the step needs, so that leaving one out changes nothing
else that was drawn:

* ``op:<process>:<i>``   the i-th operation of a client process (its reads, write, wait, pause);
* ``f:<process>:<n>``    the faults drawn for that process's n-th store request (a transient
                         error, a lost reply, a stalled leg);
* ``writer:<process>``   the process at all; ``crash:<process>``, ``pause:<process>`` its crash
                         or pause point; ``skew:<host>``, ``jump:<host>`` its clock's skew or jump.

A plan that keeps everything (``Plan()``) runs the world exactly as its seed does (same trace
digest) and records the steps it was asked about, in order. A plan with a ``keep`` set runs only
those steps; a step it was never told about (a request numbered differently once something
earlier was left out) is left out too, so a kept set only ever makes a run simpler.

:func:`shrink` then minimises the kept set, hypothesis-style on this explicit list of steps:
first whole groups (every fault, a whole process, every fault or operation of one process,
each crash, pause and clock fault), then delta debugging (Zeller's ddmin) over what is left, and
a last pass removing single steps; a candidate is accepted when the run still fails with the
same invariant (:func:`sim.bugs.fired`). The result replays with
``./just sim run --seed S --workload W [--bug B] --keep '<plan>'`` and can be written out as a
pytest regression test (:func:`regression_test`).
"""

from __future__ import annotations

import inspect
import re
import shlex
from collections import defaultdict
from typing import Any, Callable, Iterable

import attrs

from slatedb.runtime.production import ProductionRuntime

from . import bugs as bugs_mod

_WALL = ProductionRuntime("sim-shrink")  # wall time is reported, never fed into a run

_NUMBERED = re.compile(r"^(?P<head>[a-z]+:[^:\s]+):(?P<n>\d+)$")


class Plan:
    """Which removable steps of a world's schedule run (None: all of them, as the seed drew)."""

    def __init__(self, keep: Iterable[str] | None = None) -> None:
        self.keep: frozenset[str] | None = None if keep is None else frozenset(keep)
        #: Every step the world asked about, in the order it first asked.
        self.seen: list[str] = []
        self._seen: set[str] = set()
        #: The run's trace (set by the workload), for printing the shrunk run.
        self.trace: Any = None

    def on(self, step: str) -> bool:
        """Does ``step`` run? Records it as seen."""
        if step not in self._seen:
            self._seen.add(step)
            self.seen.append(step)
        return self.keep is None or step in self.keep

    @property
    def ran(self) -> list[str]:
        """The steps that ran, in order."""
        return [s for s in self.seen if self.keep is None or s in self.keep]

    @property
    def trace_text(self) -> str:
        return self.trace.render() if self.trace is not None else ""

    # -- the compact text form of a kept set (``--keep``) -----------------------------------

    @staticmethod
    def format(keep: Iterable[str]) -> str:
        """``op:w1:0-3,7 f:w2:12 crash:w1``: numbered steps of one kind and process grouped,
        runs of numbers as ranges; ``-`` for nothing kept."""
        numbered: dict[str, list[int]] = defaultdict(list)
        plain: list[str] = []
        for step in keep:
            m = _NUMBERED.match(step)
            if m:
                numbered[m["head"]].append(int(m["n"]))
            else:
                plain.append(step)
        parts = []
        for head in sorted(numbered):
            nums = sorted(set(numbered[head]))
            ranges, start, prev = [], nums[0], nums[0]
            for n in nums[1:] + [None]:  # type: ignore[list-item]
                if n is not None and n == prev + 1:
                    prev = n
                    continue
                ranges.append(f"{start}-{prev}" if prev > start else str(start))
                if n is not None:
                    start = prev = n
            parts.append(f"{head}:{','.join(ranges)}")
        parts.extend(sorted(set(plain)))
        return " ".join(parts) or "-"

    @staticmethod
    def parse(text: str) -> "Plan":
        keep: set[str] = set()
        for part in text.split():
            if part == "-":
                continue
            head, _, nums = part.rpartition(":")
            if head and re.fullmatch(r"[\d,\-]+", nums) and ":" in head:
                for r in nums.split(","):
                    lo, _, hi = r.partition("-")
                    if not lo.isdigit() or (hi and not hi.isdigit()):
                        raise ValueError(f"bad step range {r!r} in {part!r}")
                    keep.update(f"{head}:{n}" for n in range(int(lo), int(hi or lo) + 1))
            elif re.fullmatch(r"[a-z]+:[^:\s]+", part):
                keep.add(part)
            else:
                raise ValueError(f"bad plan step {part!r}")
        return Plan(keep)


def supports_plan(workload: str) -> bool:
    """Does the scenario's run function take ``plan=``? (A scenario added to the registry
    becomes shrinkable by asking a plan before its removable steps.)"""
    return "plan" in inspect.signature(bugs_mod.runner(workload)).parameters


def shrinkable() -> list[str]:
    return [w for w in bugs_mod.WORKLOADS if supports_plan(w)]


def simulate_plan(scenario: Any, seed: int, plan: Plan) -> tuple[Any, float]:
    """One run of ``scenario`` (a :class:`sim.sweep.Scenario`) under ``plan``; result, wall s."""
    if not supports_plan(scenario.workload):
        raise ValueError(f"workload {scenario.workload!r} cannot replay a plan (shrinkable: {', '.join(shrinkable())})")
    start = _WALL.monotonic_s()
    kwargs: dict[str, Any] = {"bugs": frozenset(scenario.bugs), "plan": plan}
    if scenario.faults == "none":
        kwargs["faults"] = "none"
    result = bugs_mod.runner(scenario.workload)(seed, **kwargs)
    return result, _WALL.monotonic_s() - start


def replay_command(scenario: Any, seed: int, plan: Plan | Iterable[str]) -> str:
    keep = plan.keep if isinstance(plan, Plan) else frozenset(plan)
    assert keep is not None
    return f"{scenario.replay(seed)} --keep {shlex.quote(Plan.format(keep))}"


# ---------------------------------------------------------------------------------------------
# Shrinking
# ---------------------------------------------------------------------------------------------


def _kind(step: str) -> str:
    return step.split(":", 1)[0]


def _process(step: str) -> str:
    return step.split(":")[1] if step.count(":") >= 1 else ""


def counts(steps: Iterable[str]) -> dict[str, int]:
    """Steps by kind: ``op`` (client operations), ``f`` (requests with faults), ``crash``..."""
    out: dict[str, int] = defaultdict(int)
    for s in steps:
        out[_kind(s)] += 1
    return dict(out)


@attrs.frozen
class ShrinkResult:
    workload: str
    seed: int
    bugs: tuple[str, ...]
    invariant: str  # what the original run fired (and the shrunk one still does)
    keep: frozenset[str]
    original_steps: dict  # steps by kind in the original run
    shrunk_steps: dict
    original_events: int
    shrunk_events: int
    original_faults: dict
    shrunk_faults: dict
    runs: int  # candidate runs tried
    wall_s: float
    violation: str  # the shrunk run's first violation
    trace: str  # the shrunk run's whole trace
    passes_without_bugs: bool | None  # the shrunk schedule with the bugs off (None: no bugs)
    replay: str


class _Budget(Exception):
    pass


def shrink(workload: str, seed: int, bugs: Iterable[str] = (), *, faults: str = "swarm", max_runs: int = 400,
           max_wall_s: float = 300.0, log: Callable[[str], None] | None = None) -> ShrinkResult:
    """Minimise the schedule of a failing run; ``ValueError`` if the run passes."""
    from .sweep import Scenario

    scenario = Scenario(workload=workload, faults=faults, bugs=tuple(bugs))
    start = _WALL.monotonic_s()
    plan = Plan()
    original, _ = simulate_plan(scenario, seed, plan)
    if original.ok:
        raise ValueError(f"seed {seed} of {workload} passes: nothing to shrink ({scenario.replay(seed)})")
    target = bugs_mod.fired(original)
    steps = list(plan.seen)
    runs = 0
    cache: dict[frozenset[str], bool] = {}

    def fails(keep: Iterable[str]) -> bool:
        nonlocal runs
        key = frozenset(keep)
        if key in cache:
            return cache[key]
        if runs >= max_runs or _WALL.monotonic_s() - start > max_wall_s:
            raise _Budget
        runs += 1
        r, _ = simulate_plan(scenario, seed, Plan(key))
        cache[key] = ok = (not r.ok) and bugs_mod.fired(r) == target
        return ok

    say = log or (lambda _m: None)
    say(f"original: {len(original.violations)} violation(s), fired {target}, {original.events} events, "
        f"steps {counts(steps)}")
    kept = list(steps)
    try:
        # 1. Whole groups, largest first.
        groups: list[list[str]] = []
        groups.append([s for s in kept if _kind(s) == "f"])
        procs = sorted({_process(s) for s in kept if _kind(s) == "writer"}, reverse=True)
        for p in procs:
            groups.append([s for s in kept if _process(s) == p or _process(s).startswith(p + ".")])
        for kind in ("crash", "pause", "skew", "jump"):
            groups.extend([[s] for s in kept if _kind(s) == kind])
        by_proc_kind: dict[tuple[str, str], list[str]] = defaultdict(list)
        for s in kept:
            if _kind(s) in ("op", "f"):
                by_proc_kind[(_kind(s), _process(s))].append(s)
        groups.extend(sorted(by_proc_kind.values(), key=len, reverse=True))
        for g in groups:
            g = [s for s in g if s in kept]
            if not g:
                continue
            candidate = [s for s in kept if s not in set(g)]
            if fails(candidate):
                kept = candidate
                say(f"  removed {len(g)} step(s) ({Plan.format(g)[:60]}): {len(kept)} left")
        # 2. Each process's operations cut back to the shortest prefix that still fails
        # (binary search; the failure usually needs only the operations up to its moment).
        procs_with_ops = sorted({_process(s) for s in kept if _kind(s) == "op"})
        for p in procs_with_ops:
            ops = [s for s in kept if _kind(s) == "op" and _process(s) == p]
            others = [s for s in kept if s not in set(ops)]
            lo, hi = 0, len(ops)  # ops[:hi] fails
            while lo < hi:
                mid = (lo + hi) // 2
                if fails(others + ops[:mid]):
                    hi = mid
                else:
                    lo = mid + 1
            if hi < len(ops):
                kept = [s for s in kept if s not in set(ops[hi:])]
                say(f"  {p}: operations cut to the first {hi} of {len(ops)}")
        # 3. Delta debugging over what is left.
        kept = _ddmin(kept, fails)
        say(f"  ddmin: {len(kept)} step(s) left")
        # 4. One at a time, until nothing more can go.
        changed = True
        while changed:
            changed = False
            for s in list(kept):
                candidate = [x for x in kept if x != s]
                if fails(candidate):
                    kept = candidate
                    changed = True
    except _Budget:
        say(f"  budget reached after {runs} runs")
    final_plan = Plan(kept)
    shrunk, _ = simulate_plan(scenario, seed, final_plan)
    assert not shrunk.ok and bugs_mod.fired(shrunk) == target, "the shrunk run no longer fails (nondeterminism?)"
    passes_off = None
    if scenario.bugs:
        off, _ = simulate_plan(attrs.evolve(scenario, bugs=()), seed, Plan(kept))
        passes_off = bool(off.ok)
    return ShrinkResult(
        workload, seed, tuple(scenario.bugs), target, frozenset(kept), counts(steps), counts(final_plan.ran),
        original.events, shrunk.events, dict(original.faults), dict(shrunk.faults), runs,
        _WALL.monotonic_s() - start, shrunk.violations[0], final_plan.trace_text, passes_off,
        replay_command(scenario, seed, kept))


def _ddmin(items: list[str], fails: Callable[[list[str]], bool]) -> list[str]:
    """Zeller's ddmin: a subset of ``items`` that still fails, 1-minimal at the finest split
    reached (``fails(items)`` holds on entry)."""
    n = 2
    while len(items) >= 2:
        chunk = -(-len(items) // n)
        subsets = [items[i:i + chunk] for i in range(0, len(items), chunk)]
        reduced = False
        for sub in subsets:
            if fails(sub):
                items, n, reduced = sub, 2, True
                break
        if not reduced:
            for sub in subsets:
                drop = set(sub)
                complement = [s for s in items if s not in drop]
                if fails(complement):
                    items, n, reduced = complement, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    if len(items) == 1 and fails([]):
        return []
    return items


# ---------------------------------------------------------------------------------------------
# Reports and regression tests
# ---------------------------------------------------------------------------------------------


def _steps_text(d: dict) -> str:
    names = {"op": "ops", "f": "faulted requests", "writer": "processes", "crash": "crashes", "pause": "pauses",
             "skew": "skews", "jump": "jumps"}
    return ", ".join(f"{v} {names.get(k, k)}" for k, v in sorted(d.items())) or "none"


def format_report(r: ShrinkResult, trace_lines: int = 60) -> str:
    lines = [
        f"shrunk seed {r.seed} of {r.workload}" + (f" with {', '.join(r.bugs)}" if r.bugs else ""),
        f"{'fires':<15} {r.invariant}: {r.violation[:300]}",
        f"{'original':<15} {_steps_text(r.original_steps)}; {r.original_events} trace events; faults {r.original_faults}",
        f"{'shrunk':<15} {_steps_text(r.shrunk_steps)}; {r.shrunk_events} trace events; faults {r.shrunk_faults}",
        f"{'effort':<15} {r.runs} candidate runs, {r.wall_s:.1f} s wall",
    ]
    if r.passes_without_bugs is not None:
        lines.append(f"{'bugs off':<15} the shrunk schedule {'passes' if r.passes_without_bugs else 'STILL FAILS'}"
                     " with the switches off")
    events = r.trace.splitlines()
    shown = readable(events)
    cut = shown[-trace_lines:]
    lines.append(f"trace: {len(events)} events; {len(shown)} protocol events, faults and writes"
                 + (f", the last {len(cut)}" if len(cut) < len(shown) else "") + " (--trace: all):")
    lines.extend("  " + e for e in cut)
    lines.append(f"replay: {r.replay} --trace")
    return "\n".join(lines)


#: Event kinds left out of the readable trace: task spawns and the store's ordinary traffic
#: (a request and its answer; the protocol events around them say what they were for).
_NOISE = ("spawn", "store.get", "store.head", "store.list", "store.delete", "store.copy", "store.result")


def readable(events: list[str]) -> list[str]:
    """The lines of a rendered trace that tell the story: protocol events, faults, crashes,
    object writes (``store.put``) and any request that drew a fault."""
    out = []
    for line in events:
        parts = line.split(None, 3)
        kind = parts[2] if len(parts) > 2 else ""
        if kind in _NOISE and "decision='ok'" in line or kind == "spawn" or (
                kind == "store.result" and "transient-error" not in line):
            continue
        out.append(line)
    return out


def regression_test(r: ShrinkResult, name: str) -> str:
    """A pytest module replaying the shrunk run: with the bugs on it fails with the same
    invariant, with them off it passes (when it did at shrink time); for a failure with no bug
    switched on (a real bug) it asserts that the failure reproduces."""
    keep = Plan.format(r.keep)
    bugs = tuple(r.bugs)
    lines = [
        f'"""Regression test written by `sim shrink` (name {name}).',
        "",
        f"Shrunk from `{bugs_mod.replay_command(r.workload, r.seed, bugs)}`:",
        f"{_steps_text(r.original_steps)}, {r.original_events} trace events, down to",
        f"{_steps_text(r.shrunk_steps)}, {r.shrunk_events} trace events. Fires {r.invariant}.",
        f"Replay: {r.replay} --trace",
        '"""',
        "",
        "from sim import bugs",
        "from sim.shrink import Plan, simulate_plan",
        "from sim.sweep import Scenario",
        "",
        f"WORKLOAD = {r.workload!r}",
        f"SEED = {r.seed}",
        f"BUGS = {bugs!r}",
        f"KEEP = {keep!r}",
        f"INVARIANT = {r.invariant!r}",
        "",
        "",
        "def _run(bug_switches):",
        "    result, _ = simulate_plan(Scenario(workload=WORKLOAD, bugs=bug_switches), SEED, Plan.parse(KEEP))",
        "    return result",
        "",
        "",
    ]
    if bugs:
        lines += [
            "def test_fails_with_the_bug_on():",
            "    result = _run(BUGS)",
            "    assert not result.ok and bugs.fired(result) == INVARIANT, result.violations",
            "",
        ]
        if r.passes_without_bugs:
            lines += [
                "",
                "def test_passes_with_the_bug_off():",
                "    result = _run(())",
                "    assert result.ok, result.violations",
                "",
            ]
    else:
        lines += [
            "def test_reproduces():",
            "    # A failure with no switch on: a real bug. Once it is fixed, assert result.ok instead.",
            "    result = _run(())",
            "    assert not result.ok and bugs.fired(result) == INVARIANT, result.violations",
            "",
        ]
    return "\n".join(lines)
