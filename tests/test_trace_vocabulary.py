"""The trace vocabulary (:mod:`sim.world.events`) against the code and the spec.

Why: checkers, the shrinker's readable trace and the timeline dispatch on ``Event.kind``; a kind
recorded under one spelling and checked under another is a check that silently never runs.
Rules: every kind recorded in ``slatedb/`` or ``sim/`` is a named kind; every named kind is
recorded somewhere; every kind a checker compares an event with is a named kind; every event of
spec/protocols/README.md's "Trace vocabulary" maps to a named kind that is recorded; a simulated
run records only named kinds.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sim.world import events
ROOT = Path(__file__).resolve().parents[1]


def _recorded() -> dict[str, set[str]]:
    """Literal kinds passed to ``.event(kind, ...)``, ``.record(process, kind, ...)`` and
    ``.emit(process, kind, ...)``; the simulated store's ``f"store.{op}"`` wherever it is spelled."""
    found: dict[str, set[str]] = {}
    for top in ("slatedb", "sim"):
        for path in (ROOT / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.JoinedStr) and ast.unparse(node) == "f'store.{op}'":
                    for op in events.STORE_OPS:
                        found.setdefault(f"store.{op}", set()).add(str(path.relative_to(ROOT)))
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                arg = None
                if node.func.attr == "event" and node.args:
                    arg = node.args[0]
                elif node.func.attr in ("record", "emit") and len(node.args) >= 2:
                    arg = node.args[1]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.setdefault(arg.value, set()).add(str(path.relative_to(ROOT)))
                elif isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "events":
                    found.setdefault(getattr(events, arg.attr), set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_recorded_kind_is_named_and_every_name_recorded() -> None:
    recorded = _recorded()
    unnamed = {k: sorted(v) for k, v in recorded.items() if k not in events.KINDS}
    assert not unnamed, f"kinds recorded but not named in sim/world/events.py: {unnamed}"
    unused = sorted(events.KINDS - recorded.keys())
    assert not unused, f"kinds named in sim/world/events.py that nothing records: {unused}"


def _compared_kinds(path: Path) -> set[str]:
    """String constants an event's kind is compared with (``e.kind in (...)``, ``event.kind``; in a checker
    module also ``kind == "x"``, the local its dispatch reads)."""
    checker = path.name.endswith("checks.py")
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            names = [node.left, *node.comparators]
            if not any((checker and isinstance(n, ast.Name) and n.id == "kind") or
                       (isinstance(n, ast.Attribute) and n.attr == "kind"
                        and isinstance(n.value, ast.Name) and n.value.id in ("e", "ev", "event")) for n in names):
                continue
            for n in names:
                for c in ast.walk(n):
                    if isinstance(c, ast.Constant) and isinstance(c.value, str):
                        out.add(c.value)
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "sim").glob("*.py")), ids=lambda p: p.name)
def test_checkers_compare_only_named_kinds(path: Path) -> None:
    unknown = sorted(_compared_kinds(path) - events.KINDS)
    assert not unknown, f"{path.name} compares event kinds that nothing records: {unknown}"


def test_the_spec_vocabulary_is_recorded() -> None:
    text = (ROOT / "spec" / "protocols" / "README.md").read_text()
    section = text.split("## Trace vocabulary", 1)[1]
    named = set(re.findall(r"`([a-z_]+)(?:\(|`)", section))
    assert named == set(events.SPEC_VOCABULARY), (named ^ set(events.SPEC_VOCABULARY))
    recorded = _recorded()
    for name, kind in events.SPEC_VOCABULARY.items():
        assert kind in events.KINDS and kind in recorded, (name, kind)


def test_a_simulated_run_records_only_named_kinds() -> None:
    from sim.world.choices import Choices
    from sim.scenarios.takeover import run_takeover_workload

    choices = Choices(0)
    run_takeover_workload(0, choices=choices)
    seen = {e.kind for e in choices.trace.events}
    assert seen <= events.KINDS, seen - events.KINDS
    assert {events.COMMIT, events.ACK, events.FENCE_WRITTEN, events.STORE_PUT} <= seen
