"""Trace listeners marked with ``sim.world.trace.listens`` are called on the events of their
kinds only; everything else about delivery is a plain loop over ``Trace.listeners``.

Why: most of a run's events are store requests and results that most checkers never look at,
and a call per listener per event was a few per cent of a simulated run. The risk is a check
that silently stops seeing events: a marked function that reacts to a kind it does not declare.
Rules: every kind a marked function compares ``kind``/``e.kind`` with is among its declared
kinds, and each declared kind is a named one (``sim/world/events.py``); delivery keeps the
order of ``listeners`` and, when a listener changes the list while called (a one-shot trigger
removing itself), goes on as iterating over the list itself would.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sim.world import events
from sim.world.invariants import InvariantViolation
from sim.world.trace import Trace, listens

ROOT = Path(__file__).resolve().parents[1]


def _kinds_compared(fn: ast.AST) -> set[str]:
    """String constants a function compares ``kind`` or ``<x>.kind`` with (==, !=, in, not in)."""
    out: set[str] = set()

    def is_kind(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "kind") or (
            isinstance(node, ast.Attribute) and node.attr == "kind")

    def constants(node: ast.AST) -> set[str]:
        return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}

    for node in ast.walk(fn):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = node.left, node.comparators[0]
            if is_kind(left):
                out |= constants(right)
            elif is_kind(right):
                out |= constants(left)
    return out


def _marked() -> list[tuple[str, str, set[str] | None, set[str]]]:
    """(file, function, declared kinds or None when not literal, kinds it compares with)."""
    found = []
    for path in (ROOT / "sim").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Name) and dec.func.id == "listens":
                    literal = all(isinstance(a, ast.Constant) for a in dec.args)
                    declared = {a.value for a in dec.args} if literal else None
                    found.append((str(path.relative_to(ROOT)), node.name, declared, _kinds_compared(node)))
    return found


def test_the_checkers_are_marked() -> None:
    names = {(f, n) for f, n, _, _ in _marked()}
    for f, n in (("sim/checks/gc.py", "on_event"), ("sim/checks/manifest.py", "on_event"),
                 ("sim/checks/compactor.py", "on_event")):
        assert (f, n) in names


@pytest.mark.parametrize("where", _marked(), ids=lambda m: f"{m[0]}:{m[1]}")
def test_a_marked_listener_declares_every_kind_it_compares_with(where) -> None:  # noqa: ANN001
    path, name, declared, compared = where
    if declared is None:  # listens(kind) of a variable: the function compares with that variable
        assert not compared, f"{path}:{name} compares with literal kinds {compared} but declares a variable"
        return
    assert compared <= declared, f"{path}:{name} reacts to {sorted(compared - declared)}, not declared in listens()"
    assert declared <= events.KINDS, f"{path}:{name} declares unnamed kinds {sorted(declared - events.KINDS)}"


def test_delivery_by_kind_in_list_order() -> None:
    trace = Trace(lambda: 0.0)
    calls: list[tuple[str, str]] = []

    def every(e) -> None:  # noqa: ANN001
        calls.append(("every", e.kind))

    @listens("a")
    def only_a(e) -> None:  # noqa: ANN001
        calls.append(("a", e.kind))

    trace.listeners.append(only_a)
    trace.listeners.append(every)
    for kind in ("a", "b", "a"):
        trace.record("p", kind)
    assert calls == [("a", "a"), ("every", "a"), ("every", "b"), ("a", "a"), ("every", "a")]
    trace.listeners.remove(every)
    calls.clear()
    trace.record("p", "b")
    trace.record("p", "a")
    assert calls == [("a", "a")]


def test_a_listener_changing_the_list_while_called_as_a_list_iterator_would() -> None:
    # The list iterator moves on by position: a listener removing itself makes the next one
    # skipped for this event; one appended is called for this event too.
    for marked in (False, True):
        trace = Trace(lambda: 0.0)
        calls: list[str] = []

        def once(e) -> None:  # noqa: ANN001
            calls.append("once")
            trace.listeners.remove(once)
            trace.listeners.append(late)

        def second(e) -> None:  # noqa: ANN001
            calls.append("second")

        def third(e) -> None:  # noqa: ANN001
            calls.append("third")

        def late(e) -> None:  # noqa: ANN001
            calls.append("late")

        if marked:
            once = listens("x")(once)
        trace.listeners.extend([once, second, third])
        trace.record("p", "x")
        plain: list[str] = []
        expected = [once, second, third]
        for listener in expected:  # what a for-loop over the list does
            if listener is once:
                plain.append("once")
                expected.remove(once)
                expected.append(late)
            else:
                plain.append(listener.__name__)
        assert calls == plain == ["once", "third", "late"]
        calls.clear()
        trace.record("p", "x")
        assert calls == ["second", "third", "late"]


def test_a_verdict_is_kept_and_raised_or_skipped() -> None:
    trace = Trace(lambda: 0.0)

    @listens("bad")
    def checker(e) -> None:  # noqa: ANN001
        raise InvariantViolation("FENCE-1", e, "bad")

    trace.listeners.append(checker)
    trace.record("p", "fine")
    with pytest.raises(InvariantViolation):
        trace.record("p", "bad")
    assert len(trace.verdicts) == 1
    trace.skip = frozenset({"FENCE-1"})
    trace.record("p", "bad")
    assert trace.skipped == {"FENCE-1": 1} and len(trace.verdicts) == 1
