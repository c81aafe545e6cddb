"""The event trace of a simulated run.

Every decision the simulator makes (a task spawned, a fault injected, an operation's outcome)
is appended here with the virtual time at which it happened. Two runs of the same seed must
produce the same trace; :meth:`Trace.digest` is what the determinism checks compare.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
from typing import Any, Callable, Iterable, Iterator

from sim.world.invariants import Violation



class Event:
    """One trace entry. ``f`` is its fields, a dict of name to value in insertion order (read
    it, never change it); ``fields`` is the same pairs as a tuple, built when asked for.

    A plain slotted class, not an ``attrs`` one: a run records one per store leg, decision and
    outcome (thousands per seed), and the frozen ``attrs`` ``__init__`` cost three times as much.
    Only the dict is kept: the tuple of pairs that stood beside it made six of every seven
    objects the collector walked when a run's world was freed (a gc seed: 61,000 tuples for
    11,000 events), where a dict of plain values is not tracked at all.
    Treat it as immutable; equality and hashing are by value."""

    __slots__ = ("time_s", "process", "kind", "f")

    def __init__(self, time_s: float, process: str, kind: str, fields: tuple[tuple[str, Any], ...],
                 f: dict[str, Any] | None = None) -> None:
        self.time_s = time_s
        self.process = process
        self.kind = kind
        if f is None:
            f = dict(fields)
            assert len(f) == len(fields), f"repeated field names: {fields!r}"
        self.f = f

    @property
    def fields(self) -> tuple[tuple[str, Any], ...]:
        """The (name, value) pairs, in insertion order."""
        return tuple(self.f.items())

    def _key(self) -> tuple:
        return (self.time_s, self.process, self.kind, self.fields)

    def __eq__(self, other: object) -> bool:
        return type(other) is Event and self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Event(time_s={self.time_s!r}, process={self.process!r}, kind={self.kind!r}, fields={self.fields!r})"

    def render(self) -> str:
        # One %-format and a list (not a generator): the same text as the f-string
        # ``f"{time_s:12.6f} {process:<12} {kind:<18} {body}"``, at about half the cost (every
        # event of a run is rendered for the digest).
        return "%12.6f %-12s %-18s %s" % (self.time_s, self.process, self.kind,
                                          " ".join([f"{k}={v!r}" for k, v in self.fields]))


_new_event = object.__new__

#: The %-format of a rendered event by its field names (``Trace.record``'s fast path: the text
#: of :meth:`Event.render`, the values formatted by ``%r`` as ``{v!r}`` does).
_FORMATS: dict[tuple[str, ...], str] = {}


def _format_of(names: tuple[str, ...]) -> str:
    fmt = _FORMATS.get(names)
    if fmt is None:
        fmt = _FORMATS[names] = "%12.6f %-12s %-18s " + " ".join(f"{n}=%r" for n in names)
    return fmt


def format_of(*names: str) -> str:
    """The rendering format of an event with these field names, in this order (for :meth:`Trace.emit`)."""
    return _format_of(names)


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


def verdict_invariant(verdict: AssertionError) -> str:
    """The invariant id a checker's verdict names (an ``InvariantViolation``'s field, else read
    from its message as :class:`sim.world.invariants.Violation` does)."""
    invariant = getattr(verdict, "invariant", None)
    if isinstance(invariant, str):
        return invariant
    return Violation.of_exception(verdict).invariant


def listens(*kinds: str) -> Callable[[Callable], Callable]:
    """Mark a trace listener as reacting to events of these kinds only: the trace calls it on
    those alone (most of a run's events are store requests and results that most checkers never
    look at). The function must do nothing for any other kind (``tests/test_sim_trace_routes.py``
    reads each marked function's ``kind`` comparisons against its kinds)."""

    def mark(fn: Callable) -> Callable:
        fn.kinds = frozenset(kinds)  # type: ignore[attr-defined]
        return fn

    return mark


def _wants(listener: Callable[[Event], None], kind: str) -> bool:
    kinds = getattr(listener, "kinds", None)
    return kinds is None or kind in kinds


class _Listeners(list):
    """:attr:`Trace.listeners`: a list that drops the trace's routes when it changes."""

    __slots__ = ("_trace",)

    def __init__(self, trace: "Trace", listeners: Iterable[Callable[[Event], None]] = ()) -> None:
        super().__init__(listeners)
        self._trace = trace

    def _changed(self) -> None:
        self._trace._routes = {}
        self._trace._version += 1


def _changing(name: str) -> Callable:
    method = getattr(list, name)

    def changed(self: _Listeners, *args: Any) -> Any:
        try:
            return method(self, *args)
        finally:
            self._changed()

    changed.__name__ = name
    return changed


for _name in ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse", "__setitem__",
              "__delitem__", "__iadd__", "__imul__"):
    setattr(_Listeners, _name, _changing(_name))
del _name


#: Rendered events hashed per ``update`` call.
_HASH_BATCH = 512


class Trace:
    """Append-only list of events with a rolling SHA-256 digest."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        #: The sped-up clock whose time ``clock`` returns (:func:`sim.world.fastclock.speed_up`:
        #: its ``_virtual_base``, read here without the call), else None.
        self._fast_clock: Any = getattr(clock, "_sim_clock", None)
        self.events: list[Event] = []
        sink = _CAPTURE.get()
        if sink is not None:
            sink.append(self)
        self._hash = hashlib.sha256()
        #: Rendered events not yet hashed: the digest is the SHA-256 of every rendered event and a
        #: newline, hashed in batches (one ``update`` per :data:`_HASH_BATCH` events, the same bytes).
        self._unhashed: list[str] = []
        #: Observers called on every event (the invariant checkers attach here), in order; one
        #: marked by :func:`listens` only on the events of its kinds.
        self._listeners = _Listeners(self)
        #: (position in ``listeners``, listener) of those called on an event, by its kind
        #: (rebuilt when ``listeners`` changes), and how many times ``listeners`` changed.
        self._routes: dict[str, tuple[tuple[int, Callable[[Event], None]], ...]] = {}
        self._version = 0
        #: Every verdict a listener raised (an ``AssertionError``: a checker's
        #: :class:`~sim.world.invariants.InvariantViolation` or a plain one), in order. The
        #: exception is raised on, into the code that recorded the event -- often the engine's
        #: own background task, whose error handling may swallow it (``Background._guard``
        #: turns any exception into a database failure, and a writer already halted keeps its
        #: first error): :func:`sim.world.harness.run_world` reports these whatever became of
        #: them, so no code under test can hide a violation from the simulator.
        self.verdicts: list[AssertionError] = []
        #: Invariant ids whose trace checks are left out (``sim hunt --skip-check``,
        #: :func:`sim.world.harness.skipping_checks`): a verdict naming one is counted in
        #: :attr:`skipped` and neither raised nor reported, so the run goes on as if that check
        #: were not attached -- which oracle catches a bug without it is then measurable.
        self.skip: frozenset[str] = frozenset()
        self.skipped: dict[str, int] = {}
        #: The last request number (``n`` of ``store.*`` / ``store.result`` events) of each
        #: process, over all its stores: see :meth:`next_request`.
        self._requests: dict[str, int] = {}

    def use_clock(self, clock: Callable[[], float]) -> None:
        """Read the time of later events from ``clock`` (the same time as the one given at
        construction, asked more directly: :func:`sim.world.harness.run_world` gives the run's clock)."""
        self._clock = clock
        self._fast_clock = getattr(clock, "_sim_clock", None)

    def next_request(self, process: str) -> int:
        """The next store request number of ``process``. One sequence per process, shared by
        every store it holds (a database's and each external one its engine opens): the checkers
        match a ``store.result`` to its request by ``(process, n)``, which a count per store made
        ambiguous (rescale seed 1251: the merged writer's SST put ``n=30`` stalled 9 s on its
        ``merged/`` store while a get ``n=30`` on its ``src/`` store returned, and GC-5's checker
        took that reply for the put's)."""
        n = self._requests.get(process, 0) + 1
        self._requests[process] = n
        return n

    def record(self, process: str, kind: str, **fields: Any) -> Event:
        fast = self._fast_clock
        time_s = fast._virtual_base if fast is not None else self._clock()
        event = _new_event(Event)  # Event(time_s, process, kind, (), fields), without the call
        event.time_s = time_s
        event.process = process
        event.kind = kind
        event.f = fields
        self.events.append(event)
        unhashed = self._unhashed
        names = tuple(fields)
        fmt = _FORMATS.get(names) or _format_of(names)
        unhashed.append(fmt % (time_s, process, kind, *fields.values()))
        if len(unhashed) >= _HASH_BATCH:
            self._flush_hash()
        route = self._routes.get(kind)
        if route is None:
            route = self._route(kind)
        if route:
            version = self._version
            for i, listener in route:
                try:
                    listener(event)
                except AssertionError as verdict:
                    if self._kept(verdict):
                        raise
                if self._version != version:  # a listener changed the list: on as a list iterator goes
                    self._deliver_from(event, i + 1)
                    break
        return event

    def emit(self, process: str, kind: str, fields: dict[str, Any], fmt: str) -> Event:
        """:meth:`record` of ``fields`` (a dict the caller gives away) whose rendering format,
        :func:`format_of` its names, the caller knows (the simulated store's events: the same
        field names at every request); the same event, text and listeners."""
        fast = self._fast_clock
        time_s = fast._virtual_base if fast is not None else self._clock()
        event = _new_event(Event)  # Event(time_s, process, kind, (), fields), without the call
        event.time_s = time_s
        event.process = process
        event.kind = kind
        event.f = fields
        self.events.append(event)
        unhashed = self._unhashed
        unhashed.append(fmt % (time_s, process, kind, *fields.values()))
        if len(unhashed) >= _HASH_BATCH:
            self._flush_hash()
        route = self._routes.get(kind)
        if route is None:
            route = self._route(kind)
        if route:
            version = self._version
            for i, listener in route:
                try:
                    listener(event)
                except AssertionError as verdict:
                    if self._kept(verdict):
                        raise
                if self._version != version:  # a listener changed the list: on as a list iterator goes
                    self._deliver_from(event, i + 1)
                    break
        return event

    @property
    def listeners(self) -> list[Callable[[Event], None]]:
        """Observers called on every event (the invariant checkers attach here), in order; one
        marked by :func:`listens` only on the events of its kinds."""
        return self._listeners

    @listeners.setter
    def listeners(self, listeners: Iterable[Callable[[Event], None]]) -> None:
        self._listeners = _Listeners(self, listeners)
        self._listeners._changed()

    def _route(self, kind: str) -> tuple[tuple[int, Callable[[Event], None]], ...]:
        route = self._routes[kind] = tuple(
            (i, listener) for i, listener in enumerate(self._listeners) if _wants(listener, kind))
        return route

    def _deliver_from(self, event: Event, i: int) -> None:
        """Call the listeners from position ``i`` of the list as it is now, as iterating over
        the list itself would (a listener may remove itself, or add one, while called)."""
        listeners = self._listeners
        kind = event.kind
        while i < len(listeners):
            listener = listeners[i]
            i += 1
            if _wants(listener, kind):
                try:
                    listener(event)
                except AssertionError as verdict:
                    if self._kept(verdict):
                        raise

    def _kept(self, verdict: AssertionError) -> bool:
        """A listener's verdict: counted and dropped (False) when its check is left out, else
        kept (True: the caller raises it on, into the code that recorded the event)."""
        if self.skip:
            invariant = verdict_invariant(verdict)
            if invariant in self.skip:
                self.skipped[invariant] = self.skipped.get(invariant, 0) + 1
                return False
        self.verdicts.append(verdict)
        return True

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
