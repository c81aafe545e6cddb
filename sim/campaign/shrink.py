"""Shrinking a failing run (``sim shrink``): the simplest choice sequence of the same scenario
that still fails with the same invariant.

Every random choice of a world goes through its :class:`sim.world.choices.Choices` (one recorded
stream per process and purpose: ``workload:w1``, ``store:w1``, ``process:w1``, ``world``,
``settings``, ``clock:w2``, ...), so a failing run *is* its choice sequence, and any edited
sequence is another valid world (a replay falls back to the simplest value where the edit no
longer fits, and past the end of a stream). The shrinker never looks inside a scenario: it
proposes edited sequences, replays them, and keeps an edit when the run still fails with the
**same invariant** (:func:`sim.scenarios.catalogue.fired`) and its recorded sequence is smaller in
hypothesis's shortlex order (fewer choices, then simpler ones: :meth:`Choices.sort_key`). So
every scenario of the registry shrinks, with no shrink points placed by hand. The passes, run
in rounds until one changes nothing or the budget is spent:

1. **streams**: a whole stream set to its simplest values (a process's store faults gone, its
   clock unskewed, a knob stream at its lowest: swarm knobs, settings and crash rates are drawn
   through the choices too);
2. **knobs**: each choice of the short streams (world, swarm, settings, clocks, crash points)
   set to its simplest value, integers then halved towards it;
3. **tails**: a stream cut short (everything after its k-th choice simplest: the rest of a
   client's operations trivial, no more faults after a request);
4. **spans**: labelled spans deleted (``stream.span("op")``: one client operation's draws), the
   later ones first, and blocks of 8, 4, 2 and 1 choices in short streams;
5. **zero**: blocks of choices set to their simplest values (halves, quarters, ...).

The scheduler's seed and the object-id streams are replayed, never edited. A candidate sequence
is run at most once (a cache keyed by the sequence). The result replays with
``./just sim run --seed S --workload W [--bug B] --keep FILE`` (the saved sequence as JSON, see
:func:`sim.world.choices.dumps`) and can be written out as a pytest regression test
(:func:`regression_test`).
"""

from __future__ import annotations

import shlex
from typing import Any, Callable, Iterable

import attrs

from slatedb.runtime.production import ProductionRuntime

from sim.scenarios import catalogue as bugs_mod
from sim.world.choices import Choices, complexity, dumps, simplest

_WALL = ProductionRuntime("sim-shrink")  # wall time is reported, never fed into a run

#: Streams at most this long count as knobs (pass 2) and get block deletion (pass 4).
_SHORT = 64


def simulate_choices(scenario: Any, seed: int, prefix: dict[str, list[Any]] | None) -> tuple[Any, Choices, float]:
    """One run of ``scenario`` (a :class:`sim.campaign.sweep.Scenario`) replaying ``prefix`` (None: the
    seed's own choices); the result, the run's recorded choices, wall seconds."""
    from sim.campaign.sweep import simulate

    choices = Choices(seed, prefix)
    result, wall_s = simulate(scenario, seed, choices=choices)
    return result, choices, wall_s


def replay_command(scenario: Any, seed: int, path: str) -> str:
    return f"{scenario.replay(seed)} --keep {shlex.quote(path)}"


@attrs.frozen
class Size:
    """How big a run is: its editable choices (and those not at their simplest), client
    operations (``op`` spans), trace events and faults injected."""

    choices: int
    nontrivial: int
    ops: int
    events: int
    faults: int

    @staticmethod
    def of(result: Any, choices: Choices) -> "Size":
        total, nontrivial = choices.size()
        ops = sum(1 for _l, name, _s, _e in choices.spans() if name == "op")
        return Size(total, nontrivial, ops, int(result.events), int(sum(dict(result.faults).values())))

    def text(self) -> str:
        ops = f"{self.ops} ops, " if self.ops else ""
        return (f"{self.choices} choices ({self.nontrivial} not simplest), {ops}{self.events} trace events, "
                f"{self.faults} faults")


@attrs.frozen
class ShrinkResult:
    workload: str
    seed: int
    bugs: tuple[str, ...]
    invariant: str  # what the original run fired (and the shrunk one still does)
    saved: dict  # the shrunk choice sequence (sim.world.choices.dumps / loads)
    original: Size
    shrunk: Size
    original_faults: dict
    shrunk_faults: dict
    runs: int  # candidate runs tried
    wall_s: float
    violation: str  # the shrunk run's first violation
    trace: str  # the shrunk run's whole trace
    passes_without_bugs: bool | None  # the shrunk sequence with the bugs off (None: no bugs)
    streams: dict  # label -> choices left in each stream of the shrunk run that is not all simplest
    #: What else the run depends on (:class:`sim.campaign.sweep.Scenario`'s fields): a replay
    #: without them replays another world (``--faults none`` dropped: the shrunk run passed).
    options: dict = attrs.field(factory=dict)
    interrupted: bool = False  # Ctrl-C stopped the search: ``saved`` is the smallest failing sequence by then

    def scenario(self) -> Any:
        from sim.campaign.sweep import Scenario

        return Scenario(workload=self.workload, bugs=self.bugs, **self.options)

    def replay(self, path: str) -> str:
        return replay_command(self.scenario(), self.seed, path)


class _Budget(Exception):
    pass


class _Shrinker:
    def __init__(self, scenario: Any, seed: int, target: str, first: tuple[Any, Choices], max_runs: int,
                 max_wall_s: float, say: Callable[[str], None]) -> None:
        self.scenario, self.seed, self.target = scenario, seed, target
        self.result, self.choices = first
        self.best = self.choices.saved()
        self.key = self.choices.sort_key()
        self.max_runs, self.max_wall_s, self.say = max_runs, max_wall_s, say
        self.start = _WALL.monotonic_s()
        self.runs = 0
        self.cache: dict[str, bool] = {dumps(self.best): False}

    def attempt(self, prefix: dict[str, list[Any]]) -> bool:
        """Run ``prefix``; keep it (and return True) if it fails the same way and is smaller."""
        prefix = {k: v for k, v in prefix.items() if v}
        text = dumps(prefix)
        if text in self.cache:
            return self.cache[text]
        if self.runs >= self.max_runs or _WALL.monotonic_s() - self.start > self.max_wall_s:
            raise _Budget
        self.runs += 1
        result, choices, _ = simulate_choices(self.scenario, self.seed, prefix)
        better = (not result.ok and bugs_mod.fired(result) == self.target and choices.sort_key() < self.key)
        self.cache[text] = better
        if better:
            self.result, self.choices = result, choices
            self.best, self.key = choices.saved(), choices.sort_key()
            self.cache.setdefault(dumps(self.best), False)
        return better

    def edited(self, label: str, values: list[Any]) -> dict[str, list[Any]]:
        out = dict(self.best)
        out[label] = values
        return out

    def kinds(self, label: str) -> list[tuple]:
        s = self.choices.streams.get(label)
        return s.kinds if s is not None else []

    # -- passes ----------------------------------------------------------------------------

    def streams(self) -> None:
        for label in sorted(self.best, key=lambda k: -len(self.best.get(k, ()))):
            if label in self.best and self.attempt(self.edited(label, [])):
                self.say(f"  stream {label}: all simplest")

    def knobs(self) -> None:
        for label in sorted(self.best):
            i = 0
            while label in self.best and i < len(self.best[label]) and len(self.best[label]) <= _SHORT:
                values, kinds = self.best[label], self.kinds(label)
                if i < len(kinds) and complexity(values[i], kinds[i]) != 0:
                    kind = kinds[i]
                    if not self.attempt(self.edited(label, values[:i] + [simplest(kind)] + values[i + 1:])):
                        if kind[0] == "i":
                            self._lower_int(label, i, kind[1])
                i += 1

    def _lower_int(self, label: str, i: int, lo: int) -> None:
        """Binary search the smallest value of integer choice ``i`` that still fails."""
        hi = self.best[label][i]
        lo_ok = lo  # known not to work
        while hi - lo_ok > 1:
            mid = (lo_ok + hi) // 2
            values = self.best[label]
            if i >= len(values) or values[i] != hi:
                return
            if self.attempt(self.edited(label, values[:i] + [mid] + values[i + 1:])):
                hi = mid
            else:
                lo_ok = mid

    def tails(self) -> None:
        for label in sorted(self.best, key=lambda k: -len(self.best.get(k, ()))):
            while label in self.best:
                values = self.best[label]
                n = len(values)
                cuts = sorted({0, n // 8, n // 4, n // 2, 3 * n // 4, max(0, n - 4), max(0, n - 1)} - {n})
                if not any(self.attempt(self.edited(label, values[:k])) for k in cuts):
                    break
                self.say(f"  stream {label}: cut to {len(self.best.get(label, ()))} of {n} choices")

    def spans(self) -> None:
        spans = sorted(((l, s, e) for l, name, s, e in self.choices.spans() if l in self.best),
                       key=lambda t: (-t[1], t[0]))
        stale: set[str] = set()
        for label, s, e in spans:
            if label in stale or label not in self.best:
                continue
            values = self.best[label]
            if s >= len(values):
                continue
            if self.attempt(self.edited(label, values[:s] + values[e:])):
                stale.add(label)  # later spans' positions moved: next round
        for label in sorted(self.best):
            for size in (8, 4, 2, 1):
                i = 0
                while label in self.best and len(self.best[label]) <= _SHORT and i + size <= len(self.best[label]):
                    values = self.best[label]
                    if not self.attempt(self.edited(label, values[:i] + values[i + size:])):
                        i += 1

    def zero(self) -> None:
        for label in sorted(self.best, key=lambda k: -len(self.best.get(k, ()))):
            n = len(self.best.get(label, ()))
            size = n
            while size >= 1 and label in self.best:
                i = 0
                while label in self.best and i < len(self.best[label]):
                    values, kinds = self.best[label], self.kinds(label)
                    block = range(i, min(i + size, len(values), len(kinds)))
                    if any(complexity(values[j], kinds[j]) != 0 for j in block):
                        edited = list(values)
                        for j in block:
                            edited[j] = simplest(kinds[j])
                        self.attempt(self.edited(label, edited))
                    i += size
                if size == 1 or size <= max(1, n // 16):
                    break
                size //= 2

    def run(self) -> None:
        passes = (self.streams, self.knobs, self.tails, self.spans, self.zero)
        while True:
            key = self.key
            for p in passes:
                p()
            if self.key == key:
                return


def shrink(workload: str, seed: int, bugs: Iterable[str] = (), *, faults: str = "swarm", max_runs: int = 400,
           max_wall_s: float = 300.0, log: Callable[[str], None] | None = None, ops: int = 2000,
           clients: int = 6) -> ShrinkResult:
    """Minimise the choice sequence of a failing run; ``ValueError`` if the run passes (or the
    scenario refuses ``faults``, ``ops``, ``clients``: :class:`sim.campaign.sweep.Scenario`)."""
    from sim.campaign.sweep import WORKLOADS, Scenario

    scenario = Scenario(workload=workload, faults=faults, bugs=tuple(bugs), ops=ops, clients=clients)
    options: dict[str, Any] = {"faults": faults} if faults != "swarm" else {}
    if WORKLOADS[workload].takes_size:  # the store's size (every other scenario ignores it)
        default = {f.name: f.default for f in attrs.fields(Scenario)}
        options.update({k: v for k, v in (("ops", ops), ("clients", clients)) if v != default[k]})
    start = _WALL.monotonic_s()
    original, choices, _ = simulate_choices(scenario, seed, None)
    if original.ok:
        raise ValueError(f"seed {seed} of {workload} passes: nothing to shrink ({scenario.replay(seed)})")
    target = bugs_mod.fired(original)
    say = log or (lambda _m: None)
    before = Size.of(original, choices)
    say(f"original: fired {target}; {before.text()}")
    s = _Shrinker(scenario, seed, target, (original, choices), max_runs, max_wall_s, say)
    interrupted = False
    try:
        s.run()
    except _Budget:
        say(f"  budget reached after {s.runs} runs")
    except KeyboardInterrupt:  # the search so far is kept: its smallest failing sequence is a result
        interrupted = True
        say(f"  interrupted (Ctrl-C) after {s.runs} runs: the smallest failing sequence found so far")
    # The kept sequence replays to the same failure (checked: a replay is exact).
    shrunk, replayed, _ = simulate_choices(scenario, seed, s.best)
    assert not shrunk.ok and bugs_mod.fired(shrunk) == target, "the shrunk run no longer fails (nondeterminism?)"
    passes_off = None
    if scenario.bugs:
        off, _, _ = simulate_choices(attrs.evolve(scenario, bugs=()), seed, s.best)
        passes_off = bool(off.ok)
    trace = replayed.trace.render() if getattr(replayed, "trace", None) is not None else ""
    return ShrinkResult(
        workload, seed, tuple(scenario.bugs), target, s.best, before, Size.of(shrunk, replayed),
        dict(original.faults), dict(shrunk.faults), s.runs, _WALL.monotonic_s() - start,
        str(shrunk.violations[0]), trace, passes_off, {k: len(v) for k, v in s.best.items()}, options, interrupted)


# ---------------------------------------------------------------------------------------------
# Reports and regression tests
# ---------------------------------------------------------------------------------------------


def format_report(r: ShrinkResult, path: str, trace_lines: int = 60) -> str:
    lines = [
        f"shrunk seed {r.seed} of {r.workload}" + (f" with {', '.join(r.bugs)}" if r.bugs else ""),
        f"{'fires':<15} {r.invariant}: {r.violation[:300]}",
        f"{'original':<15} {r.original.text()}; faults {r.original_faults}",
        f"{'shrunk':<15} {r.shrunk.text()}; faults {r.shrunk_faults}",
        f"{'streams left':<15} " + (", ".join(f"{k} {v}" for k, v in sorted(r.streams.items())) or "none"),
        f"{'effort':<15} {r.runs} candidate runs, {r.wall_s:.1f} s wall"
        + (" (INTERRUPTED by Ctrl-C: the smallest failing sequence found by then)" if r.interrupted else ""),
    ]
    if r.passes_without_bugs is not None:
        lines.append(f"{'bugs off':<15} the shrunk sequence {'passes' if r.passes_without_bugs else 'STILL FAILS'}"
                     " with the switches off")
    events = r.trace.splitlines()
    shown = readable(events)
    cut = shown[-trace_lines:]
    lines.append(f"trace: {len(events)} events; {len(shown)} protocol events, faults and writes"
                 + (f", the last {len(cut)}" if len(cut) < len(shown) else "") + " (--trace: all):")
    lines.extend("  " + e for e in cut)
    lines.append(f"replay: {r.replay(path)} --trace")
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
    bugs = tuple(r.bugs)
    text = dumps(r.saved)
    lines = [
        f'"""Regression test written by `sim shrink` (name {name}).',
        "",
        f"Shrunk from `{r.scenario().replay(r.seed)}`:",
        f"{r.original.text()}, down to",
        f"{r.shrunk.text()}. Fires {r.invariant}.",
        '"""',
        "",
        "from sim.scenarios import catalogue as bugs",
        "from sim.world.choices import loads",
        "from sim.campaign.shrink import simulate_choices",
        "from sim.campaign.sweep import Scenario",
        "",
        f"WORKLOAD = {r.workload!r}",
        f"SEED = {r.seed}",
        f"BUGS = {bugs!r}",
        f"INVARIANT = {r.invariant!r}",
        *([f"#: What the run depends on besides its seed and switches (sim.campaign.sweep.Scenario).",
           f"OPTIONS = {r.options!r}"] if r.options else []),
        "#: The shrunk choice sequence (sim.world.choices.dumps): per stream, its values.",
        "CHOICES = (",
        *(f"    {text[i:i + 96]!r}" for i in range(0, len(text), 96)),
        ")",
        "",
        "",
        "def _run(bug_switches):",
        "    result, _, _ = simulate_choices(Scenario(workload=WORKLOAD, bugs=bug_switches"
        + (", **OPTIONS" if r.options else "") + "), SEED, loads(CHOICES))",
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
