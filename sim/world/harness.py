"""One harness for every scenario: :func:`run_world` runs a declared :class:`Scenario` for one
seed and returns one :class:`WorldResult`.

A scenario is data (FoundationDB's test specs are lists of workloads; hypothesis splits its
engine from its strategies): it declares

* its **checkers** (trace listeners of ``sim/checks/``, attached before the world starts and
  armed in every phase),
* its **world** (``build``: the knobs drawn from the choices, the stores, the shared state),
* its **processes and fault injectors** (``processes``: the safety phase, faults on),
* its **liveness phase** (``liveness``: after ``world.heal()`` when ``heals``, faults off),
* its **end-to-end checks** (``final``, after every process ended, outside the time limit) and
  its **oracles** (``oracles``: a history model judged at the end, also on a run that stopped
  early when the scenario says so),
* what it reports (``figures``, ``fault_counts``) and what it may inject (``fault_kinds``:
  the coverage-gap guard of ``sim dst`` fails a campaign in which a declared kind never fired).

The harness does the rest, the same for every scenario: a fresh trace and bucket, the
checkers, a deterministic run on the virtual clock (``sim.world.runtime.run_deterministic``),
the virtual time limit (a run still going after it is a liveness failure), the processes'
nursery (cancelled when both phases are done, or joined), exceptions turned into
:class:`sim.world.invariants.Violation` records, and the result. The nesting of the run (one
time limit, one nursery for both phases) is the one every scenario had on its own, so the
seeds' traces are the ones they were before the harness existed.
"""

from __future__ import annotations

import contextlib
import gc
import contextvars
from typing import Any, Awaitable, Callable, Iterable, Iterator

import attrs
import trio

from slatedb.errors import SlateDBError
from slatedb.format import memo
from slatedb.objstore.memory import MemoryBucket

from sim.world import fastclock
from sim.world import trace as trace_mod
from sim.world.choices import Choices
from sim.world.invariants import Violation, as_violation, is_id
from sim.world.runtime import no_cyclic_gc, run_deterministic
from sim.world.trace import Trace

#: A run still going after this much virtual time has failed (liveness), unless the scenario says otherwise.
VIRTUAL_LIMIT_S = 6 * 3600


@attrs.define
class Setup:
    """What every world starts from: the seed and its choices, the trace, the catalogued bugs
    switched on, the fault mode (``swarm``, ``all``, ``none``), one in-memory bucket, the
    scenario's own options (e.g. the store's ``n_ops``) and the attached checkers by name."""

    seed: int
    choices: Choices
    trace: Trace
    bugs: frozenset[str]
    faults: str
    bucket: MemoryBucket
    options: dict[str, Any]
    checkers: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Checker:
    """A trace checker of ``sim/checks/``: ``make(setup)`` builds it, the harness attaches it."""

    name: str
    make: Callable[[Setup], Any]
    when: Callable[[Setup], bool] = lambda _setup: True


@attrs.frozen
class Scenario:
    """One scenario, declared (see the module's docstring). ``nursery`` is ``"cancel"`` (the
    processes' nursery is cancelled once the phases are done: background processes such as GC
    end with the world), ``"join"`` (it waits for every process) or ``"none"`` (the processes
    open their own nurseries)."""

    name: str
    build: Callable[[Setup], Any]
    processes: Callable[[Any, "trio.Nursery | None"], Awaitable[None]]
    checkers: tuple[Checker, ...] = ()
    liveness: Callable[[Any, "trio.Nursery | None"], Awaitable[None]] | None = None
    heals: bool = False
    nursery: str = "cancel"
    final: Callable[[Any], Awaitable[None]] | None = None
    oracles: Callable[[Any, bool], Iterable[Any]] = lambda _world, _failed: ()
    figures: Callable[[Any], dict[str, Any]] = lambda _world: {}
    fault_counts: Callable[[Setup, Any], dict[str, int]] = lambda _setup, _world: {}
    after: Callable[["WorldResult", Any], "WorldResult"] | None = None
    virtual_limit_s: float | None = VIRTUAL_LIMIT_S
    limit_what: str = "the world still runs"
    fault_kinds: tuple[str, ...] = ()
    processes_declared: tuple[str, ...] = ()


@attrs.frozen
class WorldResult:
    """The one result record of a simulated run. ``figures`` holds what the scenario counts
    (acknowledged writes, GC deletes, LIN operations...), also readable as attributes
    (``result.acked``)."""

    scenario: str
    seed: int
    ok: bool
    digest: str
    events: int
    virtual_s: float
    faults: dict[str, int]
    violations: tuple[Violation, ...]
    figures: dict[str, Any] = attrs.field(factory=dict)
    last_events: str = ""
    skipped: dict[str, int] = attrs.field(factory=dict)  # left-out check -> verdicts it would have raised

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "figures":
            raise AttributeError(name)
        try:
            return self.figures[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} of {self.scenario!r} has no field {name!r}") from None


#: Invariant ids whose checks every world run in this context leaves out (:func:`skipping_checks`).
_SKIP: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("sim_skip_checks", default=frozenset())


@contextlib.contextmanager
def skipping_checks(ids: Iterable[str]) -> Iterator[frozenset[str]]:
    """Leave the checks of invariants ``ids`` out of every world run inside the block (``sim hunt
    --skip-check``, ``sim run --skip-check``): a trace checker's verdict naming one is neither
    raised into the world nor reported (:attr:`sim.world.trace.Trace.skip`; the run goes on, its
    trace unchanged), nor is an end-of-run oracle's violation naming one; a scenario that reads
    the ``skip_checks`` option (gc) does not even evaluate it. The checker that raised the verdict
    stops its work on that one event there (as it would have with the check on): a check it runs
    after the left-out one on the same event is skipped for that event. An exception a scenario's
    own process raises still stops the run and is reported. Unknown ids are refused
    (``ValueError``)."""
    skip = frozenset(ids)
    bad = sorted(i for i in skip if not is_id(i))
    if bad:
        raise ValueError(f"not an invariant id: {', '.join(bad)} (ids look like READ-1, CKPT-4, LIN)")
    token = _SKIP.set(_SKIP.get() | skip)
    try:
        yield skip
    finally:
        _SKIP.reset(token)


def leaves(group: BaseExceptionGroup) -> Iterable[BaseException]:
    """The exceptions of a (nested) exception group."""
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from leaves(e)
        else:
            yield e


def run_world(scenario: Scenario, seed: int, *, choices: Choices | None = None, bugs: Iterable[str] = frozenset(),
              faults: str = "swarm", **options: Any) -> WorldResult:
    """Run one seed of ``scenario``; never raises for what happens inside the world (a violated
    invariant, an escaping exception, a stuck run are violations of the result). Every random
    choice comes from ``choices`` (default: generated from ``seed``)."""
    assert faults in ("swarm", "all", "none"), faults
    # Decodes of what the world's processes just encoded return their values (memo). The cyclic
    # collector stays off until the world is dropped: a world is some 17,000 objects in cycles
    # (tasks, frames, tracebacks), all made during the run; collected then, as the youngest
    # generation, they are walked once, not promoted alive at the run's end and walked again
    # with ten other worlds' in a generation-1 collection (16 -> 11 ms of a gc seed). The memos
    # end first: what they held (the encoders' recorded parts, mostly tuples: 18,000 of the
    # 28,000 objects the collection at gc seed 0's end walked) is freed by reference counting
    # before the collector is back on (gc seeds 0..2 and 37: 45 -> 35 ms at the runs' ends).
    with no_cyclic_gc() as was_enabled, memo.remembering():
        result = _run_world(scenario, seed, choices, bugs, faults, options)
    if was_enabled:
        gc.collect(0)
    return result


def _run_world(scenario: Scenario, seed: int, choices: Choices | None, bugs: Iterable[str], faults: str,
               options: dict[str, Any]) -> WorldResult:
    # The trace's events outlive the run only when someone may read them: a caller's choices
    # (``choices.trace``) or ``capture()`` (``sim run --timeline``).
    keep_events = choices is not None or trace_mod._CAPTURE.get() is not None
    choices = Choices(seed) if choices is None else choices
    trace = Trace(fastclock.current_time)
    skip = frozenset(options.get("skip_checks", ())) | _SKIP.get()
    if skip:
        options = {**options, "skip_checks": skip}
        trace.skip = skip
    setup = Setup(seed, choices, trace, frozenset(bugs), faults, MemoryBucket(), dict(options))
    for checker in scenario.checkers:
        if checker.when(setup):
            made = checker.make(setup)
            made.attach(trace)
            setup.checkers[checker.name] = made
    box: list[Any] = []
    errors: list[BaseException] = []
    end_s = None
    try:
        end_s = run_deterministic(_main, scenario, setup, box, seed=choices)
    except (AssertionError, SlateDBError) as e:
        errors = [e]
    except BaseExceptionGroup as group:
        errors = list(leaves(group))
        if any(isinstance(e, KeyboardInterrupt) for e in errors):
            # Ctrl-C reached a simulated process: the user's, never a verdict on the code (it
            # was reported as the seed's ESCAPE-1 failure, and the campaign went on).
            raise KeyboardInterrupt from group
    world = box[0] if box else None
    stopped_early = bool(errors)
    errors = with_verdicts(errors, trace.verdicts)
    violations = [Violation.of_exception(e) for e in errors]
    if world is not None:
        violations += [v for v in map(as_violation, scenario.oracles(world, stopped_early)) if v.invariant not in skip]
    if end_s is None:
        end_s = trace.events[-1].time_s if trace.events else 0.0
    result = WorldResult(
        scenario.name, seed, not violations, trace.digest(), len(trace), end_s,
        scenario.fault_counts(setup, world), tuple(violations),
        figures=scenario.figures(world) if world is not None and not errors else {},
        last_events=_last_events(trace, errors) if violations else "", skipped=dict(trace.skipped))
    if scenario.after is not None:
        result = scenario.after(result, world)
    if not keep_events:
        # Nobody reads them now (the record has the digest and the last events): dropped by
        # reference counting here, they are not walked by the collector with the world's cycles
        # (11,000 of a gc world's 17,000 objects; 6 ms of a seed).
        trace.events.clear()
    return result


def _chain(e: BaseException) -> Iterable[BaseException]:
    """``e`` and the exceptions it was raised from or during (``__cause__``, ``__context__``)."""
    seen: list[BaseException] = []
    todo = [e]
    while todo:
        x = todo.pop()
        if any(x is y for y in seen):
            continue
        seen.append(x)
        todo += [c for c in (x.__cause__, x.__context__) if c is not None]
    return seen


def with_verdicts(errors: list[BaseException], verdicts: Iterable[BaseException]) -> list[BaseException]:
    """What escaped the world (``errors``) with every verdict a checker raised into the code under
    test (:attr:`sim.world.trace.Trace.verdicts`) that did not escape as itself: one the engine
    wrapped (raised from it, or naming it in its message: ``raise error from None`` drops the
    cause) replaces its wrapper; one it swallowed -- a background task's error
    handling, or a writer already halted that keeps its first error -- is reported too. Then the
    verdicts come first, in the order they were raised, and the other errors after them: the
    first verdict raised is the run's first violation (a later one may merely follow from it: a
    verdict stops the event's delivery to the checkers after its own, so one of those may report
    a landing "before" the one it never saw). Unchanged when every verdict escaped."""
    verdicts = list(verdicts)
    out = list(errors)
    swallowed: list[BaseException] = []
    for v in verdicts:
        if any(v is e for e in out):
            continue
        for i, e in enumerate(out):
            if any(v is c for c in _chain(e)) or (str(v) and str(v) in str(e)):
                out[i] = v
                break
        else:
            swallowed.append(v)
    if not swallowed:
        return out
    raised = {id(v): i for i, v in enumerate(verdicts)}
    first = sorted(swallowed + [e for e in out if id(e) in raised], key=lambda v: raised[id(v)])
    return first + [e for e in out if id(e) not in raised]


def _last_events(trace: Trace, errors: list[BaseException]) -> str:
    """The trace's last 40 events, or, when the first error is a verdict at an event of the trace
    (the run may have gone on after the engine swallowed it), the 40 up to that event."""
    event = getattr(errors[0], "event", None) if errors else None
    at = next((i for i, e in enumerate(trace.events) if e is event), None) if event is not None else None
    if at is None:
        return trace.render(last=40)
    return "\n".join(e.render() for e in trace.events[max(0, at - 39):at + 1])


#: The world running in this process, as (its run's token, its limit scope), while one runs.
_RUNNING: list[tuple[Any, trio.CancelScope]] = []


def stop_running_world() -> bool:
    """Stop the world running in this process, if any, as if its virtual limit had passed (its
    liveness violation follows): a campaign's wall limit per seed
    (:func:`sim.campaign.sweep.wall_limit`). Safe from a signal handler (trio's
    ``run_sync_soon``); False when no world runs."""
    if not _RUNNING:
        return False
    token, limit = _RUNNING[-1]
    try:
        token.run_sync_soon(limit.cancel)
    except trio.RunFinishedError:
        return False
    return True


async def _main(scenario: Scenario, setup: Setup, box: list[Any]) -> float:
    # The trace asks the run's clock itself (fastclock.current_time finds it through the run
    # at every event): the same time, a call fewer per event.
    setup.trace.use_clock(trio.lowlevel.current_clock().current_time)
    world = scenario.build(setup)
    box.append(world)
    limit = trio.CancelScope(deadline=trio.current_time() + scenario.virtual_limit_s) \
        if scenario.virtual_limit_s is not None else trio.CancelScope()
    _RUNNING.append((trio.lowlevel.current_trio_token(), limit))
    try:
        return await _phases(scenario, world, limit)
    finally:
        _RUNNING.pop()


async def _phases(scenario: Scenario, world: Any, limit: trio.CancelScope) -> float:
    with limit:
        if scenario.nursery == "none":
            await scenario.processes(world, None)
        else:
            async with trio.open_nursery() as nursery:
                await scenario.processes(world, nursery)
                if scenario.liveness is not None:
                    if scenario.heals:
                        world.heal()
                    await scenario.liveness(world, nursery)
                if scenario.nursery == "cancel":
                    nursery.cancel_scope.cancel()
    assert not limit.cancelled_caught, f"liveness: {scenario.limit_what} after {scenario.virtual_limit_s} virtual s"
    if scenario.final is not None:
        await scenario.final(world)
    return trio.current_time()
