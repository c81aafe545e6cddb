"""Invariant ids and violations: the one definition used by ``models/run.py``, the simulator and
the tests.

An invariant id is a prefix and a number (``FENCE-2``). The **spec prefixes** are the protocol
pages' (``spec/protocols/README.md`` lists the same ones; ``tests/test_traceability.py`` checks
it); the simulator adds its own numbered oracles (``FLIP-1``: a bit flip in a checksummed object
is reported against that object) and whole-history oracles without a number (``LIN``:
linearizability of the client history).

A :class:`Violation` is what a failed run reports: its message (a ``Violation`` *is* that
string, so rows, JSON lines and Parquet tables keep their text) and, as fields, the invariant id
it violated, its class (``safety``, ``liveness`` or ``oracle``) and, for a check on the trace,
the event it fired at. The id is known where the violation is raised
(:class:`sim.world.invariants.InvariantViolation`) or read once from the message where it is made
(:meth:`Violation.of_exception`); :func:`sim.scenarios.catalogue.fired` and the shrinker read the field.

Stdlib only: ``models/run.py`` imports this file.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # stdlib only at run time (models/run.py imports this module)
    from sim.world.trace import Event

#: The protocol pages' prefixes, in the order of spec/protocols/README.md.
SPEC_PREFIXES = ("FENCE", "SEQMETA", "BOUNDARY", "CKPT", "GC", "COMPACT", "CFENCE",
                 "RESUME", "CLONE", "PROJ", "DUR", "READ", "DESTROY", "LOAD", "MERGE", "TXN", "TRACK")
#: Numbered ids not on a protocol page: the simulator's own oracles, ``FLIP-1`` (a bit flip is
#: reported against its object) and ``ESCAPE-1`` (spec/simulation.md: an exception that escapes a
#: simulated process is a named failure), and the store layer's ``RETRY-1`` (spec/objstore.md: the
#: production retry bound, checked by the ``store-bounded`` scenario).
SIM_PREFIXES = ("FLIP", "ESCAPE", "RETRY")
#: Whole-history oracles of the simulator, named without a number.
ORACLES = ("LIN",)

#: A spec invariant id (``FENCE-2``).
SPEC_ID = re.compile(r"\b(?:%s)-[0-9]+\b" % "|".join(SPEC_PREFIXES))
#: Any id a violation may name: a spec id, a simulator oracle id, or a whole-history oracle.
ID = re.compile(r"\b(?:(?:%s)-[0-9]+|%s)\b" % ("|".join(SPEC_PREFIXES + SIM_PREFIXES), "|".join(ORACLES)))

SAFETY = "safety"
LIVENESS = "liveness"
ORACLE = "oracle"

#: spec/simulation.md ESCAPE-1: a simulated process ends only with an outcome its scenario
#: expects; an exception that escapes one is reported under this id with its type and message.
ESCAPE = "ESCAPE-1"
#: A label, not an invariant: the scenario function itself raised (a harness defect).
HARNESS = "harness"

# "InvariantViolation: FENCE-3 violated at ...", "AssertionError: DUR-1: ...", "FencedError: ...":
# an optional exception type first; an oracle's own label ("liveness: ...", "harness: ...").
_EXC_PREFIX = re.compile(r"^(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Violation|Crashed|Exit|Interrupt|Group)): ")
_LABEL = re.compile(r"^(?P<label>[a-z][a-z0-9_-]*):")


def is_id(text: str) -> bool:
    return ID.fullmatch(text) is not None


class InvariantViolation(AssertionError):
    """What a trace checker raises at the event that breaks invariant ``invariant``."""

    def __init__(self, invariant: str, event: "Event", detail: str) -> None:
        self.invariant = invariant
        self.event = event
        super().__init__(f"{invariant} violated at {event.render()}: {detail}")


class Violation(str):
    """One violation: the message (this string) with its ``invariant``, ``cls`` and ``event``.

    ``invariant`` is an id (:data:`ID`), else ``liveness`` for a run that got stuck, else the
    type of the exception that escaped (``RuntimeError``), else ``oracle`` (an end-of-run oracle
    that names no invariant, e.g. the store scenario's). Immutable, like the string it is.
    """

    invariant: str
    cls: str
    event: Any

    def __new__(cls, message: str, invariant: str, klass: str = SAFETY, event: Any = None) -> "Violation":
        assert klass in (SAFETY, LIVENESS, ORACLE), klass
        self = super().__new__(cls, message)
        object.__setattr__(self, "invariant", invariant)
        object.__setattr__(self, "cls", klass)
        object.__setattr__(self, "event", event)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Violation is immutable")

    def __reduce__(self):  # pickles (worker processes, Spark) with its fields
        return (Violation, (str(self), self.invariant, self.cls, self.event))

    @classmethod
    def of_message(cls, message: str, event: Any = None) -> "Violation":
        """A violation from its message alone: the first id it names, else ``liveness`` if it
        says so, else the type of the exception it starts with (``FencedError``), else an
        oracle's label (``harness: ...``), else ``oracle`` (the store oracle's bare sentences).
        :meth:`named` turns a bare exception type into ``ESCAPE-1``."""
        m = ID.search(message)
        if m:
            return cls(message, m.group(0), ORACLE if m.group(0) in ORACLES else SAFETY, event)
        if "liveness" in message:
            return cls(message, LIVENESS, LIVENESS, event)
        m = _EXC_PREFIX.match(message)
        if m:
            return cls(message, m["exc"], SAFETY, event)
        m = _LABEL.match(message)
        if m:
            return cls(message, m["label"], ORACLE, event)
        return cls(message, ORACLE, ORACLE, event)

    @classmethod
    def of_exception(cls, e: BaseException) -> "Violation":
        """A violation from what a simulated process raised: ``Type: message``, with the id the
        exception carries (an :class:`sim.world.invariants.InvariantViolation`) or names in its message;
        one that names none escaped the process: ``ESCAPE-1`` (:meth:`named`)."""
        message = f"{type(e).__name__}: {e}"
        invariant = getattr(e, "invariant", None)
        if isinstance(invariant, str) and is_id(invariant):
            return cls(message, invariant, SAFETY, getattr(e, "event", None))
        return cls.of_message(message).named()

    @classmethod
    def harness(cls, e: BaseException) -> "Violation":
        """The scenario function itself raised: a harness defect, not a verdict on the code."""
        return cls(f"{HARNESS}: the scenario raised {type(e).__name__}: {e}", HARNESS, ORACLE)

    def escaped(self) -> bool:
        """Whether this violation names only the type of an exception (no id, no label)."""
        m = _EXC_PREFIX.match(str(self))
        return m is not None and self.invariant == m["exc"]

    def named(self) -> "Violation":
        """This violation, or, when it names only the type of an exception that escaped a
        simulated process (``CorruptionError: ...``), the ``ESCAPE-1`` violation with that text."""
        if self.escaped():
            return Violation(f"{ESCAPE}: a simulated process ended with an exception: {self}", ESCAPE, SAFETY,
                             self.event)
        return self


def as_violation(v: Any) -> Violation:
    """A violation as a :class:`Violation` (a plain string, e.g. a row read back from a file,
    classified once from its text), ESCAPE-1 named (:meth:`Violation.named`)."""
    return (v if isinstance(v, Violation) else Violation.of_message(str(v))).named()


def first_invariant(violations: Any) -> str:
    """What a failed run fired: the first violation that names an id, else the first one's
    invariant (``liveness``, an exception type, ``oracle``)."""
    vs = [as_violation(v) for v in violations]
    for v in vs:
        if is_id(v.invariant):
            return v.invariant
    return vs[0].invariant
