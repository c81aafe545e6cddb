"""The main job, ``sim dst`` (``./just dst``): every scenario of the one registry in one campaign.

Every scenario of the one table, :data:`sim.scenarios.registry.SCENARIOS`, runs (a scenario registered
there later is in the main job at once). **The main job is a seed plan, not a time box**
(:func:`plan`): ``./just dst`` runs 500 seeds of every scenario (:data:`PLAN_MIN_SEEDS`),
``--quick`` :data:`PLAN_CORE_S` ``["quick"]`` core-seconds of seeds shared equally between the
scenarios and turned into a seed count per scenario by the table's fixed ``cost_s`` -- constants,
never a measurement, so the same command
runs the same seeds on any machine, loaded or not (slower under load, never thinner). Calibrated
so that the default plan takes about 9 minutes on 2 idle cores and ``--quick`` about 30 s. A
wall-clock cap (``--cap-minutes``), if given, fails the run and names what did not run.

``--minutes N`` (soaks) is time-boxed instead: ``budget_s`` wall seconds
shared equally between the scenarios, and each scenario's seed count follows from its *measured* cost:
the scheduler always hands the next free worker the next seed of the scenario that has used the
fewest core-seconds so far, so a scenario whose seeds cost 2.5 s runs a tenth as many seeds as one
whose seeds cost 0.25 s, and all of them get the same share of the machine. A scenario gets a new
seed only while its expected cost still fits in the budget; the seeds in flight when the budget
runs out finish (the overrun is at most one seed per worker). Each scenario runs seeds
``start, start+1, ...`` in order (``--from``), so a scenario's seeds are a contiguous range and
every failure replays with one command.

With ``seeds`` given (``--seeds A..B``) the campaign is not time-boxed: every scenario runs exactly
those seeds.

The verdict is one table -- scenario, seeds, failures by invariant, faults by kind, compression
(virtual s per busy core-second), seeds per core-minute -- a total line, then one replay command
per failing seed. Wall time is only reported and scheduled on, never fed into a run.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import queue
from collections import Counter
from typing import IO, Callable, Iterable, Sequence

import attrs

from slatedb.runtime.production import ProductionRuntime

from sim.scenarios import registry as scenarios_mod
from sim.world import probes as probes_mod
from sim.campaign import sweep as sweep_mod
from sim.campaign.sweep import Progress, Scenario, invariant_of

_WALL = ProductionRuntime("sim-dst")

#: Wall seconds of a time-boxed campaign when none is given (``--minutes`` soaks name theirs).
DEFAULT_BUDGET_S = 540.0
#: The seed plans. ``--quick``: 40 core-s (at the table's ``cost_s``) shared equally between the
#: scenarios, every scenario at least 3 seeds: about 40 core-s, 20 s of 2 idle cores (about 30
#: with start-up). The default: 500 seeds of every scenario (issue 27: the default plan holds at
#: least 500 of each), about 1,080 core-s at the table's costs: about 9 minutes of 2 idle cores.
PLAN_CORE_S = {"quick": 40.0, "default": 0.0}
#: Fewest seeds of any scenario in a plan.
PLAN_MIN_SEEDS = {"quick": 3, "default": 500}


def plan(kind: str, workloads: Sequence[str], start: int = 0) -> dict[str, range]:
    """The seeds of each scenario in plan ``kind`` (``quick`` or ``default``), from seed ``start``:
    a pure function of the registry's constants, the same on every machine."""
    share = PLAN_CORE_S[kind] / max(1, len(workloads))
    out = {}
    for w in workloads:
        n = max(PLAN_MIN_SEEDS[kind], round(share / prior_cost_s(w)))
        out[w] = range(start, start + n)
    return out


def grace_s(budget_s: float) -> float:
    """How long seeds in flight may overrun the budget before they are cut."""
    return min(30.0, budget_s / 2)


#: Assumed cost of a scenario's first seed until one has been measured: its table entry's
#: ``cost_s`` (:class:`sim.scenarios.registry.ScenarioSpec`).
def prior_cost_s(workload: str) -> float:
    spec = scenarios_mod.BY_NAME.get(workload)
    return spec.cost_s if spec is not None else 1.0


@attrs.frozen
class ScenarioResult:
    """What one scenario did in a campaign (rows in seed order)."""

    scenario: Scenario
    rows: list[dict]

    @property
    def seeds(self) -> list[int]:
        return [r["seed"] for r in self.rows]

    @property
    def failures(self) -> list[dict]:
        return [r for r in self.rows if not r["ok"]]

    @property
    def by_invariant(self) -> dict[str, int]:
        c: Counter = Counter()
        for r in self.failures:
            c.update(set(r.get("invariants") or [invariant_of(v) for v in r["violations"]]) or {"?"})
        return dict(c.most_common())

    @property
    def faults(self) -> dict[str, int]:
        c: Counter = Counter()
        for r in self.rows:
            c.update(r["faults"])
        return dict(c.most_common())

    @property
    def virtual_s(self) -> float:
        return sum(r["virtual_s"] for r in self.rows)

    @property
    def core_s(self) -> float:
        return sum(r["wall_s"] for r in self.rows)

    @property
    def compression(self) -> float:
        """Virtual seconds per busy core-second."""
        return self.virtual_s / max(self.core_s, 1e-9)

    @property
    def seeds_per_core_minute(self) -> float:
        return len(self.rows) * 60.0 / max(self.core_s, 1e-9)


@attrs.frozen
class Campaign:
    results: list[ScenarioResult]
    wall_s: float
    jobs: int
    budget_s: float | None  # None: fixed seeds
    cut: tuple = ()  # (scenario, seed) still running at the hard stop (or at Ctrl-C), terminated
    not_run: tuple = ()  # (scenario, seed) of a plan never started (a wall-clock cap or Ctrl-C stopped it)
    interrupted: bool = False  # Ctrl-C (SIGINT) stopped the campaign: the rows are the seeds that ran

    @property
    def rows(self) -> list[dict]:
        return [r for s in self.results for r in s.rows]

    @property
    def ok(self) -> bool:
        """Every seed passed; for fixed seeds (a plan), every seed also ran."""
        if self.interrupted or self.budget_s is None and (self.cut or self.not_run):
            return False
        return all(r["ok"] for r in self.rows)


class _Lane:
    """One scenario's seeds as the scheduler hands them out."""

    def __init__(self, scenario: Scenario, seeds: Iterable[int] | None, start: int) -> None:
        self.scenario = scenario
        self.fixed = list(seeds) if seeds is not None else None
        self.next_seed = start
        self.rows: list[dict] = []
        self.in_flight = 0

    @property
    def cost_s(self) -> float:
        """Measured mean wall seconds of one seed (the table's prior until one has finished)."""
        if not self.rows:
            return prior_cost_s(self.scenario.workload)
        return max(sum(r["wall_s"] for r in self.rows) / len(self.rows), 1e-3)

    @property
    def charged_s(self) -> float:
        """Core-seconds used, counting seeds in flight at their expected cost."""
        return sum(r["wall_s"] for r in self.rows) + self.in_flight * self.cost_s

    def has_more(self) -> bool:
        return self.fixed is None or bool(self.fixed)

    def take(self) -> int:
        self.in_flight += 1
        if self.fixed is not None:
            return self.fixed.pop(0)
        seed, self.next_seed = self.next_seed, self.next_seed + 1
        return seed


def run_campaign(scenarios: Sequence[Scenario], *, budget_s: float | None = DEFAULT_BUDGET_S,
                 seeds: "Iterable[int] | dict[str, Iterable[int]] | None" = None, start: int = 0, jobs: int = 0,
                 out: IO[str] | None = None,
                 progress: bool = True, run: Callable[[Scenario, int], dict] | None = None,
                 clock: Callable[[], float] | None = None, hard_stop_s: float | None = None) -> Campaign:
    """Run ``scenarios`` together: exactly ``seeds`` of each (a dict: per scenario, a plan), or
    (``seeds`` None) as many of each
    as a fair share of ``budget_s`` wall seconds buys at its measured cost, from seed ``start``.
    ``jobs`` worker processes (0: all cores; 1: in this process). With a budget, seeds still
    running ``hard_stop_s`` wall seconds after the start (default: the budget plus
    :func:`grace_s`) are cut: their workers are terminated and they count as neither passed nor
    failed (so that ``--quick`` ends inside the before-stop hook's timeout even when the cores
    are shared). ``run`` and ``clock`` (wall seconds) are for tests."""
    if not scenarios:
        raise ValueError("no scenario to run")
    if seeds is None and (budget_s is None or budget_s <= 0):
        raise ValueError("a campaign needs seeds or a positive budget")
    run = run or sweep_mod.run_seed
    jobs = jobs or os.cpu_count() or 1
    if isinstance(seeds, dict):
        per = {w: list(v) for w, v in seeds.items()}
        lanes = [_Lane(s, per.get(s.workload, []), start) for s in scenarios]
        seed_list: list[int] | None = [x for v in per.values() for x in v]
        total = sum(len(ln.fixed or ()) for ln in lanes)
    else:
        seed_list = list(seeds) if seeds is not None else None
        lanes = [_Lane(s, seed_list, start) for s in scenarios]
        total = len(seed_list) * len(lanes) if seed_list is not None else 0
    if hard_stop_s is None and seed_list is None and budget_s is not None:
        hard_stop_s = budget_s + grace_s(budget_s)
    cut: list = []
    bar = Progress(total or 100, enabled=progress, label="dst" if total else "dst, % of the budget")
    clock = clock or _WALL.monotonic_s
    t0 = clock()
    failures = 0

    def elapsed() -> float:
        return clock() - t0

    def pick() -> _Lane | None:
        """The lane to run next: the least charged one that still has seeds and fits the budget."""
        live = [ln for ln in lanes if ln.has_more()]
        if seed_list is not None and hard_stop_s is not None and elapsed() >= hard_stop_s:
            return None  # the cap: what is left did not run (and fails the campaign)
        if budget_s is not None and seed_list is None:
            left = budget_s - elapsed()
            # Every scenario runs at least one seed; after that a seed must be expected to fit.
            live = [ln for ln in live if not ln.rows and not ln.in_flight
                    or (left > 0 and ln.cost_s * 0.5 <= left)]
        return min(live, key=lambda ln: (ln.charged_s, lanes.index(ln))) if live else None

    def done(lane: _Lane, row: dict) -> None:
        nonlocal failures
        lane.in_flight -= 1
        lane.rows.append(row)
        failures += not row["ok"]
        sweep_mod._write_row(out, row)
        n = sum(len(ln.rows) for ln in lanes)
        if total:
            bar.update(n, failures)
        else:
            bar.update(min(99, int(100 * elapsed() / budget_s)), failures)  # type: ignore[operator]

    interrupted = False
    try:
        if jobs == 1:
            while (lane := pick()) is not None:
                seed = lane.take()
                cut = [(lane, seed)]
                done(lane, run(lane.scenario, seed))
                cut = []
        else:
            cut = _run_pool(run, jobs, pick, done, hard_stop_s, elapsed)
    except _Interrupted as stop:  # Ctrl-C: what ran is the campaign's, what was running is cut
        interrupted, cut = True, stop.cut
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if not total:
            bar.update(100, failures)
        bar.close()
    results = [ScenarioResult(ln.scenario, sorted(ln.rows, key=lambda r: r["seed"])) for ln in lanes]
    not_run = tuple((ln.scenario.workload, seed) for ln in lanes for seed in (ln.fixed or ()))
    return Campaign(results, elapsed(), jobs, budget_s if seed_list is None else None,
                    cut=tuple((lane.scenario.workload, seed) for lane, seed in cut),
                    not_run=not_run if seed_list is not None else (), interrupted=interrupted)


class _Interrupted(Exception):
    """Ctrl-C reached :func:`_run_pool`: its workers are terminated; ``cut`` the seeds they ran."""

    def __init__(self, cut: list) -> None:
        super().__init__("interrupted")
        self.cut = cut


def _run_pool(run, jobs: int, pick, done, hard_stop_s: float | None, elapsed) -> list:
    """Worker processes: keep ``jobs`` seeds in flight, hand each finished row to ``done``; at
    ``hard_stop_s`` (wall seconds since the start) terminate the workers and return the
    ``(lane, seed)`` pairs still running (cut: neither passed nor failed). At Ctrl-C the same,
    raised as :class:`_Interrupted`."""
    results: queue.Queue = queue.Queue()
    pending: dict[int, tuple] = {}
    pool = multiprocessing.get_context().Pool(jobs, initializer=sweep_mod.ignore_sigint)
    terminated = False
    try:
        ticket = 0
        while True:
            while len(pending) < jobs and (lane := pick()) is not None:
                seed = lane.take()
                ticket += 1
                pending[ticket] = (lane, seed)
                pool.apply_async(run, (lane.scenario, seed),
                                 callback=lambda row, t=ticket: results.put((t, row, None)),
                                 error_callback=lambda e, t=ticket: results.put((t, None, e)))
            if not pending:
                break
            wait_s = None if hard_stop_s is None else max(0.0, hard_stop_s - elapsed())
            try:
                t, row, error = results.get(timeout=wait_s)
            except queue.Empty:
                pool.terminate()
                terminated = True
                return list(pending.values())
            lane, _seed = pending.pop(t)
            if error is not None:
                raise error
            done(lane, row)
        return []
    except KeyboardInterrupt:
        pool.terminate()
        terminated = True
        raise _Interrupted(list(pending.values())) from None
    finally:
        if not terminated:
            pool.close()
        pool.join()


#: A scenario's declared fault kinds are held to having fired once it ran this many seeds (the
#: default plan's db, takeover, seqmeta, store, store-bounded, txn and load; the quick plan never
#: trips it).
GAP_MIN_SEEDS = 100


def coverage_gaps(c: Campaign) -> list[str]:
    """The coverage-gap guard: a fault kind a scenario declares (``SCENARIO.fault_kinds``) that
    none of its seeds injected once it ran :data:`GAP_MIN_SEEDS` seeds, and a coverage probe
    :data:`sim.world.probes.REACHED_BY` assigns to a scenario that none of its seeds hit once the
    seeds listed there (and the scenario's :data:`sim.world.probes.DEFAULT_SEEDS_FLOOR`) ran.
    One line per gap; empty when nothing its scenarios declare was left unexercised."""
    gaps = []
    for result in c.results:
        w = result.scenario.workload
        if result.scenario.bugs or result.scenario.faults != "swarm":
            continue
        seeds = set(result.seeds)
        spec = scenarios_mod.BY_NAME.get(w)
        declared = getattr(importlib.import_module(spec.runner.partition(":")[0]), "SCENARIO", None) if spec else None
        if declared is not None and len(seeds) >= GAP_MIN_SEEDS:
            for kind in declared.fault_kinds:
                if not result.faults.get(kind):
                    gaps.append(f"{w}: fault kind {kind} declared, never injected in {len(seeds)} seeds")
        hit = Counter()
        for r in result.rows:
            hit.update({p for p, n in (r.get("probes") or {}).items() if n})
        floor = probes_mod.DEFAULT_SEEDS_FLOOR.get(w, 0)
        for probe, (scenario, listed) in probes_mod.REACHED_BY.items():
            if scenario == w and set(listed) <= seeds and len(seeds) >= floor and not hit[probe]:
                gaps.append(f"{w}: probe {probe} never hit in {len(seeds)} seeds (reached by seed(s) "
                            f"{', '.join(map(str, listed))})")
    return gaps


def _seed_range(seeds: list[int]) -> str:
    if not seeds:
        return "-"
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}..{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return f"{len(seeds)} seeds"


def _pairs(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "-"


def format_table(c: Campaign) -> str:
    """One row per scenario, a total row, then a replay command per failing seed."""
    head = ("scenario", "seeds", "runs", "failed", "failures by invariant", "compression", "seeds/core-min",
            "faults by kind")
    body = []
    for s in c.results:
        body.append((s.scenario.workload, _seed_range(s.seeds), str(len(s.rows)), str(len(s.failures)),
                     _pairs(s.by_invariant), f"{s.compression:.0f}x", f"{s.seeds_per_core_minute:.0f}",
                     _pairs(s.faults)))
    rows = c.rows
    virtual = sum(r["virtual_s"] for r in rows)
    core = sum(r["wall_s"] for r in rows)
    inv: Counter = Counter()
    for s in c.results:
        inv.update(s.by_invariant)
    faults: Counter = Counter()
    for s in c.results:
        faults.update(s.faults)
    body.append(("total", "", str(len(rows)), str(sum(1 for r in rows if not r["ok"])), _pairs(dict(inv.most_common())),
                 f"{virtual / max(core, 1e-9):.0f}x", f"{len(rows) * 60.0 / max(core, 1e-9):.0f}",
                 f"{sum(faults.values())} injected"))
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head) - 1)]
    lines = []
    for r in [head, *body]:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths)) + "  " + r[-1])
        if r is head:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * len(head[-1]))
    budget = f"budget {c.budget_s:.0f} s, " if c.budget_s is not None else ""
    lines.append(f"wall {c.wall_s:.1f} s ({budget}{c.jobs} worker{'s' if c.jobs != 1 else ''}); "
                 f"{len(rows) * 60.0 / max(c.wall_s, 1e-9):.0f} seeds/min overall; "
                 f"compression = virtual s per busy core-second")
    if c.interrupted:
        lines.append(f"INTERRUPTED (Ctrl-C) after {c.wall_s:.1f} s: the table holds the {len(rows)} seed(s) that ran")
    if c.cut:
        lines.append(("stopped by Ctrl-C" if c.interrupted else "cut at the hard stop")
                     + " (still running, neither passed nor failed): "
                     + ", ".join(f"{w} seed {seed}" for w, seed in c.cut))
    if c.not_run:
        by: dict[str, list[int]] = {}
        for w, seed in c.not_run:
            by.setdefault(w, []).append(seed)
        lines.append(("not started before Ctrl-C: " if c.interrupted else
                      "FAIL: the wall-clock cap stopped the plan; did not run: ")
                     + ", ".join(f"{w} {_seed_range(sorted(v))}" for w, v in by.items()))
    failing = [r for r in rows if not r["ok"]]
    if failing:
        lines.append("")
        lines.append(sweep_mod.format_failures(failing))
    return "\n".join(lines)
