"""Coverage probes (slatedb/runtime/probes.py, sim/world/probes.py): declared once, called at their
branch, free in production, counted in simulation, printed by every campaign, and every one of
them reached by the main job.

``test_the_default_campaign_hits_every_probe`` runs, for each scenario, the few seeds that
:data:`sim.world.probes.REACHED_BY` lists (measured) and fails when a probe is left unhit. Why that
small set stands in for the default ``./just dst``: runs are deterministic (same seed, same
trace, same probe hits: ``test_hits_are_deterministic_and_leave_the_trace_alone``), the default
campaign runs every scenario from seed 0 upwards, and every listed seed is below the number of
seeds of its scenario the default campaign runs at least (:data:`sim.world.probes.DEFAULT_SEEDS_FLOOR`).
So each probe hit here is hit by the default campaign; a probe whose call site is removed, or
whose scenario stops reaching it, fails here.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sim.scenarios import catalogue as bugs

from sim.world import probes
from sim.campaign.sweep import Scenario, run_seed
from slatedb.runtime import Runtime
from slatedb.runtime import probes as P
from slatedb.runtime.production import ProductionRuntime

ROOT = Path(__file__).resolve().parents[1]


def _probe_calls() -> dict[str, list[str]]:
    """Constant name -> the ``file:line`` of every ``<x>.probe(probes.NAME)`` in slatedb/ (and the
    names used through :func:`slatedb.runtime.probes.ambiguous_create`)."""
    calls: dict[str, list[str]] = {}
    for path in (ROOT / "slatedb").rglob("*.py"):
        text = path.read_text()
        if ".probe(" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "probe":
                for sub in ast.walk(node.args[0]):
                    if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "probes":
                        calls.setdefault(sub.attr, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return calls


def test_every_probe_is_declared_once_and_called_at_a_branch() -> None:
    consts = {k: v for k, v in vars(P).items() if re.fullmatch(r"[A-Z][A-Z0-9_]+", k) and isinstance(v, str)}
    assert sorted(consts.values()) == sorted(P.PROBES), "every probe is a constant of slatedb/runtime/probes.py"
    calls = _probe_calls()
    assert set(calls) - {"ambiguous_create"} <= set(consts), f"probe calls naming no declared probe: {set(calls)}"
    ambiguous = {P.ambiguous_create(k, mine) for k in ("manifest/01.manifest", "compactions/01.compactions",
                                                       "wal/01.sst") for mine in (True, False)}
    called = {consts[c] for c in calls if c in consts} | (ambiguous if "ambiguous_create" in calls else set())
    assert called == set(P.PROBES), f"declared but never called: {sorted(set(P.PROBES) - called)}"
    for p in P.PROBES.values():
        assert re.fullmatch(r"[a-z]+\.[a-z0-9.-]+", p.name) and p.meaning and p.spec, p


def test_production_ignores_probes_and_the_simulator_counts_them() -> None:
    assert ProductionRuntime("prod").probe(P.COMPACTOR_RESUMED) is None
    assert Runtime.probe is ProductionRuntime.probe  # production inherits the no-op
    with probes.counting() as hits:
        probes.hit(P.COMPACTOR_RESUMED)
        probes.hit(P.COMPACTOR_RESUMED)
        with probes.counting() as inner:
            probes.hit(P.GC_CHECKPOINT_EXPIRED)
    assert hits == {P.COMPACTOR_RESUMED: 2} and inner == {P.GC_CHECKPOINT_EXPIRED: 1}
    probes.hit(P.COMPACTOR_RESUMED)  # outside a counting block: nowhere, no error
    with pytest.raises(AssertionError, match="not declared"):
        probes.hit("compactor.no-such-branch")


def test_hits_are_deterministic_and_leave_the_trace_alone() -> None:
    from sim.scenarios.db import run_db_workload

    a, b = run_seed(Scenario(workload="db"), 1), run_seed(Scenario(workload="db"), 1)
    assert a["probes"] and a["probes"] == b["probes"]
    assert a["digest"] == run_db_workload(1).digest  # counting probes leaves the trace as it was


def test_reached_by_names_every_probe_with_seeds_the_default_campaign_runs() -> None:
    assert set(probes.REACHED_BY) | set(probes.UNIT_REACHED) == set(P.PROBES)
    assert not set(probes.REACHED_BY) & set(probes.UNIT_REACHED)
    for name, (scenario, seeds) in probes.REACHED_BY.items():
        assert scenario in bugs.WORKLOADS, (name, scenario)
        assert seeds and all(0 <= s < probes.DEFAULT_SEEDS_FLOOR[scenario] for s in seeds), (name, seeds)


def test_probe_table_lists_every_probe_and_the_unhit_ones() -> None:
    rows = [{"workload": "db", "probes": {P.WAL_WRITE_FENCED: 3}}, {"workload": "takeover", "probes": {P.WAL_WRITE_FENCED: 1}}]
    text = probes.format_table(rows)
    line = next(ln for ln in text.splitlines() if ln.startswith(P.WAL_WRITE_FENCED + " "))
    assert line.split()[1:3] == ["4", "2"] and "db 1, takeover 1" in line
    assert f"probes hit: 1/{len(P.PROBES)}" in text and P.UNION_RESUMED in text.splitlines()[-1]
    assert probes.unhit(rows) == [n for n in P.PROBES if n != P.WAL_WRITE_FENCED]
    held, _, not_hit = text.splitlines()[-1].partition("NOT HIT")
    assert P.WRITER_OPEN_OUTLIVED_DESTROY in held and P.WRITER_OPEN_OUTLIVED_DESTROY not in not_hit  # UNIT_REACHED


@pytest.mark.parametrize("scenario", sorted(probes.reached_by_seeds()))
def test_the_default_campaign_hits_every_probe(scenario: str) -> None:
    """The seeds :data:`sim.world.probes.REACHED_BY` lists for ``scenario`` hit each of its probes (see
    the module docstring for why they stand in for the default campaign)."""
    seeds = probes.reached_by_seeds()[scenario]
    # In a fresh process, as a campaign's worker runs them: a few scenarios' runs still depend on
    # what ran before them in the same process (docs/simulation.md, known issues).
    code = ("import json, sys; from sim.campaign.sweep import Scenario, run_seed; "
            f"print(json.dumps([run_seed(Scenario(workload={scenario!r}), s)['probes'] for s in {seeds!r}]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "SIM_LEDGER": "off"}).stdout
    hit_by: dict[str, set[int]] = {}
    for seed, hits in zip(seeds, json.loads(out.splitlines()[-1])):
        for name in hits:
            hit_by.setdefault(name, set()).add(seed)
    missed = {name: s for name, (w, s) in probes.REACHED_BY.items()
              if w == scenario and not set(s) & hit_by.get(name, set())}
    assert not missed, (f"probes no longer reached by their seeds of {scenario} (the default campaign leaves "
                        f"them unhit): {missed}; seeds run: {seeds}")


@pytest.mark.parametrize("name", sorted(probes.UNIT_REACHED))
def test_each_probe_beyond_the_simulated_contract_is_taken_by_its_unit_test(name: str) -> None:
    """A probe no seed of the default plan reaches (``probes.UNIT_REACHED``) names a unit test that
    takes its branch and asserts it did (by the event or the refusal the branch makes): the test
    exists and passes."""
    node = probes.UNIT_REACHED[name]
    path, func = node.split("::")
    text = (ROOT / path).read_text()
    assert f"def {func}(" in text, node
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:]
