"""``sim shrink``: a failing run's schedule minimised to a short run that still fails with the
same invariant, replayable with ``--keep`` and written out as a regression test."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sim import bugs, cli
from sim.db_workload import run_db_workload
from sim.shrink import Plan, format_report, readable, shrink, simulate_plan, supports_plan
from sim.sweep import Scenario
from sim.takeover_workload import run_takeover_workload

pytestmark = pytest.mark.xdist_group("sim-shrink")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_plan_text_round_trips() -> None:
    keep = {"op:w1:0", "op:w1:1", "op:w1:2", "op:w1:7", "f:w2:12", "crash:w1", "writer:w1", "op:w1.r:3"}
    text = Plan.format(keep)
    assert text == "f:w2:12 op:w1:0-2,7 op:w1.r:3 crash:w1 writer:w1"
    assert Plan.parse(text).keep == keep
    assert Plan.format(()) == "-" and Plan.parse("-").keep == frozenset()
    with pytest.raises(ValueError):
        Plan.parse("op:w1:x-3")


def test_a_plan_that_keeps_everything_is_the_seed_itself() -> None:
    # Asking the plan draws nothing and records nothing: same trace digest as without a plan.
    for run, seed in ((run_db_workload, 3), (run_takeover_workload, 1)):
        plan = Plan()
        assert run(seed, plan=plan).digest == run(seed).digest
        assert any(s.startswith("op:") for s in plan.seen) and any(s.startswith("writer:") for s in plan.seen)
        # Keeping exactly what was seen is the same run again.
        assert run(seed, plan=Plan(plan.seen)).digest == run(seed).digest
    assert supports_plan("db") and supports_plan("takeover") and not supports_plan("store")


def test_shrinking_takeover_no_epoch_recheck() -> None:
    r = shrink("takeover", 9, ["no-epoch-recheck"], max_runs=150)
    assert r.invariant == "DUR-1" and bugs.INVARIANT_ID.search(r.violation).group(0) == "DUR-1"
    assert r.shrunk_steps.get("writer") == 2 and r.original_steps["writer"] > 2
    assert r.shrunk_steps.get("f", 0) <= 3 < r.original_steps["f"]
    assert r.shrunk_events < r.original_events / 2
    assert r.passes_without_bugs is True
    report = format_report(r)
    assert "--keep '" in report and "replay: ./just sim run --seed 9 --workload takeover --bug no-epoch-recheck" in report
    # The replay command reproduces it, from the command line.
    argv = r.replay.split("./just sim ", 1)[1]
    keep = r.replay.split("--keep ", 1)[1].strip("'")
    assert cli.main(["run", "--seed", "9", "--workload", "takeover", "--bug", "no-epoch-recheck", "--keep", keep]) == 1
    assert cli.main(["run", "--seed", "9", "--workload", "takeover", "--keep", keep]) == 0
    assert argv.startswith("run --seed 9")


def test_shrinking_db_zombie_ack_is_much_shorter() -> None:
    r = shrink("db", 9, ["zombie-ack"], max_runs=250)
    assert r.invariant == "FENCE-3"
    assert r.shrunk_steps["op"] * 3 <= r.original_steps["op"]
    assert r.shrunk_steps["writer"] < r.original_steps["writer"]
    assert sum(r.shrunk_steps.values()) * 3 <= sum(r.original_steps.values())
    assert not any(k in r.shrunk_steps for k in ("skew", "jump"))
    assert r.passes_without_bugs is True
    # The readable trace keeps the protocol story and drops the store's ordinary traffic.
    lines = readable(r.trace.splitlines())
    assert len(lines) < r.shrunk_events and any(" ack " in line for line in lines)
    result, _ = simulate_plan(Scenario(workload="db", bugs=("zombie-ack",)), 9, Plan(r.keep))
    assert not result.ok and bugs.fired(result) == "FENCE-3"


def test_a_passing_seed_is_refused_and_unshrinkable_workloads_say_so(capsys) -> None:
    with pytest.raises(ValueError, match="passes"):
        shrink("takeover", 0)
    assert cli.main(["shrink", "--seed", "0", "--workload", "store"]) == 2
    assert "cannot be shrunk" in capsys.readouterr().err


def test_the_written_regression_test_runs_under_pytest(tmp_path) -> None:
    path = tmp_path / "tests" / "regressions" / "test_takeover_shrunk.py"
    code = cli.main(["shrink", "--seed", "2", "--workload", "takeover", "--bug", "no-epoch-recheck", "-q",
                     "--max-runs", "150", "--write-test", str(path)])
    assert code == 0
    text = path.read_text()
    assert "def test_fails_with_the_bug_on" in text and "def test_passes_with_the_bug_off" in text
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed" in r.stdout
