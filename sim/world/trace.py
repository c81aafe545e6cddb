"""The event trace of a simulated run.

Every decision the simulator makes (a task spawned, a fault injected, an operation's outcome)
is appended here with the virtual time at which it happened. Two runs of the same seed must
produce the same trace; :meth:`Trace.digest` is what the determinism checks compare.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
from typing import Any, Callable, Iterator

import attrs


@attrs.frozen(slots=True)
class Event:
    """One trace entry. ``fields`` is a tuple of (name, value) pairs, kept in insertion order."""

    time_s: float
    process: str
    kind: str
    fields: tuple[tuple[str, Any], ...]

    def render(self) -> str:
        # One %-format and a list (not a generator): the same text as the f-string
        # ``f"{time_s:12.6f} {process:<12} {kind:<18} {body}"``, at about half the cost (every
        # event of a run is rendered for the digest).
        return "%12.6f %-12s %-18s %s" % (self.time_s, self.process, self.kind,
                                          " ".join([f"{k}={v!r}" for k, v in self.fields]))


#: Where :func:`capture` collects the traces made in its context (None: nowhere). A context
#: variable, not a global: it reaches only the code run inside ``with capture()`` (trio copies
#: the caller's context into the run), and nothing in a run reads it.
_CAPTURE: contextvars.ContextVar[list | None] = contextvars.ContextVar("sim_trace_capture", default=None)


@contextlib.contextmanager
def capture() -> Iterator[list["Trace"]]:
    """Collect every :class:`Trace` created inside the block (``sim run --timeline`` draws the
    run's trace after the workload returned its result)."""
    traces: list[Trace] = []
    token = _CAPTURE.set(traces)
    try:
        yield traces
    finally:
        _CAPTURE.reset(token)


#: Rendered events hashed per ``update`` call.
_HASH_BATCH = 512


class Trace:
    """Append-only list of events with a rolling SHA-256 digest."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.events: list[Event] = []
        sink = _CAPTURE.get()
        if sink is not None:
            sink.append(self)
        self._hash = hashlib.sha256()
        #: Rendered events not yet hashed: the digest is the SHA-256 of every rendered event and a
        #: newline, hashed in batches (one ``update`` per :data:`_HASH_BATCH` events, the same bytes).
        self._unhashed: list[str] = []
        #: Optional observer called on every event (the invariant checkers attach here).
        self.listeners: list[Callable[[Event], None]] = []
        #: Every verdict a listener raised (an ``AssertionError``: a checker's
        #: :class:`~sim.world.invariants.InvariantViolation` or a plain one), in order. The
        #: exception is raised on, into the code that recorded the event -- often the engine's
        #: own background task, whose error handling may swallow it (``Background._guard``
        #: turns any exception into a database failure, and a writer already halted keeps its
        #: first error): :func:`sim.world.harness.run_world` reports these whatever became of
        #: them, so no code under test can hide a violation from the simulator.
        self.verdicts: list[AssertionError] = []

    def record(self, process: str, kind: str, **fields: Any) -> Event:
        event = Event(self._clock(), process, kind, tuple(fields.items()))
        self.events.append(event)
        unhashed = self._unhashed
        unhashed.append(event.render())
        if len(unhashed) >= _HASH_BATCH:
            self._flush_hash()
        for listener in self.listeners:
            try:
                listener(event)
            except AssertionError as verdict:
                self.verdicts.append(verdict)
                raise
        return event

    def _flush_hash(self) -> None:
        if self._unhashed:
            self._unhashed.append("")
            self._hash.update("\n".join(self._unhashed).encode())
            self._unhashed = []

    def digest(self) -> str:
        self._flush_hash()
        return self._hash.hexdigest()

    def render(self, last: int | None = None) -> str:
        events = self.events if last is None else self.events[-last:]
        return "\n".join(e.render() for e in events)

    def __len__(self) -> int:
        return len(self.events)
