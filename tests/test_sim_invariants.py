"""The one invariant-id module (:mod:`sim.world.invariants`): ids, structured violations, ESCAPE-1.

Why: a violation used to be a string re-parsed by three regexes that had drifted; now the id
is a field set where the violation is made, and ``models/run.py``, the catalogue, the sweep's
``invariants`` column and these tests read the same definition.
"""

from __future__ import annotations

import pickle

import pytest

from sim.world import invariants
from sim.world.invariants import InvariantViolation
from sim.world.invariants import ESCAPE, Violation, as_violation, first_invariant
from slatedb.errors import FencedError


def test_models_run_uses_the_one_id_pattern() -> None:
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("models_run_ids", Path(__file__).resolve().parents[1] / "models" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["models_run_ids"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    assert mod.ID_RE is invariants.SPEC_ID and mod.ID_PREFIXES == invariants.SPEC_PREFIXES
    assert invariants.is_id("FENCE-5") and invariants.is_id("ESCAPE-1") and invariants.is_id("LIN")
    assert not invariants.is_id("FencedError") and not invariants.is_id("liveness")


def test_an_exception_with_an_id_keeps_it_and_its_event() -> None:
    class _Event:
        def render(self) -> str:
            return "1.0 w1 ack"

    e = InvariantViolation("FENCE-3", _Event(), "w1 acknowledged after it halted")
    v = Violation.of_exception(e)
    assert v.invariant == "FENCE-3" and v.cls == invariants.SAFETY and v.event is e.event
    assert str(v) == "InvariantViolation: FENCE-3 violated at 1.0 w1 ack: w1 acknowledged after it halted"
    v = Violation.of_exception(AssertionError("DUR-1: acknowledged write lost"))
    assert v.invariant == "DUR-1"
    v = Violation.of_exception(AssertionError("liveness: writers still running"))
    assert (v.invariant, v.cls) == ("liveness", invariants.LIVENESS)


@pytest.mark.parametrize("exc", [FencedError("writer fenced by epoch 3"), KeyError("k001"),
                                 AssertionError("counter 7 above 5 commits")])
def test_an_exception_naming_no_invariant_escaped_the_process(exc: BaseException) -> None:
    v = Violation.of_exception(exc)
    assert v.invariant == ESCAPE and v.cls == invariants.SAFETY
    assert str(v) == f"{ESCAPE}: a simulated process ended with an exception: {type(exc).__name__}: {exc}"
    # Idempotent, and the same when read back as text (a row of a file, a Spark table).
    assert v.named() is v and as_violation(str(v)).invariant == ESCAPE
    assert as_violation(f"{type(exc).__name__}: {exc}") == v


def test_harness_defects_and_oracles_are_labels_not_escapes() -> None:
    h = Violation.harness(RuntimeError("boom"))
    assert str(h) == "harness: the scenario raised RuntimeError: boom" and h.invariant == "harness"
    assert as_violation(str(h)).invariant == "harness"
    o = as_violation("c2 read k3=b'x', possible {b'y'}")
    assert (o.invariant, o.cls) == ("oracle", invariants.ORACLE)


def test_first_invariant_prefers_an_id_and_violations_pickle_with_their_fields() -> None:
    vs = ["AssertionError: liveness: stuck", "InvariantViolation: DUR-1 violated at 1.0 w1 ack"]
    assert first_invariant(vs) == "DUR-1"
    assert first_invariant(["KeyError: 'x'"]) == ESCAPE
    v = Violation("PROJ-3: seq", "PROJ-3")
    back = pickle.loads(pickle.dumps(v))
    assert back == v and back.invariant == "PROJ-3" and back.cls == invariants.SAFETY
    with pytest.raises(AttributeError):
        v.invariant = "X"  # type: ignore[misc]
