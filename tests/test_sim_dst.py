"""The main job (``sim dst`` / ``./just dst``, :mod:`sim.campaign.dst`): every registered scenario, a
fixed seed plan (or, for soaks, seeds balanced by measured cost inside a time budget), one table,
a replay command per failing seed."""

from __future__ import annotations

import os
import re

from sim.scenarios import registry as scenarios_mod
from sim import cli
from sim.campaign import dst as dst_mod
from sim.campaign import sweep as sweep_mod
from sim.campaign.sweep import Scenario

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Fake wall cost of one seed per scenario (seconds).
COSTS = {"db": 0.2, "store": 0.25, "takeover": 0.25, "seqmeta": 0.1, "compactor": 1.0, "gc": 2.5}


class FakeWorld:
    """A run function whose seeds cost COSTS on a fake clock, failing the seeds in ``fail``."""

    def __init__(self, fail=(), costs=None):
        self.now = 0.0
        self.fail = set(fail) if not isinstance(fail, dict) else set()
        self.costs = fail if isinstance(fail, dict) else (costs or COSTS)
        self.ran = []

    def clock(self):
        return self.now

    def run(self, scenario, seed):
        cost = self.costs.get(scenario.workload, 0.5)
        self.now += cost
        self.ran.append((scenario.workload, seed))
        bad = (scenario.workload, seed) in self.fail
        violations = ["InvariantViolation: FENCE-3 violated at wal/3"] if bad else []
        return sweep_mod._row(scenario, seed, not bad, "d" * 16, 10, 100.0 * cost, {"fault.transient": 2},
                              violations, cost)


def test_budget_is_shared_by_measured_cost():
    world = FakeWorld()
    scenarios = [Scenario(workload=w) for w in COSTS]
    c = dst_mod.run_campaign(scenarios, budget_s=60.0, jobs=1, progress=False, run=world.run, clock=world.clock)
    by = {s.scenario.workload: s for s in c.results}
    # Each scenario gets about a sixth of the budget, so seeds are inversely proportional to cost.
    for w, cost in COSTS.items():
        core_s = by[w].core_s
        assert 10.0 - cost <= core_s <= 10.0 + cost, (w, core_s)
        assert by[w].seeds == list(range(len(by[w].seeds))), "each scenario runs a contiguous range from 0"
    assert len(by["seqmeta"].rows) >= 20 * len(by["gc"].rows) // 2
    # The budget holds: the last seed started while its expected cost still (mostly) fitted.
    assert c.wall_s <= 60.0 + max(COSTS.values()) / 2
    assert c.ok


def test_every_scenario_runs_at_least_one_seed_even_in_a_tiny_budget():
    world = FakeWorld()
    c = dst_mod.run_campaign([Scenario(workload=w) for w in COSTS], budget_s=0.5, jobs=1, progress=False,
                             run=world.run, clock=world.clock)
    assert sorted(s.scenario.workload for s in c.results if len(s.rows) >= 1) == sorted(COSTS)


def test_fixed_seeds_run_exactly(monkeypatch):
    world = FakeWorld()
    c = dst_mod.run_campaign([Scenario(workload="db"), Scenario(workload="gc")], seeds=range(3, 6), jobs=1,
                             progress=False, run=world.run, clock=world.clock)
    assert sorted(world.ran) == sorted((w, s) for w in ("db", "gc") for s in (3, 4, 5))
    assert c.budget_s is None


def test_cli_runs_every_registered_scenario_and_reports_failures(monkeypatch, capsys):
    """`sim dst` with no --workload runs every scenario of the registry, including one registered
    after the fact; the table has one row each, failures by invariant, and a replay per failing seed."""
    world = FakeWorld(fail={("gc", 1), ("newscenario", 0)})
    monkeypatch.setitem(scenarios_mod.BY_NAME, "newscenario", scenarios_mod.ScenarioSpec(
        "newscenario", "tests.test_sim_dst:_never_called", "a scenario registered after the fact"))
    monkeypatch.setattr(sweep_mod, "run_seed", world.run)
    rc = cli.main(["dst", "--seeds", "0..2", "--jobs", "1", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 1
    assert {w for w, _ in world.ran} == set(scenarios_mod.BY_NAME)
    for w in scenarios_mod.BY_NAME:
        assert re.search(rf"^{w}\s+0\.\.2\s+3\s", out, re.M), out
    assert re.search(r"^gc\s+0\.\.2\s+3\s+1\s+FENCE-3 1\s", out, re.M), out
    n = len(scenarios_mod.BY_NAME)
    assert re.search(rf"^total\s+\S*\s*{3 * n}\s+2\s+FENCE-3 2\s", out, re.M), out
    assert "faults by kind" in out and "fault.transient 6" in out
    assert "replay: ./just sim run --seed 1 --workload gc" in out
    assert "replay: ./just sim run --seed 0 --workload newscenario" in out


def test_cli_runs_a_seed_plan_and_minutes_a_soak(monkeypatch, capsys):
    seen = []

    def fake_campaign(scenarios, **kw):
        seen.append(kw)
        return dst_mod.Campaign([], 0.0, 1, kw["budget_s"])

    monkeypatch.setattr(dst_mod, "run_campaign", fake_campaign)
    assert cli.main(["dst", "--quick"]) == 0
    assert cli.main(["dst", "--minutes", "30"]) == 0
    assert cli.main(["dst"]) == 0
    assert cli.main(["dst", "--quick", "--from", "1000"]) == 0
    quick, soak, default, shifted = seen
    names = list(scenarios_mod.BY_NAME)
    # The main job is a plan: fixed seeds per scenario, no budget; --minutes is a time-boxed soak.
    assert quick["budget_s"] is None and quick["seeds"] == dst_mod.plan("quick", names)
    assert default["budget_s"] is None and default["seeds"] == dst_mod.plan("default", names)
    assert soak["budget_s"] == 1800.0 and soak["seeds"] is None
    assert shifted["seeds"]["gc"].start == 1000
    assert "plan: db 0.." in capsys.readouterr().out


def test_the_plan_is_a_function_of_the_table_alone() -> None:
    names = list(scenarios_mod.BY_NAME)
    quick, default = dst_mod.plan("quick", names), dst_mod.plan("default", names)
    assert set(quick) == set(default) == set(names)
    for w in names:
        assert quick[w].start == default[w].start == 0
        assert dst_mod.PLAN_MIN_SEEDS["quick"] <= len(quick[w]) <= len(default[w])
    cost = lambda p: sum(len(r) * scenarios_mod.BY_NAME[w].cost_s for w, r in p.items())  # noqa: E731
    # At the table's costs: about 30 s of 2 cores for --quick (every scenario at least 3 seeds),
    # about 8.5 minutes for the default.
    assert 40 <= cost(quick) <= 70 and 900 <= cost(default) <= 1100


def test_a_plan_runs_exactly_its_seeds_loaded_or_not() -> None:
    """The same plan on a fast and on a slow machine: the same seeds ran (slower, never thinner)."""
    plan = {"db": range(0, 5), "gc": range(0, 2)}
    for slow in (1.0, 50.0):
        world = FakeWorld({"db": 0.1 * slow, "gc": 1.0 * slow})
        c = dst_mod.run_campaign([Scenario(workload="db"), Scenario(workload="gc")], budget_s=None, seeds=plan,
                                 jobs=1, progress=False, run=world.run, clock=world.clock)
        assert {s.scenario.workload: s.seeds for s in c.results} == {"db": [0, 1, 2, 3, 4], "gc": [0, 1]}
        assert c.ok and c.not_run == ()


def test_a_wall_clock_cap_fails_the_plan_and_names_what_did_not_run() -> None:
    world = FakeWorld({"db": 1.0, "gc": 10.0})
    c = dst_mod.run_campaign([Scenario(workload="db"), Scenario(workload="gc")], budget_s=None,
                             seeds={"db": range(0, 5), "gc": range(0, 5)}, jobs=1, progress=False, run=world.run,
                             clock=world.clock, hard_stop_s=12.0)
    assert not c.ok and c.not_run
    table = dst_mod.format_table(c)
    assert "FAIL: the wall-clock cap stopped the plan; did not run: " in table and "gc " in table


def test_justfile_dst_is_the_whole_registry():
    text = open(os.path.join(ROOT, "Justfile")).read()
    recipe = text.split("\ndst *args:\n", 1)[1].split("\n\n", 1)[0]
    assert recipe.strip() == '.venv/bin/sim dst "$@"', recipe


def test_real_quick_campaign_of_two_scenarios():
    """The real thing on a small scale: two scenarios, a 3 s budget, one process."""
    c = dst_mod.run_campaign([Scenario(workload="seqmeta"), Scenario(workload="db")], budget_s=3.0, jobs=1,
                             progress=False)
    assert c.ok and all(len(s.rows) >= 1 for s in c.results)
    table = dst_mod.format_table(c)
    assert table.splitlines()[0].split()[:4] == ["scenario", "seeds", "runs", "failed"]


def _sleepy_run(scenario, seed):
    """A seed that costs real wall time: gc seeds hang, others are quick (picklable for workers)."""
    import time

    time.sleep(60.0 if scenario.workload == "gc" else 0.05)
    return sweep_mod._row(scenario, seed, True, "d" * 16, 1, 1.0, {}, [], 0.05)


def test_seeds_running_at_the_hard_stop_are_cut():
    """A seed that hangs (or a core shared with others) cannot hold the campaign past budget + grace:
    its worker is terminated and the seed reported as cut, not as passed or failed."""
    import time

    start = time.monotonic()
    c = dst_mod.run_campaign([Scenario(workload="db"), Scenario(workload="gc")], budget_s=1.0, jobs=2,
                             progress=False, run=_sleepy_run)
    assert time.monotonic() - start < 20
    assert ("gc", 0) in c.cut and all(w == "gc" for w, _ in c.cut)
    by = {s.scenario.workload: s for s in c.results}
    assert by["gc"].rows == [] and len(by["db"].rows) >= 1 and c.ok
    assert "cut at the hard stop" in dst_mod.format_table(c) and "gc seed 0" in dst_mod.format_table(c)


def test_the_coverage_gap_guard_names_a_declared_fault_kind_or_probe_that_never_fired() -> None:
    world = FakeWorld()  # every seed injects fault.transient only
    c = dst_mod.run_campaign([Scenario(workload="db")], budget_s=None, seeds={"db": range(0, 500)}, jobs=1,
                             progress=False, run=world.run, clock=world.clock)
    gaps = dst_mod.coverage_gaps(c)
    assert "db: fault kind store.reply-lost declared, never injected in 500 seeds" in gaps
    assert "db: fault kind fault.transient declared, never injected in 500 seeds" not in gaps
    assert any(g.startswith("db: probe manifest.conflict never hit in 500 seeds") for g in gaps)
    # Too few seeds to hold the scenario to its declarations: no gap.
    small = dst_mod.run_campaign([Scenario(workload="db")], budget_s=None, seeds={"db": range(0, 5)}, jobs=1,
                                 progress=False, run=world.run, clock=world.clock)
    assert dst_mod.coverage_gaps(small) == []
