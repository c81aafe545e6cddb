"""The bug catalogue (``sim/scenarios/catalogue.py``): every catalogued bug, switched on in the real code, is
caught by the simulator within its seed budget; with every switch off the same worlds pass; the
production runtime carries no switch; ``sim bugs`` and ``sim hunt`` work from the shell."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sim.scenarios import catalogue as bugs
from sim.campaign import hunt as hunt_mod
from slatedb.runtime import Runtime, switches
from slatedb.runtime.production import ProductionRuntime

ROOT = Path(__file__).resolve().parents[1]


def test_production_runtime_switches_nothing_on() -> None:
    assert Runtime.bugs == frozenset()
    assert ProductionRuntime("prod").bugs == frozenset()


#: A switch site: ``"name" in rt.bugs`` or ``switches.<NAME> in rt.bugs`` (slatedb/runtime/switches.py),
#: or a module constant ``NAME = "name"`` then ``NAME in ...bugs``.
_CONSTANTS = {k: v for k, v in vars(switches).items() if k.isupper() and isinstance(v, str)}


def _sites(text: str) -> set[str]:
    names = set(re.findall(r'"([a-z0-9]+(?:-[a-z0-9]+)+)" (?:not )?in [\w.]*\bbugs\b', text))
    names |= {_CONSTANTS.get(c, c) for c in re.findall(r'\bswitches\.([A-Z0-9_]+) (?:not )?in [\w.]*\bbugs\b', text)}
    consts = dict(re.findall(r'^([A-Z][A-Z0-9_]*) = "([a-z0-9]+(?:-[a-z0-9]+)+)"$', text, re.M))
    for const in re.findall(r'(?<!\.)\b([A-Z][A-Z0-9_]*) (?:not )?in [\w.]*\bbugs\b', text):
        if const in consts:
            names.add(consts[const])
    return names


def test_catalogue_entries_are_well_formed_and_their_switches_exist() -> None:
    assert len({b.name for b in bugs.CATALOGUE}) == len(bugs.CATALOGUE)
    # Every switch name is a constant of slatedb/runtime/switches.py, with one entry each.
    assert set(bugs.BY_NAME) | set(bugs.UNIT_CAUGHT) == switches.ALL == set(_CONSTANTS.values())
    assert not set(bugs.BY_NAME) & set(bugs.UNIT_CAUGHT)
    for b in bugs.CATALOGUE:
        path = ROOT / b.site.split()[0]
        # The switch sits in the real code, tested exactly as documented.
        assert b.name in _sites(path.read_text()), (b.name, path)
        assert b.workload in bugs.WORKLOADS
    # ... and every switch in the code is catalogued (a new switch needs its entry).
    used = set()
    for path in (ROOT / "slatedb").rglob("*.py"):
        used |= _sites(path.read_text())
    known = set(bugs.BY_NAME) | set(bugs.UNIT_CAUGHT)
    assert used <= known, f"switches without a catalogue entry: {sorted(used - known)}"
    assert used == known, f"entries without a switch: {sorted(known - used)}"


@pytest.mark.parametrize("name", sorted(bugs.UNIT_CAUGHT))
def test_each_switch_beyond_the_simulated_contract_is_caught_by_its_unit_test(name: str) -> None:
    """A switch no seed reaches (``catalogue.UNIT_CAUGHT``) names a unit test that turns it on and
    sees the failure: run it, and check that it really switches this name on."""
    node = bugs.UNIT_CAUGHT[name]
    path, func = node.split("::")
    text = (ROOT / path).read_text()
    body = text[text.index(f"def {func}("):]
    body = body[:body.find("\ndef ", 1) if "\ndef " in body[1:] else len(body)]
    const = next(k for k, v in _CONSTANTS.items() if v == name)
    assert f"switches.{const}" in body or f'"{name}"' in body, (node, "does not switch it on")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:]


def test_unknown_bug_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown bug"):
        bugs.run("db", 0, ["no-such-bug"])


@pytest.mark.parametrize("name", [b.name for b in bugs.CATALOGUE])
def test_each_bug_is_caught_within_its_budget(name: str) -> None:
    entry = bugs.BY_NAME[name]
    result = hunt_mod.hunt(name)  # seeds 0..budget-1, stops at the first detection
    assert result.detected_seed is not None, f"{name} not detected in {entry.budget} seeds of {entry.workload}"
    assert result.expected, (name, result.invariant, result.violation)


@pytest.mark.parametrize("workload,seeds", [("db", range(4)), ("takeover", range(4)), ("seqmeta", range(6)),
                                            ("store", range(2))])
def test_worlds_pass_with_every_switch_off(workload: str, seeds: range) -> None:
    for seed in seeds:
        result = bugs.run(workload, seed)
        assert result.ok, (workload, seed, result.violations)


def test_a_switch_does_not_outlive_its_run() -> None:
    """Switches live in the runs' runtimes only: a run with a bug on leaves the next clean run
    identical to one made before it."""
    before = bugs.run("seqmeta", 1)
    assert not bugs.run("seqmeta", 1, ["no-boundary-check"]).ok
    after = bugs.run("seqmeta", 1)
    assert before.ok and after.digest == before.digest


def test_the_seqmeta_oracle_alone_catches_a_lost_commit() -> None:
    """Without its trace checks (SEQMETA-1/2) the seqmeta world still sees what a missing
    boundary check costs: a commit that the final manifest does not count."""
    from sim.scenarios.seqmeta import run_seqmeta_workload

    result = next(r for r in (run_seqmeta_workload(s, bugs=frozenset({"no-boundary-check"}), trace_checks=False)
                              for s in range(8)) if not r.ok)
    assert "lost commit" in result.violations[0]


def _sim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_cli_bugs_lists_the_catalogue() -> None:
    out = _sim("bugs")
    assert out.returncode == 0, out.stderr
    for b in bugs.CATALOGUE:
        line = next(line for line in out.stdout.splitlines() if line.startswith(b.name + " "))
        assert b.workload in line and b.invariants[0] in line
    assert "planned" in out.stdout


def test_a_planned_class_is_no_catalogued_class() -> None:
    """``sim bugs`` listed as "planned (their code does not exist yet)" three classes that had
    entries for sessions (GC of SSTs in use, clone/projection leaks, an expired checkpoint)."""
    for planned, _where in bugs.PLANNED:
        assert not [b.name for b in bugs.CATALOGUE if b.bug_class.startswith(planned)], planned


def test_cli_hunt_reports_the_detecting_seed_and_its_replay() -> None:
    out = _sim("hunt", "--bug", "no-boundary-check", "--seeds", "8", "--jobs", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    m = re.search(r"detected by seed (\d+) of seqmeta after (\d+) seed", out.stdout)
    assert m and int(m.group(2)) == int(m.group(1)) + 1, out.stdout
    assert re.search(r"fired:\s+SEQMETA-[12]", out.stdout), out.stdout
    replay = re.search(r"replay:\s+\./just sim run (.*)", out.stdout).group(1).split()
    assert "--bug" in replay and "no-boundary-check" in replay
    # The replay command fails the same way, and prints itself again.
    again = _sim("run", *replay)
    assert again.returncode == 1 and "SEQMETA-" in again.stdout and "--bug no-boundary-check" in again.stdout


def test_cli_hunt_all_prints_a_table() -> None:
    out = _sim("hunt", "--all", "--seeds", "1", "--jobs", "1", "--workload", "seqmeta")
    lines = out.stdout.splitlines()
    assert lines[0].split()[:3] == ["bug", "workload", "seed"], out.stdout
    assert len(lines) == 1 + len(bugs.CATALOGUE)
    # Entries of the writer's WAL path are not exercised by the metadata-only world: NOT FOUND
    # there is the honest answer, and the exit status says so.
    assert "NOT FOUND" in out.stdout and out.returncode == 1
